"""The errors calibration raises; all derive from quantcore's QuantcoreError and name the tensor involved."""

from __future__ import annotations

from quantcore.errors import CalibrationError


class NonFiniteBatchError(CalibrationError):
    """A calibration batch holds NaN or infinite values; nothing of it was recorded."""

    def __init__(self, tensor: str, non_finite: int, size: int) -> None:
        self.tensor = tensor
        self.non_finite = non_finite
        self.size = size
        super().__init__(
            f"tensor '{tensor}': calibration batch has {non_finite} non-finite value(s) (NaN or +-Inf) "
            f"out of {size}; the batch was rejected - check the model and the calibration inputs"
        )

    def __reduce__(self) -> tuple[type, tuple[str, int, int]]:
        # Rebuilt from its arguments, so a calibration worker process can send it back intact.
        return (type(self), (self.tensor, self.non_finite, self.size))


class EmptyObserverError(CalibrationError):
    """A range or histogram was asked of an observer that has seen no values."""

    def __reduce__(self) -> tuple[type, tuple[str]]:
        return (type(self), (self.tensor,))

    def __init__(self, tensor: str) -> None:
        self.tensor = tensor
        super().__init__(
            f"tensor '{tensor}': no calibration values were observed, so it has no range; "
            "feed it at least one non-empty batch (is the tensor on the path of the calibration inputs?)"
        )


class ObserverMismatchError(CalibrationError):
    """Two observers that cannot be merged (different tensors or histogram resolutions)."""


class ObserverFormatError(CalibrationError):
    """A serialised observer (dict or npz) is malformed or was not produced by this version."""
