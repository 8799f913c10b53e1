"""The engine's driver: a float model in, a quant-params document and an evaluation report out.

graph = load_model(path)                    import (ONNX / PyTorch) and prepare (fold, fuse, NHWC)
calibration = calibrate(graph, data, ...)   observe every activation, pick ranges
qgraph = quantize_graph(graph, calibration) the int8 scheme: scales, int weights, kernel parameters
document = to_document(qgraph, ...)         the quant-params JSON
report = evaluate(model, document, data)    float (onnxruntime) vs int8 (reference), layer by layer
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from quantcore import loading
from quantcore.calibrate.calibration import Calibration
from quantcore.calibrate.collect import CalibrationPlan, calibrate
from quantcore.calibrate.method import RangeMethod
from quantcore.data import DataSet
from quantcore.errors import InputError
from quantcore.ir import Graph
from quantcore.ir.io_layout import to_firmware
from quantcore.kernels.blas import single_threaded
from quantcore.kernels.requantize import Rounding
from quantcore.passes.equalize import ChannelScaled, Equalized, equalize
from quantcore.quantize import channel_scales, lowering, mixed_precision
from quantcore.quantize.bias_correction import Prefix, correct_biases, with_corrections
from quantcore.quantize.document import (
    DocumentError,
    equalization_applied,
    finetuned_weights,
    float_graph_for,
    from_document,
    to_document,
)
from quantcore.quantize.graph import QuantConfig, quantize_graph
from quantcore.quantize.mixed_precision import Budget
from quantcore.runtime import int8_exec, tail
from quantcore.runtime.heap import reuse_freed_memory
from quantcore.runtime.ir_float import IrFloat
from quantcore.runtime.onnx_float import OnnxFloat
from quantcore.verify.evaluate import evaluate_graphs, float_outputs, part_samples
from quantcore.verify.metrics import output_sqnr_db
from quantcore.verify.report import EvaluationReport, json_db
from quantcore.verify.sensitivity import SensitivityReport, gradient_magnitudes, layer_sensitivity

if TYPE_CHECKING:
    from quantcore.cores import Core

SELECTION_SAMPLES = 256
"""Calibration samples the automatic choices (equalization) are scored on: output SQNR averages over
every output of every sample, so a few hundred decide as well as thousands, at a fraction of the time."""
KEPT_RUN_BYTES = 64 * 2**20
"""The int8 tensors of one graph's run over the selection samples kept for the next graph's (13 MiB on
MobileNetV2 with 100 samples); a larger run is not kept, the next one runs whole."""
EQUALIZE_SPREAD = 4.0
"""Auto mode scores equalization only when it would move some channel over 4x against another of the
same tensor. Below that a per-tensor scale loses under 2 bits on any channel to its widest neighbour;
on the benchmark's BatchNorm nets (spreads 1.2-2.5) equalizing lowered the output SQNR by 0.3-1.3 dB,
while the outlier net's 30-60x channels (spread ~60) went from 13 to 39 dB."""


@dataclass(frozen=True)
class QuantizeOptions:
    method: RangeMethod = field(default_factory=RangeMethod)
    """The calibration method for every activation not named in `per_layer`."""
    per_layer: Mapping[str, RangeMethod] = field(default_factory=dict)
    """Calibration method by layer (node) name or tensor name."""
    per_channel: bool = True
    rounding: Rounding = Rounding.DOUBLE
    int16_layers: frozenset[str] = frozenset()
    """Layers to run with int16 activations (CMSIS-NN's s16 kernels)."""
    equalize: bool | None = None
    """Cross-layer equalization: True/False force it; None (auto) keeps whichever of the two gives the
    higher output SQNR on the calibration set."""
    bias_correction: bool | None = None
    """Empirical bias correction (quantcore/quantize/bias_correction.py), forced or (None) automatic."""
    pool_as_depthwise: bool | None = None
    """Average pools run as depthwise convolutions: forced or (None) chosen by the rule of
    quantcore/quantize/lowering.py (SQNR gained against flash and RAM added on `core`)."""
    dw_channel_scales: bool | None = None
    """Per-channel scales for activations read only by depthwise convolutions: forced or (None) chosen
    by the rule of quantcore/quantize/channel_scales.py (kept where it raises the output SQNR)."""
    int16_output: bool | None = None
    """The graph output at int16 (its producer on an s16 kernel, its range widened by
    precision.INT16_OUTPUT_MARGIN): True/False force it; None (auto) keeps it where it raises the output
    SQNR on the calibration set and fits `budget`."""
    int16_auto: bool = False
    """Pick int16 tensors by sensitivity within `budget` (quantcore/quantize/mixed_precision.py), on top
    of `int16_layers`."""
    budget: Budget = field(default_factory=Budget)
    """The model's Flash (constants) and RAM (arena + scratch) budget for the automatic int16 choice."""
    core: str = "cortex-m4"
    """The core the memory of the automatic choices is costed for (scratch sizes differ per core)."""
    batch_size: int = 64
    progress: bool = False
    workers: int = 1
    """Calibration processes (sharded, merged exactly: the same result as one)."""


