"""fixpoint.toml: a project's model, parameters, target, board, budget, CMSIS-NN and flashing settings.

    model = "kws.onnx"             # paths are relative to the fixpoint.toml
    params = "kws.params.json"
    generated = "generated"
    target = "qemu-m4"

    [board]                        # a real board (target = its name, or "board")
    core = "cortex-m4"
    flash_origin = 0x08000000
    flash_size = "512K"
    ram_origin = 0x20000000
    ram_size = "128K"

    [budget]
    flash = "256K"
    ram = "64K"

    [flash]
    backend = "pyocd"              # gdb | pyocd | openocd | jlink
    serial = "/dev/ttyACM0"

    [checks]
    aligned = ["src/nn/**"]        # hand-written arrays held to `alignment`, as generated ones are

`load_project` never fails on a bad value: it keeps the default and returns the problem (key, line and
message), so an editor can show every problem at once; `load_project_strict` (the CLI) raises ProjectError.

The file may come with a repository the user was sent: the model and parameters it names must lie inside
the workspace (`workspace_roots`), the generated folder it writes to below its own folder, symlinks
resolved ([cmsis_nn] path is the exception: the user's own checkout usually lives elsewhere), and the
strings that reach a command line (probe, device, serial, gdb_remote) or a linker script (the board's
name) are checked for what they can hold.
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from quantcore import limits
from quantcore.cores import Core
from quantcore.errors import InputError, QuantcoreError
from quantcore.kernels.rounding import Rounding
from quantcore.targets.backend_names import BackendName

FILENAME = "fixpoint.toml"
T = TypeVar("T")


class ProjectError(InputError):
    """fixpoint.toml is unreadable or holds an invalid value; the message names the file and key."""


@dataclass(frozen=True)
class Problem:
    key: str
    """The dotted key, e.g. "budget.flash" ("" for the whole file)."""
    message: str
    line: int | None = None
    """1-based line of the key in the file, when found."""

    def where(self, path: str | Path) -> str:
        """`fixpoint.toml:4: generated` - the file, line and key the problem is at."""
        line = f":{self.line}" if self.line else ""
        return f"{path}{line}: {self.key}" if self.key else f"{path}{line}"


@dataclass(frozen=True)
class BoardSettings:
    name: str = "board"
    """The target name that selects this board (`--target board` works too)."""
    core: Core = Core.CORTEX_M4
    """The board's processor core (cortex-m0 ... cortex-m55)."""
    flash_origin: int = 0x08000000
    """Start address of flash, where the vector table goes."""
    flash_size: int = 512 * 1024
    ram_origin: int = 0x20000000
    ram_size: int = 128 * 1024
    uart_base: int | None = None
    """Base address of a CMSDK APB UART for the harness; other UARTs: see docs/protocol.md."""


@dataclass(frozen=True)
class BudgetSettings:
    flash: int | None = None
    """Flash bytes the firmware may take (text + data); None: the target's flash size."""
    ram: int | None = None
    """RAM bytes the firmware may take (data + bss); None: the target's RAM size."""


@dataclass(frozen=True)
class FlashConfig:
    backend: BackendName = BackendName.GDB
    """How to flash: gdb (a GDB server, e.g. QEMU's stub), pyocd, openocd or jlink."""
    probe: str = ""
    """The probe's serial number / unique id; empty: the only one connected."""
    serial: str = ""
    """The board's UART: a device (/dev/ttyACM0) or a pyserial URL (socket://host:port)."""
    baud: int = 115200
    device: str = ""
    """pyOCD target / OpenOCD target cfg / J-Link device name."""
    gdb_remote: str = "127.0.0.1:3333"
    """host:port of the GDB server the gdb backend flashes through."""


DEFAULT_FORBIDDEN_FLAGS = (
    "-O3",
    "-Ofast",
    "-O0",
    "-fno-builtin",
    "-ffreestanding",
    "-fno-omit-frame-pointer",
)
"""The flags the kernel-opt-level rule flags on CMSIS-NN and generated model sources by default."""
DEFAULT_KERNEL_SOURCES = ("**/CMSIS-NN/**", "**/CMSIS_NN/**", "**/cmsis-nn/**", "**/cmsis_nn/**")
"""Globs (relative to the project root) of CMSIS-NN's own sources; the generated folder is added to them."""
SEVERITIES = ("error", "warning", "info", "hint", "off")


