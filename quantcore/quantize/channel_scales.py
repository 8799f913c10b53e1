"""Per-channel activation scales into depthwise convolutions: why, which tensors, the scales, the rule.

Why. A depthwise convolution's output channel c reads only its own input channel (c // ch_mult), so the
input needs no common scale: with one scale s_in[c] per channel, the depthwise layer's per-channel
multipliers absorb it (M[c] = s_in[c // m] * s_w[c] / s_out, bias_q[c] = round(b[c] / (s_in[c // m] *
s_w[c]))), and the producing convolution, which has per-channel multipliers already, writes each channel
at its own scale (M[c] = s_in * s_w[c] / s_out[c]). No kernel changes: only the integers of the two
layers. The zero point stays one per tensor (CMSIS-NN's kernels take one input and one output offset), so
a channel whose values span a tenth of the tensor's range gets ten times finer codes, as NNCF's
per-channel activation quantization would, but within CMSIS-NN's scheme.

Which tensors (`candidates`), conservatively:
- produced by a CONV2D or DEPTHWISE_CONV2D layer with int8 output (its multipliers are per channel), and
- read only by DEPTHWISE_CONV2D layers, as their data input (no pad, pool, reshape, add, concat or graph
  output in between: each of those would need the one scale its kernel takes), and
- not a graph input or output, not in a group of tensors that share qparams, and not from a model whose
  int8 parameters are imported (their integers stay their source's).

The scales (`channel_scales`). The tensor's own range (its calibration method's) gives the shared zero
point zp as before. Each channel's range is the per-channel min/max of the calibration activations,
clipped to the tensor's range (a method that clips the tensor, e.g. percentile, clips every channel
too), and its scale is the smallest that represents that range around zp:
    s[c] = max(hi[c] / (127 - zp), lo[c] / (-128 - zp))
floored at the tensor's scale / MAX_RATIO (a channel that was (almost) always zero would otherwise get a
scale that overflows its reader's int32 bias or the producer's multiplier shift). s[c] <= the tensor's
scale, so no channel loses resolution.

Fused activations. act_min/act_max are integer codes, one per layer, and the zero point is shared: a
ReLU clamp (at zp) and no clamp stay the same for every channel. A clamp at a real value (ReLU6 at 6,
Clip) lands on a different code per channel; when those codes differ the tensor keeps its per-tensor
scale (the layer refuses, with the reason recorded). With the min/max ranges of a ReLU6 output every
channel's 6.0 lies at or beyond code 127, so all clamp at 127 and the transform applies.

The rule (`fixpoint quantize --dw-channel-scales auto`, the default): a candidate is tried only when its
per-channel scales lower the tensor's own quantization noise (the mean of s[c]^2 against the shared
scale's) by at least NOISE_DB; those are tried in graph order, each on top of those kept before it,
quantized and scored on the selection samples (output SQNR against the float model, as equalization,
bias correction and the pools are chosen); one is kept when it raises the output SQNR by at least
MIN_GAIN_DB. Both bars come from the benchmark nets (100 calibration images, 10,000 test images): smaller
gains, measured on the samples the per-channel ranges were fitted to, did not carry over to unseen data
(MobileNetV2: +0.81 dB on the calibration samples from two tensors at 2.6 and 3.5 dB less noise, -0.06 dB
and -0.1 top-1 points on the test set), while the DS-CNN's first tensor (5.5 dB less noise, +1.97 dB on
the calibration samples) gained +2.5 dB on the test set. The bar on the noise also keeps the scoring
cheap: a tensor below it costs no quantization and no scoring. `on` gives every candidate per-channel
scales (those a fused clamp refuses excepted), `off` none. transforms.dw_channel_scales in the
quant-params JSON lists every candidate, whether it has per-channel scales and why.

Top-1 (bench/fashion_mnist/dw_channel_scales.py --calib-sets 10 --held-out). On the DS-CNN, over 10
disjoint calibration sets of 100 images, auto - off was -0.063 top-1 points on t10k (9 sets lower) and
-0.036 on 9,000 held-out train-split images (7 lower, 2 higher), for +2.50 and +2.39 dB; over those
19,000 images -0.050 points, 95 % bootstrap interval [-0.111, +0.011]: within what the choice of
evaluation images moves (without bias correction the same transform gave -0.078 on t10k and +0.039
held out). The images that change class are near-ties of the float model (its two highest logits
0.06 apart at the median, 0.32 at most, against 4.7 over all images), and auto agrees with the float
model more (99.46 -> 99.58 % on t10k, 99.47 -> 99.58 % held out); calibration data have no labels, so
no rule here could see a top-1 cost anyway. Widening each channel's range x1.25, or flooring its scale
at the tensor's / 4, gave -0.067 and -0.079 points over the 19,000 images for about the same SQNR, so
the ranges stay min/max (clipped to the tensor's) and MAX_RATIO stays 256. The example net
(--models examples/fashion/model.onnx --method mse --calib 300 --calib-sets 3) gained +0.087 points on
t10k (3 of 3 sets higher) and +0.011 held out, for +4.4 dB: its one image of 500 lost is noise of the 500.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from quantcore.errors import QuantcoreError
from quantcore.ir import DType, Graph, Op

MIN_GAIN_DB = 1.0
"""Smaller output SQNR gains on the calibration samples did not carry over to the test set (docstring)."""
NOISE_DB = 5.0
"""A tensor is tried only when its per-channel scales lower its own quantization noise this much."""
MAX_RATIO = 256.0
"""A channel's scale is at least the tensor's / MAX_RATIO: eight bits finer than the tensor's is more
than int8 can use, and a smaller scale would blow up the reader's bias and the producer's multiplier."""
AXIS = 3
"""Activations are NHWC: channel scales run along the last axis."""
FORCED = "forced on"
_PRODUCERS = (Op.CONV2D, Op.DEPTHWISE_CONV2D)


def candidates(graph: Graph, imported: bool = False) -> dict[str, tuple[str, list[str]]]:
    """Tensor -> (producer, depthwise readers) for every tensor that may take per-channel scales (the
    conditions of the module docstring), in graph order."""
    if imported:
        return {}
    from quantcore.quantize.graph import activation_groups

    groups = activation_groups(graph)
    shared = {g for g in groups.values() if sum(1 for v in groups.values() if v == g) > 1}
    ends = {*graph.inputs, *graph.outputs}
    result: dict[str, tuple[str, list[str]]] = {}
    for node in graph.nodes:
        name = node.outputs[0]
        tensor = graph.tensor(name)
        if node.op not in _PRODUCERS or name in ends or groups.get(name) in shared:
            continue
        if tensor.dtype is DType.INT16 or len(tensor.shape) != 4:
            continue
        readers = [n for n in graph.nodes if name in n.inputs]
        if readers and all(n.op is Op.DEPTHWISE_CONV2D and n.inputs.index(name) == 0 for n in readers):
            result[name] = (node.name, [n.name for n in readers])
    return result


def possible(graph: Graph, imported: bool = False) -> list[str]:
    """Every 4-D activation a depthwise convolution or an average pool reads as its data: the candidates
    of `graph` with any of its pools substituted by depthwise layers are among these, so calibration
    collects their per-channel ranges before the pools are chosen."""
    if imported:
        return []
    acts = {t.name for t in graph.activations()}
    readers = (n for n in graph.nodes if n.op in (Op.DEPTHWISE_CONV2D, Op.AVG_POOL) and n.inputs)
    names = {n.inputs[0] for n in readers if n.inputs[0] in acts}
    return [t.name for t in graph.activations() if t.name in names and len(t.shape) == 4]


def noise_db(scale: float, scales: np.ndarray) -> float:
    """How much the per-channel `scales` lower a tensor's quantization noise against the one `scale`
    (dB, positive = less): rounding noise is s^2 / 12 per value, so the ratio of the mean s[c]^2 to
    s^2 (channels counted alike, as every channel has the same number of values)."""
    return float(-10.0 * np.log10(np.mean((np.asarray(scales, np.float64) / scale) ** 2)))


def channel_scales(
    scale: float, zero_point: int, tensor_range: tuple[float, float], channels: tuple[np.ndarray, np.ndarray]
) -> np.ndarray:
    """Each channel's scale around the shared zero point (module docstring): the smallest representing
    its range clipped to the tensor's, at least scale / MAX_RATIO and at most `scale`."""
    lo_t, hi_t = tensor_range
    lo = np.clip(np.minimum(channels[0], 0.0), min(lo_t, 0.0), 0.0)
    hi = np.clip(np.maximum(channels[1], 0.0), 0.0, max(hi_t, 0.0))
    up = hi / (127 - zero_point) if zero_point < 127 else np.zeros_like(hi)
    down = lo / (-128 - zero_point) if zero_point > -128 else np.zeros_like(lo)
    scales: np.ndarray = np.clip(np.maximum(up, down), scale / MAX_RATIO, scale).astype(np.float64)
    return scales


