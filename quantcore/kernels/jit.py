"""Compiled twins of a few numpy passes (numba): the switch that picks them, and numba's loading.

The numpy kernels stay the readable reference. Where a batched evaluation spends its time in a dozen
numpy passes per element (finish_s8's requantization, the depthwise taps, the metrics' sums), a
compiled loop computes the same integers (and the same float64 sums, in an order of additions of
its own) in one pass:
`quantcore.kernels.compiled` and `quantcore.verify.compiled_sums`. Those modules import numba when they
are imported, and only the code that runs them imports them (inside a function): `fixpoint --help`,
`fixpoint check` and the language server never load numba (tests/test_cli_startup.py).

The same switch and block select quantcore.kernels.int_gemm, the convolutions' integer product on
onnxruntime (no numba; exact int32 sums where a probe finds this machine's MLAS exact).

The loops run only inside `compiled_loops()`, which `evaluate` opens around its batches when they are
large enough to repay numba's load (COMPILED_LOOPS_FROM in verify/evaluate.py; why only evaluate: see
compiled_loops).
FIXPOINT_JIT=0 in the environment turns them off there too (every caller then takes its numpy path);
the equality tests use it to hold both paths to the same results, and FIXPOINT_JIT=all runs them
everywhere (the kernel and conformance suites through them). It is read at each call, so a test can
switch it. No fastmath anywhere: it would let LLVM reorder float sums as each machine's vector width
suits, and the figures would change from machine to machine.

Compiling them all costs a CLI process about 5 s, so numba's on-disk cache is on (cache=True) with its
folder in Fixpoint's per-user cache, $XDG_CACHE_HOME/fixpoint/numba: a later process loads the machine
code instead (about 0.4 s: numba's import, and its first load, which imports scipy's BLAS where scipy
is installed). numba reads NUMBA_CACHE_DIR when it is imported, so `numba()` sets it (unless the user
did) before the first import.
"""

from __future__ import annotations

import functools
import importlib.util
import os
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from types import ModuleType

from quantcore.paths import cache_root

SWITCH = "FIXPOINT_JIT"
"""The environment variable: "0" selects the numpy paths everywhere, "all" the compiled loops everywhere
(to run the kernel and conformance suites through them); unset or "1", they run inside compiled_loops."""


_WANTED: ContextVar[bool] = ContextVar("fixpoint_compiled_loops", default=False)


@contextmanager
def compiled_loops() -> Iterator[None]:
    """Within this block (in this thread), the kernels and the figures take their compiled loops where
    `enabled` allows. Only `evaluate` asks: its thousands of samples repay numba's load (about 0.4 s a
    process, more on a first run), while `quantize` - whose calibration runs are small and whose wall
    time is a benchmark of its own - stays on numpy and never imports numba."""
    token = _WANTED.set(True)
    try:
        yield
    finally:
        _WANTED.reset(token)


def enabled() -> bool:
    """Whether the compiled loops are to be used: asked for (compiled_loops), numba installed, and not
    switched off."""
    switch = os.environ.get(SWITCH, "1")
    return (switch == "all" or (_WANTED.get() and switch != "0")) and installed()


@functools.cache
def installed() -> bool:
    """Whether numba can be imported (a dependency; an install without it keeps the numpy paths)."""
    return importlib.util.find_spec("numba") is not None


def cache_folder() -> Path:
    """numba's cache folder: $XDG_CACHE_HOME/fixpoint/numba."""
    return cache_root() / "numba"


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
