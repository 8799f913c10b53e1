"""A numba loop for tests/kernels/test_jit_loops.py to build ahead of time (quantcore.kernels.jit): an
integer array, a float, an int and an output array in; a float64 out."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from quantcore.kernels import jit

_nb = jit.numba()


def _scaled_sum(x: npt.NDArray[np.int16], factor: float, rounds: int, out: npt.NDArray[np.float64]) -> float:
    """out = x * factor; the sum of out, `rounds` times over (a loop as long as a test needs)."""
    total = 0.0
    for _ in range(rounds):
        for i in range(x.size):
            out[i] = x[i] * factor
            total += out[i]
    return total


scaled_sum = _nb.njit(nogil=True)(_scaled_sum)
