"""Float (onnxruntime) and int8 (reference executor) side by side: per-layer and per-model figures."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Protocol

import numpy as np

from quantcore.data import DataSet
from quantcore.ir import Graph, Node
from quantcore.ir.io_layout import to_firmware
from quantcore.kernels.blas import single_threaded
from quantcore.quantize import lowering
from quantcore.runtime import int8_exec
from quantcore.runtime.heap import reuse_freed_memory
from quantcore.verify.metrics import (
    ClassificationAccumulator,
    TensorAccumulator,
    classifier_classes,
    output_sqnr_db,
)
from quantcore.verify.report import EvaluationReport, LayerMetrics

RUN_BATCHES = 4
"""Batches of `batch_size` samples run through both models at once: a quarter of the onnxruntime calls
and kernel calls (onnxruntime's and the kernels' per-sample results do not depend on the batch; the
figures are still summed per batch_size samples)."""


class FloatModel(Protocol):
    def activations(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]: ...


def evaluate_graphs(
    float_model: FloatModel,
    qgraph: Graph,
    data: DataSet,
    *,
    model: str,
    params_file: str,
    batch_size: int = 64,
    progress: bool = False,
) -> EvaluationReport:
    layers = [n for n in qgraph.nodes if n.op.computes]
    sums = _Sums(qgraph, layers)
    with reuse_freed_memory():
        for xs, ys in _batches(data, batch_size * RUN_BATCHES, progress):
            references = float_model.activations({qgraph.inputs[0]: xs})
            q_inputs = int8_exec.quantize_inputs(
                qgraph, {qgraph.inputs[0]: to_firmware(qgraph, qgraph.inputs[0], xs)}
            )
            with single_threaded():
                qs = int8_exec.run(qgraph, q_inputs)
            # The figures are summed per batch_size samples, as they always were: same sums, same bits.
            for start in range(0, len(xs), batch_size):
                part = slice(start, start + batch_size)
                sums.add(references, qs, part, None if ys is None else ys[part])
    classes, classifier = sums.classes, sums.classifier
    return EvaluationReport(
        model=model,
        params_file=params_file,
        samples=len(data),
        top1_float=classes.top1_float if classifier else None,
        top1_int8=classes.top1_int8 if classifier else None,
        agreement=classes.agreement if classifier else None,
        classifier=classifier,
        output_sqnr_db=output_sqnr_db(
            [np.concatenate(sums.float_outputs)], [np.concatenate(sums.int8_outputs)]
        ),
        layers=[
            LayerMetrics.from_metrics(n.name, lowering.op_label(n), sums.layers[n.name].result())
            for n in layers
        ],
    )


class _Sums:
    """What the report is made of, accumulated over the samples: per-layer sums, top-1 counts, outputs."""

    def __init__(self, qgraph: Graph, layers: list[Node]) -> None:
        self.qgraph, self.nodes = qgraph, layers
        self.layers = {n.name: TensorAccumulator(n.name) for n in layers}
        self.classes = ClassificationAccumulator()
        self.classifier = is_classifier(qgraph)
        self.float_outputs: list[np.ndarray] = []
        self.int8_outputs: list[np.ndarray] = []

    def add(
        self, references: dict[str, np.ndarray], qs: dict[str, np.ndarray], part: slice, y: np.ndarray | None
    ) -> None:
        """Samples `part` of one run: float activations `references`, the int8 tensors `qs`."""
        qgraph, out_name = self.qgraph, self.qgraph.outputs[0]
        for node in self.nodes:
            out = node.outputs[0]
            dequantized = int8_exec.dequantize_tensor(qgraph, out, qs[out][part])
            self.layers[node.name].update(references[out][part], dequantized)
        f_logits = references[out_name][part]
        n = len(f_logits)
        f_logits = f_logits.reshape(n, -1)
        q_logits = int8_exec.dequantize_tensor(qgraph, out_name, qs[out_name][part]).reshape(n, -1)
        if self.classifier:
            self.classes.update(f_logits, q_logits, y)
        self.float_outputs.append(f_logits)
        self.int8_outputs.append(q_logits)


def is_classifier(graph: Graph) -> bool:
    """Whether top-1 and arg-max agreement mean something for `graph` (the rule: metrics.py)."""
    return classifier_classes([graph.tensor(name).shape for name in graph.outputs]) is not None


def float_outputs(float_model: FloatModel, graph: Graph, data: DataSet, batch_size: int = 64) -> np.ndarray:
    """The float model's output for every sample, flattened per sample (N, -1)."""
    input_name, out_name = graph.inputs[0], graph.outputs[0]
    parts = [
        float_model.activations({input_name: x})[out_name].reshape(len(x), -1)
        for x, _ in _batches(data, batch_size, False)
    ]
    return np.concatenate(parts)


def int8_outputs(qgraph: Graph, data: DataSet, batch_size: int = 64) -> np.ndarray:
    """The int8 reference executor's dequantized output for every sample, flattened per sample."""
    input_name, out_name = qgraph.inputs[0], qgraph.outputs[0]
    parts = []
    for x, _ in _batches(data, batch_size, False):
        q_inputs = int8_exec.quantize_inputs(qgraph, {input_name: to_firmware(qgraph, input_name, x)})
        with single_threaded():
            q = int8_exec.run(qgraph, q_inputs)[out_name]
        parts.append(int8_exec.dequantize_tensor(qgraph, out_name, q).reshape(len(x), -1))
    return np.concatenate(parts)


def _batches(data: DataSet, size: int, progress: bool) -> Iterator[tuple[np.ndarray, np.ndarray | None]]:
    starts: Iterable[int] = range(0, len(data), size)
    if progress:
        from rich.progress import track

        starts = track(starts, description="evaluating", transient=True)
    for start in starts:
        y = None if data.y is None else data.y[start : start + size]
        yield data.x[start : start + size], y