@dataclass(frozen=True)
class LoadedModel:
    path: Path
    graph: Graph
    """The prepared float graph (NHWC, BN folded, activations fused)."""
    float_model: OnnxFloat | IrFloat
    """onnxruntime on the ONNX model; the IR float executor for a .tflite (no onnxruntime for it)."""

    @property
    def fully_quantized(self) -> bool:
        """An int8 .tflite: its scales are TensorFlow's, so it is quantized without calibration."""
        return self.graph.meta.get("format") == "tflite" and bool(self.graph.meta.get("qdq"))


@dataclass(frozen=True)
class QuantizeResult:
    model: LoadedModel
    qgraph: Graph
    document: dict[str, Any]


def load_model(path: str | Path, batch: int = 1, started: loading.Loading | None = None) -> LoadedModel:
    """Import (the file read once, within quantcore.limits: the CLI, `fixpoint check` and the language
    server all load models here) and prepare; onnxruntime gets the bytes the importer checked.

    All of it runs in a child process first (quantcore/loading.py), onnxruntime's session included: a
    model that makes onnx's or onnxruntime's C++ code abort is a ModelError here. This process makes its
    own session only when the float model is first run. `started`: that child, forked by the caller
    (loading.start) before it imported this module, so that the two went on side by side."""
    started = loading.start(path, batch) if started is None else started
    graph, runnable = started.result()
    if runnable is None:
        return LoadedModel(started.path, graph, IrFloat(graph))
    return LoadedModel(started.path, graph, OnnxFloat(runnable, graph))


def quantize(
    model: LoadedModel, data: DataSet, options: QuantizeOptions = QuantizeOptions()
) -> QuantizeResult:
    """Calibrate and quantize; in auto mode each transform is kept only if it raises the output SQNR.

    Every combination of the transforms left open (equalization, bias correction) is quantized and
    scored on the first SELECTION_SAMPLES calibration samples; the best one is kept, and a tie leaves the
    model as it is (no transform). Within each, the average pools worth running as depthwise convolutions
    are chosen first (quantcore/quantize/lowering.py), on the same samples."""
    _check_pool_option(model, options)
    check_layer_methods(model, options.per_layer, "per_layer")
    # Calibration, the per-channel ranges, bias correction and the scores run the same batches through
    # the float model: onnxruntime runs each once.
    reusing = model.float_model.reusing() if isinstance(model.float_model, OnnxFloat) else nullcontext()
    # The int8 runs of the choices allocate and free the same large arrays layer after layer: kept
    # freed memory spares each its fresh pages (quantcore/runtime/heap.py; MobileNetV2's quantize
    # process: 0.26 -> 0.18 s of system time, median of 8).
    with reusing, reuse_freed_memory():
        return _quantized(model, data, options)


