"""The memory audit: what the firmware takes of flash and RAM, against the target's or project's budget.

`arm-none-eabi-size` (Berkeley format) gives text, data and bss: flash holds text + data (the initial
values of .data are stored there and copied at reset), RAM holds data + bss. The model's own figures,
its activation arena and CMSIS-NN scratch buffer, come from the generated header; both live in .bss, as
do the recurrent layers' own state buffers (the header's <PREFIX>_STATE_BYTES, when there are some).
The audit runs before flashing, so a model that does not fit never reaches the board.
"""

from __future__ import annotations

from dataclasses import dataclass

from quantcore.targets import process
from quantcore.targets.build import Firmware
from quantcore.targets.errors import BudgetError, FirmwareBuildError

SIZE_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class Budget:
    """Bytes available; None means no limit (the host)."""

    flash: int | None
    ram: int | None


@dataclass(frozen=True)
class MemoryReport:
    """Sizes of one firmware image and the budget they were checked against."""

    text: int
    data: int
    bss: int
    arena: int
    scratch: int
    budget: Budget
    state: int = 0
    """The recurrent layers' own buffers (persistent state), in .bss beside the arena."""

    @property
    def flash(self) -> int:
        return self.text + self.data

    @property
    def ram(self) -> int:
        return self.data + self.bss

    def problems(self) -> list[str]:
        found = []
        for what, used, limit in (
            ("flash", self.flash, self.budget.flash),
            ("RAM", self.ram, self.budget.ram),
        ):
            if limit is not None and used > limit:
                found.append(f"{what}: {used} bytes needed, budget {limit} ({used - limit} over)")
        return found

    def format(self) -> str:
        def of(limit: int | None) -> str:
            return f" of {limit}" if limit is not None else ""

        return (
            f"flash {self.flash}{of(self.budget.flash)} bytes (text {self.text} + data {self.data}), "
            f"RAM {self.ram}{of(self.budget.ram)} bytes (data {self.data} + bss {self.bss}; "
            f"arena {self.arena}, scratch {self.scratch}"
            + (f", recurrent state {self.state})" if self.state else ")")
        )


def target_budget(firmware: Firmware) -> Budget:
    target = firmware.target
    return Budget(target.flash.size if target.flash else None, target.ram.size if target.ram else None)


def measure(firmware: Firmware, budget: Budget | None = None) -> MemoryReport:
    """Berkeley sizes of the firmware, the header's arena/scratch, `budget` (default: the target's)."""
    text, data, bss = berkeley_size(firmware.toolchain.size, firmware)
    header = firmware.header
    return MemoryReport(
        text,
        data,
        bss,
        header.arena_bytes,
        header.scratch_bytes,
        budget or target_budget(firmware),
        header.state_bytes,
    )


def berkeley_size(tool: str, firmware: Firmware) -> tuple[int, int, int]:
    try:
        done = process.run_capped([tool, "-B", str(firmware.path)], SIZE_TIMEOUT_S)
    except FileNotFoundError:
        raise FirmwareBuildError(f"{tool} is not installed; it comes with the compiler's binutils") from None
    rows = done.stdout.decode("utf-8", "replace").strip().splitlines()
    fields = rows[1].split()[:3] if done.returncode == 0 and len(rows) >= 2 else []
    if len(fields) != 3 or not all(field.isdigit() for field in fields):
        stderr = done.stderr.decode("utf-8", "replace").strip()[-500:]
        raise FirmwareBuildError(f"{tool} could not read {firmware.path}: {stderr or '(no message)'}")
    text, data, bss = (int(v) for v in fields)
    return text, data, bss


def check_budget(report: MemoryReport, where: str) -> None:
    """BudgetError listing every region over budget; nothing is flashed after one."""
    problems = report.problems()
    if problems:
        raise BudgetError(
            f"the firmware does not fit {where}: "
            + "; ".join(problems)
            + ". Shrink the model (fewer channels, int8 everywhere) or raise [budget] in fixpoint.toml"
        )
