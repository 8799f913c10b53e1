"""The calibration stage: run the float model over the representative set, observe every activation of
the prepared graph, and pick each one's range with its method (global, or per layer)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from quantcore.calibrate.calibration import Calibration
from quantcore.calibrate.errors import EmptyObserverError, NonFiniteBatchError
from quantcore.calibrate.method import Method, RangeMethod, select_range
from quantcore.calibrate.observer import Observer
from quantcore.calibrate.ranges import containing_zero
from quantcore.ir import Activation, Graph, Node, Op
from quantcore.ir.io_layout import transposed


class FloatModel(Protocol):
    def activations(self, feeds: dict[str, np.ndarray], layout: bool = True) -> dict[str, np.ndarray]: ...


class DataSource(Protocol):
    def __len__(self) -> int: ...
    def batches(self, size: int) -> Iterator[np.ndarray]: ...


@dataclass(frozen=True)
class CalibrationPlan:
    method: RangeMethod = field(default_factory=RangeMethod)
    per_layer: Mapping[str, RangeMethod] = field(default_factory=dict)
    """Method by layer (node) name or by tensor name."""
    batch_size: int = 64
    progress: bool = False
    workers: int = 1
    """Processes observing contiguous shards of the data set at once; their observers merge exactly, so
    the result equals one process's (histograms are integer counts on a grid fixed by the union range)."""


def calibrate(
    graph: Graph, model: FloatModel, data: DataSource, plan: CalibrationPlan, channels: Iterable[str] = ()
) -> tuple[Calibration, dict[str, Any]]:
    """Observe, select ranges; returns the Calibration and the JSON 'calibration' summary. The Calibration
    also holds the per-channel (min, max) of each activation named in `channels`, from the same pass."""
    wanted = frozenset(channels)
    if plan.workers > 1 and len(data) > plan.batch_size and hasattr(data, "x"):
        observers = _observe_sharded(graph, model, data, plan, wanted)
    else:
        observers = observe(graph, model, data, plan, wanted)
    return select(graph, observers, plan, len(data))


def calibrate_distributed(
    graph: Graph, model: FloatModel, local_data: DataSource, plan: CalibrationPlan
) -> tuple[Calibration, dict[str, Any]]:
    """Calibration under torch.distributed (torchrun): each rank observes its own part of the data set,
    the observers are gathered and merged in rank order, and every rank returns the same Calibration -
    the one a single process would compute over all the ranks' data in rank order."""
    import torch.distributed as dist

    local = {name: _record(obs) for name, obs in observe(graph, model, local_data, plan).items()}
    gathered: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, (len(local_data), local))
    return select(graph, _merged([records for _, records in gathered]), plan, sum(n for n, _ in gathered))


def observe(
    graph: Graph,
    model: FloatModel,
    data: DataSource,
    plan: CalibrationPlan,
    channels: frozenset[str] = frozenset(),
) -> dict[str, _Observer]:
    """Run the float model over `data` and observe every activation (a histogram, or only min/max when
    every tensor's method is min/max), and the per-channel min/max of the activations in `channels`."""
    methods = _methods(graph, plan)
    minmax_only = all(m.method is Method.MINMAX for m in methods.values())
    # min/max needs no histogram: building one per tensor would double the time of a min/max run.
    observers: dict[str, _Observer] = {
        t.name: (_MinMax(t.name) if minmax_only else Observer(t.name)) for t in graph.activations()
    }
    cells = cell_state_nodes(graph)
    observers.update({key: _MinMax(key) for key in cells})
    # Under keys of their own, beside the tensor's observer, so shards and ranks merge them alike.
    observers.update(
        {_channels_key(n): _Channels(n, _channel_axis(graph, n, model)) for n in sorted(channels)}
    )
    input_name = graph.inputs[0]
    for batch in _progress(data.batches(plan.batch_size), len(data), plan):
        values = model.activations({input_name: batch}, layout=False)  # statistics ignore element order
        for name, observer in observers.items():
            if isinstance(observer, _Channels):
                observer.observe(values[observer.name])
            else:
                observer.observe(
                    values[name] if name not in cells else _cell_states(graph, cells[name], values)
                )
    return observers


def _channels_key(name: str) -> str:
    return f"{name}#channels"


def _channel_axis(graph: Graph, name: str, model: FloatModel) -> int:
    """The channel axis of `name`'s values as model.activations(layout=False) gives them: the model file's
    layout (channel first for an NCHW ONNX tensor), unless the model hands back the IR's channel-last
    layout whatever it is asked (its `ir_layout` is True: the IR float executor, an equalized model)."""
    if transposed(graph, name) and not getattr(model, "ir_layout", False):
        return 1
    return len(graph.tensor(name).shape) - 1


def cell_state_nodes(graph: Graph) -> dict[str, Node]:
    """The float LSTMs whose int16 cell state and the float SVDFs whose int16 state calibration ranges (an
    imported int8 layer brings its own scale), by the key their range has in the Calibration
    (quantcore.scheme.recurrent.cell_state_key)."""
    from quantcore.scheme.recurrent import cell_state_key, needs_cell_range

    return {cell_state_key(n): n for n in graph.nodes if needs_cell_range(graph, n)}


