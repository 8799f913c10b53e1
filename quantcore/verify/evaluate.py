"""Float (onnxruntime) and int8 (reference executor) side by side: per-layer and per-model figures."""

from __future__ import annotations

import contextvars
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import nullcontext
from typing import Protocol

import numpy as np

from quantcore.data import DataSet
from quantcore.ir import Graph, Node
from quantcore.ir.io_layout import to_firmware
from quantcore.kernels import jit
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
"""Batches of `batch_size` samples run through the float model at once: a quarter of the onnxruntime
calls (its per-sample results do not depend on the batch). The int8 executor runs each batch_size part
on its own: its kernels' dozen passes over a part's accumulators stay in cache (MobileNetV2, 2,560
images: 3.7 -> 2.9 s CPU against whole runs of 4 batches), and the kernels' per-sample bytes do not
depend on the batch either (tests/kernels/test_batched_equality.py). The figures are summed per
batch_size samples, as they always were."""


SUMS_AHEAD = 2
"""Parts whose figures may wait for the summing thread (each holds its int8 tensors): enough to keep it
busy while the int8 kernels run the next part, few enough to hold memory to a few parts' tensors."""


COMPILED_LOOPS_FROM = 6 * 10**7
"""Activation values (samples times the computed layers' values per sample) from which evaluate runs the
accelerated paths (quantcore.kernels.jit's compiled loops, int_gemm's integer product): they save 2-7 ns
a value and cost a process about 0.4 s to load (numba). Measured over 10,000 images: lenet5 (8e7 values)
1.60 -> 1.40 s with them, convbn (2.7e8) 2.3 -> 1.95 s; below about 6e7 the load costs more than they
save."""


def worth_compiling(qgraph: Graph, layers: list[Node], samples: int) -> bool:
    """Whether evaluating `samples` samples repays loading the compiled loops (COMPILED_LOOPS_FROM)."""
    per_sample = sum(int(np.prod(qgraph.tensor(n.outputs[0]).shape[1:])) for n in layers)
    return samples * per_sample >= COMPILED_LOOPS_FROM


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
    compiled = jit.compiled_loops() if worth_compiling(qgraph, layers, len(data)) else nullcontext()
    with reuse_freed_memory(), compiled, _Beside(SUMS_AHEAD) as beside:
        for xs, ys, references in _with_float_run(
            float_model, qgraph.inputs[0], data, batch_size * RUN_BATCHES, progress
        ):
            for start in range(0, len(xs), batch_size):
                part = slice(start, start + batch_size)
                qs = _run_int8(qgraph, xs[part])
                beside.submit(sums.add, references, qs, part, None if ys is None else ys[part])
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


class _Beside:
    """One worker thread that runs calls in the order they are submitted, at most `ahead` of them
    waiting: evaluate's figures for one part of a batch are summed there while this thread runs the
    next part's int8 kernels (the compiled sums and numpy's passes release the GIL). One worker, in
    submission order, adds the parts' sums in the order a single thread would: the same bits. Each call
    runs in the submitting thread's context (contextvars), so it takes the same paths
    (jit.compiled_loops) as it would here."""

    def __init__(self, ahead: int) -> None:
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="fixpoint-sums")
        self._ahead = ahead
        self._pending: deque[Future[None]] = deque()

    def __enter__(self) -> _Beside:
        return self

    def submit(self, call: Callable[..., None], *args: object) -> None:
        while len(self._pending) >= self._ahead:
            self._pending.popleft().result()  # re-raises the worker's error here
        self._pending.append(self._pool.submit(contextvars.copy_context().run, call, *args))

    def __exit__(self, kind: object, error: object, trace: object) -> None:
        try:
            while self._pending and kind is None:
                self._pending.popleft().result()
        finally:
            for future in self._pending:
                future.cancel()
            self._pool.shutdown(wait=True)


def _with_float_run(
    float_model: FloatModel, input_name: str, data: DataSet, size: int, progress: bool
) -> Iterator[tuple[np.ndarray, np.ndarray | None, dict[str, np.ndarray]]]:
    """The batches, each with the float model's activations, the next batch's float run going on in a
    second thread while the caller runs the int8 kernels and the figures on this one (onnxruntime's run
    releases the GIL, as numpy's array passes do). At most three batches' activations are held: this
    one's, the next one's, and the last one's while the summing thread (_Beside) finishes its parts.
    (From i20-eval5's branch.)"""
    for_evaluation = getattr(float_model, "for_evaluation", None)  # an onnxruntime model (see there)
    if for_evaluation is not None:
        for_evaluation()
    batches = iter(_batches(data, size, progress))
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="fixpoint-float") as pool:
        current = next(batches, None)
        running = None if current is None else pool.submit(float_model.activations, {input_name: current[0]})
        while current is not None and running is not None:
            references = running.result()
            upcoming = next(batches, None)
            if upcoming is not None:
                running = pool.submit(float_model.activations, {input_name: upcoming[0]})
            yield current[0], current[1], references
            current = upcoming


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
        """Samples `part` of the float run's activations `references`, and the int8 tensors `qs` of
        those samples."""
        qgraph, out_name = self.qgraph, self.qgraph.outputs[0]
        for node in self.nodes:
            out = node.outputs[0]
            quant = qgraph.tensor(out).quant
            assert quant is not None
            scale, zero_point = int8_exec.activation_scale(quant), int(quant.zero_point)
            self.layers[node.name].update_quantized(references[out][part], qs[out], scale, zero_point)
        f_logits = references[out_name][part]
        n = len(f_logits)
        f_logits = f_logits.reshape(n, -1)
        q_logits = int8_exec.dequantize_tensor(qgraph, out_name, qs[out_name]).reshape(n, -1)
        if self.classifier:
            self.classes.update(f_logits, q_logits, y)
        self.float_outputs.append(f_logits)
        self.int8_outputs.append(q_logits)


def _run_int8(qgraph: Graph, xs: np.ndarray) -> dict[str, np.ndarray]:
    """Every tensor of the int8 executor's run over float inputs `xs` (the model's layout)."""
    name = qgraph.inputs[0]
    q_inputs = int8_exec.quantize_inputs(qgraph, {name: to_firmware(qgraph, name, xs)})
    with single_threaded():
        return int8_exec.run(qgraph, q_inputs)


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
    out_name = qgraph.outputs[0]
    parts = []
    for x, _ in _batches(data, batch_size, False):
        q = _run_int8(qgraph, x)[out_name]
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