@dataclass(frozen=True)
class ChecksSettings:
    """[checks]: what the editor's and `fixpoint check`'s rules look for, and how loudly."""

    severity: Mapping[str, str] = field(default_factory=dict)
    """[checks.severity]: rule code -> error | warning | info | hint | off (unset: the rule's default)."""
    forbidden_flags: tuple[str, ...] = DEFAULT_FORBIDDEN_FLAGS
    """Compiler flags not allowed on kernel sources (CMSIS-NN and the generated model)."""
    kernel_sources: tuple[str, ...] = DEFAULT_KERNEL_SOURCES
    """Globs of the sources the flag policy applies to, besides the generated folder."""
    exclude: tuple[str, ...] = ()
    """Globs of paths the workspace index skips (build output folders are always skipped)."""
    aligned: tuple[str, ...] = ()
    """Globs (relative to the project root) of hand-written sources whose kernel-facing arrays follow
    the project's `alignment` policy, like the generated folder's always do: aligned to it and padded to
    a multiple of it (misaligned-array warns otherwise). Arrays elsewhere only need the alignment the
    kernel's own loads ask for on the configured core."""


@dataclass(frozen=True)
class Project:
    path: Path | None = None
    """The fixpoint.toml this came from (None: defaults only)."""
    model: Path | None = None
    """The float model (ONNX)."""
    params: Path | None = None
    """The quant-params JSON written by `fixpoint quantize`."""
    generated: Path = Path("generated")
    """The folder `fixpoint generate` writes the C sources to."""
    target: str = "host"
    """The default --target."""
    rounding: Rounding = Rounding.DOUBLE
    """CMSIS-NN's requantization rounding (double, or single = CMSIS_NN_USE_SINGLE_ROUNDING)."""
    alignment: int = 16
    """Byte alignment of the generated arena and constant tables: the project's alignment policy, which
    misaligned-array holds the generated folder and [checks] aligned's globs to."""
    cmsis_nn: Path | None = None
    """A CMSIS-NN checkout ([cmsis_nn] path); None: $FIXPOINT_CMSIS_NN or the cache."""
    board: BoardSettings | None = None
    budget: BudgetSettings = field(default_factory=BudgetSettings)
    flash: FlashConfig = field(default_factory=FlashConfig)
    checks: ChecksSettings = field(default_factory=ChecksSettings)


# ------------------------------------------------------------------------------------------- values


def parse_size(value: Any) -> int:
    """512, "512K", "2M", "1.5M" -> bytes (K = 1024)."""
    if isinstance(value, bool):
        raise ValueError('expected a size such as 524288, "512K" or "2M"')
    if isinstance(value, int) and value >= 0:
        return value
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KkMmGg]?)i?[Bb]?\s*", str(value))
    if not match or isinstance(value, float):
        raise ValueError(f'expected a size such as 524288, "512K" or "2M", got {value!r}')
    scale = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3}[match[2].lower()]
    return int(float(match[1]) * scale)


def _int(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"expected a non-negative integer, got {value!r}")
    return value


def _str(value: Any) -> str:
    if not isinstance(value, str):
        raise ValueError(f"expected a string, got {value!r}")
    return value


def _choice(kind: Callable[[str], T], names: list[str]) -> Callable[[Any], T]:
    def convert(value: Any) -> T:
        try:
            return kind(_str(value))
        except (ValueError, QuantcoreError):
            raise ValueError(f"expected one of {', '.join(names)}, got {value!r}") from None

    return convert


def _alignment(value: Any) -> int:
    n = _int(value)
    if not 4 <= n <= 4096 or n & (n - 1):
        raise ValueError(f"expected a power of two from 4 to 4096, got {value!r}")
    return n


_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}\Z")


def _name(value: Any) -> str:
    """A board name: it is a --target value and appears in generated files."""
    text = _str(value)
    if not _NAME.match(text):
        raise ValueError(f"expected 1-64 letters, digits, '_', '.' or '-', got {text[:80]!r}")
    return text


def _argument(value: Any) -> str:
    """A string passed to a flashing tool as one argument: no control characters, not an option (the
    backends check probe and device names more strictly where they build their command lines)."""
    text = _str(value)
    if text.startswith("-") or any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in text) or len(text) > 255:
        raise ValueError(
            f"expected a name without control characters that does not start with '-', got {text[:80]!r}"
        )
    return text


def _host_port(value: Any) -> str:
    """gdb_remote: the rule the gdb backend applies (quantcore.targets.serial_link.is_host_port)."""
    from quantcore.targets.serial_link import is_host_port

    text = _str(value)
    if not is_host_port(text):
        raise ValueError(f"expected host:port with a port from 1 to 65535, got {text[:80]!r}")
    return text