def _cell_states(graph: Graph, node: Node, values: Mapping[str, np.ndarray]) -> np.ndarray:
    """The cell state of every step (an SVDF: the values entering its state), by the IR float executor
    from the layer's observed input (the ONNX model's LSTM returns only the last step's)."""
    from quantcore.runtime.recurrent_float import lstm_cell_states, svdf_states

    constants = (graph.constant(n).astype(np.float64) if n else None for n in node.inputs[1:])
    args = [values[node.inputs[0]], *constants]
    return (svdf_states if node.op is Op.SVDF else lstm_cell_states)(node, args, graph)


def select(
    graph: Graph, observers: Mapping[str, _Observer], plan: CalibrationPlan, samples: int
) -> tuple[Calibration, dict[str, Any]]:
    """Each activation's range from its observer, by its method, and the per-channel (min, max) observed."""
    methods = _methods(graph, plan)
    channels = {obs.name: obs.ranges() for obs in observers.values() if isinstance(obs, _Channels)}
    tensors = {name: obs for name, obs in observers.items() if not isinstance(obs, _Channels)}
    ranges = {name: _select(obs, methods[name]) for name, obs in tensors.items()}
    ranges = _keep_saturation_bounds(graph, ranges, tensors, methods)
    observed = {name: (obs.min, obs.max) for name, obs in tensors.items()}
    labels = {name: methods[name].method.value for name in tensors}
    return Calibration(ranges, observed, labels, channels), _summary(plan, samples)


# -- shards -----------------------------------------------------------------------------------------


