"""Compiled twins of a few numpy passes (numba): the switch that picks them, and numba's loading.

The numpy kernels stay the readable reference. Where a batched evaluation spends its time in a dozen
numpy passes per element (finish_s8's requantization, the metrics' sums), a compiled loop computes the
same integers (and the same float64 bits) in one pass: `quantcore.kernels.compiled` and
`quantcore.verify.compiled_sums`. Those modules import numba when they are imported, and only the code
that runs them imports them (inside a function): `fixpoint --help`, `fixpoint check` and the language
server never load numba (tests/test_cli_startup.py).

FIXPOINT_JIT=0 in the environment turns the compiled loops off (every caller then takes its numpy
path); the equality tests use it to hold both paths to the same results. It is read at each call, so a
test can switch it. No fastmath anywhere: it lets LLVM reorder float sums, and the bits would change.

Compilation costs a CLI process about a second per kernel on first use, so numba's on-disk cache is on
(cache=True) with its folder in Fixpoint's per-user cache, $XDG_CACHE_HOME/fixpoint/numba: a later
process loads the machine code instead. numba reads NUMBA_CACHE_DIR when it is imported, so `numba()`
sets it (unless the user did) before the first import.
"""

from __future__ import annotations

import functools
import importlib.util
import os
from pathlib import Path
from types import ModuleType

SWITCH = "FIXPOINT_JIT"
"""The environment variable: "0" selects the numpy paths."""


def enabled() -> bool:
    """Whether the compiled loops are to be used: numba installed, and not switched off."""
    return os.environ.get(SWITCH, "1") != "0" and _installed()


@functools.cache
def _installed() -> bool:
    return importlib.util.find_spec("numba") is not None


def cache_folder() -> Path:
    """numba's cache folder: $XDG_CACHE_HOME/fixpoint/numba (the rule of targets/cmsis_nn.cache_root,
    which this layer cannot import)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base).expanduser() / "fixpoint" / "numba"


def numba() -> ModuleType:
    """The numba module, imported with its cache folder set (see the module docstring)."""
    os.environ.setdefault("NUMBA_CACHE_DIR", str(cache_folder()))
    import numba as module

    return module


@functools.cache
def caching() -> bool:
    """Whether numba's cache folder can be written: numba refuses to define a cached function where it
    cannot (a read-only home); the loops are then compiled in each process instead."""
    folder = Path(os.environ.get("NUMBA_CACHE_DIR") or cache_folder())
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        return False
    return os.access(folder, os.W_OK)
