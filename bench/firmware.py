"""Benchmark: what the generated firmware costs on the QEMU Cortex-M boards - arena, flash/RAM, instructions.

    python bench/firmware.py [--models ds_cnn_s residual lenet5 ...] [--targets qemu-m4 qemu-m7 qemu-m55]
                             [--vectors DIR] [--fmnist DIR] [--plugin-source FILE] [--cases 4]
                             [--opt O2] [--work-dir DIR] [--json PATH] [--no-float] [--float-cflags FLAGS]

Models: CMSIS-NN's ds_cnn_s (from its test vector), tests.onnx_models.residual_cnn quantized by the
product, the Fashion-MNIST networks of bench/fashion_mnist (skipped with a note when not trained), and
the recurrent example examples/fashion_lstm (an ONNX LSTM; no float32 baseline).
For each model and target the generated sources are built twice, both with the product's build:
  verify   --cases test inputs, every layer's output reported through the layer hook and compared byte
           for byte with the reference executor (int8_exec), the model output as well;
  count    one test input (the first), the layer hook compiled out (<PREFIX>_NO_LAYER_HOOK), run under
           QEMU with the insncount TCG plugin (../shared/toolchain/insncount.c): the instructions between
           the harness's roi_begin() and roi_end() calls around the one model invoke. The output is
           compared with the reference too. Flash and RAM (arm-none-eabi-size) are of this image: model,
           harness with one test input, newlib with semihosting.
Instruction counts are exact and repeat run to run (QEMU models no caches or pipeline: they count
instructions, not cycles). Wall time is not measured.

--float (the default; --no-float skips it) adds the float32 baseline for the int8/float ratio: the same
network with plain-C float32 kernels (bench/float_model: NHWC loops, one function per layer, weights from
the prepared float graph; ds_cnn_s, which has no float model, from its dequantized weights), built with
the same toolchain, core flags (-mfloat-abi=hard, the core's FPU), startup code and linker script, and
counted the same way around its one invoke. Two images per target again: every case's float output is
checked against quantcore.runtime.float_exec (max |error| / output range <= 1e-4), and the count image
(--count-cases inputs) must print the same bytes as the check image for those cases.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import platform
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "bench" / "fashion_mnist")]  # tests.onnx_models; fmnist

import fmnist  # noqa: E402  (bench/fashion_mnist: its cache folder)

from quantcore.errors import CmsisNnNotFound, QuantcoreError  # noqa: E402
from quantcore.ir import Graph  # noqa: E402
from quantcore.targets import cmsis_nn, verify  # noqa: E402

DS_CNN_S = Path("arm_ds_cnn_s_s8") / "ds_cnn_s.json"
FMNIST_MODELS = ("lenet5", "convbn", "dscnn", "mbv2")
MODEL_NAMES = ("ds_cnn_s", "residual", *FMNIST_MODELS, "fashion_lstm")
TARGETS = ("qemu-m4", "qemu-m7", "qemu-m55")
REFERENCE_INSTRUCTIONS = {"qemu-m4": 7.84e6, "qemu-m7": 7.76e6, "qemu-m55": 1.79e6}
"""ds_cnn_s instructions per inference with CMSIS-NN's own harness (../shared/TOOLCHAIN.md)."""
QEMU_TIMEOUT_S = 300
_INSNCOUNT = re.compile(r"insncount: total=(\d+)(?: roi=(\d+) roi_intervals=(\d+))?")
_OUTPUT = re.compile(r"\[OUTPUT (\d+) bytes=(\d+)\] ?([0-9a-f]*)")


# ---------------------------------------------------------------- figures


@dataclass
class Arena:
    arena_bytes: int
    tensor_bytes: int
    lower_bound: int
    peak_live_bytes: int

    @property
    def saving(self) -> float:
        """Unshared sum / planned arena: how many times smaller sharing makes it."""
        return self.tensor_bytes / self.arena_bytes if self.arena_bytes else math.nan


@dataclass
class _Image:
    """What one built image measures on one target: its sections and counted instructions."""

    target: str
    text: int | None = None
    data: int | None = None
    bss: int | None = None
    instructions: float | None = None
    """ROI instructions per model invoke (roi / roi_intervals)."""
    roi_instructions: int | None = None
    roi_intervals: int | None = None
    total_instructions: int | None = None
    """The whole count run: boot, init, the one invoke, the transcript."""

    @property
    def flash(self) -> int | None:
        return None if self.text is None or self.data is None else self.text + self.data

    @property
    def ram(self) -> int | None:
        return None if self.data is None or self.bss is None else self.data + self.bss


@dataclass
class TargetRow(_Image):
    arena_bytes: int | None = None
    scratch_bytes: int | None = None
    weight_bytes: int | None = None
    verify: str = "-"
    """PASS / FAIL of the verification build (every layer of every case)."""
    verify_mismatched_bytes: int | None = None
    verify_cases: int | None = None
    count_output: str = "-"
    """PASS / FAIL of the count build's model output against the reference."""
    vector_output: str | None = None
    """ds_cnn_s only: case 0's output against CMSIS-NN's own expected output."""
    note: str = ""


