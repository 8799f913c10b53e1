"""Float (onnxruntime) and int8 (reference executor) side by side: per-layer and per-model figures."""

from __future__ import annotations

import contextvars
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Any, Protocol, cast

import numpy as np

from quantcore.data import DataSet
from quantcore.ir import Graph, Node
from quantcore.ir.io_layout import to_firmware
from quantcore.kernels import jit
from quantcore.kernels.blas import single_threaded
from quantcore.passes.equalize import ChannelScaled
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

PART_SAMPLES = 256
"""Samples per part: the float model runs a part in one onnxruntime call, the int8 executor runs it at
once, and its figures are summed together (the kernels' per-sample bytes do not depend on the part:
tests/kernels/test_batched_equality.py). Against parts of 64 (with the float model run on four of them at
once, as it was), in-process evaluate over the 10,000 Fashion-MNIST test images, wall time: LeNet-5
0.71 -> 0.57 s, convbn 1.14 -> 0.93, outlier 1.35 -> 1.02, DS-CNN 1.61 -> 1.47, MobileNetV2 4.18 -> 4.10;
each kernel call costs a part's values plus a fixed cost, and three threads hand over a quarter as
often. Fewer samples where a part would pass PART_VALUES."""

PART_VALUES = 2**25
"""Activation values (samples times the computed layers' values per sample) a part holds at most: the
int8 tensors of a part (a byte each) and its float activations (4 bytes each) stay within about 32 and
128 MiB, a few parts of each at a time. MobileNetV2 (136,882 values a sample) takes 245 samples."""


