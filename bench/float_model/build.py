"""The float32 firmware: build it like the product builds its int8 firmware, run it, check its outputs.

Sources: float_model.c (generate_float), a harness rendered from harness_f32.c.j2 (the test inputs as
const floats, each output printed as the hex of its float bytes) and, for Cortex-M, the product's own
startup code and linker script (templates/target/startup.c.j2, link.ld.j2). The compiler flags are those
of quantcore.targets.build (the core's -mcpu/-mfloat-abi=hard/-mfpu flags, -std=c11, the -O level,
-ffunction-sections -fdata-sections) and the link line is its own (link_flags: rdimon semihosting,
-nostartfiles, the linker script, --gc-sections) plus -lm for expf. No CMSIS-NN is linked.

The outputs are checked against quantcore.runtime.float_exec (numpy, float64) run on the same float32
inputs and weights: max |firmware - reference| over every output of every case, relative to the range of
the reference outputs, must be at most TOLERANCE.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from quantcore.ir import Graph
from quantcore.runtime import float_exec
from quantcore.targets.build import (
    STACK_BYTES,
    Channel,
    Firmware,
    ModelHeader,
    link_flags,  # the product's link line, so the float image links exactly as build_firmware's
    memory_layout,
    run_build_step,
)
from quantcore.targets.errors import FirmwareBuildError
from quantcore.targets.protocol import Expectation
from quantcore.targets.render import render as render_target
from quantcore.targets.render import write_text
from quantcore.targets.run import DEFAULT_TIMEOUT_S, run_firmware
from quantcore.targets.target import Target
from quantcore.targets.toolchain import require_toolchain

from .generate import PREFIX, FloatModel, render

TOLERANCE = 1e-4
"""Max |firmware - float_exec| / (max - min of the reference outputs). The firmware computes in float32
(eps 2^-23 = 1.2e-7) and sums in another order than numpy's float64 matrix products; the rounding error
of a K-term dot product is at most ~K * eps relative to the sum of |terms| and typically ~sqrt(K) * eps,
so over these networks' 10-25 layers with K <= 600 it stays around 1e-6 of the output range. 1e-4
(~2^-13) leaves two orders of magnitude for that while any real bug - a wrong tap, channel, offset or
clamp - moves outputs by a sizeable fraction of their range."""


def cflags(target: Target, opt: str) -> list[str]:
    """quantcore.targets.build._cflags without its CMSIS-NN rounding define."""
    return [
        *target.core.cflags,
        "-std=c11",
        opt,
        "-Wall",
        "-Wextra",
        "-Wno-unused-parameter",
        "-ffunction-sections",
        "-fdata-sections",
    ]


def build_float_firmware(
    model: FloatModel,
    target: Target,
    inputs: np.ndarray,
    build_dir: Path,
    opt: str = "-O2",
    name: str = "model",
    extra_cflags: Sequence[str] = (),
) -> Firmware:
    """The float firmware for `target` running `inputs` (K cases of the model's input, any shape that
    flattens to K x input_count); FirmwareBuildError/BudgetError with the compiler output if it fails.
    `extra_cflags` go after the product's flags (e.g. -ffp-contract=fast to let GCC fuse into VFMA)."""
    cases = np.asarray(inputs, dtype=np.float32).reshape(len(inputs), -1)
    if not len(cases) or cases.shape[1] != model.input_count:
        raise FirmwareBuildError(
            f"{len(cases)} float cases of {cases.shape[1:]} values; the model takes {model.input_count}"
        )
    if not np.isfinite(cases).all():
        raise FirmwareBuildError("the float test inputs are not all finite")
    chain = require_toolchain(target.core)
    build_dir = Path(build_dir)
    harness_dir = build_dir / "harness"
    common = {"model": name, "prefix": PREFIX, "target": target.name, "core": target.core.label}
    sources = [
        model.source,
        write_text(harness_dir / "harness_f32.c", render("harness_f32.c.j2", **common, cases=cases.tolist())),
    ]
    if target.cross:
        sources.append(
            write_text(harness_dir / "startup.c", render_target("startup.c", **common, channel="semihosting"))
        )
        write_text(
            harness_dir / "link.ld",
            render_target("link.ld", **memory_layout(target), stack_size=STACK_BYTES, target=target.name),
        )
    out = build_dir / ("firmware.elf" if target.cross else "firmware")
    command = [chain.cc, *cflags(target, opt), *extra_cflags, f"-I{model.directory}", *map(str, sources)]
    command += [*link_flags(target, Channel.SEMIHOSTING, harness_dir), "-lm", "-o", str(out)]
    run_build_step(command, f"building the float32 firmware for {target.name}")
    header = ModelHeader(
        model.header, model.layers, 4 * model.input_count, 4 * model.output_count, model.arena_bytes, 0
    )
    channel = Channel.SEMIHOSTING if target.cross else Channel.STDIO
    return Firmware(target, channel, out, header, len(cases), name, chain)


def decode_outputs(outputs: list[bytes], model: FloatModel) -> np.ndarray:
    """The transcript's output bytes as (K, *output shape without batch) float32 values."""
    values = [np.frombuffer(data, dtype="<f4") for data in outputs]
    if any(v.size != model.output_count for v in values):
        raise FirmwareBuildError(f"an output is not {model.output_count} floats")
    return np.stack(values).reshape(len(values), *model.output_shape[1:])


def run_float_firmware(
    firmware: Firmware, model: FloatModel, timeout: float = DEFAULT_TIMEOUT_S
) -> np.ndarray:
    """Run on QEMU (semihosting) or the host and return every case's output."""
    expect = Expectation((), firmware.header.output_bytes, firmware.cases)
    run = run_firmware(firmware, timeout=timeout, expect=expect)
    return decode_outputs([case.output for case in run.transcript.cases], model)


def reference_outputs(graph: Graph, inputs: np.ndarray) -> np.ndarray:
    """float_exec's output for every case (float64, (K, *output shape without batch)), one case at a time
    with the graph's own batch of 1 (a constant with a batch axis would not broadcast over K cases)."""
    shape = graph.tensor(graph.inputs[0]).shape
    x = np.asarray(inputs, dtype=np.float32).reshape(len(inputs), *shape)
    name, out = graph.inputs[0], graph.outputs[0]
    return np.concatenate([float_exec.run(graph, {name: case}, keep=False)[out] for case in x])


@dataclass(frozen=True)
class FloatCheck:
    max_abs: float
    """max |firmware - reference| over every output value of every case."""
    output_range: float
    """max - min of the reference outputs (1.0 when they are all equal)."""
    tolerance: float = TOLERANCE

    @property
    def relative(self) -> float:
        return self.max_abs / self.output_range

    @property
    def passed(self) -> bool:
        return math.isfinite(self.relative) and self.relative <= self.tolerance


def check_outputs(got: np.ndarray, want: np.ndarray, tolerance: float = TOLERANCE) -> FloatCheck:
    got64 = np.asarray(got, dtype=np.float64).reshape(np.shape(want))
    spread = float(np.max(want) - np.min(want))
    diff = np.abs(got64 - want)
    max_abs = float(diff.max()) if np.isfinite(diff).all() else math.inf
    return FloatCheck(max_abs, spread if spread > 0 else 1.0, tolerance)