@dataclass
class FloatRow(_Image):
    """The float32 baseline of a model on one target (bench/float_model)."""

    weight_bytes: int | None = None
    arena_bytes: int | None = None
    int8_instructions: float | None = None
    """The int8 count build's instructions on the same target (TargetRow.instructions)."""
    max_abs_error: float | None = None
    """max |firmware - float_exec| over every output of every case of the check image."""
    output_range: float | None = None
    relative_error: float | None = None
    """max_abs_error / output_range; PASS needs <= the tolerance."""
    check: str = "-"
    """PASS: every case within tolerance and the count image's outputs equal the check image's."""
    note: str = ""

    @property
    def ratio(self) -> float | None:
        """float32 instructions / int8 instructions."""
        if self.instructions is None or not self.int8_instructions:
            return None
        return self.instructions / self.int8_instructions


@dataclass
class ModelResult:
    name: str
    description: str
    layers: int = 0
    arena: Arena | None = None
    cases_source: str = ""
    targets: list[TargetRow] = field(default_factory=list)
    note: str = ""
    float_layers: int = 0
    float32: list[FloatRow] = field(default_factory=list)
    float_note: str = ""

    def row(self, target: str) -> TargetRow | None:
        return next((r for r in self.targets if r.target == target), None)


@dataclass
class Model:
    """A quantized model ready for the firmware, with its test cases."""

    name: str
    description: str
    qgraph: Graph
    cases: verify.Cases
    expected_output: bytes | None = None
    """An independent oracle for case 0 (ds_cnn_s: the vector's expected output), when there is one."""
    float_graph: Graph | None = None
    """The float network for the float32 baseline: the prepared float graph (ds_cnn_s: dequantized)."""
    float_inputs: np.ndarray | None = None
    """The cases as float32 values in the float graph's layout, one per quantized case."""


# ---------------------------------------------------------------- models


def ds_cnn_s(args: argparse.Namespace) -> Model | str:
    from bench.float_model.dequantize import dequantized_graph
    from quantcore.conformance.cases import VectorCase
    from quantcore.conformance.network_graph import network_graph

    path = Path(args.vectors) / DS_CNN_S
    if not path.is_file():
        return f"{path} not found; pass --vectors DIR or set FIXPOINT_VECTORS"
    case = VectorCase.load(path)
    qgraph = network_graph(case)
    shape = qgraph.tensor(qgraph.inputs[0]).shape[1:]
    vector = case.raw_array(f"{case.name}_input").astype(np.int8).reshape(1, *shape)
    extra = verify.random_cases(qgraph, args.cases - 1, seed=0).quantized if args.cases > 1 else vector[:0]
    cases = verify.Cases(
        np.concatenate([vector, extra]), f"the vector's input + {len(extra)} random (seed 0)"
    )
    expected = case.raw_array(f"{case.name}_output_ref").astype(np.int8).tobytes()
    float_inputs = verify.float_inputs(qgraph, cases).astype(np.float32)  # exactly what the int8 input means
    return Model(
        "ds_cnn_s", "CMSIS-NN's ds_cnn_s test network", qgraph, cases, expected,
        float_graph=dequantized_graph(qgraph), float_inputs=float_inputs,
    )  # fmt: skip


def _quantized(onnx_path: Path, calib: Any) -> tuple[Graph, Graph]:
    """pipeline.quantize (min/max) and the graph of its document, as `fixpoint quantize` + generate do;
    (the prepared float graph, the quantized graph)."""
    from quantcore import pipeline
    from quantcore.quantize.document import from_document

    loaded = pipeline.load_model(onnx_path)
    result = pipeline.quantize(loaded, calib)
    return loaded.graph, from_document(loaded.graph, result.document)


def residual(args: argparse.Namespace, work: Path) -> Model | str:
    import onnx

    from quantcore.data import DataSet
    from quantcore.ir.io_layout import to_firmware
    from tests.onnx_models import residual_cnn

    path = work / "residual.onnx"
    onnx.save(residual_cnn(), path)
    x = np.random.default_rng(3).normal(size=(40 + args.cases, 1, 12, 12)).astype(np.float32)
    fgraph, qgraph = _quantized(path, DataSet(x[:40]))
    cases = verify.data_cases(qgraph, to_firmware(qgraph, qgraph.inputs[0], x[40:]), "seeded normal inputs")
    return Model(
        "residual", "tests.onnx_models.residual_cnn, min/max on 40 seeded samples", qgraph, cases,
        float_graph=fgraph, float_inputs=to_firmware(fgraph, fgraph.inputs[0], x[40:]).astype(np.float32),
    )  # fmt: skip