def _quantized(model: LoadedModel, data: DataSet, options: QuantizeOptions) -> QuantizeResult:
    plan = _calibration_plan(options)
    # The pools are substituted here, by lowering's rule, not by quantize_graph's default.
    config = QuantConfig(options.per_channel, options.rounding, options.int16_layers, lower_pools=False)
    equalized = equalize(model.graph)
    eq_choices = [False, True] if options.equalize is None else [options.equalize]
    if not equalized.pairs or (options.equalize is None and equalized.spread <= EQUALIZE_SPREAD):
        eq_choices = [False]  # nothing (worth) equalizing: no need to quantize and score twice
    bc_choices = [False, True] if options.bias_correction is None else [options.bias_correction]
    selection = _Selection(model, data.head(SELECTION_SAMPLES), options.batch_size)
    candidates: dict[tuple[bool, bool], _Candidate] = {}
    scored: dict[tuple[bool, bool], float] = {}
    for eq in eq_choices:
        graph, float_model = (equalized.graph, _equalized_float(model, equalized)) if eq else (
            model.graph, model.float_model)  # fmt: skip
        # The per-channel ranges _choose_channel_scales may need, from calibration's own pass.
        wanted = (
            channel_scales.possible(graph, lowering.imported(graph))
            if options.dw_channel_scales is not False
            else []
        )
        calibration, summary = calibrate(graph, float_model, data, plan, wanted)
        pools = _choose_pools(graph, calibration, config, selection, options)
        graph = lowering.substitute(graph, pools.substituted)
        calibration, channels = _choose_channel_scales(graph, calibration, config, pools, selection, options)
        qgraph = channels.qgraph
        for bc in bc_choices:
            corrected, prefix = qgraph, None
            corrections: Mapping[str, Any] = {}
            if bc:
                with _scoring_beside(selection, candidates.get((eq, False)), scored, (eq, False)):
                    corrected, corrections, outputs, prefix = correct_biases(
                        graph,
                        float_model,
                        qgraph,
                        selection.data,
                        options.batch_size,
                        keep=_output_cut(graph),
                    )
                selection.remember(corrected, outputs)
            candidates[(eq, bc)] = _Candidate(
                graph, float_model, calibration, corrected, summary, corrections, pools, channels, prefix
            )
    # Scored only when there is a choice to make.
    sqnr = (
        {k: scored[k] if k in scored else _score(selection, c) for k, c in candidates.items()}
        if len(candidates) > 1
        else {}
    )
    # Ties (and no choice at all) keep the model as it is: fewer transforms first.
    chosen = max(candidates, key=lambda k: (sqnr.get(k, 0.0), not k[0], not k[1]))
    best = candidates[chosen]
    eq, bc = chosen
    transforms = {
        "cross_layer_equalization": _equalization_entry(
            options.equalize, eq, equalized, _pair(sqnr, (False, bc), (True, bc))
        ),
        "bias_correction": _bias_correction_entry(
            options.bias_correction,
            bc,
            best.corrections,
            len(selection.data),
            _pair(sqnr, (eq, False), (eq, True)),
        ),
        "pool_as_depthwise": lowering.entry(options.pool_as_depthwise, best.pools, model.graph, options.core),
        "dw_channel_scales": channel_scales.entry(options.dw_channel_scales, best.channels),
    }
    # The int16 choices quantize again: with the per-channel scales the candidate was quantized with.
    config = dataclasses.replace(config, channel_scales=best.channels.applied)
    best, config, transforms["int16_output"] = _choose_output(
        best, selection, config, sqnr.get(chosen), options
    )
    qgraph, applied, mixed = best.qgraph, best.corrections, None
    if options.int16_auto:
        choice, applied = _choose_int16(best, selection, config, bc, options)
        qgraph = choice.qgraph
        mixed = mixed_precision.entry(choice, options.budget)
    if bc:  # the corrections of the graph chosen (int16 tensors change what the rounding shifts)
        transforms["bias_correction"]["layers"] = _correction_lists(applied)
    document = to_document(qgraph, best.summary, transforms, mixed_precision=mixed)
    return QuantizeResult(model, qgraph, document)


IMPORTED_CALIBRATION = {"method": "imported", "samples": 0}
"""The params JSON's calibration entry of a model whose ranges came with it (an int8 .tflite)."""


def quantize_imported(model: LoadedModel, rounding: Rounding = Rounding.DOUBLE) -> QuantizeResult:
    """An int8 .tflite: TensorFlow's scales, zero points, weights and biases kept, no calibration and no
    transform (equalization or bias correction would change the integers TFLM runs). The kernels'
    multipliers follow from those scales as TFLM computes them (quantcore/quantize/params.py:
    QuantizeMultiplier of double(s_in) * double(s_w) / double(s_out))."""
    config = QuantConfig(per_channel=True, rounding=rounding, lower_pools=False)
    qgraph = quantize_graph(model.graph, Calibration(ranges={}), config)
    return QuantizeResult(model, qgraph, to_document(qgraph, IMPORTED_CALIBRATION))


