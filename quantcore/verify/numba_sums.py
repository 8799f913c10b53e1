"""The loop of quantcore.verify.compiled_sums, as numba compiles it: the sums and maxima of one pass over
a float reference and int8 (or int16) values (what they are, the layouts, and the order of additions:
compiled_sums.py's docstring).

This module imports numba when it is imported; quantcore.kernels.jit imports it only to build the loop
ahead of time (compiled_sums.SUMS names it and its argument types), or where that cannot be done, to run
it through numba's JIT.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from quantcore.kernels import jit

_nb = jit.numba()
_CACHE = jit.caching()


def _rows(
    f: npt.NDArray[np.floating[Any]],
    q: npt.NDArray[np.number[Any]],
    zero_point: float,
    scales: npt.NDArray[np.float64],
) -> tuple[float, float, float, float, float, float]:
    """The sums and maxima over f (A, C, P) and q (A, P, C) (f[a, c, p] pairs with q[a, p, c]), scale
    scales[c] (or scales[0] for all): rows (a, c) in order, two accumulators per row (module docstring)."""
    rows_a, channels, length = f.shape
    per_channel = scales.size != 1
    ff = ee = fd = dd = 0.0
    max_e = max_f = 0.0
    for a in range(rows_a):
        for c in range(channels):
            s = scales[c] if per_channel else scales[0]
            ff0 = ee0 = fd0 = dd0 = 0.0
            ff1 = ee1 = fd1 = dd1 = 0.0
            p = 0
            while p + 1 < length:
                f0 = np.float64(f[a, c, p])
                d0 = (np.float64(q[a, p, c]) - zero_point) * s
                e0 = f0 - d0
                f1 = np.float64(f[a, c, p + 1])
                d1 = (np.float64(q[a, p + 1, c]) - zero_point) * s
                e1 = f1 - d1
                ff0 += f0 * f0
                ee0 += e0 * e0
                fd0 += f0 * d0
                dd0 += d0 * d0
                ff1 += f1 * f1
                ee1 += e1 * e1
                fd1 += f1 * d1
                dd1 += d1 * d1
                max_e = max(max_e, abs(e0), abs(e1))
                max_f = max(max_f, abs(f0), abs(f1))
                p += 2
            if p < length:
                f0 = np.float64(f[a, c, p])
                d0 = (np.float64(q[a, p, c]) - zero_point) * s
                e0 = f0 - d0
                ff0 += f0 * f0
                ee0 += e0 * e0
                fd0 += f0 * d0
                dd0 += d0 * d0
                max_e = max(max_e, abs(e0))
                max_f = max(max_f, abs(f0))
            ff += ff0 + ff1
            ee += ee0 + ee1
            fd += fd0 + fd1
            dd += dd0 + dd1
    return ff, ee, fd, dd, max_e, max_f


rows = _nb.njit(cache=_CACHE, nogil=True)(_rows)
