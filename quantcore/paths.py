"""Fixpoint's per-user cache folder, which the CMSIS-NN checkout and builds (targets/cmsis_nn.py) and
numba's compiled loops (kernels/jit.py) live under."""

from __future__ import annotations

import os
from pathlib import Path


def cache_root() -> Path:
    """Fixpoint's per-user cache: $XDG_CACHE_HOME/fixpoint, by default ~/.cache/fixpoint."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base).expanduser() / "fixpoint"
