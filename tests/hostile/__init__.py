"""The hostile-input corpus of issue 17: bad inputs run as a user runs them, each outcome classified.

cases.py and lsp_cases.py hold the registry (an id, a class, a setup that builds the inputs in a fresh
workspace, what to run and what a correct outcome is); runner.py runs a case against a checkout of
Fixpoint without importing it (the `fixpoint` CLI and the language server as child processes, a memory
watchdog, a timeout, snapshots of the workspace's surroundings); test_corpus.py runs every case under
pytest and bench/hostile.py prints the per-class figures.
"""
