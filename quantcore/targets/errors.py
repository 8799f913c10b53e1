"""Errors of building, flashing and running firmware; each names the target, file or port, and what to do."""

from __future__ import annotations

from quantcore.errors import InputError, QuantcoreError


class TargetError(QuantcoreError):
    """Base of everything that goes wrong between generated sources and a parsed firmware transcript."""


class UnknownTargetError(TargetError, InputError):
    """A target name that is neither built in nor the project's board."""


class SettingError(TargetError, InputError):
    """A board or flashing setting that cannot be used as given (fixpoint.toml [board] / [flash], or the
    option that overrides it): a malformed URL or address, a missing UART address. Bad input, not a
    failure of the board."""


class ToolchainNotFound(TargetError):
    """A compiler, emulator or flashing tool the target needs is not installed (or not on PATH)."""


class FirmwareBuildError(TargetError):
    """Compiling or linking the firmware (model sources + harness + CMSIS-NN) failed."""


class BudgetError(TargetError):
    """The firmware does not fit the flash or RAM budget; raised before anything is flashed."""


class TestInputsOverflow(BudgetError):
    """The firmware would fit but for its embedded test inputs; `fit` of them would."""

    __test__ = False  # not a pytest test class, whatever its name

    def __init__(self, message: str, fit: int) -> None:
        super().__init__(message)
        self.fit = fit


class FirmwareTimeout(TargetError):
    """The firmware did not finish its transcript within the timeout (a hang, or output lost)."""


class FirmwareOutputLimit(TargetError):
    """The firmware printed more than limits.FIRMWARE_OUTPUT_MAX_BYTES without ending its transcript."""

    @classmethod
    def on(cls, channel: str, last: str) -> FirmwareOutputLimit:
        """The error for `channel`, quoting the `last` output (already shown safely)."""
        from quantcore import limits

        mib = f"{limits.FIRMWARE_OUTPUT_MAX_BYTES / limits.MIB:g} MiB"
        return cls(
            f"{channel}: the firmware printed more than {mib} without finishing its transcript (no "
            f"'FIXPOINT END' line; it was stopped); last output: {last}"
        )


class FirmwareFault(TargetError):
    """The firmware crashed: a Cortex-M fault handler ran, or the host process died of a signal."""


class FirmwareFailed(TargetError):
    """The firmware ran to its end but reported a failure (model_init or model_invoke returned non-zero)."""


class PortBusyError(TargetError):
    """A TCP port (QEMU's GDB stub or UART) or a serial device is already in use."""


class FlashError(TargetError):
    """Writing the firmware to the board (or QEMU's GDB stub) failed or did not verify."""