def part_samples(qgraph: Graph) -> int:
    """Samples per part for `qgraph` (PART_SAMPLES, fewer for a large network: PART_VALUES)."""
    return max(1, min(PART_SAMPLES, PART_VALUES // max(values_per_sample(qgraph), 1)))


SUMS_AHEAD = 2
"""Parts whose figures may wait for the summing thread (each holds its int8 tensors): enough to keep it
busy while the int8 kernels run the next part, few enough to hold memory to a few parts' tensors. Past
that, the int8 thread measures parts itself rather than wait (_Beside)."""


COMPILED_LOOPS_FROM = 10**7
"""Activation values (samples times the computed layers' values per sample) from which evaluate runs the
accelerated paths (quantcore.kernels.jit's compiled loops, int_gemm's integer product): they save 2-7 ns
a value, and cost a process a few milliseconds (importing the built loops, int_gemm's session and probe;
the first process on a machine builds the loops, about 9 s once). Break-even, measured as whole
`fixpoint evaluate` processes (fastest of three): lenet5 on 1,000 images (8.1e6 values) 0.71 -> 0.69 s
with them, dscnn on 500 (2.2e7) 1.18 -> 1.14 s; from 2.7e8 values (convbn, 10,000 images) they save a
third or more. While the loops came from numba's JIT (0.4 s a process to load) this was 6e7."""


def worth_compiling(qgraph: Graph, samples: int) -> bool:
    """Whether evaluating `samples` samples repays loading the compiled loops (COMPILED_LOOPS_FROM)."""
    return samples * values_per_sample(qgraph) >= COMPILED_LOOPS_FROM


def values_per_sample(qgraph: Graph) -> int:
    """The activation values one sample gives: the computed layers' outputs, what evaluate measures."""
    return sum(int(np.prod(qgraph.tensor(n.outputs[0]).shape[1:])) for n in _computed(qgraph))


def _computed(qgraph: Graph) -> list[Node]:
    return [n for n in qgraph.nodes if n.op.computes]


class FloatModel(Protocol):
    def activations(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]: ...


def evaluate_graphs(
    float_model: FloatModel,
    qgraph: Graph,
    data: DataSet,
    *,
    model: str,
    params_file: str,
    batch_size: int | None = None,
    progress: bool = False,
) -> EvaluationReport:
    """The report of `data` run through both models in parts of `batch_size` samples (by default
    part_samples)."""
    layers = _computed(qgraph)
    divisors: Mapping[str, np.ndarray] = {}
    if isinstance(float_model, ChannelScaled):  # its divisions are made in the figures' pass (_Sums)
        divisors = float_model.divisors
        float_model = cast(FloatModel, float_model.inner)
    sums = _Sums(qgraph, layers, divisors)
    compiled = jit.compiled_loops() if worth_compiling(qgraph, len(data)) else nullcontext()
    with reuse_freed_memory(), compiled, _Beside(SUMS_AHEAD, sums.fold) as beside:
        for xs, ys, references in _with_float_run(
            float_model, qgraph.inputs[0], data, batch_size or part_samples(qgraph), progress, beside.help
        ):
            beside.submit(sums.measure, references, _run_int8(qgraph, xs), ys)
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
    """Calls run on one worker thread, each call's result handed to `fold` on the submitting thread in the
    order the calls were submitted. evaluate measures one part there while this thread runs the next part's
    int8 kernels (the compiled sums and numpy's passes release the GIL). The submitter runs calls the worker
    has not started itself where it would otherwise wait: past `ahead` calls waiting, and whenever it calls
    `help` (evaluate: while the float run, which shares the second core with the worker, is behind). Folded in
    submission order, the parts add up in the order a single thread would add them: the same bits wherever
    each was measured. Each call runs in the submitting thread's context (contextvars), so it takes the same
    paths (jit.compiled_loops)."""

    def __init__(self, ahead: int, fold: Callable[[Any], None]) -> None:
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="fixpoint-sums")
        self._ahead = ahead
        self._fold = fold
        self._pending: deque[_Call] = deque()

    def __enter__(self) -> _Beside:
        return self

    def submit(self, call: Callable[..., Any], *args: object) -> None:
        context = contextvars.copy_context()
        self._pending.append(_Call(self._pool.submit(context.run, call, *args), context, call, args))
        while True:
            while self._pending and self._pending[0].done():
                self._fold(self._pending.popleft().result())
            if len(self._pending) <= self._ahead:
                return
            if not self.help():
                self._fold(self._pending.popleft().result())  # re-raises the call's error here

    def help(self) -> bool:
        """Run the latest call the worker has not started here (the caller has nothing else to do);
        whether there was one."""
        return any(waiting.run_here() for waiting in reversed(self._pending))

    def __exit__(self, kind: object, error: object, trace: object) -> None:
        try:
            while self._pending and kind is None:
                self._fold(self._pending.popleft().result())
        finally:
            for waiting in self._pending:
                waiting.future.cancel()
            self._pool.shutdown(wait=True)


class _Call:
    """A call submitted to _Beside: on the worker (its future), or run on the submitting thread once
    taken back from the worker before it started (`run_here`)."""

    def __init__(
        self,
        future: Future[Any],
        context: contextvars.Context,
        call: Callable[..., Any],
        args: tuple[object, ...],
    ) -> None:
        self.future, self._context, self._call, self._args = future, context, call, args
        self._here: tuple[Any] | None = None

    def run_here(self) -> bool:
        """Run the call on this thread if the worker has not started it (and take it back from the worker);
        whether it ran."""
        if self._here is not None or not self.future.cancel():
            return False
        self._here = (self._context.run(self._call, *self._args),)
        return True

    def done(self) -> bool:
        return self._here is not None or self.future.done()

    def result(self) -> Any:
        return self._here[0] if self._here is not None else self.future.result()


def _with_float_run(
    float_model: FloatModel,
    input_name: str,
    data: DataSet,
    size: int,
    progress: bool,
    meanwhile: Callable[[], bool] = lambda: False,
) -> Iterator[tuple[np.ndarray, np.ndarray | None, dict[str, np.ndarray]]]:
    """The batches, each with the float model's activations, the next batch's float run going on in a
    second thread while the caller runs the int8 kernels and the figures on this one (onnxruntime's run
    releases the GIL, as numpy's array passes do). At most three batches' activations are held: this
    one's, the next one's, and the last one's while the summing thread (_Beside) finishes its parts.
    While the float run is behind, the caller's `meanwhile` is called until it has nothing to do (it
    returns False): evaluate's int8 thread then measures parts waiting for the summing thread, which
    shares the second core with the float run."""
    for_evaluation = getattr(float_model, "for_evaluation", None)  # an onnxruntime model (see there)
    if for_evaluation is not None:
        for_evaluation()
    batches = iter(_batches(data, size, progress))
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="fixpoint-float") as pool:
        current = next(batches, None)
        running = None if current is None else pool.submit(float_model.activations, {input_name: current[0]})
        while current is not None and running is not None:
            while not running.done() and meanwhile():
                pass  # other work while the float run is behind (evaluate: the figures waiting)
            references = running.result()
            upcoming = next(batches, None)
            if upcoming is not None:
                running = pool.submit(float_model.activations, {input_name: upcoming[0]})
            yield current[0], current[1], references
            current = upcoming