def fashion_mnist(name: str, args: argparse.Namespace) -> Model | str:
    from quantcore import data, pipeline
    from quantcore.ir.io_layout import to_firmware

    folder = Path(args.fmnist).expanduser()
    onnx_path, calib_path, test_path = folder / f"{name}.onnx", folder / "calib_1000.npz", folder / "test.npz"
    missing = [p.name for p in (onnx_path, calib_path) if not p.is_file()]
    if missing:
        return f"{', '.join(missing)} not in {folder} (bench/fashion_mnist/train.py makes them)"
    shape = pipeline.first_input_shape(pipeline.load_model(onnx_path))
    fgraph, qgraph = _quantized(onnx_path, data.load(calib_path, shape))
    source = test_path if test_path.is_file() else calib_path
    x = data.load(source, shape).head(args.cases).x
    cases = verify.data_cases(
        qgraph, to_firmware(qgraph, qgraph.inputs[0], x), f"first images of {source.name}"
    )
    return Model(
        name, f"Fashion-MNIST {name}, min/max on calib_1000", qgraph, cases,
        float_graph=fgraph, float_inputs=to_firmware(fgraph, fgraph.inputs[0], x).astype(np.float32),
    )  # fmt: skip


def fashion_lstm(args: argparse.Namespace) -> Model | str:
    """examples/fashion_lstm: its shipped model, calibration and test images (no float32 C baseline: the
    plain-C float kernels have no LSTM)."""
    from quantcore import data, pipeline

    folder = Path(__file__).resolve().parents[1] / "examples" / "fashion_lstm"
    onnx_path = folder / "model.onnx"
    shape = pipeline.first_input_shape(pipeline.load_model(onnx_path))
    _, qgraph = _quantized(onnx_path, data.load(folder / "calib.npz", shape))
    x = data.load(folder / "test.npz", shape).head(args.cases).x
    cases = verify.data_cases(qgraph, x, "first images of examples/fashion_lstm/test.npz")
    return Model("fashion_lstm", "examples/fashion_lstm (LSTM over image rows), min/max", qgraph, cases)


def load(name: str, args: argparse.Namespace, work: Path) -> Model | str:
    if name == "fashion_lstm":
        return fashion_lstm(args)
    if name == "ds_cnn_s":
        return ds_cnn_s(args)
    if name == "residual":
        return residual(args, work)
    return fashion_mnist(name, args)


# ---------------------------------------------------------------- the instruction counter