@contextlib.contextmanager
def _scoring_beside(
    selection: _Selection,
    candidate: _Candidate | None,
    scores: dict[tuple[bool, bool], float],
    key: tuple[bool, bool],
) -> Iterator[None]:
    """Score `candidate` (into scores[key]) in a second thread while the body runs: the graph without
    bias correction runs its int8 graph on the selection samples beside the correcting run, which shares
    nothing with it (its own graph; the float model's activations are read-only), instead of after it.
    The same figure as scored after it: a run's result does not depend on what ran before (quantcore/
    runtime/tail.py). Nothing else touches `selection` until the score is in (the body must not).
    On MobileNetV2 (100 samples) 0.1 s of a 0.9 s `fixpoint quantize` where a second core is free."""
    if candidate is None:
        yield
        return
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="fixpoint-score") as pool:
        score = pool.submit(_score, selection, candidate)
        yield
        scores[key] = score.result()


def _score(selection: _Selection, candidate: _Candidate) -> float:
    """The candidate's output SQNR on the selection samples; the pool rule's or the channel-scale
    rule's own figure when the candidate is the graph that rule chose and scored (no bias correction
    on top)."""
    for choice in (candidate.channels, candidate.pools):
        if candidate.qgraph is choice.qgraph and choice.sqnr is not None:
            return choice.sqnr
    return selection.sqnr(candidate.qgraph)


def check_layer_methods(model: LoadedModel, names: Iterable[str], what: str) -> None:
    """Refuse, before any work, a per-layer method for a name that is neither a layer (node) of the
    prepared graph nor one of its activation tensors; the message lists the names that are."""
    from quantcore.display import quoted

    layers = [node.name for node in model.graph.nodes]
    tensors = [t.name for t in model.graph.activations()]
    known = {*layers, *tensors}
    unknown = [name for name in names if name not in known]
    if unknown:
        raise InputError(
            f"{model.path.name}: {what} {', '.join(quoted(n) for n in unknown)}: no layer or activation"
            f" tensor of that name; layers: {', '.join(quoted(n) for n in layers)}; tensors:"
            f" {', '.join(quoted(n) for n in tensors)}"
        )


def _check_pool_option(model: LoadedModel, options: QuantizeOptions) -> None:
    if options.pool_as_depthwise and lowering.imported(model.graph):
        raise InputError(
            f"{model.path.name}: --pool-as-depthwise on: the model brings its own int8 scales (QDQ), which"
            " an average pool run as a depthwise convolution would not keep; use auto or off (its pools"
            " stay average pools either way)"
        )


def _choose_pools(
    graph: Graph,
    calibration: Calibration,
    config: QuantConfig,
    selection: _Selection,
    options: QuantizeOptions,
) -> lowering.Choice:
    """The average pools of `graph` to run as depthwise convolutions, and the graph quantized with them."""

    def build(pools: Mapping[str, str]) -> Graph:
        return quantize_graph(lowering.substitute(graph, pools), calibration, config)

    return lowering.choose(
        graph,
        calibration.ranges,
        options.pool_as_depthwise,
        build,
        selection.sqnr,
        functools.partial(_memory, core=_core(options)),
        options.budget,
    )


def _choose_channel_scales(
    graph: Graph,
    calibration: Calibration,
    config: QuantConfig,
    pools: lowering.Choice,
    selection: _Selection,
    options: QuantizeOptions,
) -> tuple[Calibration, channel_scales.Choice]:
    """The tensors read only by depthwise layers worth per-channel scales (quantcore/quantize/
    channel_scales.py), on `graph` with its pools substituted, and the calibration with their
    per-channel ranges (observed by calibrate's own pass: channel_scales.possible)."""
    found = (
        channel_scales.candidates(graph, lowering.imported(graph))
        if options.dw_channel_scales is not False
        else {}
    )
    found = {name: v for name, v in found.items() if name in calibration.ranges}
    # Calibration observed every tensor a candidate can be (channel_scales.possible): keep the candidates'.
    calibration = dataclasses.replace(calibration, channels={n: calibration.channels[n] for n in found})

    def build(names: frozenset[str]) -> Graph:
        chosen = dataclasses.replace(config, channel_scales=names)
        return quantize_graph(graph, calibration, chosen)

    noise = {name: _noise_db(calibration, name) for name in found}
    choice = channel_scales.choose(
        found, options.dw_channel_scales, build, selection.sqnr, (pools.qgraph, pools.sqnr), noise
    )
    return calibration, choice


