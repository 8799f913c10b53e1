"""Building firmware: generated model sources + the test harness + CMSIS-NN for a target's core.

The model directory holds what `fixpoint generate` wrote (<prefix>.h, <prefix>.c, <prefix>_data.c, ...);
every .c file in it is compiled. Fixpoint adds, rendered from templates/target/: the harness (runs the
test vectors, writes the protocol transcript), the vectors (quantized inputs as const arrays) and, for
Cortex-M, the startup code and linker script. One compiler call compiles and links everything against
libcmsis-nn.a built for the same core and rounding.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from quantcore import limits, untrusted
from quantcore.kernels.requantize import Rounding
from quantcore.targets import cmsis_nn, process
from quantcore.targets.errors import BudgetError, FirmwareBuildError, SettingError, TestInputsOverflow
from quantcore.targets.render import render, write_text
from quantcore.targets.target import Kind, Target
from quantcore.targets.toolchain import Toolchain, require_toolchain

COMPILE_TIMEOUT_S = 300
ADDRESS_SPACE = 1 << 32
"""Cortex-M addresses are 32 bits: an origin, size or UART address beyond them is a broken setting."""
STACK_BYTES = 16 * 1024
"""Stack the linker script keeps free at the top of RAM (CMSIS-NN kernels use little; printf some)."""

_MACRO = re.compile(r"^\s*#\s*define\s+(\w+)\s+\(?\s*([-+0-9.eE]+)[uUlLfF]*\s*\)?", re.MULTILINE)


class Channel(enum.Enum):
    """How the harness writes its transcript."""

    STDIO = "stdio"
    """printf to the host process's stdout."""
    SEMIHOSTING = "semihosting"
    """newlib + librdimon: printf reaches QEMU's stdout; exit() ends QEMU with main's status."""
    UART = "uart"
    """The CMSDK UART0, polled; the board route (no debugger needed while it runs)."""


def default_channel(target: Target) -> Channel:
    return Channel.STDIO if target.kind is Kind.HOST else Channel.SEMIHOSTING


@dataclass(frozen=True)
class ModelHeader:
    """The sizes the generated header declares (macros <PREFIX>_LAYER_COUNT, _INPUT_BYTES, ...)."""

    path: Path
    layer_count: int
    input_bytes: int
    output_bytes: int
    arena_bytes: int
    scratch_bytes: int
    state_bytes: int = 0
    """The recurrent layers' own buffers (<PREFIX>_STATE_BYTES; absent: none)."""


def _header(src: Path, prefix: str) -> tuple[Path, str, dict[str, str]]:
    """src/<prefix>.h: its path, its text and its numeric macros."""
    path = src / f"{prefix}.h"
    if not path.is_file():
        raise FirmwareBuildError(f"{path} does not exist: generate the model first (`fixpoint generate`)")
    text = untrusted.read_text(path, limit=limits.SOURCE_MAX_BYTES)
    return path, text, dict(_MACRO.findall(text))


def read_header(src: Path, prefix: str = "model") -> ModelHeader:
    """The size macros of src/<prefix>.h; FirmwareBuildError naming the file and macro when one is missing."""
    path, _, macros = _header(src, prefix)
    upper = prefix.upper()

    def size(name: str) -> int:
        value = macros.get(f"{upper}_{name}")
        if value is None or not re.fullmatch(r"\d+", value):
            raise FirmwareBuildError(f"{path}: no integer #define {upper}_{name}; regenerate the model")
        return int(value)

    return ModelHeader(
        path,
        layer_count=size("LAYER_COUNT"),
        input_bytes=size("INPUT_BYTES"),
        output_bytes=size("OUTPUT_BYTES"),
        arena_bytes=size("ARENA_BYTES"),
        scratch_bytes=size("SCRATCH_BYTES"),
        state_bytes=size("STATE_BYTES") if f"{upper}_STATE_BYTES" in macros else 0,
    )