def build_plugin(source: Path) -> tuple[Path | None, str]:
    """libinsncount.so built from `source` into a cache folder keyed by its hash; (None, why) if not."""
    if not source.is_file():
        return None, f"plugin source {source} not found (--plugin-source)"
    cc = shutil.which("gcc")
    if cc is None:
        return None, "gcc is not installed (needed to build the QEMU plugin)"
    digest = hashlib.sha256(source.read_bytes()).hexdigest()[:16]
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    library = Path(base) / "fixpoint" / "bench" / "insncount" / digest / "libinsncount.so"
    if not library.is_file():
        library.parent.mkdir(parents=True, exist_ok=True)
        partial = library.with_name(f"libinsncount.{os.getpid()}.so")
        done = subprocess.run(
            [cc, "-shared", "-fPIC", "-O2", "-o", str(partial), str(source)],
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            return None, f"building the plugin failed: {(done.stdout + done.stderr).strip()[-300:]}"
        os.replace(partial, library)
    return library, ""


def symbol_address(firmware: Any, name: str) -> int | None:
    nm = f"{firmware.toolchain.prefix}nm"
    done = subprocess.run([nm, str(firmware.path)], capture_output=True, text=True, check=False)
    for line in done.stdout.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[2] == name:
            return int(parts[0], 16)
    return None


@dataclass
class CountRun:
    outputs: dict[int, bytes]
    status_ok: bool
    total: int | None
    roi: int | None
    intervals: int | None


def run_counted(firmware: Any, plugin: Path | None) -> CountRun:
    """The count build under QEMU semihosting, with the plugin when there is one; its stdout is the
    transcript without layer lines (the hook is compiled out), so only OUTPUT and END are read here."""
    from quantcore.targets.errors import FirmwareBuildError, FirmwareTimeout
    from quantcore.targets.run import check_exit, qemu_semihosting_command

    command = qemu_semihosting_command(firmware)
    if plugin is not None:
        begin, end = symbol_address(firmware, "roi_begin"), symbol_address(firmware, "roi_end")
        if begin is None or end is None:
            raise FirmwareBuildError(f"{firmware.path} has no roi_begin/roi_end symbols")
        command += ["-plugin", f"{plugin},roi_start={begin:#x},roi_end={end:#x}"]
    try:
        done = subprocess.run(command, capture_output=True, timeout=QEMU_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        raise FirmwareTimeout(f"QEMU timed out after {QEMU_TIMEOUT_S} s: {shlex.join(command)}") from None
    text, stderr = done.stdout.decode("ascii", "replace"), done.stderr.decode("utf-8", "replace")
    check_exit(done.returncode, text, stderr, f"QEMU {firmware.target.machine}")
    outputs = {int(m[1]): bytes.fromhex(m[3]) for m in map(_OUTPUT.fullmatch, text.splitlines()) if m}
    counted = _INSNCOUNT.search(stderr)
    if plugin is not None and counted is None:
        raise FirmwareBuildError(f"no insncount line in QEMU's stderr: {stderr.strip()[-300:]!r}")
    total, roi, intervals = (int(g) if g else None for g in counted.groups()) if counted else (None,) * 3
    ok = done.returncode == 0 and "FIXPOINT END status=ok" in text
    return CountRun(outputs, ok, total, roi, intervals)


# ---------------------------------------------------------------- one model on one target


def bench_target(model: Model, target: str, args: argparse.Namespace, ctx: dict[str, Any]) -> TargetRow:
    from quantcore.codegen.generate import generate
    from quantcore.targets import memory
    from quantcore.targets.build import BuildRequest, build_firmware
    from quantcore.targets.compare import compare
    from quantcore.targets.run import run_firmware
    from quantcore.targets.target import BUILTIN

    spec, row = BUILTIN[target], TargetRow(target)
    work: Path = ctx["work"] / model.name / target
    generated = generate(model.qgraph, work / "model", core=spec.core, force=True)
    plan = generated.plan
    ctx.setdefault("arenas", {})[target] = plan.arena
    row.arena_bytes, row.scratch_bytes, row.weight_bytes = (
        plan.arena.arena_bytes,
        plan.scratch_bytes,
        plan.weight_bytes,
    )
    layers, output = ctx["reference"]
    common = {"src": work / "model", "checkout": ctx["checkout"], "opt": f"-{args.opt}", "model": model.name}

    # verify: every layer of every case.
    firmware = build_firmware(
        BuildRequest(spec, build_dir=work / "verify", inputs=model.cases.as_bytes(), **common)
    )
    run = run_firmware(firmware, timeout=QEMU_TIMEOUT_S, expect=verify.expectation(layers, output))
    comparison = compare(layers, output, run.transcript)
    row.verify = "PASS" if comparison.passed else "FAIL"
    row.verify_mismatched_bytes, row.verify_cases = comparison.mismatched_bytes_total, comparison.cases
    if model.expected_output is not None:
        row.vector_output = "PASS" if run.transcript.cases[0].output == model.expected_output else "FAIL"

    # count: --count-cases cases (default 1), no layer hook; the memory audit is of this image.
    firmware = build_firmware(
        BuildRequest(
            spec,
            build_dir=work / "count",
            inputs=model.cases.as_bytes()[: args.count_cases],
            defines=(f"{plan.macro}_NO_LAYER_HOOK",),
            **common,
        )
    )
    report = memory.measure(firmware)
    row.text, row.data, row.bss = report.text, report.data, report.bss
    if report.problems():
        row.note = "over the target's memory: " + "; ".join(report.problems())
    counted = run_counted(firmware, ctx["plugin"])
    want = [np.ascontiguousarray(output[k]).tobytes() for k in range(args.count_cases)]
    got = [counted.outputs.get(k) for k in range(args.count_cases)]
    row.count_output = "PASS" if counted.status_ok and got == want else "FAIL"
    row.total_instructions, row.roi_instructions, row.roi_intervals = (
        counted.total,
        counted.roi,
        counted.intervals,
    )
    if counted.roi is not None and counted.intervals:
        row.instructions = counted.roi / counted.intervals
        if counted.intervals != args.count_cases:
            row.note = f"{counted.intervals} ROI intervals for {args.count_cases} invokes"
    return row


# ---------------------------------------------------------------- the float32 baseline


def float_target(
    model: Model, fmodel: Any, want: np.ndarray, row: FloatRow, args: argparse.Namespace, ctx: dict[str, Any]
) -> None:
    """Fill `row`: the check image (every case against float_exec), the count image (sizes, instructions,
    its outputs equal to the check image's)."""
    from bench.float_model.build import build_float_firmware, check_outputs, decode_outputs
    from quantcore.targets import memory
    from quantcore.targets.target import BUILTIN

    assert model.float_inputs is not None
    spec, work = BUILTIN[row.target], ctx["work"] / model.name / "float32" / row.target
    common = {"opt": f"-{args.opt}", "name": model.name, "extra_cflags": shlex.split(args.float_cflags)}
    inputs = model.float_inputs

    firmware = build_float_firmware(fmodel, spec, inputs, work / "verify", **common)
    checked = run_counted(firmware, None)
    outputs = [checked.outputs.get(k) for k in range(len(inputs))]
    if not checked.status_ok or any(o is None for o in outputs):
        row.check, row.note = "FAIL", "the check image did not report every output"
        return
    result = check_outputs(decode_outputs(outputs, fmodel), want)
    row.max_abs_error, row.output_range, row.relative_error = (
        result.max_abs,
        result.output_range,
        result.relative,
    )

    firmware = build_float_firmware(fmodel, spec, inputs[: args.count_cases], work / "count", **common)
    report = memory.measure(firmware)
    row.text, row.data, row.bss = report.text, report.data, report.bss
    if report.problems():
        row.note = "over the target's memory: " + "; ".join(report.problems())
    counted = run_counted(firmware, ctx["plugin"])
    same = counted.status_ok and all(counted.outputs.get(k) == outputs[k] for k in range(args.count_cases))
    row.check = "PASS" if result.passed and same else "FAIL"
    if not same:
        row.note = "the count image's outputs differ from the check image's"
    row.total_instructions, row.roi_instructions, row.roi_intervals = (
        counted.total,
        counted.roi,
        counted.intervals,
    )
    if counted.roi is not None and counted.intervals:
        row.instructions = counted.roi / counted.intervals
        if counted.intervals != args.count_cases:
            row.note = f"{counted.intervals} ROI intervals for {args.count_cases} invokes"


def bench_float(model: Model, result: ModelResult, args: argparse.Namespace, ctx: dict[str, Any]) -> None:
    """The float32 build of `model` on every target, into result.float32 (or why not into float_note)."""
    from bench.float_model.build import reference_outputs
    from bench.float_model.generate import Unsupported, generate_float
    from quantcore.targets.errors import BudgetError

    if model.float_graph is None or model.float_inputs is None:
        result.float_note = "skipped: no float network for this model"
        print(f"    float32: {result.float_note}", flush=True)
        return
    try:
        fmodel = generate_float(model.float_graph, ctx["work"] / model.name / "float32" / "model")
    except Unsupported as exc:
        result.float_note = f"skipped: {exc}"
        print(f"    float32: {result.float_note}", flush=True)
        return
    result.float_layers = fmodel.layers
    want = reference_outputs(model.float_graph, model.float_inputs)
    for target in args.targets:
        start = time.perf_counter()
        int8 = result.row(target)
        row = FloatRow(
            target,
            weight_bytes=fmodel.weight_bytes,
            arena_bytes=fmodel.arena_bytes,
            int8_instructions=int8.instructions if int8 else None,
        )
        try:
            float_target(model, fmodel, want, row, args, ctx)
        except BudgetError as exc:  # too big for this target's memory: a figure, not a failure
            row.check, row.note = "skip", f"{type(exc).__name__}: {exc}"[:400]
        except QuantcoreError as exc:
            row.check, row.note = "FAIL", f"{type(exc).__name__}: {exc}"[:400]
        result.float32.append(row)
        ratio = "-" if row.ratio is None else f"{row.ratio:.2f}x int8"
        error = "-" if row.relative_error is None else f"{row.relative_error:.1e}"
        print(
            f"    {target} float32: check {row.check} (max error/range {error}), "
            f"{_fmt_m(row.instructions)} instructions ({ratio}), {time.perf_counter() - start:.1f} s",
            flush=True,
        )


def bench_model(name: str, args: argparse.Namespace, ctx: dict[str, Any]) -> ModelResult:
    start = time.perf_counter()
    loaded = load(name, args, ctx["work"])
    if isinstance(loaded, str):
        print(f"  {name}: skipped - {loaded}", flush=True)
        return ModelResult(name, "", note=f"skipped: {loaded}")
    result = ModelResult(name, loaded.description, len(loaded.qgraph.nodes), cases_source=loaded.cases.source)
    ctx["reference"] = verify.reference(loaded.qgraph, loaded.cases)
    print(
        f"  {name}: {result.layers} layers, quantized/loaded in {time.perf_counter() - start:.1f} s",
        flush=True,
    )
    for target in args.targets:
        start = time.perf_counter()
        try:
            row = bench_target(loaded, target, args, ctx)
        except QuantcoreError as exc:  # a build or run failing is a figure to report, not a reason to stop
            row = TargetRow(
                target, verify="FAIL", count_output="FAIL", note=f"{type(exc).__name__}: {exc}"[:400]
            )
        result.targets.append(row)
        print(
            f"    {target}: verify {row.verify}, count {row.count_output}, "
            f"{_fmt_m(row.instructions)} instructions, {time.perf_counter() - start:.1f} s",
            flush=True,
        )
    if args.float:
        bench_float(loaded, result, args, ctx)
    arenas = {
        (a.arena_bytes, a.tensor_bytes, a.lower_bound, a.peak_live_bytes)
        for a in ctx.pop("arenas", {}).values()
    }
    if arenas:
        result.arena = Arena(*min(arenas))
        if len(arenas) > 1:
            result.note = f"the arena plan differs between cores: {sorted(arenas)}"
    return result


# ---------------------------------------------------------------- output


def _fmt_m(value: float | None) -> str:
    return "-" if value is None else f"{value / 1e6:.3f} M"


def _int(value: int | None) -> str:
    return "-" if value is None else str(value)


def table(header: tuple[str, ...], rows: list[tuple[str, ...]], left: int = 1) -> str:
    """A Markdown table; the first `left` columns left-aligned, the rest right-aligned."""
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)]

    def render(cells: tuple[str, ...]) -> str:
        return (
            "| "
            + " | ".join(
                c.ljust(w) if i < left else c.rjust(w)
                for i, (c, w) in enumerate(zip(cells, widths, strict=True))
            )
            + " |"
        )

    return "\n".join(
        [render(header), "|" + "|".join("-" * (w + 2) for w in widths) + "|", *map(render, rows)]
    )


