"""Element types of IR tensors, with their numpy dtype and integer range."""

from __future__ import annotations

import enum

import numpy as np


class DType(enum.Enum):
    FLOAT32 = ("float32", None, None)
    INT8 = ("int8", -128, 127)
    INT16 = ("int16", -32768, 32767)
    INT32 = ("int32", -(2**31), 2**31 - 1)
    INT64 = ("int64", -(2**63), 2**63 - 1)

    def __init__(self, label: str, qmin: int | None, qmax: int | None) -> None:
        self.label = label
        self.qmin = qmin
        self.qmax = qmax

    @property
    def numpy(self) -> np.dtype[np.generic]:
        return np.dtype(self.label)

    @classmethod
    def from_numpy(cls, dtype: np.dtype[np.generic]) -> DType:
        for member in cls:
            if member.label == np.dtype(dtype).name:
                return member
        raise ValueError(f"no IR dtype for numpy {np.dtype(dtype).name}")
