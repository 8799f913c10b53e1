"""Every TFLM example model: imported or refused (and why), its operators, import time; for an int8 model
the output bytes Fixpoint writes differently from TFLM's interpreter, and what its generated firmware
costs beside TFLM's own arena.

    .venv/bin/python bench/tflm_models.py [--cases N] [--targets qemu-m4 qemu-m55] [--plugin-source F]

(FIXPOINT_TFLM_REPO names TFLM's checkout, default ~/.cache/fixpoint/tflite-micro.) The import time is
the fastest of three in one process (the first import in a process also loads Python's modules, ~1 s).
For an int8 model:
  mismatched  output bytes that differ from TFLM's interpreter (tflite-micro, reference kernels) on
              --cases seeded random int8 inputs over the whole range: Fixpoint's int8 reference executor,
              and the generated firmware built and run on the host (the product's harness, every case);
  per target  the firmware built for qemu-m4 / qemu-m55 with one test input and the layer hook compiled
              out (as bench/firmware.py's count build): flash (text + data) and RAM (data + bss) of the
              whole image (model, harness, newlib with semihosting), the model's arena and CMSIS-NN
              scratch from model.h, instructions per inference (QEMU's insncount plugin between
              roi_begin/roi_end around the one invoke: exact, repeatable), and its output against TFLM's;
  TFLM arena  arena_used_bytes of TFLM's own interpreter on the same model: the python package does not
              return it, but its print_allocations() prints TFLM's RecordingMicroAllocator report, whose
              "Arena allocation total" is arena_used_bytes (head: the tensors' and kernels' scratch plan;
              tail: persistent structures). It is measured in a child process, as the figures go to its
              C++ stderr. It is the package's 64-bit host build with reference kernels: the head is what a
              Cortex-M build plans for the same tensors; the tail holds pointers, so it is smaller on a
              32-bit MCU, and CMSIS-NN kernels in TFLM would add their scratch to the head.
"""

from __future__ import annotations

import argparse
import collections
import re
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "bench")]

import firmware as firmware_bench  # noqa: E402  (bench/firmware.py: the insncount plugin and its run)

from quantcore import pipeline  # noqa: E402
from quantcore.errors import QuantcoreError  # noqa: E402
from quantcore.importers._tflite_read import read_model  # noqa: E402
from quantcore.runtime import int8_exec  # noqa: E402
from quantcore.targets import cmsis_nn  # noqa: E402
from quantcore.verify import tflm as tflm_compare  # noqa: E402
from tests import tflm  # noqa: E402

TARGETS = ("qemu-m4", "qemu-m55")
HOST_TIMEOUT_S = 120.0
_ARENA = re.compile(r"Arena allocation (total|head|tail) (\d+) bytes")
_TFLM_ARENA_PROGRAM = """
import sys
from tflite_micro.python.tflite_micro import runtime
runtime.Interpreter.from_file(sys.argv[1]).print_allocations()
"""


@dataclass
class TargetFigures:
    flash: int | None = None
    ram: int | None = None
    arena: int | None = None
    scratch: int | None = None
    instructions: float | None = None
    mismatched: int | None = None
    """Output bytes of the one case that differ from TFLM's (None: no output line)."""
    compared: int = 0


@dataclass
class ModelFigures:
    name: str
    verdict: str = ""
    ops: dict[str, int] = field(default_factory=dict)
    import_s: float | None = None
    reference_mismatched: int | None = None
    host_mismatched: int | None = None
    output_bytes: int | None = None
    firmware: str = ""
    """Why no firmware was generated (empty when it was)."""
    tflm_arena: dict[str, int] = field(default_factory=dict)
    targets: dict[str, TargetFigures] = field(default_factory=dict)


# ---------------------------------------------------------------- TFLM's side


def random_inputs(result: pipeline.QuantizeResult, count: int) -> np.ndarray:
    """Seeded random inputs over the input type's whole range: int8, or int16 for a model whose int8
    layers start from an int16 input (TFLM's keyword models). The inputs are given in a row (TFLM's
    interpreter and Fixpoint's executor carry a recurrent layer's state from one to the next)."""
    tensor = result.qgraph.tensor(result.qgraph.inputs[0])
    assert tensor.quant is not None
    dtype = np.int16 if tensor.quant.dtype.label == "int16" else np.int8
    info = np.iinfo(dtype)
    rng = np.random.default_rng(0)
    return rng.integers(info.min, info.max + 1, size=(count, *tensor.shape[1:])).astype(dtype)