def report(results: list[ModelResult], args: argparse.Namespace, count_note: str) -> str:
    done = [r for r in results if r.arena is not None]
    out = ["", "## Activation arena (bytes; core-independent)"]
    out.append(
        table(
            ("model", "layers", "arena", "unshared sum", "lower bound", "peak live", "saving", "arena/peak"),
            [
                (
                    r.name,
                    str(r.layers),
                    str(r.arena.arena_bytes),
                    str(r.arena.tensor_bytes),
                    str(r.arena.lower_bound),
                    str(r.arena.peak_live_bytes),
                    f"{r.arena.saving:.2f}x ({100 * (1 - 1 / r.arena.saving):.0f}%)",
                    f"{r.arena.arena_bytes / r.arena.peak_live_bytes:.3f}",
                )
                for r in done
                if r.arena
            ],
        )
    )
    out += [
        "saving = unshared sum / arena (and the share of the unshared sum saved); lower bound = max over",
        "layers of inputs + output; peak live = max bytes alive at once (no alignment); arena/peak 1.000 is",
        "optimal.",
        "",
        f"## Firmware per target (bytes; count image: {args.count_cases} test input(s), no layer hook)",
    ]
    rows: list[tuple[str, ...]] = []
    for r in results:
        for t in r.targets:
            rows.append(
                (
                    r.name,
                    t.target,
                    _int(t.flash),
                    _int(t.weight_bytes),
                    _int(t.ram),
                    _int(t.text),
                    _int(t.data),
                    _int(t.bss),
                    _int(t.arena_bytes),
                    _int(t.scratch_bytes),
                    _fmt_m(t.instructions),
                    t.verify,
                    t.count_output,
                )
            )
    out.append(
        table(
            (
                "model",
                "target",
                "flash",
                "weights",
                "RAM",
                "text",
                "data",
                "bss",
                "arena",
                "scratch",
                "instr/inference",
                "verify",
                "count run",
            ),
            rows,
            left=2,
        )
    )
    out += [
        "flash = text + data, RAM = data + bss (arena and scratch are in bss; the 16 KiB stack is not);",
        "weights = the model's constant tables (in text).",
        f"instr/inference: {count_note}.",
        f"verify: {args.cases} cases (ds_cnn_s: the vector's input first), every layer's bytes and the",
        "output equal the reference executor's; count run: the count image's output equals it too.",
    ]
    notes = [f"  note: {r.name} {t.target}: {t.note}" for r in results for t in r.targets if t.note]
    notes += [f"  note: {r.name}: {r.note}" for r in results if r.note]
    out += notes

    speed = [r for r in done if r.row("qemu-m4") and r.row("qemu-m55")]
    if speed:
        out += ["", "## MVE speed-up (instructions per inference)"]
        rows = []
        for r in speed:
            m4, m7, m55 = (getattr(r.row(t), "instructions", None) for t in TARGETS)
            rows.append(
                (
                    r.name,
                    _fmt_m(m4),
                    _fmt_m(m7),
                    _fmt_m(m55),
                    f"{m4 / m55:.2f}x" if m4 and m55 else "-",
                    f"{m7 / m55:.2f}x" if m7 and m55 else "-",
                )
            )
        out.append(table(("model", "M4", "M7", "M55", "M4/M55", "M7/M55"), rows))

    ds = next((r for r in done if r.name == "ds_cnn_s"), None)
    if ds is not None:
        out += ["", "## Cross-check: ds_cnn_s against CMSIS-NN's own harness (TOOLCHAIN.md)"]
        rows = []
        for t in ds.targets:
            ref = REFERENCE_INSTRUCTIONS.get(t.target)
            ratio = t.instructions / ref if t.instructions and ref else None
            rows.append(
                (
                    t.target,
                    _fmt_m(t.instructions),
                    _fmt_m(ref),
                    "-" if ratio is None else f"{ratio:.3f}",
                    "-" if ratio is None else f"{100 * (ratio - 1):+.1f}%",
                    t.vector_output or "-",
                )
            )
        out.append(table(("target", "ours", "CMSIS-NN harness", "ours/ref", "diff", "vector output"), rows))
        out += [
            "vector output: case 0's output equals CMSIS-NN's expected output of the test vector.",
            f"this run: CMSIS-NN, model and harness at -{args.opt}; the reference figures were presumably",
            "measured with CMSIS-NN's CMake default, -Ofast: --opt Ofast compares like with like.",
        ]
    return "\n".join(out)


