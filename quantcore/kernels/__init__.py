"""Bit-exact numpy reference of CMSIS-NN's integer kernels.

Each kernel takes NHWC int8/int16 numpy arrays and the parameters of its CMSIS-NN counterpart (named after
the C structs' fields), validates them as CMSIS-NN documents, and returns exactly the bytes the compiled
kernel writes. Batches run vectorised; accumulation is exact integer arithmetic.
"""

from quantcore.kernels.rounding import Rounding  # not via requantize: importing the package needs no numpy

__all__ = ["Rounding"]
