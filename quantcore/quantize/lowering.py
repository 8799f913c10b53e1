"""Average pools run as depthwise convolutions: why, when (the rule), and how a reader sees it.

Why. arm_avgpool_s8 keeps its input's scale and zero point. A global average pool typically averages a
wide ReLU output down to a narrow one (outlier net: range 1200 in, 486 out), so the pooled values use a
fraction of the int8 codes and the next layer reads them coarsely (-4 dB, -5 top-1 points there). A
depthwise convolution with all weights 1/(kh*kw) computes the same average exactly (each weight
quantizes to 127 at scale 1/(127*kh*kw)) and requantizes to the output's own range.

What it costs. The depthwise form carries constants the pool has not (kh*kw*C int8 weights, C int32
biases, C multipliers and C shifts), and CMSIS-NN's depthwise wrapper asks for more scratch than
arm_avgpool_s8 (C int32) on cores with DSP or MVE: for a window other than 3x3, kh*kw*C int16 on DSP
cores (arm_depthwise_conv_s8_opt), 4*124*kh*kw bytes on MVE (quantcore/codegen/buffers.py). On a
keyword-spotting net (a 25x5 pool over 64 channels) that is 8.8 KB more flash and the model's scratch
going from 256 to 16,000 B on Cortex-M4 and from 4,464 to 62,000 B on Cortex-M55, for +0.1 to +1.3 dB.

The rule (`fixpoint quantize --pool-as-depthwise auto`, the default):
- A pool is a candidate when it has no padding (only then is the depthwise form exact) and its input's
  calibrated range is at least NARROWING times its output's (below that its output loses less than one
  bit of int8 resolution to the shared scale).
- Candidates are tried in graph order, each on top of those kept before it: quantized, scored on the
  selection samples (output SQNR against the float model, as equalization and bias correction are
  chosen) and costed as the generated program for `--core` (constants = flash; arena + scratch = RAM).
- One is kept when it raises the output SQNR by at least MIN_GAIN_DB, adds at most BYTES_PER_DB bytes
  of flash + RAM per dB it gains, and keeps the program within --flash-budget / --ram-budget.
`on` substitutes every unpadded average pool whatever it gains or costs; `off` none. A model whose int8
parameters are imported (QDQ ONNX, int8 .tflite) is never substituted: its integers must stay its
source's.

How it shows. The layer keeps op "depthwise_conv2d" in the quant-params JSON (what generate, verify and
the editor's checks run), the JSON's transforms.pool_as_depthwise says which pools were substituted and
why, and the graph's node carries the attr AS_POOL, which `op_label` shows as
"avg_pool (as depthwise_conv2d: +2.31 dB)".
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from quantcore import display
from quantcore.errors import QuantcoreError
from quantcore.ir import Graph, Node, Op, Tensor
from quantcore.quantize.mixed_precision import Budget, Memory

NARROWING = 2.0
"""A pool is a candidate when its input's range is at least this many times its output's (one bit)."""
MIN_GAIN_DB = 0.1
"""Smaller output SQNR gains are within what the choice of selection samples moves."""
BYTES_PER_DB = 4096
"""The memory one dB of output SQNR is worth: a substitution may add this many bytes of flash + RAM per
dB it gains (a global pool over 8x8x12 adds ~2.4 KB on Cortex-M4 and needs 0.6 dB; the keyword-spotting
net's 25x5x64 pool adds ~25 KB and would need 6 dB)."""
FORCED = "forced on"
"""Why a pool was substituted under `--pool-as-depthwise on`."""
AS_POOL = "as_pool"
"""Node attr of a depthwise convolution that stands for an average pool: why it was substituted."""
WHY_SHOWN_CHARS = 80
"""A reason longer than this (only a hand-edited file has one) is shortened where a layer is named."""


def candidates(graph: Graph, ranges: Mapping[str, tuple[float, float]], forced: bool = False) -> list[str]:
    """The average pools that may run as depthwise convolutions, in graph order: unpadded ones whose
    range narrows NARROWING times (every unpadded one when `forced`); none when the model's int8
    parameters are imported."""
    if imported(graph):
        return []
    return [
        node.name
        for node in graph.nodes
        if node.op is Op.AVG_POOL
        and not any(node.attr("pads", (0, 0, 0, 0)))
        and (forced or range_ratio(node, ranges) >= NARROWING)
    ]


def imported(graph: Graph) -> bool:
    """The model brought its own int8 parameters (QDQ ONNX, int8 .tflite): they must stay as they are."""
    return bool(graph.meta.get("qdq"))


def range_ratio(node: Node, ranges: Mapping[str, tuple[float, float]]) -> float:
    """How many times wider the pool's input range is than its output's (0 when either is unknown)."""
    if node.inputs[0] not in ranges or node.outputs[0] not in ranges:
        return 0.0
    lo_in, hi_in = ranges[node.inputs[0]]
    lo_out, hi_out = ranges[node.outputs[0]]
    return (hi_in - lo_in) / (hi_out - lo_out) if hi_out - lo_out > 0 else 0.0


def lower_narrowing_pools(graph: Graph, ranges: Mapping[str, tuple[float, float]]) -> Graph:
    """Every candidate substituted (quantize_graph's default, for callers that score nothing)."""
    return substitute(graph, candidates(graph, ranges))


def substitute(graph: Graph, names: Mapping[str, str] | list[str], why: str = "") -> Graph:
    """The graph with the named average pools as depthwise convolutions; `names` may map each to why."""
    for name in names:
        reason = names[name] if isinstance(names, Mapping) else why
        graph = avgpool_as_depthwise(graph, graph.node(name), reason)
    return graph


def avgpool_as_depthwise(graph: Graph, node: Node, why: str = "") -> Graph:
    """Replace an unpadded AVG_POOL by the equivalent DEPTHWISE_CONV2D (same name, same tensors)."""
    kh, kw = node.attr("kernel")
    channels = graph.tensor(node.inputs[0]).shape[-1]
    w_name, b_name = f"{node.name}.mean_weights", f"{node.name}.mean_bias"
    weights = np.full((1, kh, kw, channels), 1.0 / (kh * kw), np.float32)
    graph = graph.with_tensors(
        Tensor(w_name, weights.shape, data=weights),
        Tensor(b_name, (channels,), data=np.zeros(channels, np.float32)),
    )
    attrs = {k: v for k, v in node.attrs.items() if k not in ("count_include_pad", "ceil_pads")}
    attrs[AS_POOL] = why
    dw = Node(node.name, Op.DEPTHWISE_CONV2D, (node.inputs[0], w_name, b_name), node.outputs, attrs)
    return graph.replace_node(node, [dw])


def op_label(node: Node) -> str:
    """The op as a reader should see it: "avg_pool (as depthwise_conv2d: <why>)" for a substituted pool."""
    if AS_POOL not in node.attrs:
        return node.op.json_name
    why = display.shown(str(node.attr(AS_POOL)), WHY_SHOWN_CHARS)  # from a params file: one short line
    return f"avg_pool (as {node.op.json_name}: {why})" if why else f"avg_pool (as {node.op.json_name})"


# -- the rule ---------------------------------------------------------------------------------------


def refusal(gain_db: float, added: Memory) -> str | None:
    """Why a substitution that gains `gain_db` and adds `added` is not worth it (None: it is)."""
    if not gain_db >= MIN_GAIN_DB:  # also NaN: nothing to gain on a model quantized without error
        return f"gain {gain_db:+.2f} dB < {MIN_GAIN_DB} dB"
    cost = max(added.flash, 0) + max(added.ram, 0)
    if cost > gain_db * BYTES_PER_DB:
        return f"{cost} B for {gain_db:+.2f} dB > {BYTES_PER_DB} B per dB"
    return None


@dataclass
class Choice:
    """The pools substituted, the graph quantized with them, and one record per pool considered."""

    qgraph: Graph
    layers: dict[str, dict[str, Any]] = field(default_factory=dict)
    sqnr: float | None = None
    """The output SQNR of `qgraph` on the selection samples, when the rule scored it."""

    @property
    def substituted(self) -> dict[str, str]:
        """Pool name -> why, for the pools substituted."""
        return {name: r["why"] for name, r in self.layers.items() if r["substituted"]}


def choose(
    graph: Graph,
    ranges: Mapping[str, tuple[float, float]],
    mode: bool | None,
    build: Callable[[Mapping[str, str]], Graph],
    score: Callable[[Graph], float],
    memory: Callable[[Graph], Memory],
    budget: Budget,
) -> Choice:
    """Apply the rule of the module docstring (`mode` None) or force it (True/False). `build` quantizes
    with the given pools substituted; `score` is the output SQNR on the selection samples; `memory` the
    generated program's flash and RAM on the target core."""
    names = candidates(graph, ranges, forced=mode is True) if mode is not False else []
    if mode is True:
        chosen = dict.fromkeys(names, FORCED)
        return Choice(build(chosen), {name: _record(graph, name, ranges, True, FORCED) for name in names})
    qgraph = build({})
    if not names:
        return Choice(qgraph)
    try:
        cost = memory(qgraph)
    except QuantcoreError as err:  # the model as quantized cannot be generated: nothing to cost against
        why = f"kept: the memory cost cannot be measured ({err})"
        return Choice(qgraph, {name: _record(graph, name, ranges, False, why) for name in names})
    sqnr = score(qgraph)
    layers: dict[str, dict[str, Any]] = {}
    kept: dict[str, str] = {}  # the substituted pools so far -> why (Choice.substituted of `layers`)
    for name in names:
        try:
            trial = build({**kept, name: ""})
            trial_cost = memory(trial)
        except QuantcoreError as err:  # a form the kernels or the code generator refuse
            layers[name] = _record(graph, name, ranges, False, str(err))
            continue
        trial_sqnr = score(trial)
        added = Memory(trial_cost.flash - cost.flash, trial_cost.ram - cost.ram)
        gain = trial_sqnr - sqnr
        reason = budget.problem(trial_cost.flash, trial_cost.ram) or refusal(gain, added)
        why = f"{gain:+.2f} dB for {max(added.flash, 0) + max(added.ram, 0)} B" if reason is None else reason
        layers[name] = _record(graph, name, ranges, reason is None, why)
        layers[name]["output_sqnr_db"] = {"off": _db(sqnr), "on": _db(trial_sqnr)}
        layers[name]["added_bytes"] = {"flash": added.flash, "ram": added.ram}
        if reason is None:
            qgraph, sqnr, cost = trial, trial_sqnr, trial_cost
            kept[name] = why
    return Choice(_with_reasons(qgraph, kept), layers, sqnr)


def _db(value: float) -> float | None:
    """A dB figure for the JSON: None for an infinite one (no error)."""
    return round(value, 3) if math.isfinite(value) else None


def _with_reasons(qgraph: Graph, reasons: Mapping[str, str]) -> Graph:
    """The substituted nodes' AS_POOL attr set to why they were kept (unknown while they were tried)."""
    nodes = [n.with_attrs(**{AS_POOL: reasons[n.name]}) if n.name in reasons else n for n in qgraph.nodes]
    return qgraph.evolve(nodes=nodes)


def _record(
    graph: Graph, name: str, ranges: Mapping[str, tuple[float, float]], substituted: bool, why: str
) -> dict[str, Any]:
    return {
        "substituted": substituted,
        "range_ratio": round(range_ratio(graph.node(name), ranges), 3),
        "why": why,
    }


def entry(mode: bool | None, choice: Choice, graph: Graph, core: str) -> dict[str, Any]:
    """The quant-params JSON's transforms.pool_as_depthwise."""
    record: dict[str, Any] = {
        "mode": "auto" if mode is None else ("on" if mode else "off"),
        "applied": bool(choice.substituted),
    }
    if imported(graph):
        record["imported"] = True
    if mode is None:
        record["core"] = core
    record["layers"] = choice.layers
    return record


def substituted_in(doc: Mapping[str, Any]) -> dict[str, str]:
    """Pool name -> why, as transforms.pool_as_depthwise records them ({} for a file written before it)."""
    layers = doc.get("transforms", {}).get("pool_as_depthwise", {}).get("layers", {})
    return {name: str(r.get("why", "")) for name, r in layers.items() if r.get("substituted")}