def float_report(results: list[ModelResult], args: argparse.Namespace) -> str:
    from bench.float_model.build import TOLERANCE

    out = ["", "## float32 baseline (plain-C float kernels, bench/float_model; instructions per inference)"]
    rows = [
        (
            r.name,
            f.target,
            _fmt_m(f.int8_instructions),
            _fmt_m(f.instructions),
            "-" if f.ratio is None else f"{f.ratio:.2f}x",
            _int(f.flash),
            _int(f.ram),
            _int(f.weight_bytes),
            _int(f.arena_bytes),
            "-" if f.relative_error is None else f"{f.relative_error:.1e}",
            f.check,
        )
        for r in results
        for f in r.float32
    ]
    out.append(
        table(
            (
                "model",
                "target",
                "int8 instr",
                "float32 instr",
                "float/int8",
                "f32 flash",
                "f32 RAM",
                "f32 weights",
                "f32 arena",
                "max err/range",
                "check",
            ),
            rows,
            left=2,
        )
    )
    extra = f" {args.float_cflags}" if args.float_cflags else ""
    out += [
        "float32: plain C over NHWC, one function per layer: conv/FC one float accumulator per output over",
        "contiguous dot products, depthwise/pools accumulate a pixel's channels in place tap by tap; the",
        "valid taps computed per output pixel; no im2col, intrinsics or unrolling. Weights fp32 in flash,",
        "activations in one static arena (quantcore.codegen.arena.plan_arena). Built like the product: the",
        "core's flags (-mfloat-abi=hard; M4 -mfpu=fpv4-sp-d16, M7 -mfpu=fpv5-d16, M55 FPU + MVE, where GCC",
        f"vectorizes a few elementwise loops), -std=c11 -{args.opt}{extra} (ISO C: no a*b+c contraction",
        "into VFMA unless -ffp-contract=fast), same startup, linker script, newlib (its expf).",
        "Instructions: the same ROI markers around the one invoke, mean of the count image's invoke(s).",
        "int8 instr: the int8 count image's (table above); float/int8 = float32 instr / int8 instr.",
        "f32 flash/RAM: the float count image (harness, its input(s), newlib), as for int8 above.",
        f"max err/range: max |QEMU - float_exec (float64)| over the {args.cases} cases' outputs, over the",
        f"reference outputs' range; check PASS: <= {TOLERANCE:g}, and the count image prints the same bytes.",
        "ds_cnn_s: float network = its dequantized weights (q * scale) with every int8 clamp kept.",
    ]
    out += [f"  note: {r.name} float32: {r.float_note}" for r in results if r.float_note]
    out += [f"  note: {r.name} {f.target} float32: {f.note}" for r in results for f in r.float32 if f.note]
    return "\n".join(out)


