"""Verification: build the model's firmware, run it, compare every layer with the reference executor.

Test cases are quantized inputs. With a data set they are its first N samples prepared on the host
exactly as the generated model.h tells an application (its layout conversion, its scale and zero
point: documented_cases), then copied unchanged to <prefix>_input() - no permutation anywhere else.
Without one they are seeded random int8 values spread over the whole int8 range (numpy
default_rng(seed), uniform integers in [-128, 127], seed 0 unless told), which exercises every code
path of the kernels, saturation included. The reference is int8_exec.run on exactly those bytes; the
firmware must match it byte for byte on every layer.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from quantcore import display
from quantcore.ir import DType, Graph
from quantcore.runtime import int8_exec
from quantcore.scheme.arith import quantize_activation
from quantcore.targets.build import Firmware, InputContract
from quantcore.targets.compare import Comparison, ReferenceLayer, compare
from quantcore.targets.errors import TargetError
from quantcore.targets.memory import MemoryReport
from quantcore.targets.protocol import Expectation
from quantcore.targets.run import RunResult

DEFAULT_SEED = 0
DEFAULT_CASES = 4
TIMEOUT_BASE_S = 60.0
"""What any firmware gets: starting QEMU or flashing, and a small model's cases."""
SECONDS_PER_CASE_BYTE = 1 / 25_000
"""Run time grows with the image: a case runs every weight once, and the flash image is mostly weights.
Measured on QEMU: a 250 KB model with 10 cases took 29-52 s, at worst 5.2 s per case per 250 KB; this
allows 10 s per case per 250 KB of flash, twice that."""


def default_timeout(flash_bytes: int | None, cases: int) -> float:
    """The seconds a firmware may run when --timeout is not given:
    TIMEOUT_BASE_S + cases x flash bytes x SECONDS_PER_CASE_BYTE (60 s + 10 s per case per 250 KB)."""
    return TIMEOUT_BASE_S + cases * (flash_bytes or 0) * SECONDS_PER_CASE_BYTE


@dataclass(frozen=True)
class Cases:
    """Quantized test inputs: (K * rows, *input shape without its first axis) in the graph's layout (NHWC),
    case after case - the rows the executors stack inferences along."""

    quantized: np.ndarray
    source: str
    """What they came from: a data set's path, or "random (seed 0)"."""
    rows: int = 1
    """Rows of one case: the graph input's first axis - 1 for a batch of one; a time-major LSTM's input
    (time, batch, features) is one inference of `time` rows."""

    @property
    def count(self) -> int:
        return len(self.quantized) // self.rows

    def head(self, count: int) -> Cases:
        return Cases(self.quantized[: count * self.rows], self.source, self.rows)

    def as_bytes(self) -> list[bytes]:
        cases = self.quantized.reshape(self.count, -1, *self.quantized.shape[1:])
        return [np.ascontiguousarray(case).tobytes() for case in cases]

    def by_case(self, values: np.ndarray) -> np.ndarray:
        """A tensor the executor computed for these cases, (count, ...) - its rows grouped by case: a
        tensor whose first axis is not one row per case (a time-major input's steps, an ONNX LSTM's
        sequence-first (seq, 1, H) tensors) has each case's rows contiguous along it."""
        return values if len(values) == self.count else values.reshape(self.count, -1, *values.shape[1:])


def random_cases(qgraph: Graph, count: int = DEFAULT_CASES, seed: int = DEFAULT_SEED) -> Cases:
    name = qgraph.inputs[0]
    tensor = qgraph.tensor(name)
    wide = tensor.quant is not None and tensor.quant.dtype is DType.INT16
    dtype, (lo, hi) = (np.int16, (-32768, 32767)) if wide else (np.int8, (-128, 127))
    rng = np.random.default_rng(seed)
    rows = tensor.shape[0] if tensor.shape else 1
    values = rng.integers(lo, hi, size=(count * rows, *tensor.shape[1:]), endpoint=True).astype(dtype)
    return Cases(values, f"random (seed {seed})", rows)


