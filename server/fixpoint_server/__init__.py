"""fixpoint_server: the pygls language server (diagnostics, code actions, commands) - built in a later stage.

Kept under server/ but installed as `fixpoint_server` so it cannot collide with other packages named `server`.
"""