def tflm_outputs(path: Path, cases: np.ndarray) -> list[bytes]:
    """TFLM's output for each case, invoked in a row: the model's output tensor, or the integer tensor
    behind an edge conversion (keyword_scrambled's int16 softmax before its int32 QUANTIZE), which is
    what Fixpoint's graph ends at."""
    model = read_model(path.read_bytes(), str(path))
    inner = tflm_compare.inner_outputs(model)[0]
    if inner == model.outputs[0]:
        return [output.tobytes() for output in tflm.outputs(tflm.interpreter(path), cases)]
    interpreter = tflm.interpreter(path)
    rows = []
    for case in cases:
        interpreter.set_input(case[np.newaxis], 0)
        interpreter.invoke()
        rows.append(np.asarray(interpreter.GetTensor(inner, 0)["tensor_data"]).tobytes())
    return rows


def tflm_arena(path: Path) -> dict[str, int]:
    """TFLM's arena_used_bytes (total) and its head and tail, from print_allocations in a child."""
    done = subprocess.run(
        [sys.executable, "-c", _TFLM_ARENA_PROGRAM, str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    return {kind: int(size) for kind, size in _ARENA.findall(done.stdout + done.stderr)}


def differing(ours: list[bytes], theirs: list[bytes]) -> int:
    return sum(sum(a != b for a, b in zip(x, y, strict=True)) for x, y in zip(ours, theirs, strict=True))


# ---------------------------------------------------------------- Fixpoint's side


def reference_outputs(result: pipeline.QuantizeResult, cases: np.ndarray) -> list[bytes]:
    qgraph = result.qgraph
    out = int8_exec.run(qgraph, {qgraph.inputs[0]: cases})[qgraph.outputs[0]]
    return [np.ascontiguousarray(row).tobytes() for row in out]


def host_outputs(result: pipeline.QuantizeResult, cases: np.ndarray, work: Path, nn: Any) -> list[bytes]:
    """The generated firmware with the product's harness on the host: every case's OUTPUT line."""
    from quantcore.codegen.generate import generate
    from quantcore.targets.build import BuildRequest, build_firmware
    from quantcore.targets.run import run_firmware
    from quantcore.targets.target import BUILTIN

    spec = BUILTIN["host"]
    generate(result.qgraph, work / "model", core=spec.core, force=True)
    inputs = [np.ascontiguousarray(case).tobytes() for case in cases]
    built = build_firmware(BuildRequest(spec, work / "model", work / "build", inputs, nn))
    return [case.output for case in run_firmware(built, HOST_TIMEOUT_S).transcript.cases]


def target_figures(
    result: pipeline.QuantizeResult,
    case: np.ndarray,
    expected: bytes,
    target: str,
    work: Path,
    ctx: dict[str, Any],
) -> TargetFigures:
    """One input, no layer hook: memory of the image, instructions of the one invoke, its output."""
    from quantcore.codegen.generate import generate
    from quantcore.targets import memory
    from quantcore.targets.build import BuildRequest, build_firmware
    from quantcore.targets.target import BUILTIN

    spec = BUILTIN[target]
    generated = generate(result.qgraph, work / "model", core=spec.core, force=True)
    request = BuildRequest(
        spec,
        work / "model",
        work / "count",
        [np.ascontiguousarray(case).tobytes()],
        ctx["nn"],
        defines=(f"{generated.plan.macro}_NO_LAYER_HOOK",),
    )
    built = build_firmware(request)
    report = memory.measure(built)
    figures = TargetFigures(report.flash, report.ram, report.arena, report.scratch)
    counted = firmware_bench.run_counted(built, ctx["plugin"])
    if counted.roi is not None and counted.intervals:
        figures.instructions = counted.roi / counted.intervals
    got = counted.outputs.get(0)
    figures.mismatched = None if got is None else differing([got], [expected])
    figures.compared = len(expected)
    return figures


# ---------------------------------------------------------------- one model


def timed_import(path: Path, repeats: int = 3) -> tuple[pipeline.LoadedModel, float]:
    """The model and the fastest of `repeats` imports (the first pays for Python's lazy imports)."""
    best, model = float("inf"), None
    for _ in range(repeats):
        started = time.perf_counter()
        model = pipeline.load_model(path)
        best = min(best, time.perf_counter() - started)
    assert model is not None
    return model, best


def bench_model(name: str, args: argparse.Namespace, ctx: dict[str, Any]) -> ModelFigures:
    figures = ModelFigures(name)
    path = tflm.model_path(name)
    if path is None:
        figures.verdict = f"not in the checkout ({tflm.MODELS[name]})"
        return figures
    figures.ops = dict(
        collections.Counter(op.op for op in read_model(path.read_bytes(), str(path)).operators)
    )
    try:
        model, figures.import_s = timed_import(path)
    except QuantcoreError as error:
        figures.verdict = f"refused: {error}"
        return figures
    if not model.fully_quantized:
        figures.verdict = "float: imported, quantized with --calib (no TFLM int8 counterpart)"
        return figures
    figures.verdict = "int8: imported with TensorFlow's scales"
    result = pipeline.quantize_imported(model)
    cases = random_inputs(result, args.cases)
    theirs = tflm_outputs(path, cases)
    figures.output_bytes = sum(len(o) for o in theirs)
    figures.reference_mismatched = differing(reference_outputs(result, cases), theirs)
    work = ctx["work"] / name
    figures.tflm_arena = tflm_arena(path)
    try:
        figures.host_mismatched = differing(host_outputs(result, cases, work / "host", ctx["nn"]), theirs)
    except QuantcoreError as error:  # a layer the code generator does not generate yet (SVDF, LSTM)
        figures.firmware = f"no firmware: {error}"
        return figures
    for target in args.targets:
        figures.targets[target] = target_figures(result, cases[0], theirs[0], target, work / target, ctx)
    return figures


# ---------------------------------------------------------------- output


def print_model(f: ModelFigures) -> None:
    print(f"{f.name}: {f.verdict}")
    if f.ops:
        print(f"  ops {f.ops}")
    if f.import_s is not None:
        print(f"  import {f.import_s:.2f} s")
    if f.reference_mismatched is None:
        return
    print(
        f"  mismatched bytes vs TFLM on {f.output_bytes} output bytes: reference executor"
        f" {f.reference_mismatched}, firmware on the host {f.host_mismatched}"
    )
    if f.firmware:
        print(f"  {f.firmware}")
    arena = f.tflm_arena
    if arena:
        print(
            f"  TFLM arena_used_bytes {arena.get('total')} (head {arena.get('head')},"
            f" tail {arena.get('tail')}; tflite-micro's 64-bit host build)"
        )
    for target, t in f.targets.items():
        instructions = "n/a" if t.instructions is None else f"{t.instructions:,.0f}"
        print(
            f"  {target}: flash {t.flash} B, RAM {t.ram} B, arena {t.arena} B + scratch {t.scratch} B,"
            f" {instructions} instructions per inference, output vs TFLM: {t.mismatched} bytes differ"
        )


def markdown(rows: list[ModelFigures], targets: list[str]) -> str:
    cores = " / ".join(t.replace("qemu-", "").upper() for t in targets)
    head = ["model", "import", "mismatched bytes vs TFLM (reference / host firmware / QEMU firmware)"]
    head += [f"flash B ({cores})", f"RAM B ({cores})", f"arena + scratch B ({cores})"]
    head += ["TFLM arena_used_bytes", f"instructions per inference ({cores})"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for f in rows:
        if f.reference_mismatched is None:
            lines.append(f"| {f.name} | {short(f.verdict)} |" + " |" * (len(head) - 2))
            continue
        if f.firmware:
            cells = [
                f.name,
                f"{f.import_s:.2f} s",
                f"{f.reference_mismatched} of {f.output_bytes} / no firmware",
            ]
            cells += ["", "", "", f"{f.tflm_arena.get('total', 0):,}", ""]
            lines.append("| " + " | ".join(cells) + " |")
            continue
        per = [f.targets[t] for t in targets]
        cells = [
            f.name,
            f"{f.import_s:.2f} s",
            f"{f.reference_mismatched} of {f.output_bytes} / {f.host_mismatched} of {f.output_bytes}"
            f" / {sum(t.mismatched or 0 for t in per)} of {sum(t.compared for t in per)}",
            " / ".join(f"{t.flash:,}" for t in per),
            " / ".join(f"{t.ram:,}" for t in per),
            " / ".join(f"{t.arena:,} + {t.scratch:,}" for t in per),
            f"{f.tflm_arena.get('total', 0):,}",
            " / ".join("n/a" if t.instructions is None else f"{t.instructions:,.0f}" for t in per),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def short(verdict: str) -> str:
    """A refusal without the model's path, up to its first clause: what the table has room for."""
    message = verdict.split(".tflite: ", 1)[-1]
    return message.split("; ")[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=20, help="random int8 inputs per model (default 20)")
    parser.add_argument("--targets", nargs="+", default=list(TARGETS), choices=TARGETS)
    parser.add_argument(
        "--plugin-source",
        type=Path,
        default=REPO.parent / "shared" / "toolchain" / "insncount.c",
        help="insncount.c (default: ../shared/toolchain/insncount.c beside the repository)",
    )
    parser.add_argument("--work-dir", type=Path, default=None, help="build folder (default: a temporary one)")
    parser.add_argument("--models", nargs="+", default=list(tflm.MODELS), choices=list(tflm.MODELS))
    args = parser.parse_args()
    import tempfile

    plugin, why = firmware_bench.build_plugin(args.plugin_source)
    if plugin is None:
        print(f"note: no instruction counts: {why}")
    with tempfile.TemporaryDirectory() as scratch:  # build_firmware builds CMSIS-NN per core when needed
        ctx = {"nn": cmsis_nn.locate(), "plugin": plugin, "work": args.work_dir or Path(scratch)}
        rows = []
        for name in args.models:
            rows.append(bench_model(name, args, ctx))
            print_model(rows[-1])
    print()
    print(markdown(rows, args.targets))


if __name__ == "__main__":
    main()