_ROUNDING = _choice(Rounding, [r.value for r in Rounding])
_BACKEND = _choice(BackendName, [b.value for b in BackendName])
_CORE = _choice(Core.from_label, [c.label for c in Core if c is not Core.HOST])


# ------------------------------------------------------------------------------------------ loading


class _Reader:
    """Reads one table's keys, collecting problems and keeping defaults for bad values."""

    def __init__(self, table: dict[str, Any], prefix: str, problems: list[Problem]) -> None:
        self.table, self.prefix, self.problems = table, prefix, problems
        self.seen: set[str] = set()

    def get(self, key: str, convert: Callable[[Any], T], default: T) -> T:
        self.seen.add(key)
        if key not in self.table:
            return default
        try:
            return convert(self.table[key])
        except ValueError as exc:
            self.problems.append(Problem(self.prefix + key, str(exc)))
            return default

    def unknown(self, allowed_tables: tuple[str, ...] = ()) -> None:
        for key in self.table:
            if key not in self.seen and key not in allowed_tables:
                known = ", ".join(sorted(self.seen))
                self.problems.append(Problem(self.prefix + key, f"unknown key (known here: {known})"))


def load_project(path: str | Path) -> tuple[Project, list[Problem]]:
    """The project in `path` and its problems; bad values keep their defaults (never raises on content)."""
    from quantcore.untrusted import UntrustedInputError, read_text

    path = Path(path)
    problems: list[Problem] = []
    try:
        text = read_text(path, limit=limits.TOML_MAX_BYTES)
        document = tomllib.loads(text)
    except UntrustedInputError as exc:
        return Project(path), [Problem("", f"cannot read it: {exc.problem}")]
    except tomllib.TOMLDecodeError as exc:
        at = re.search(r"at line (\d+)", str(exc))
        return Project(path), [Problem("", f"not valid TOML: {exc}", int(at[1]) if at else None)]
    except RecursionError:
        return Project(path), [Problem("", "not valid TOML: values nest too deeply")]
    project = _project(path, document, problems)
    return project, [_placed(problem, text) for problem in problems]


def _project(path: Path, document: dict[str, Any], problems: list[Problem]) -> Project:
    base = path.parent
    top = _Reader(document, "", problems)

    readable = workspace_roots(path)

    def inside(roots: list[Path], refusal: str) -> Callable[[Any], Path]:
        def convert(value: Any) -> Path:
            from quantcore.untrusted import is_inside

            candidate = base / _str(value)
            if not any(is_inside(candidate, root) for root in roots):
                raise ValueError(f"{_str(value)!r} leads outside {refusal}")
            return candidate

        return convert

    model_file = inside(
        readable,
        f"the workspace {readable[0]} (the repository holding {path.name}, else its folder); give a path"
        " inside it, or name the file with --model/--params",
    )
    output = inside(
        [base.resolve()],
        f"{base.resolve()}, {path.name}'s folder, below which generated code goes; give a folder inside it,"
        " or name it with -o",
    )

    def checkout(value: Any) -> Path:
        return base / _str(value)  # the user's own CMSIS-NN checkout: anywhere, by design

    project = Project(
        path=path,
        model=top.get("model", model_file, None),
        params=top.get("params", model_file, None),
        generated=top.get("generated", output, base / "generated"),
        target=top.get("target", _name, "host"),
        rounding=top.get("rounding", _ROUNDING, Rounding.DOUBLE),
        alignment=top.get("alignment", _alignment, 16),
        cmsis_nn=_section(document, "cmsis_nn", problems, lambda r: r.get("path", checkout, None)),
        board=_section(document, "board", problems, _board) if "board" in document else None,
        budget=_section(document, "budget", problems, _budget),
        flash=_section(document, "flash", problems, _flash),
        checks=_section(document, "checks", problems, _checks),
    )
    top.unknown(("cmsis_nn", "board", "budget", "flash", "checks"))
    return project


def read_roots(folder: Path) -> list[Path]:
    """The folders a project in `folder` may read its model and parameters from: `folder` itself and the
    git work tree holding it (a firmware folder keeps its model beside it: `model = "../model.onnx"`).
    Found by looking for `.git` upwards - git itself is not run on a tree that may be hostile."""
    base = Path(os.path.realpath(folder))
    repository = next((f for f in (base, *base.parents) if (f / ".git").exists()), None)
    return [repository] if repository is not None else [base]


def workspace_roots(project_file: Path) -> list[Path]:
    """read_roots of a fixpoint.toml's folder, and the current folder when the file lies inside it (the
    folder the user works in: an example copied out of its repository still reads `../model.onnx`)."""
    base = Path(os.path.realpath(project_file)).parent
    roots = read_roots(base)
    cwd = Path.cwd().resolve()
    return [*roots, cwd] if cwd not in roots and cwd in base.parents else roots


