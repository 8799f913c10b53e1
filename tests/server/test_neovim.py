"""A real editor through the same server: headless Neovim (Debian's neovim) opens a generated source of
a firmware tree whose quant-params JSON changed, shows the stale-generated diagnostic and offers
"Regenerate model" (tests/server/nvim/probe.lua is the client script)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests import needs
from tests.server.firmware_tree import make_tree

PROBE = Path(__file__).resolve().parent / "nvim" / "probe.lua"


@needs.tool("nvim", "neovim")
def test_neovim_shows_the_stale_model_and_offers_to_regenerate_it(tmp_path: Path) -> None:
    tree = make_tree(tmp_path / "fw")
    params = tree / "model" / "residual.params.json"
    doc = json.loads(params.read_text())
    doc["calibration"]["samples"] += 1
    params.write_text(json.dumps(doc, indent=2) + "\n")
    out = tmp_path / "result.txt"
    env = dict(
        os.environ,
        LSP_CMD=f"{sys.executable} -m fixpoint_server --stdio",
        LSP_OUT=str(out),
        XDG_CACHE_HOME=str(tmp_path / "cache"),  # Neovim's lsp.log stays out of $HOME
        XDG_STATE_HOME=str(tmp_path / "state"),
    )
    proc = subprocess.run(
        ["nvim", "--headless", "--clean", "-n", "-c", f"luafile {PROBE}", "src/model/model.c"],
        cwd=tree, env=env, capture_output=True, text=True, timeout=90,
    )  # fmt: skip
    lines = out.read_text().splitlines() if out.exists() else []
    assert proc.returncode == 0, (proc.returncode, lines, proc.stderr[-2000:])
    diags = [line for line in lines if line.startswith("DIAG ")]
    assert len(diags) == 1 and diags[0].startswith("DIAG 4:0 stale-generated stale: generated from")
    assert "ACTION Regenerate model" in lines