@dataclass(frozen=True)
class InputContract:
    """How model.h tells an application to write the input (templates/model/model.h.j2): the model's own
    values, transposed (n, c, h, w) -> (n, h, w, c) when `model_nchw`, quantized with `scale` and
    `zero_point`, written in `shape` (NHWC or NC, batch first) through <prefix>_input()."""

    path: Path
    shape: tuple[int, ...]
    scale: float
    zero_point: int
    wide: bool
    """int16_t input (else int8_t)."""
    model_nchw: bool


_SHAPE = re.compile(r"^\s*#\s*define\s+(\w+)_INPUT_SHAPE\s+\{([0-9, ]*)\}", re.MULTILINE)
_TYPE = re.compile(r"^\s*#\s*define\s+(\w+)_INPUT_TYPE\s+(int8_t|int16_t)\s*$", re.MULTILINE)


def read_contract(src: Path, prefix: str = "model") -> InputContract:
    """The input contract src/<prefix>.h states; FirmwareBuildError when it states none (an older
    generation, or sources not written by `fixpoint generate`)."""
    path, text, macros = _header(src, prefix)
    upper = prefix.upper()
    shape = {m.group(1): m.group(2) for m in _SHAPE.finditer(text)}.get(upper)
    ctype = {m.group(1): m.group(2) for m in _TYPE.finditer(text)}.get(upper)
    names = ("INPUT_SCALE", "INPUT_ZERO_POINT", "INPUT_MODEL_NCHW")
    missing = [f"{upper}_{n}" for n in names if f"{upper}_{n}" not in macros]
    missing += [f"{upper}_INPUT_SHAPE"] * (shape is None) + [f"{upper}_INPUT_TYPE"] * (ctype is None)
    if missing:
        raise FirmwareBuildError(
            f"{path}: no {', '.join(missing)}: it does not state how to write the input; regenerate the"
            " model (`fixpoint generate`)"
        )
    assert shape is not None
    try:
        dims = tuple(int(d) for d in shape.split(","))
        scale, zero_point = float(macros[f"{upper}_INPUT_SCALE"]), int(macros[f"{upper}_INPUT_ZERO_POINT"])
    except ValueError:
        raise FirmwareBuildError(
            f"{path}: {upper}_INPUT_SHAPE, _SCALE or _ZERO_POINT is not a list of integers, a number and an"
            " integer as `fixpoint generate` writes them; regenerate the model"
        ) from None
    return InputContract(
        path, dims, scale, zero_point, ctype == "int16_t", macros[f"{upper}_INPUT_MODEL_NCHW"] == "1"
    )


@dataclass(frozen=True)
class Firmware:
    """A built firmware image and what went into it."""

    target: Target
    channel: Channel
    path: Path
    """The ELF (Cortex-M) or executable (host)."""
    header: ModelHeader
    cases: int
    model: str
    toolchain: Toolchain

    @property
    def hex_path(self) -> Path:
        return self.path.with_suffix(".hex")


@dataclass(frozen=True)
class BuildRequest:
    """Everything one firmware build depends on."""

    target: Target
    src: Path
    """The generated model sources."""
    build_dir: Path
    inputs: Sequence[bytes]
    """The quantized input bytes of each test case (model_input() layout)."""
    checkout: cmsis_nn.CmsisNn
    rounding: Rounding = Rounding.DOUBLE
    channel: Channel | None = None
    """None: stdout on the host, semihosting on QEMU and boards."""
    model: str = "model"
    prefix: str = "model"
    opt: str = "-O2"
    defines: tuple[str, ...] = ()
    """Extra preprocessor defines for every source (NAME or NAME=VALUE), e.g. MODEL_NO_LAYER_HOOK."""
    application: tuple[Path, ...] = ()
    """C sources that take the test harness's place (they define main and use only <prefix>.h); then
    `inputs` is not used. Cortex-M targets still get Fixpoint's startup code and linker script."""