def data_cases(qgraph: Graph, x_ir_layout: np.ndarray, source: str, count: int | None = None) -> Cases:
    """The first `count` samples (already in the graph's layout), quantized as the model's input."""
    x = x_ir_layout[:count] if count else x_ir_layout
    name = qgraph.inputs[0]
    return Cases(int8_exec.quantize_inputs(qgraph, {name: x})[name], source)


def documented_cases(
    contract: InputContract, x_model: np.ndarray, source: str, count: int | None = None
) -> Cases:
    """Test inputs prepared exactly as model.h tells an application: the model's own samples (its
    layout, batch first), transposed to NHWC when the header says the model's input is NCHW, quantized
    with the header's scale and zero point (round half away from zero, clamp). These bytes are what the
    harness copies to <prefix>_input(), unchanged. A case is `rows` samples when the input's first axis
    is `rows` (a time-major recurrent input: a sample per time step)."""
    rows = contract.shape[0] if contract.shape else 1
    x = x_model[: count * rows] if count else x_model
    if contract.model_nchw:
        x = x.transpose(0, 2, 3, 1)
    if tuple(x.shape[1:]) != contract.shape[1:]:
        raise TargetError(
            f"{contract.path} takes inputs of shape {list(contract.shape[1:])} per sample, but the samples"
            f" of {source} give {list(x.shape[1:])}"
            + (" after the transposition it asks for" if contract.model_nchw else "")
            + "; give data in the model's own input layout"
        )
    if len(x) % rows:
        raise TargetError(
            f"{contract.path} takes {rows} samples of shape {list(contract.shape[1:])} per case (its input"
            f" is {list(contract.shape)}), but {source} gives {len(x)} samples; give a multiple of {rows}"
        )
    qmin, qmax = (-32768, 32767) if contract.wide else (-128, 127)
    q = quantize_activation(x, contract.scale, contract.zero_point, qmin, qmax)
    return Cases(np.ascontiguousarray(q), source, rows)


def float_inputs(qgraph: Graph, cases: Cases) -> np.ndarray:
    """The float values the quantized cases stand for (graph layout), for the float metrics."""
    return int8_exec.dequantize_tensor(qgraph, qgraph.inputs[0], cases.quantized)


def reference(qgraph: Graph, cases: Cases) -> tuple[list[ReferenceLayer], np.ndarray]:
    """Every layer's reference output for every case, and the model output."""
    env = int8_exec.run(qgraph, {qgraph.inputs[0]: cases.quantized})
    layers = [ReferenceLayer(node.name, cases.by_case(env[node.outputs[0]])) for node in qgraph.nodes]
    return layers, cases.by_case(env[qgraph.outputs[0]])


def expectation(layers: list[ReferenceLayer], output: np.ndarray) -> Expectation:
    return Expectation(tuple(int(ref.values[0].nbytes) for ref in layers), int(output[0].nbytes), len(output))


@dataclass(frozen=True)
class VerifyReport:
    """One verification: where it ran, how it compared, what it takes of memory."""

    target: str
    channel: str
    cases: Cases
    comparison: Comparison
    memory: MemoryReport | None
    seconds: float
    float_metrics: list[Any] = field(default_factory=list)
    """quantcore.verify.report.LayerMetrics of the quantizer's evaluation on the same inputs (if run)."""

    @property
    def verdict(self) -> str:
        return "pass" if self.comparison.passed else "fail"

    def to_dict(self) -> dict[str, Any]:
        metrics = {m.name: m for m in self.float_metrics}
        layers = [_layer_dict(layer, metrics.get(layer.name)) for layer in self.comparison.layers]
        memory = self.memory
        return {
            "target": self.target,
            "verdict": self.verdict,
            "channel": self.channel,
            "cases": self.comparison.cases,
            "inputs": self.cases.source,
            "layers": layers,
            "mismatched_bytes_total": self.comparison.mismatched_bytes_total,
            "output_mismatched_bytes": self.comparison.outputs_mismatched_bytes,
            "flash_bytes": memory.flash if memory else None,
            "ram_bytes": memory.ram if memory else None,
            "arena_bytes": memory.arena if memory else None,
            "scratch_bytes": memory.scratch if memory else None,
            "state_bytes": memory.state if memory else None,
            "flash_budget": memory.budget.flash if memory else None,
            "ram_budget": memory.budget.ram if memory else None,
            "run_seconds": round(self.seconds, 3),
        }