# -- the rule ---------------------------------------------------------------------------------------


@dataclass
class Choice:
    """The tensors given per-channel scales, the graph quantized with them, one record per candidate."""

    qgraph: Graph
    tensors: dict[str, dict[str, Any]] = field(default_factory=dict)
    sqnr: float | None = None

    @property
    def applied(self) -> frozenset[str]:
        return frozenset(name for name, r in self.tensors.items() if r["per_channel"])


def choose(
    found: Mapping[str, tuple[str, list[str]]],
    mode: bool | None,
    build: Callable[[frozenset[str]], Graph],
    score: Callable[[Graph], float],
    baseline: tuple[Graph, float | None],
    noise: Mapping[str, float] | None = None,
) -> Choice:
    """Apply the rule of the module docstring (`mode` None) or force it (True) or not (False). `build`
    quantizes with the given tensors per channel; `baseline` is the graph without any (and its score,
    when known); `noise` each candidate's noise_db (a candidate without one is tried)."""
    qgraph, sqnr = baseline
    if mode is False or not found:
        return Choice(qgraph, {}, sqnr)
    kept: frozenset[str] = frozenset()
    records: dict[str, dict[str, Any]] = {}
    for name, (producer, readers) in found.items():
        record: dict[str, Any] = {"producer": producer, "readers": readers}
        less = (noise or {}).get(name)
        if less is not None:
            record["noise_db"] = round(less, 3)
        if mode is None and less is not None and not less >= NOISE_DB:
            why = f"kept per-tensor: its noise falls {less:.2f} dB < {NOISE_DB} dB"
            records[name] = {**record, "per_channel": False, "why": why}
            continue
        if sqnr is None and mode is None:
            sqnr = score(qgraph)
        try:
            trial = build(kept | {name})
        except QuantcoreError as err:  # a fused clamp that differs per channel, a scale out of range
            records[name] = {**record, "per_channel": False, "why": f"kept per-tensor: {err}"}
            continue
        if mode is True:
            qgraph, kept = trial, kept | {name}
            records[name] = {**record, "per_channel": True, "why": FORCED}
            continue
        assert sqnr is not None
        trial_sqnr = score(trial)
        gain = trial_sqnr - sqnr
        keep = gain >= MIN_GAIN_DB  # also False for NaN
        why = f"{gain:+.2f} dB" if keep else f"kept per-tensor: gain {gain:+.2f} dB < {MIN_GAIN_DB} dB"
        records[name] = {**record, "per_channel": keep, "why": why}
        records[name]["output_sqnr_db"] = {"off": _db(sqnr), "on": _db(trial_sqnr)}
        if keep:
            qgraph, sqnr, kept = trial, trial_sqnr, kept | {name}
    return Choice(qgraph, records, sqnr if mode is None else None)


def _db(value: float) -> float | None:
    return round(value, 3) if math.isfinite(value) else None


def entry(mode: bool | None, choice: Choice) -> dict[str, Any]:
    """The quant-params JSON's transforms.dw_channel_scales."""
    return {
        "mode": "auto" if mode is None else ("on" if mode else "off"),
        "applied": bool(choice.applied),
        "tensors": choice.tensors,
    }