def build_firmware(request: BuildRequest) -> Firmware:
    """Render the harness files, compile and link; FirmwareBuildError with the compiler output if not."""
    target, channel = request.target, request.channel or default_channel(request.target)
    check_channel(target, channel)
    if request.application and channel is Channel.UART:
        raise SettingError("an application build prints through stdio or semihosting, not the UART")
    header = read_header(request.src, request.prefix)
    if not request.application:
        _check_inputs(request, header)
    chain = require_toolchain(target.core)
    library = cmsis_nn.build_library(request.checkout, target.core, request.rounding, request.opt)
    harness_dir = request.build_dir / "harness"
    sources = [*_model_sources(request.src), *_render_harness(request, channel, header, harness_dir)]
    out = request.build_dir / ("firmware" if not target.cross else "firmware.elf")
    command = [chain.cc, *_cflags(request), f"-I{request.src}", f"-I{request.checkout.include_dir}"]
    command += [*map(str, sources), *link_flags(target, channel, harness_dir), str(library), "-lm"]
    try:
        run_build_step([*command, "-o", str(out)], f"building the firmware for {target.name}")
    except BudgetError as exc:
        raise _inputs_overflow(request, header, exc) from None
    if chain.cross:
        run_build_step(
            [chain.objcopy, "-O", "ihex", str(out), str(out.with_suffix(".hex"))], "writing the .hex image"
        )
    return Firmware(target, channel, out, header, len(request.inputs), request.model, chain)


_FLASH_OVERFLOW = re.compile(r"region [`']FLASH' overflowed by (\d+) bytes")


