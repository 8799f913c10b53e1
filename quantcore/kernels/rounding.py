"""The requantization rounding a CMSIS-NN build uses, without numpy: the CLI's --rounding choices and
fixpoint.toml's reader need the names only (quantcore.kernels.requantize re-exports it)."""

from __future__ import annotations

import enum


class Rounding(enum.Enum):
    """The requantization rounding a CMSIS-NN build uses."""

    DOUBLE = "double"
    """Default build: arm_nn_doubling_high_mult_no_sat + arm_nn_divide_by_power_of_two."""
    SINGLE = "single"
    """Build with CMSIS_NN_USE_SINGLE_ROUNDING defined."""

    @property
    def define(self) -> str | None:
        """The C macro that selects this rounding, or None for the default."""
        return "CMSIS_NN_USE_SINGLE_ROUNDING" if self is Rounding.SINGLE else None
