"""Freed memory kept for reuse while `fixpoint evaluate` runs its batches: no page faults per array.

A batch of evaluation allocates and frees the same large arrays (activations, accumulators, metric
products: tens of MB each) once per layer. glibc's malloc serves such sizes with mmap and gives them back
on free (its mmap threshold adapts only up to 32 MB), so every array costs fresh zeroed pages from the
kernel: measured on the MobileNetV2 benchmark net, 6 s of system time out of 43 s of CPU. Raising the
mmap and trim thresholds for the duration makes malloc serve them from its heap and keep freed pages,
which later arrays reuse; at the end the thresholds return to glibc's documented defaults and the heap is
trimmed. Only speed changes. Without glibc (another libc, another platform) `reuse_freed_memory` does
nothing.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
from collections.abc import Iterator
from typing import Any

# mallopt parameters (malloc.h) and glibc's defaults for them.
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
_DEFAULT_THRESHOLD = 128 * 1024
_KEPT = 1 << 30  # 1 GiB: larger than any array an evaluation batch allocates


@contextlib.contextmanager
def reuse_freed_memory() -> Iterator[None]:
    """Run the body with malloc keeping freed memory (see the module docstring)."""
    libc = _glibc()
    if libc is None:
        yield
        return
    libc.mallopt(_M_MMAP_THRESHOLD, _KEPT)
    libc.mallopt(_M_TRIM_THRESHOLD, 2 * _KEPT)
    try:
        yield
    finally:
        libc.mallopt(_M_MMAP_THRESHOLD, _DEFAULT_THRESHOLD)
        libc.mallopt(_M_TRIM_THRESHOLD, _DEFAULT_THRESHOLD)
        libc.malloc_trim(0)


@functools.cache
def _glibc() -> Any:
    try:
        # The symbols the process already has (libc among them): find_library would run ldconfig.
        libc = ctypes.CDLL(None)
    except OSError:
        return None
    if not (
        hasattr(libc, "mallopt") and hasattr(libc, "malloc_trim") and hasattr(libc, "gnu_get_libc_version")
    ):
        return None
    libc.mallopt.argtypes, libc.mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    libc.malloc_trim.argtypes, libc.malloc_trim.restype = [ctypes.c_size_t], ctypes.c_int
    return libc