class _Sums:
    """What the report is made of, accumulated over the samples: per-layer sums, top-1 counts, outputs.
    Each part is measured on its own (`measure`, on any thread) and folded into the totals in
    sample order (`fold`): a part's sums are its accumulators' only additions to 0.0, so the totals take
    the same additions, in the same order, as accumulating the parts one after the other."""

    def __init__(self, qgraph: Graph, layers: list[Node], divisors: Mapping[str, np.ndarray]) -> None:
        self.qgraph, self.nodes, self.divisors = qgraph, layers, divisors
        self.layers = {n.name: TensorAccumulator(n.name) for n in layers}
        self.classes = ClassificationAccumulator()
        self.classifier = is_classifier(qgraph)
        self.float_outputs: list[np.ndarray] = []
        self.int8_outputs: list[np.ndarray] = []

    def measure(
        self, references: dict[str, np.ndarray], qs: dict[str, np.ndarray], y: np.ndarray | None
    ) -> _Part:
        """The figures of a part: the float run's activations `references` and the int8 tensors `qs` of
        its samples (reads only: any thread)."""
        qgraph, out_name = self.qgraph, self.qgraph.outputs[0]
        measured = _Part({n.name: TensorAccumulator(n.name) for n in self.nodes}, ClassificationAccumulator())
        for node in self.nodes:
            out = node.outputs[0]
            quant = qgraph.tensor(out).quant
            assert quant is not None
            scale, zero_point = int8_exec.activation_scale(quant), int(quant.zero_point)
            measured.layers[node.name].update_quantized(
                references[out], qs[out], scale, zero_point, self.divisors.get(out)
            )
        f_logits = references[out_name]
        if out_name in self.divisors:
            f_logits = f_logits / self.divisors[out_name]
        n = len(f_logits)
        measured.float_logits = f_logits.reshape(n, -1)
        measured.int8_logits = int8_exec.dequantize_tensor(qgraph, out_name, qs[out_name]).reshape(n, -1)
        if self.classifier:
            measured.classes.update(measured.float_logits, measured.int8_logits, y)
        return measured

    def fold(self, measured: _Part) -> None:
        """Add the next part's figures (in sample order) to the totals."""
        for name, layer in measured.layers.items():
            self.layers[name].merge(layer)
        self.classes.merge(measured.classes)
        self.float_outputs.append(measured.float_logits)
        self.int8_outputs.append(measured.int8_logits)


@dataclass
class _Part:
    """One part's figures (_Sums.measure)."""

    layers: dict[str, TensorAccumulator]
    classes: ClassificationAccumulator
    float_logits: np.ndarray = field(default_factory=lambda: np.empty(0))
    int8_logits: np.ndarray = field(default_factory=lambda: np.empty(0))


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