def _layer_dict(layer: Any, metrics: Any) -> dict[str, Any]:
    first = layer.first
    entry: dict[str, Any] = {
        "name": layer.name,
        "bytes": layer.bytes,
        "mismatched_bytes": layer.mismatched_bytes,
    }
    if first is not None:
        entry["first_mismatch"] = {
            "case": first.case, "channel": first.channel, "index": list(first.index),
            "expected": first.expected, "actual": first.actual,
        }  # fmt: skip
    if metrics is not None:
        entry["float_sqnr_db"] = metrics.sqnr_db if np.isfinite(metrics.sqnr_db) else None
    return entry


def firmware_name(name: str) -> str:
    """How the firmware prints a layer's name: shortened, one printable line (the generated C's string)."""
    return display.printable(display.shorten(name))


def check_layer_names(qgraph: Graph, run: RunResult, firmware: Firmware) -> None:
    """The firmware must be the model's: same layers in the same order (else the sources are stale)."""
    case = run.transcript.cases[0]
    for i, (node, (name, _)) in enumerate(zip(qgraph.nodes, case.layers, strict=False)):
        if name != firmware_name(node.name):
            raise TargetError(
                f"layer {i} is {display.quoted(name)} in {firmware.header.path.parent} but "
                f"{display.quoted(node.name)} in the model: the sources were generated from another model; "
                "regenerate them"
            )


def verify_run(
    qgraph: Graph,
    cases: Cases,
    firmware: Firmware,
    execute: Callable[[Expectation], RunResult],
    memory: MemoryReport | None,
    float_metrics: list[Any] | None = None,
) -> VerifyReport:
    """Run the built firmware through `execute` and compare its transcript with the reference."""
    layers, output = reference(qgraph, cases)
    result = execute(expectation(layers, output))
    check_layer_names(qgraph, result, firmware)
    comparison = compare(layers, output, result.transcript)
    return VerifyReport(
        firmware.target.name, result.channel, cases, comparison, memory, result.seconds, float_metrics or []
    )


def format_table(report: VerifyReport) -> str:
    """The per-layer table the CLI prints."""
    metrics = {m.name: m for m in report.float_metrics}
    rows: list[tuple[str, ...]] = [
        ("#", "layer", "bytes", "mismatched", "float SQNR dB", "first mismatch (case, channel, index)")
    ]
    for layer in report.comparison.layers:
        first = layer.first
        where = (
            f"case {first.case}, ch {first.channel}, {first.index}: {first.expected} != {first.actual}"
            if first
            else ""
        )
        sqnr = metrics[layer.name].sqnr_db if layer.name in metrics else None
        rows.append((
            str(layer.index), layer.name, str(layer.bytes), str(layer.mismatched_bytes),
            "" if sqnr is None else f"{sqnr:.2f}", where,
        ))  # fmt: skip
    if not metrics:
        rows = [row[:4] + row[5:] for row in rows]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows]
    summary = [
        f"target {report.target} via {report.channel}; "
        f"{report.comparison.cases} cases ({report.cases.source})",
        f"memory: {report.memory.format()}" if report.memory else "memory: not measured",
        f"{report.verdict.upper()}: {report.comparison.mismatched_bytes_total} mismatched bytes",
    ]
    return "\n".join([*lines, *summary])


def write_json(path: Path, report: VerifyReport) -> None:
    import json

    path.write_text(json.dumps(report.to_dict(), indent=2) + "\n")