def _inputs_overflow(request: BuildRequest, header: ModelHeader, exc: BudgetError) -> BudgetError:
    """When dropping test inputs would make the firmware fit, say so and how many fit; else `exc`.

    The test inputs are const arrays in flash (vectors.c): the linker's overflow in bytes, divided by one
    input's bytes and rounded up, is how many must go."""
    match = _FLASH_OVERFLOW.search(str(exc))
    count, each = len(request.inputs), header.input_bytes
    if match is None or request.application or each == 0:
        return exc
    over = int(match.group(1))
    fit = count - -(-over // each)
    if fit < 1:
        return exc  # the model itself (with one input) does not fit: the linker's message says why
    return TestInputsOverflow(
        f"building the firmware for {request.target.name}: its {count} test inputs ({count} x {each} bytes,"
        f" embedded in flash) overflow the target's flash by {over} bytes; {fit} fit: give --cases {fit}"
        " (or fewer)",
        fit,
    )


def _model_sources(src: Path) -> list[Path]:
    """The .c files of the model directory, each a regular file (a FIFO would hang the compiler)."""
    found = sorted(src.glob("*.c"))
    for path in found:
        untrusted.regular_file(path)
    return found


def check_channel(target: Target, channel: Channel) -> None:
    """The UART channel needs the address of the UART the harness writes to (a board's own setting)."""
    if channel is not Channel.UART:
        return
    if target.uart_base is None:
        raise SettingError(
            f"target {target.name} has no UART base address: the test harness writes its transcript to a "
            "CMSDK APB UART at that address; set [board] uart_base in fixpoint.toml (e.g. 0x40004000)"
        )
    if not 0 <= target.uart_base < ADDRESS_SPACE:
        raise SettingError(
            f"target {target.name}: uart_base {target.uart_base:#x} is not a 32-bit address; fix [board] "
            "uart_base in fixpoint.toml"
        )


def _check_inputs(request: BuildRequest, header: ModelHeader) -> None:
    if not request.inputs:
        raise FirmwareBuildError("no test cases: give at least one input sample")
    for k, case in enumerate(request.inputs):
        if len(case) != header.input_bytes:
            raise FirmwareBuildError(
                f"test case {k} has {len(case)} bytes but {header.path} declares "
                f"{request.prefix.upper()}_INPUT_BYTES {header.input_bytes}"
            )


def _cflags(request: BuildRequest) -> list[str]:
    define = [f"-D{request.rounding.define}"] if request.rounding.define else []
    define += [f"-D{name}" for name in request.defines]
    warnings = ["-Wall", "-Wextra", "-Wno-unused-parameter"]
    return [
        *request.target.core.cflags,
        "-std=c11",
        request.opt,
        *warnings,
        *define,
        "-ffunction-sections",
        "-fdata-sections",
    ]


def link_flags(target: Target, channel: Channel, harness_dir: Path) -> list[str]:
    """The link line's flags for `target` (none on the host): newlib's specs for `channel`, the harness's
    link.ld, unused sections dropped."""
    if not target.cross:
        return []
    # rdimon: newlib with semihosting syscalls; nosys: newlib with stubs (the UART needs no syscalls).
    specs = "rdimon.specs" if channel is Channel.SEMIHOSTING else "nosys.specs"
    return [f"--specs={specs}", "-nostartfiles", "-T", str(harness_dir / "link.ld"), "-Wl,--gc-sections"]


def _render_harness(request: BuildRequest, channel: Channel, header: ModelHeader, out: Path) -> list[Path]:
    target = request.target
    common = {
        "model": request.model,
        "prefix": request.prefix,
        "target": target.name,
        "core": target.core.label,
    }
    if request.application:
        for path in request.application:
            untrusted.regular_file(path)  # a FIFO would hang the compiler
        files = list(request.application)
        if target.cross:
            files.append(write_text(out / "app_support.c", render("app_support.c", **common)))
    else:
        files = _harness_files(request, channel, header, out, common)
    if target.cross:
        files.append(write_text(out / "startup.c", render("startup.c", **common, channel=channel.value)))
        write_text(
            out / "link.ld",
            render("link.ld", **memory_layout(target), stack_size=STACK_BYTES, target=target.name),
        )
    return files


def _harness_files(
    request: BuildRequest, channel: Channel, header: ModelHeader, out: Path, common: dict[str, str]
) -> list[Path]:
    """The test harness and its vectors (the quantized inputs as const arrays)."""
    target = request.target
    return [
        write_text(
            out / "harness.c",
            render("harness.c", **common, channel=channel.value, uart_base=target.uart_base or 0),
        ),
        write_text(
            out / "vectors.c",
            render(
                "vectors.c",
                **common,
                input_bytes=header.input_bytes,
                cases=[_ints(c) for c in request.inputs],
            ),
        ),
    ]


def _ints(case: bytes) -> list[int]:
    return [b - 256 if b > 127 else b for b in case]


def memory_layout(target: Target) -> dict[str, int]:
    """link.ld's flash and RAM regions for `target`, checked to lie in the 32-bit address space."""
    if target.flash is None or target.ram is None:
        raise FirmwareBuildError(f"target {target.name} has no flash/RAM layout; set them in [board]")
    for what, region in (("flash", target.flash), ("ram", target.ram)):
        if region.origin < 0 or region.size <= 0 or region.origin + region.size > ADDRESS_SPACE:
            raise SettingError(
                f"target {target.name}: {what} at {region.origin:#x}, {region.size} bytes, does not lie in "
                f"the 32-bit address space; fix [board] {what}_origin and {what}_size in fixpoint.toml"
            )
    return {
        "flash_origin": target.flash.origin,
        "flash_size": target.flash.size,
        "ram_origin": target.ram.origin,
        "ram_size": target.ram.size,
    }


def run_build_step(command: list[str], doing: str) -> None:
    """Run a compiler step; its output is read as it comes and only its tail kept (for the message)."""
    done = process.run_tool(command, COMPILE_TIMEOUT_S, doing, FirmwareBuildError)
    if done.returncode != 0:
        tail = process.last_lines(done.output(), 30)
        if "overflowed by" in tail or "will not fit in region" in tail or "left for the stack" in tail:
            raise BudgetError(f"{doing}: the firmware does not fit the target's memory:\n{tail}")
        raise FirmwareBuildError(f"{doing} failed (exit {done.returncode}):\n{tail}")