def _observe_sharded(
    graph: Graph, model: FloatModel, data: Any, plan: CalibrationPlan, channels: frozenset[str] = frozenset()
) -> dict[str, _Observer]:
    """Contiguous shards (whole batches) observed by `plan.workers` processes, merged in shard order.

    Workers are spawned (onnxruntime is not fork-safe) and get the model pickled: an OnnxFloat travels
    as its ONNX model and graph and rebuilds its session there."""
    import concurrent.futures
    import multiprocessing

    batches = -(-len(data) // plan.batch_size)
    per_worker = -(-batches // plan.workers) * plan.batch_size
    shards = [data.x[start : start + per_worker] for start in range(0, len(data), per_worker)]
    worker_plan = dataclasses.replace(plan, workers=1, progress=False)
    context = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(len(shards), mp_context=context) as pool:
        records = list(
            pool.map(
                _observe_shard,
                *zip(*[(graph, model, x, worker_plan, channels) for x in shards], strict=True),
            )
        )
    return _merged(records)


def _observe_shard(
    graph: Graph, model: FloatModel, x: np.ndarray, plan: CalibrationPlan, channels: frozenset[str]
) -> dict[str, Any]:
    from quantcore.data import DataSet

    observers = observe(graph, model, DataSet(x, None), plan, channels)
    return {name: _record(obs) for name, obs in observers.items()}


def _record(observer: _Observer) -> Any:
    """An observer as plain data for another process."""
    if isinstance(observer, _MinMax):
        return ("minmax", observer.name, observer.count, observer.min, observer.max)
    if isinstance(observer, _Channels):
        return ("channels", observer.name, observer.axis, observer.low, observer.high)
    return observer.to_dict()


def _merged(parts: list[dict[str, Any]]) -> dict[str, _Observer]:
    """The observers of every part (shard, rank), merged in the parts' order."""
    merged: dict[str, _Observer] = {}
    for records in parts:
        for name, record in records.items():
            observer = _from_record(record)
            if name not in merged:
                merged[name] = observer
            else:
                merged[name].merge(observer)  # type: ignore[arg-type]
    return merged


def _from_record(record: Any) -> _Observer:
    if isinstance(record, tuple) and record[0] == "channels":
        _, name, axis, low, high = record
        channels = _Channels(name, axis)
        channels.low, channels.high = low, high
        return channels
    if isinstance(record, tuple):
        _, name, count, lo, hi = record
        observer = _MinMax(name)
        observer.count, observer.min, observer.max = count, lo, hi
        return observer
    return Observer.from_dict(record)


def _summary(plan: CalibrationPlan, samples: int) -> dict[str, Any]:
    """The JSON 'calibration' entry: the method, its parameters if any layer uses them, per-layer choices."""
    summary: dict[str, Any] = {"method": plan.method.method.value, "samples": samples}
    for spec in (plan.method, *plan.per_layer.values()):
        summary.update({p: getattr(spec, p) for p in spec.method.parameters if p not in summary})
    if plan.per_layer:
        summary["per_layer"] = {k: v.method.value for k, v in plan.per_layer.items()}
    return summary


class _MinMax:
    """The running min and max of a tensor, with the Observer's checks (non-finite, empty)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.count = 0
        self.min = np.inf
        self.max = -np.inf

    def observe(self, batch: np.ndarray) -> None:
        values = np.asarray(batch, np.float32)
        lo, hi = float(values.min(initial=np.inf)), float(values.max(initial=-np.inf))
        if not (np.isfinite(lo) and np.isfinite(hi)) and values.size:
            bad = int(np.count_nonzero(~np.isfinite(values)))
            raise NonFiniteBatchError(self.name, bad, values.size)
        self.count += values.size
        self.min, self.max = min(self.min, lo), max(self.max, hi)

    def merge(self, other: _MinMax) -> None:
        """Add what `other` observed: min and max of floats are exact, whatever the order."""
        self.count += other.count
        self.min, self.max = min(self.min, other.min), max(self.max, other.max)


class _Channels:
    """The running per-channel min and max of a tensor along `axis` (float64, one entry per channel)."""

    def __init__(self, name: str, axis: int) -> None:
        self.name = name
        self.axis = axis
        self.low: np.ndarray | None = None
        self.high: np.ndarray | None = None

    def observe(self, batch: np.ndarray) -> None:
        # Reduced where the values lie, in their own precision: the min and max of floats are exact, so
        # widening after is the same as before, without a float64 copy of the batch.
        values = np.asarray(batch)
        axes = tuple(i for i in range(values.ndim) if i != self.axis)
        lo, hi = values.min(axis=axes).astype(np.float64), values.max(axis=axes).astype(np.float64)
        self.low = lo if self.low is None else np.minimum(self.low, lo)
        self.high = hi if self.high is None else np.maximum(self.high, hi)

    def merge(self, other: _Channels) -> None:
        """Add what `other` observed: elementwise min and max, exact whatever the order."""
        if other.low is None or other.high is None:
            return
        self.low = other.low if self.low is None else np.minimum(self.low, other.low)
        self.high = other.high if self.high is None else np.maximum(self.high, other.high)

    def ranges(self) -> tuple[np.ndarray, np.ndarray]:
        if self.low is None or self.high is None:
            raise EmptyObserverError(self.name)
        return self.low, self.high


_Observer = Observer | _MinMax | _Channels


def _select(observer: Observer | _MinMax, method: RangeMethod) -> tuple[float, float]:
    if isinstance(observer, _MinMax):
        if observer.count == 0:
            raise EmptyObserverError(observer.name)
        return containing_zero(observer.min, observer.max)
    return select_range(observer, method)


_COUNTING_METHODS = (Method.ENTROPY, Method.PERCENTILE)
"""Methods that clip by the shape or count of the histogram, blind to how much error a clip costs."""


def _keep_saturation_bounds(
    graph: Graph,
    ranges: dict[str, tuple[float, float]],
    observers: Mapping[str, Observer | _MinMax],
    methods: Mapping[str, RangeMethod],
) -> dict[str, tuple[float, float]]:
    """Never let entropy or percentile clip a fused ReLU6 / Clip output below the bound it piles up at.

    A bounded activation puts a large share of its values exactly at the bound (6 for ReLU6). Entropy
    reads that spike as a tail and cuts it - it chose [0, 0.92] for a ReLU6 layer of a MobileNetV2
    (6.3 dB) - which moves every saturated value; so for the counting methods the range keeps the bound
    whenever the observed values reach it. MSE weighs the cost of clipping the spike itself, and its
    choice stands: forcing the bound on it cost a depthwise Fashion-MNIST CNN 1 dB of output SQNR
    where few values reach 6.
    """
    result = dict(ranges)
    for node in graph.nodes:
        bound = _upper_bound(node)
        out = node.outputs[0]
        if bound is None or out not in result or methods[out].method not in _COUNTING_METHODS:
            continue
        lo, hi = result[out]
        reached = min(bound, observers[out].max)
        if hi < reached:
            result[out] = (lo, reached)
    return result


def _upper_bound(node: Node) -> float | None:
    activation = node.attr("activation", Activation.NONE)
    if activation is Activation.RELU6:
        return 6.0
    if activation is Activation.CLIP and node.attr("clip") is not None:
        hi = float(node.attr("clip")[1])
        return hi if np.isfinite(hi) else None
    return None


def _methods(graph: Graph, plan: CalibrationPlan) -> dict[str, RangeMethod]:
    by_tensor = {t.name: plan.method for t in graph.activations()}
    # An LSTM's cell state takes its min/max, as TFLite's quantizer does, whatever the method.
    by_tensor.update({key: RangeMethod(Method.MINMAX) for key in cell_state_nodes(graph)})
    for node in graph.nodes:
        if node.name in plan.per_layer:
            by_tensor[node.outputs[0]] = plan.per_layer[node.name]
    for name, method in plan.per_layer.items():
        if name in by_tensor:
            by_tensor[name] = method
    return by_tensor


def _progress(batches: Iterator[np.ndarray], total: int, plan: CalibrationPlan) -> Iterator[np.ndarray]:
    if not plan.progress:
        yield from batches
        return
    from rich.progress import Progress

    with Progress(transient=True) as bar:
        task = bar.add_task("calibrating", total=total)
        for batch in batches:
            yield batch
            bar.advance(task, len(batch))