def _json_safe(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_json_safe(v) for v in value]
    return value


def write_json(path: Path, results: list[ModelResult], settings: dict[str, Any]) -> None:
    models = {}
    for r in results:
        entry = asdict(r)
        if r.arena is not None:
            entry["arena"]["saving"] = r.arena.saving
        for t, d in zip(r.targets, entry["targets"], strict=True):
            d["flash"], d["ram"] = t.flash, t.ram
            ref = REFERENCE_INSTRUCTIONS.get(t.target) if r.name == "ds_cnn_s" else None
            if ref:
                d["reference_instructions"] = ref
        for f, d in zip(r.float32, entry["float32"], strict=True):
            d["flash"], d["ram"], d["float_over_int8"] = f.flash, f.ram, f.ratio
        m4, m55 = r.row("qemu-m4"), r.row("qemu-m55")
        if m4 and m55 and m4.instructions and m55.instructions:
            entry["m4_over_m55"] = m4.instructions / m55.instructions
        models[r.name] = entry
    payload = {"benchmark": "firmware", **settings, "models": models}
    path.write_text(json.dumps(_json_safe(payload), indent=2) + "\n")


# ---------------------------------------------------------------- main


def parse_args() -> argparse.Namespace:
    default_vectors = os.environ.get("FIXPOINT_VECTORS") or str(REPO.parent / "shared" / "cmsisnn-vectors")
    default_plugin = REPO.parent / "shared" / "toolchain" / "insncount.c"
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=list(MODEL_NAMES), choices=MODEL_NAMES)
    parser.add_argument("--targets", nargs="+", default=list(TARGETS), choices=TARGETS)
    parser.add_argument(
        "--vectors",
        default=default_vectors,
        help="vector dir (default: $FIXPOINT_VECTORS or ../shared/cmsisnn-vectors beside the repository)",
    )
    parser.add_argument(
        "--fmnist", default=str(fmnist.default_cache()), help="Fashion-MNIST models (default: its cache)"
    )
    parser.add_argument(
        "--plugin-source",
        type=Path,
        default=default_plugin,
        help="insncount.c (default: ../shared/toolchain/insncount.c beside the repository)",
    )
    parser.add_argument("--cases", type=int, default=4, help="test cases of the verify build (default 4)")
    parser.add_argument(
        "--count-cases", type=int, default=1, help="invokes of the count build, averaged (default 1)"
    )
    parser.add_argument(
        "--opt",
        default="O2",
        choices=("O0", "O1", "O2", "O3", "Os", "Ofast"),
        help="-O level of CMSIS-NN, the model and the harness (default O2, the product's)",
    )
    parser.add_argument(
        "--cmsis-nn", metavar="DIR", help="CMSIS-NN checkout (default: FIXPOINT_CMSIS_NN, cache)"
    )
    parser.add_argument(
        "--work-dir", type=Path, help="keep the sources and builds here (default: a temp dir)"
    )
    parser.add_argument("--json", type=Path, help="write all figures to this file")
    parser.add_argument(
        "--float",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also build and count the float32 baseline (bench/float_model; default on)",
    )
    parser.add_argument(
        "--float-cflags",
        default="",
        metavar="FLAGS",
        help="extra compiler flags for the float32 build only, e.g. '-ffp-contract=fast' (default none)",
    )
    args = parser.parse_args()
    if args.cases < 1 or not 1 <= args.count_cases <= args.cases:
        parser.error("--cases must be at least 1 and --count-cases between 1 and --cases")
    return args


