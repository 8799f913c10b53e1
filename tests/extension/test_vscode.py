"""The VS Code extension in real VS Code: runs vscode-extension/scripts/e2e.sh (code-server + headless
Chromium, the extension's unit and integration tests against the real language server, screenshots in
vscode-extension/test-artifacts/). Slow (about a minute, plus a one-time ~2 minute install of code-server
into ~/.cache/fixpoint/code-server), so it runs only when asked: FIXPOINT_VSCODE_TESTS=1."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

EXTENSION = Path(__file__).resolve().parents[2] / "vscode-extension"
E2E = EXTENSION / "scripts" / "e2e.sh"


@pytest.mark.skipif(
    os.environ.get("FIXPOINT_VSCODE_TESTS") != "1",
    reason="set FIXPOINT_VSCODE_TESTS=1 to run the VS Code e2e stage (vscode-extension/scripts/e2e.sh)",
)
def test_vscode_extension_e2e() -> None:
    missing = [tool for tool in ("npm", "bash") if shutil.which(tool) is None]
    if not Path(os.environ.get("CHROMIUM", "/usr/bin/chromium")).exists():
        missing.append("chromium")
    assert not missing, f"the extension's e2e stage needs {', '.join(missing)} (apt-get install chromium npm)"
    env = dict(os.environ, FIXPOINT_PYTHON=os.environ.get("FIXPOINT_PYTHON", sys.executable))
    proc = subprocess.run(
        ["bash", str(E2E)], cwd=EXTENSION, env=env, capture_output=True, text=True, timeout=1800
    )
    tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-60:])
    assert proc.returncode == 0, f"scripts/e2e.sh exited {proc.returncode}:\n{tail}"
    assert (EXTENSION / "test-artifacts" / "workbench-problems.png").is_file(), tail
