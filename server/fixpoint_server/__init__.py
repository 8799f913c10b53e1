"""fixpoint_server: the Fixpoint language server (diagnostics, code actions, hovers and commands over a
firmware tree), and the headless `fixpoint check` that runs the same rules.

Kept under server/ but installed as `fixpoint_server` so it cannot collide with other packages named `server`.
"""

from quantcore import __version__

__all__ = ["__version__"]
