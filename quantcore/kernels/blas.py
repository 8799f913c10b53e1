"""One BLAS thread while the reference kernels run: their matrix products are many and small.

The int8 kernels' products ((batch * pixels, K) by (K, out) with K and out in the tens to hundreds) take
well under a millisecond on one core. numpy's OpenBLAS splits each over every core anyway, and on a busy
machine (a CI run beside an editor, two cores shared) its threads wait for each other at every call:
measured on the benchmark's LeNet layer, 25 ms per product with the default threads against 0.2 ms with
one. Results do not depend on the thread count here (the kernels' products are exact, see conv.py), so
this changes speed only.

OpenBLAS reads its thread count once, at load; changing it later needs its own setter, found by name in
the library numpy ships with (wheels rename the symbols). Where none is found (another BLAS, another
platform) `single_threaded` does nothing: a slower run, never a wrong one.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

# (getter, setter) symbol pairs of the OpenBLAS builds numpy ships or links.
_SYMBOLS = (
    ("scipy_openblas_get_num_threads64_", "scipy_openblas_set_num_threads64_"),
    ("openblas_get_num_threads64_", "openblas_set_num_threads64_"),
    ("openblas_get_num_threads", "openblas_set_num_threads"),
)


_lock = threading.Lock()
_inside = 0
"""How many threads are inside single_threaded now (the count is OpenBLAS's, one for the process)."""
_before = 0
"""The thread count the first of them found, restored by the last one out."""


@contextlib.contextmanager
def single_threaded() -> Iterator[None]:
    """Run the body with one BLAS thread, then restore the count it had - once no other Python thread is
    inside either (quantize scores one candidate in a thread while bias correction runs: the first one
    out must not give the other one OpenBLAS's whole pool back)."""
    global _inside, _before
    control = _control()
    if control is None:
        yield
        return
    get, set_ = control
    with _lock:
        if _inside == 0:
            _before = get()
            set_(1)
        _inside += 1
    try:
        yield
    finally:
        with _lock:
            _inside -= 1
            if _inside == 0:
                set_(_before)


@functools.cache
def _control() -> tuple[Callable[[], int], Callable[[int], None]] | None:
    for library in _candidates():
        try:
            lib = ctypes.CDLL(str(library))
        except OSError:
            continue
        for getter, setter in _SYMBOLS:
            get, set_ = getattr(lib, getter, None), getattr(lib, setter, None)
            if get is not None and set_ is not None:
                get.restype, get.argtypes = ctypes.c_int, []
                set_.restype, set_.argtypes = None, [ctypes.c_int]
                return _bound(get, set_)
    return None


def _bound(get: Any, set_: Any) -> tuple[Callable[[], int], Callable[[int], None]]:
    return (lambda: int(get())), (lambda n: set_(n))


def _candidates() -> list[Path]:
    """numpy's bundled OpenBLAS (wheels keep it in numpy.libs beside the package)."""
    site = Path(np.__file__).resolve().parent.parent
    found: list[Path] = []
    for folder in (site / "numpy.libs", site / "numpy" / ".dylibs"):
        if folder.is_dir():
            found += sorted(p for p in folder.iterdir() if "openblas" in p.name)
    return found