def _placed(problem: Problem, text: str) -> Problem:
    line = key_line(text, problem.key)
    return Problem(problem.key, problem.message, None if line is None else line + 1)


def key_line(text: str, dotted: str) -> int | None:
    """The 0-based line of `dotted` (e.g. "budget.flash") in a TOML text: the key inside its table, else
    the table's header; None when neither is found."""
    if not dotted:
        return None
    *tables, key = dotted.split(".")
    current: list[str] = []
    fallback = None
    for n, line in enumerate(text.split("\n")):
        header = re.match(r"\s*\[([^\]]+)\]", line)
        if header:
            current = [part.strip() for part in header.group(1).split(".")]
            if current == [*tables, key]:
                return n  # the key is a table of its own
            if current == tables:
                fallback = n
            continue
        if current == tables and re.match(rf'\s*("?){re.escape(key)}\1\s*=', line):
            return n
    return fallback


def _section(document: dict[str, Any], name: str, problems: list[Problem], read: Callable[[_Reader], T]) -> T:
    table = document.get(name, {})
    if not isinstance(table, dict):
        problems.append(Problem(name, "expected a table ([" + name + "])"))
        table = {}
    reader = _Reader(table, name + ".", problems)
    value = read(reader)
    reader.unknown()
    return value


def _board(r: _Reader) -> BoardSettings:
    d = BoardSettings()
    return BoardSettings(
        name=r.get("name", _name, d.name),
        core=r.get("core", _CORE, d.core),
        flash_origin=r.get("flash_origin", _int, d.flash_origin),
        flash_size=r.get("flash_size", parse_size, d.flash_size),
        ram_origin=r.get("ram_origin", _int, d.ram_origin),
        ram_size=r.get("ram_size", parse_size, d.ram_size),
        uart_base=r.get("uart_base", _int, d.uart_base),
    )


def _budget(r: _Reader) -> BudgetSettings:
    return BudgetSettings(flash=r.get("flash", parse_size, None), ram=r.get("ram", parse_size, None))


def _flash(r: _Reader) -> FlashConfig:
    d = FlashConfig()
    return FlashConfig(
        backend=r.get("backend", _BACKEND, d.backend),
        probe=r.get("probe", _argument, d.probe),
        serial=r.get("serial", _argument, d.serial),
        baud=r.get("baud", _int, d.baud),
        device=r.get("device", _argument, d.device),
        gdb_remote=r.get("gdb_remote", _host_port, d.gdb_remote),
    )


def _strings(value: Any) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"expected a list of strings, got {value!r}")
    return tuple(value)


def _severities(r: _Reader) -> dict[str, str]:
    """[checks.severity], entry by entry: a bad entry is a problem of its own, the others still apply."""
    r.seen.add("severity")
    table = r.table.get("severity", {})
    if not isinstance(table, dict):
        r.problems.append(Problem(r.prefix + "severity", "expected a table ([checks.severity])"))
        return {}
    good = {}
    for rule, level in table.items():
        if level in SEVERITIES:
            good[rule] = level
        else:
            r.problems.append(
                Problem(
                    f"{r.prefix}severity.{rule}", f"expected one of {', '.join(SEVERITIES)}, got {level!r}"
                )
            )
    return good


def _checks(r: _Reader) -> ChecksSettings:
    d = ChecksSettings()
    return ChecksSettings(
        severity=_severities(r),
        forbidden_flags=r.get("forbidden_flags", _strings, d.forbidden_flags),
        kernel_sources=r.get("kernel_sources", _strings, d.kernel_sources),
        exclude=r.get("exclude", _strings, d.exclude),
        aligned=r.get("aligned", _strings, d.aligned),
    )


def load_project_strict(path: str | Path) -> Project:
    """The project, or one ProjectError line: the first problem at `file:line: key`, then how many more
    and at which keys (the editor shows each in place; `fixpoint check` lists them all)."""
    project, problems = load_project(path)
    if problems:
        first = problems[0]
        more = ""
        if len(problems) > 1:
            keys = ", ".join(p.key or "(file)" for p in problems[1:6])
            more = f" (and {len(problems) - 1} more: {keys}{', ...' if len(problems) > 6 else ''})"
        raise ProjectError(f"{first.where(path)}: {first.message}{more}")
    return project


def find_project(directory: str | Path = ".") -> Path | None:
    """./fixpoint.toml when it exists (the CLI's defaults come from it)."""
    candidate = Path(directory) / FILENAME
    return candidate if candidate.is_file() else None
