"""Integer helpers shared by the reference kernels: C's int32 wrap-around and argument validation.

numpy does the arithmetic in int64; where CMSIS-NN's C computes in int32 and relies on two's-complement
wrap-around, `wrap32` reproduces it, so the reference follows the compiled kernels and not an idealised
mathematical version of them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from quantcore.errors import KernelArgumentError

I64 = npt.NDArray[np.int64]

INT8_MIN, INT8_MAX = -128, 127
INT16_MIN, INT16_MAX = -32768, 32767
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1


def wrap32(values: I64) -> I64:
    """Reduce int64 values modulo 2^32 into [-2^31, 2^31), as an int32 cast does in C."""
    return ((values + 2**31) & 0xFFFFFFFF) - 2**31


class Args:
    """Validates the arguments of one kernel call; every failure names the kernel and the argument."""

    def __init__(self, kernel: str) -> None:
        self.kernel = kernel

    def fail(self, argument: str, problem: str) -> KernelArgumentError:
        return KernelArgumentError(self.kernel, argument, problem)

    def array(
        self,
        name: str,
        value: Any,
        dtype: type[np.generic],
        ndim: int | None = None,
        shape: Sequence[int] | None = None,
    ) -> np.ndarray[Any, Any]:
        """Return `value` as an ndarray, after checking its dtype exactly (no silent casts) and its shape."""
        if not isinstance(value, np.ndarray):
            raise self.fail(
                name, f"must be a numpy array of {np.dtype(dtype).name}, got {type(value).__name__}"
            )
        if value.dtype != np.dtype(dtype):
            raise self.fail(name, f"must have dtype {np.dtype(dtype).name}, got {value.dtype.name}")
        if ndim is not None and value.ndim != ndim:
            raise self.fail(name, f"must have {ndim} dimensions, got shape {value.shape}")
        if shape is not None and tuple(value.shape) != tuple(shape):
            raise self.fail(name, f"must have shape {tuple(shape)}, got {value.shape}")
        return value

    def integer(self, name: str, value: Any, lo: int, hi: int) -> int:
        """Check a scalar integer parameter lies in CMSIS-NN's documented range [lo, hi]."""
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise self.fail(name, f"must be an integer in [{lo}, {hi}], got {value!r}")
        if not lo <= int(value) <= hi:
            raise self.fail(name, f"must be in [{lo}, {hi}], got {int(value)}")
        return int(value)

    def pair(self, name: str, value: Any, lo: int, hi: int = 2**15 - 1) -> tuple[int, int]:
        """Check an (h, w) pair such as stride, padding or dilation."""
        if not isinstance(value, (tuple, list)) or len(value) != 2:
            raise self.fail(name, f"must be an (h, w) pair of integers, got {value!r}")
        return (self.integer(f"{name}[0]", value[0], lo, hi), self.integer(f"{name}[1]", value[1], lo, hi))

    def activation(self, act_min: Any, act_max: Any) -> tuple[int, int]:
        """An activation clamp as cmsis_nn_activation holds it: two int32s, in no required order.

        The C clamps with MIN(MAX(v, act_min), act_max) in int32 and casts the result to the output type, so
        limits outside the type or act_min > act_max (every value becomes act_max) are well defined; the
        kernels compute them so (np.clip applies the same MAX-then-MIN order, astype keeps the low bits as
        gcc's and armclang's conversion does). Keeping clamps inside the type is the quant-params schema's
        check, not the kernel's."""
        return (
            self.integer("act_min", act_min, INT32_MIN, INT32_MAX),
            self.integer("act_max", act_max, INT32_MIN, INT32_MAX),
        )

    def int_values(self, name: str, value: np.ndarray[Any, Any], lo: int, hi: int) -> None:
        """Check every element of an integer array lies in [lo, hi] (e.g. shifts, multipliers)."""
        if value.size and (int(value.min()) < lo or int(value.max()) > hi):
            bad = value[(value < lo) | (value > hi)].ravel()[0]
            raise self.fail(name, f"values must be in [{lo}, {hi}], found {int(bad)}")