def main() -> int:
    args = parse_args()
    print("$ " + shlex.join(getattr(sys, "orig_argv", [sys.executable, *sys.argv])), flush=True)
    try:
        checkout = cmsis_nn.locate(args.cmsis_nn)
    except CmsisNnNotFound as missing:
        print(f"firmware.py: no CMSIS-NN checkout - {missing}", file=sys.stderr)
        print(f"to get it: fixpoint cmsis-nn install {cmsis_nn.GIT_URL}", file=sys.stderr)
        return 2
    plugin, why = build_plugin(args.plugin_source.expanduser())
    if plugin is None:
        print(f"instruction counts: skipped - {why}")
        count_note = f"not counted ({why})"
    else:
        count_note = (
            "QEMU insncount plugin, instructions from entering roi_begin() to entering roi_end(),\n"
            f"  the calls around model_invoke(); mean of {args.count_cases} invoke(s) of the count image;"
            "\n  excludes layer reporting (the hook is compiled out) and the input copy"
        )
    print(
        f"CMSIS-NN {checkout.describe or checkout.version} ({checkout.source}); opt -{args.opt}; "
        f"targets {' '.join(args.targets)}; plugin {'built' if plugin else 'none'}",
        flush=True,
    )
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="fixpoint-bench-") as tmp:
        work = args.work_dir.resolve() if args.work_dir else Path(tmp)
        ctx: dict[str, Any] = {"work": work, "checkout": checkout, "plugin": plugin}
        results = [bench_model(name, args, ctx) for name in args.models]
    seconds = time.perf_counter() - start
    print(report(results, args, count_note))
    if args.float:
        print(float_report(results, args))
    failed = [
        f"{r.name}/{t.target}"
        for r in results
        for t in r.targets
        if "FAIL" in (t.verify, t.count_output, t.vector_output)
    ]
    print(
        f"\n{len(results)} models x {len(args.targets)} targets in {seconds:.0f} s; "
        + (f"FAILED: {', '.join(failed)}" if failed else "every run bit-exact (PASS)")
    )
    float_failed = [f"{r.name}/{f.target}" for r in results for f in r.float32 if f.check == "FAIL"]
    if args.float:
        runs = sum(len(r.float32) for r in results)
        print(
            f"float32: {runs} model/target builds; "
            + (f"FAILED: {', '.join(float_failed)}" if float_failed else "every checked one within tolerance")
        )
    if args.json:
        settings = {
            "command": getattr(sys, "orig_argv", sys.argv),
            "opt": f"-{args.opt}",
            "cases": args.cases,
            "count_cases": args.count_cases,
            "instructions": count_note,
            "cmsis_nn": checkout.describe or checkout.version,
            "python": platform.python_version(),
            "seconds": seconds,
        }
        if args.float:
            from bench.float_model.build import TOLERANCE

            settings["float32"] = {
                "tolerance": TOLERANCE,
                "error": "max |firmware - float_exec| / (max - min of the reference outputs)",
                "extra_cflags": args.float_cflags,
            }
        write_json(args.json, results, settings)
        print(f"wrote {args.json}")
    return 1 if failed or float_failed else 0


if __name__ == "__main__":
    sys.exit(main())