def _noise_db(calibration: Calibration, name: str) -> float:
    """How much per-channel scales would lower the tensor's own quantization noise (channel_scales)."""
    from quantcore.scheme.qparams import quant_params

    lo, hi = calibration.ranges[name]
    scale, zero_point = quant_params(lo, hi)
    scales = channel_scales.channel_scales(scale, zero_point, (lo, hi), calibration.channels[name])
    return channel_scales.noise_db(scale, scales)


def _core(options: QuantizeOptions) -> Core:
    from quantcore.cores import Core

    return Core.from_label(options.core)


def _memory(qgraph: Graph, core: Core) -> mixed_precision.Memory:
    """The generated program's flash (constants) and RAM (arena + scratch) on `core`."""
    from quantcore.codegen.lower import lower

    plan = lower(qgraph, core=core)
    return mixed_precision.Memory(plan.weight_bytes, plan.arena.arena_bytes + plan.scratch_bytes)


def _choose_output(
    best: _Candidate,
    selection: _Selection,
    config: QuantConfig,
    base_sqnr: float | None,
    options: QuantizeOptions,
) -> tuple[_Candidate, QuantConfig, dict[str, Any]]:
    """The graph output at int16 (mixed_precision.output_move): in auto mode kept where it raises the
    output SQNR on the selection samples by MIN_GAIN_DB and fits the budget, forced by True. Returns the
    candidate chosen (its graph and bias corrections), the config the int16 choices after it start
    from, and the transforms.int16_output record. `base_sqnr`: the candidate's score, if measured."""
    mode = options.int16_output
    entry: dict[str, Any] = {"mode": _mode_label(mode), "applied": False}
    if mode is False:
        return best, config, entry
    move = mixed_precision.output_move(best.float_graph)
    if isinstance(move, str):
        if mode:
            raise InputError(f"{selection.model.path.name}: --int16-output on: {move}; use auto or off")
        return best, config, {**entry, "reason": mixed_precision.recorded(move)}
    entry["layers"] = sorted(move.layers)
    if move.layers <= config.int16_layers:
        return best, config, {**entry, "applied": True, "reason": "named by --int16"}
    corrections: dict[frozenset[str], Mapping[str, Any]] = {}

    def build(layers: frozenset[str]) -> Graph:
        if not layers:
            return best.qgraph
        wide = dataclasses.replace(config, int16_layers=config.int16_layers | layers)
        qgraph = quantize_graph(best.float_graph, best.calibration, wide)
        if not best.corrections:
            return qgraph
        # The layers before the output read the same int8 tensors: their corrections hold. The output
        # layer's is measured again (on lenet5 keeping it cost 1.5 dB of calibration output SQNR).
        kept = {name: c for name, c in best.corrections.items() if name not in layers}
        qgraph = with_corrections(best.float_graph, qgraph, kept)
        # Started from the int8 tensors the candidate's correcting run kept: only the tail runs.
        qgraph, measured, outputs, _ = correct_biases(
            best.float_graph,
            best.float_model,
            qgraph,
            selection.data,
            options.batch_size,
            only=layers,
            start=best.prefix,
        )
        selection.remember(qgraph, outputs)
        corrections[layers] = {name: measured.get(name, c) for name, c in best.corrections.items()}
        return qgraph

    def score(qgraph: Graph) -> float:
        known = qgraph is best.qgraph and base_sqnr is not None
        return base_sqnr if known and base_sqnr is not None else selection.sqnr(qgraph)

    memory = functools.partial(_memory, core=_core(options))
    if mode:  # forced: whatever it gains or costs
        choice = mixed_precision.choose([move], build, score, memory, Budget(), min_gain=-np.inf)
    else:
        choice = mixed_precision.choose([move], build, score, memory, options.budget)
    entry.update(mixed_precision.output_entry(choice))
    if not choice.layers:
        return best, config, entry
    chosen = dataclasses.replace(
        best, qgraph=choice.qgraph, corrections=corrections.get(choice.layers, best.corrections)
    )
    return chosen, dataclasses.replace(config, int16_layers=config.int16_layers | choice.layers), entry


def _output_cut(graph: Graph) -> frozenset[str]:
    """The tensors the int16-output trial's layers read (none without such a trial; `graph` the float
    graph, whose names the int8 graph keeps): kept by the candidate's correcting run, the trial's own run
    starts from them."""
    move = mixed_precision.output_move(graph)
    if isinstance(move, str):
        return frozenset()
    return frozenset(graph.node(name).inputs[0] for name in move.layers)


def _mode_label(mode: bool | None) -> str:
    return "auto" if mode is None else ("on" if mode else "off")


def _int16_builder(
    best: _Candidate,
    selection: _Selection,
    config: QuantConfig,
    bias_correction: bool,
    options: QuantizeOptions,
) -> tuple[Callable[[frozenset[str]], Graph], dict[frozenset[str], Mapping[str, Any]]]:
    """Quantize `best` with more int16 layers than `config` has (none: `best` as it is), bias corrected
    again when it was (int16 tensors change what each layer's rounding shifts); the corrections of every
    graph built, by its added layers."""
    corrections: dict[frozenset[str], Mapping[str, Any]] = {frozenset(): best.corrections}

    def build(layers: frozenset[str]) -> Graph:
        if not layers:
            return best.qgraph
        wide = dataclasses.replace(config, int16_layers=config.int16_layers | layers)
        qgraph = quantize_graph(best.float_graph, best.calibration, wide)
        if bias_correction:
            qgraph, corrections[layers], outputs, _ = correct_biases(
                best.float_graph, best.float_model, qgraph, selection.data, options.batch_size
            )
            selection.remember(qgraph, outputs)
        return qgraph

    return build, corrections


def _choose_int16(
    best: _Candidate,
    selection: _Selection,
    config: QuantConfig,
    bias_correction: bool,
    options: QuantizeOptions,
) -> tuple[mixed_precision.Choice, Mapping[str, Any]]:
    """The int16 tensors worth their memory (quantcore/quantize/mixed_precision.py), and the bias
    corrections of the graph chosen (int16 inputs change what each layer's rounding shifts)."""
    core = _core(options)
    report = layer_sensitivity(best.float_graph, best.qgraph, selection.data, batch_size=options.batch_size)
    ranking = [layer.name for layer in report.ranking() if layer.int16_capable]
    build, corrections = _int16_builder(best, selection, config, bias_correction, options)
    # A move whose layers are int16 already (named by --int16, or the int16 output) changes nothing.
    moves = [
        m for m in mixed_precision.moves(best.float_graph, ranking) if not m.layers <= config.int16_layers
    ]
    memory = functools.partial(_memory, core=core)
    choice = mixed_precision.choose(moves, build, selection.sqnr, memory, options.budget)
    return choice, corrections.get(choice.layers, {})


@dataclass(frozen=True)
class _Candidate:
    float_graph: Graph
    """The float graph it was quantized from (equalized or not, its chosen pools substituted)."""
    float_model: Any
    """What computes that graph's activations (onnxruntime, scaled by equalization's divisors if so)."""
    calibration: Calibration
    qgraph: Graph
    summary: dict[str, Any]
    corrections: Mapping[str, Any]
    pools: lowering.Choice
    channels: channel_scales.Choice
    prefix: Prefix | None = None
    """The int8 tensors the output layers read and the float means, from the bias-correcting run."""


def _calibration_plan(options: QuantizeOptions) -> CalibrationPlan:
    return CalibrationPlan(
        options.method, dict(options.per_layer), options.batch_size, options.progress, options.workers
    )


def _pair(
    sqnr: Mapping[tuple[bool, bool], float], off: tuple[bool, bool], on: tuple[bool, bool]
) -> dict[bool, float]:
    """The scores of a transform off and on, the other transform as chosen; empty unless both ran."""
    return {False: sqnr[off], True: sqnr[on]} if off in sqnr and on in sqnr else {}


def _equalized_float(model: LoadedModel, equalized: Equalized) -> ChannelScaled:
    return ChannelScaled(model.float_model, equalized.divisors)


class _Selection:
    """The samples automatic choices are scored on, and the float model's outputs on them - computed
    once, when the first candidate is scored, and shared by every choice that follows."""

    def __init__(self, model: LoadedModel, data: DataSet, batch_size: int) -> None:
        self.model, self.data, self.batch_size = model, data, batch_size
        self._known: list[tuple[Graph, np.ndarray]] = []
        self._last: tuple[Graph, dict[str, np.ndarray]] | None = None
        """The last graph run here and its int8 tensors on every sample (within KEPT_RUN_BYTES): the
        next graph scored, a trial that differs from it only from some layer on, runs from there."""

    def remember(self, qgraph: Graph, outputs: np.ndarray) -> None:
        """The int8 outputs of `qgraph` on these samples, computed elsewhere (bias correction's run)."""
        self._known.append((qgraph, outputs))

    def int8(self, qgraph: Graph) -> np.ndarray:
        for known, outputs in self._known:
            if known is qgraph:
                return outputs
        env = self._from_last(qgraph)
        if env is None:
            x = to_firmware(qgraph, qgraph.inputs[0], self.data.x)
            with single_threaded():
                env = int8_exec.run(qgraph, int8_exec.quantize_inputs(qgraph, {qgraph.inputs[0]: x}))
        kept = sum(v.nbytes for v in env.values()) <= KEPT_RUN_BYTES
        self._last = (qgraph, env) if kept else None
        out = qgraph.outputs[0]
        return int8_exec.dequantize_tensor(qgraph, out, env[out]).reshape(len(self.data), -1)

    def _from_last(self, qgraph: Graph) -> dict[str, np.ndarray] | None:
        """The int8 tensors of `qgraph` run from the tensors the last graph shares with it (quantcore/
        runtime/tail.py: the same bits as a whole run); None when its outputs need the input."""
        if self._last is None:
            return None
        graph, env = self._last
        given = tail.shared(graph, qgraph) & env.keys()
        needed = tail.needed(qgraph, given)
        if not needed.inputs <= given:
            return None
        rounding = Rounding(qgraph.meta.get("rounding", "double"))
        return tail.run(qgraph, {name: env[name] for name in given}, needed.names, rounding)

    @functools.cached_property
    def reference(self) -> np.ndarray:
        return float_outputs(self.model.float_model, self.model.graph, self.data, self.batch_size)

    def sqnr(self, qgraph: Graph) -> float:
        """Output SQNR of the int8 graph (the bit-exact reference) against the float model."""
        return output_sqnr_db([self.reference], [self.int8(qgraph)])


def _equalization_entry(
    mode: bool | None, applied: bool, equalized: Equalized, sqnr: Mapping[bool, float]
) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "mode": "auto" if mode is None else ("on" if mode else "off"),
        "applied": applied,
        "pairs": [[p.producer, p.consumer] for p in equalized.pairs],
        "spread": round(equalized.spread, 3),
    }
    if sqnr:
        entry["output_sqnr_db"] = _scores(sqnr)
    return entry


def _bias_correction_entry(
    mode: bool | None, applied: bool, corrections: Mapping[str, Any], samples: int, sqnr: Mapping[bool, float]
) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "mode": "auto" if mode is None else ("on" if mode else "off"),
        "applied": applied,
    }
    if applied:
        entry["samples"] = samples
        entry["layers"] = _correction_lists(corrections)
    if sqnr:
        entry["output_sqnr_db"] = _scores(sqnr)
    return entry


def _correction_lists(corrections: Mapping[str, Any]) -> dict[str, list[float]]:
    return {name: [float(v) for v in delta] for name, delta in corrections.items()}


def _scores(sqnr: Mapping[bool, float]) -> dict[str, float | None]:
    finite = {k: json_db(v) for k, v in sqnr.items()}
    return {"off": finite[False], "on": finite[True]}


def float_model_for(model: LoadedModel, document: Mapping[str, Any]) -> Any:
    """The float model whose activations match the graph the document's parameters belong to."""
    if equalization_applied(document):
        return _equalized_float(model, equalize(model.graph))
    return model.float_model


def evaluate(
    model: LoadedModel,
    document: Mapping[str, Any],
    data: DataSet,
    params_file: str = "",
    batch_size: int | None = None,
    progress: bool = False,
    finetuned: Mapping[str, Any] | None = None,
) -> EvaluationReport:
    """`batch_size`: samples per part (quantcore.verify.evaluate: part_samples by default). `finetuned`:
    the fine-tuned weights of a QAT document held in memory; by default they are read from the sidecar
    file next to `params_file`."""
    check_same_model(model, document, params_file)
    if finetuned is None and params_file:
        finetuned = finetuned_weights(document, params_file)
    qgraph = from_document(model.graph, document, finetuned)
    return evaluate_graphs(
        float_model_for(model, document),
        qgraph,
        data,
        model=model.path.name,
        params_file=params_file,
        batch_size=_whole_inferences(model.graph, batch_size or part_samples(qgraph)),
        progress=progress,
    )


def _whole_inferences(graph: Graph, batch_size: int) -> int:
    """A batch size of whole inferences (inference_rows), which a batch must not split."""
    rows = inference_rows(graph)
    return rows * max(1, batch_size // rows)


def inference_rows(graph: Graph) -> int:
    """The samples one inference of a recurrent graph takes: its input's first axis (1 for a batch of one;
    a time-major LSTM's time steps), which its recurrent layers run together; 1 for any other graph."""
    if not any(node.op.stateful for node in graph.nodes):
        return 1
    return max(1, graph.tensor(graph.inputs[0]).shape[0])


def sensitivity(
    model: LoadedModel,
    document: Mapping[str, Any],
    data: DataSet,
    params_file: str = "",
    gradients: bool = True,
    batch_size: int = 64,
    finetuned: Mapping[str, Any] | None = None,
) -> SensitivityReport:
    """Each layer quantized alone (quantcore/verify/sensitivity.py), on the float graph the document's
    parameters belong to; with `gradients` also the loss-gradient ranking (skipped without torch)."""
    check_same_model(model, document, params_file)
    if finetuned is None and params_file:
        finetuned = finetuned_weights(document, params_file)
    float_graph = float_graph_for(model.graph, document, finetuned)
    qgraph = from_document(model.graph, document, finetuned)
    magnitudes = gradient_magnitudes(float_graph, data, batch_size) if gradients and _has_torch() else None
    return layer_sensitivity(
        float_graph,
        qgraph,
        data,
        batch_size=batch_size,
        gradients=magnitudes,
        model=model.path.name,
        params_file=params_file,
    )


def _has_torch() -> bool:
    import importlib.util

    return importlib.util.find_spec("torch") is not None


def check_same_model(model: LoadedModel, document: Mapping[str, Any], params_file: str) -> None:
    """Refuse parameters computed for another model (or another version of this one)."""
    recorded, actual = document["model"]["sha256"], model.graph.meta.get("sha256")
    if actual and recorded != actual:
        raise DocumentError(
            f"{params_file or 'the parameters'}: made from a model with sha256 {recorded[:12]}..., but"
            f" {model.path.name} has sha256 {actual[:12]}...; re-run fixpoint quantize for this model"
        )


def first_input_shape(model: LoadedModel) -> tuple[int, ...]:
    """The model's input shape in its own layout (as data sets are given), batch first."""
    from quantcore.ir.io_layout import model_shape

    return model_shape(model.graph, model.graph.inputs[0])


def load_data(source: str | Path, graph: Graph) -> DataSet:
    """A data set for `graph`'s input (a model's or a quantized graph), checked against the shape and
    the layout the model file gives that input (quantcore.data)."""
    from quantcore import data
    from quantcore.ir.io_layout import model_layout, model_shape

    name = graph.inputs[0]
    layout = model_layout(graph, name)
    dataset = data.load(source, model_shape(graph, name), None if layout is None else layout.value)
    rows = inference_rows(graph)
    if len(dataset) % rows:
        raise InputError(
            f"{dataset.source}: {len(dataset)} samples; the model's input {list(graph.tensor(name).shape)}"
            f" takes {rows} per inference (one per time step of a time-major recurrent input), so give a"
            f" multiple of {rows}"
        )
    return dataset
