"""A prepared float graph as a torch module that computes with CMSIS-NN's int8 scheme (DOMAIN.md section 2)
in floats - fake quantization - at exactly the places quantcore.quantize.graph quantizes:

- every activation tensor is rounded to its group's grid, real = s * (q - zp), q in [-128, 127], with
  (s, zp) = quant_params(lo, hi) of the group's learned range; tensors that quantize_graph makes share
  qparams (through pools, reshape, pad, transpose, concat) share one learned range, and a softmax output
  is fixed at (1/256, -128);
- weights are symmetric narrow-range: q = round(w / s_w) in [-127, 127], s_w = max|w| / 127 per output
  channel (or per tensor); biases are rounded at s_in * s_w;
- a fused ReLU/ReLU6/clip becomes, as in the int8 kernels, a clamp on the output's grid.

Weight and bias codes are computed in float64 with the same operations as quantcore.scheme.arith, and
scales with the same operations as quant_params, so the integers this module trains with are the
integers quantize_graph computes from the learned ranges and the trained weights (the tests check they
are equal). Rounding is half away from zero (TFLite's); gradients pass it straight through (STE), and
reach each range through the scale as in LSQ (Esser et al. 2020): inside the range round(x/s) - x/s,
outside it the clamped code's distance to the zero point.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import torch

from quantcore.ir import Graph, Node, Op
from quantcore.quantize.graph import SOFTMAX_OUTPUT, activation_groups
from quantcore.runtime.torch_ops import OPS
from quantcore.scheme.arith import WEIGHT_QMAX
from quantcore.scheme.qparams import DEGENERATE_SCALE, INT8_MAX, INT8_MIN, MIN_SCALE, quant_params

_ON_GRID = (Op.MAX_POOL, Op.RESHAPE, Op.PAD, Op.TRANSPOSE, Op.CONCAT, Op.IDENTITY)
"""Ops whose output values are already codes of the input's grid (the group's): no rounding needed."""
_WEIGHTED = (Op.CONV2D, Op.DEPTHWISE_CONV2D, Op.FULLY_CONNECTED)


class QatError(Exception):
    """Raised for graphs fake quantization cannot train (quantcore.qat.train turns it into a clear error)."""


def round_half_away(x: torch.Tensor) -> torch.Tensor:
    return torch.sign(x) * torch.floor(torch.abs(x) + 0.5)


def _round_ste(x: torch.Tensor) -> torch.Tensor:
    """Rounded values forward, the identity's gradient backward."""
    return x + (round_half_away(x) - x).detach()


def weight_axis(node: Node) -> int:
    """The output-channel axis of a layer's weights (depthwise: (1, kh, kw, C*m), else channels first)."""
    return 3 if node.op is Op.DEPTHWISE_CONV2D else 0


def weight_scales(w: torch.Tensor, axis: int | None) -> torch.Tensor:
    """max|w| / 127 per channel (float64, no gradient), 1 for an all-zero channel: scheme.weight_scales."""
    a = w.detach().double().abs()
    peak = a.max() if axis is None else a.movedim(axis, 0).reshape(a.shape[axis], -1).amax(dim=1)
    return torch.where(peak > 0, peak / WEIGHT_QMAX, torch.ones_like(peak))


def weight_codes(w: torch.Tensor, scales: torch.Tensor, axis: int | None) -> torch.Tensor:
    """The int8 weight codes (as float64): scheme.quantize_weights."""
    shape = [1] * w.ndim
    if axis is not None:
        shape[axis] = -1
    return torch.clamp(
        round_half_away(w.detach().double() / scales.reshape(shape)), -WEIGHT_QMAX, WEIGHT_QMAX
    )


def bias_codes(b: torch.Tensor, bias_scales: torch.Tensor) -> torch.Tensor:
    """The int32 bias codes (as float64): scheme.quantize_bias with s_in * s_w precomputed."""
    return torch.clamp(round_half_away(b.detach().double() / bias_scales), -(2.0**31), 2.0**31 - 1)


@dataclass(frozen=True)
class Grid:
    """One activation grid: the scale as a float64 tensor (carries the range's gradient) and the zero
    point as an int."""

    scale: torch.Tensor
    zero_point: int

    def fake_quantize(self, x: torch.Tensor) -> torch.Tensor:
        s = self.scale.to(x.dtype)
        q = torch.clamp(_round_ste(x / s) + self.zero_point, INT8_MIN, INT8_MAX)
        return (q - self.zero_point) * s


class FakeQuantNet(torch.nn.Module):
    """The graph's function with fake quantization; `quantize=False` runs it in plain floats (the teacher).

    `ranges`: the starting (lo, hi) of every activation tensor (calibration's), merged per group as
    quantize_graph merges them. `frozen`: constants that are not trained (e.g. the 1/(kh*kw) weights of
    an average pool the quantizer runs as a depthwise convolution)."""

    start: torch.Tensor
    """(groups, 2) float64: each group's starting (lo, hi), widened to contain 0."""
    width: torch.Tensor
    learnable: torch.Tensor

    def __init__(
        self,
        graph: Graph,
        ranges: Mapping[str, tuple[float, float]],
        per_channel: bool = True,
        frozen: frozenset[str] = frozenset(),
        quantize: bool = True,
    ) -> None:
        super().__init__()
        imported = [t.name for t in graph.activations() if t.quant is not None]
        if imported:
            raise QatError(
                f"tensor {imported[0]!r} already has a scale (a quantized QDQ model): quantization-aware"
                " training starts from the float model"
            )
        self.graph, self.per_channel, self.quantize = graph, per_channel, quantize
        self.trainable = [
            name
            for node in graph.nodes
            if node.op in _WEIGHTED
            for name in node.inputs[1:]
            if name and name not in frozen
        ]
        self.weights = torch.nn.ParameterList(
            torch.nn.Parameter(torch.tensor(np.asarray(graph.constant(n), np.float32)))
            for n in self.trainable
        )
        self._index = {name: i for i, name in enumerate(self.trainable)}
        self._constants = {
            name: torch.tensor(np.asarray(t.data, np.float32))
            for name, t in graph.tensors.items()
            if t.data is not None and name not in self._index
        }
        self.groups = activation_groups(graph)
        """Activation tensor -> the root of the group sharing its qparams (quantize_graph's groups)."""
        self.fixed = {self.groups[n.outputs[0]] for n in graph.nodes if n.op is Op.SOFTMAX}
        self.roots = sorted({g for g in self.groups.values() if g not in self.fixed})
        """The groups with a learned range, in the row order of `start` and `range_offsets`."""
        start = np.array([_group_span(self.groups, ranges, root) for root in self.roots], np.float64)
        start = start.reshape(-1, 2)
        self.register_buffer("start", torch.tensor(start))
        # Ranges are learned as offsets in units of their starting width (one learning rate fits every
        # tensor); an end at 0 (a ReLU output's lower end) stays there: zero must stay exact.
        width = np.maximum(start[:, 1] - start[:, 0], MIN_SCALE)
        self.register_buffer("width", torch.tensor(width).reshape(-1, 1))
        learnable = np.stack([start[:, 0] < 0, start[:, 1] > 0], axis=1)
        self.register_buffer("learnable", torch.tensor(learnable, dtype=torch.float64))
        self.range_offsets = torch.nn.Parameter(torch.zeros_like(self.start))
        self._row = {root: i for i, root in enumerate(self.roots)}

    # -- the learned quantities --------------------------------------------------------------------

    def spans(self) -> torch.Tensor:
        """(groups, 2) float64: each group's range widened to contain 0, as quant_params widens it."""
        raw = self.start + self.range_offsets * self.width * self.learnable
        lo = torch.clamp(raw[:, 0], max=0.0)
        hi = torch.clamp(raw[:, 1], min=0.0)
        return torch.stack([lo, hi], dim=1)

    def grids(self) -> dict[str, Grid]:
        """Group root -> its grid now; the scale is quant_params' value, computed the same way."""
        spans = self.spans()
        grids = {}
        values = spans.detach().cpu().tolist()
        for root, row in self._row.items():
            lo, hi = spans[row, 0], spans[row, 1]
            _, zero_point = quant_params(*values[row])
            scale = torch.clamp((hi - lo) / (INT8_MAX - INT8_MIN), min=MIN_SCALE)
            if values[row][0] == values[row][1]:
                scale = torch.tensor(DEGENERATE_SCALE, dtype=torch.float64, device=spans.device)
            grids[root] = Grid(scale, zero_point)
        for root in self.fixed:
            fixed_scale, fixed_zero_point = SOFTMAX_OUTPUT
            grids[root] = Grid(
                torch.tensor(fixed_scale, dtype=torch.float64, device=spans.device), fixed_zero_point
            )
        return grids

    def learned_ranges(self) -> dict[str, tuple[float, float]]:
        """Every activation tensor's learned (widened) range, for quantize_graph's Calibration."""
        values = self.spans().detach().cpu().tolist()
        return {
            name: (values[self._row[root]][0], values[self._row[root]][1])
            for name, root in self.groups.items()
            if root in self._row
        }

    def constant(self, name: str) -> torch.Tensor:
        return self.weights[self._index[name]] if name in self._index else self._constants[name]

    def trained_constants(self) -> dict[str, np.ndarray]:
        return {
            name: w.detach().cpu().numpy().astype(np.float32)
            for name, w in zip(self.trainable, self.weights, strict=True)
        }

    def to(self, device: torch.device) -> FakeQuantNet:  # type: ignore[override]
        """Move to `device`, with the constants that are not parameters."""
        module = super().to(device)
        self._constants = {k: v.to(device) for k, v in self._constants.items()}
        return module

    # -- forward -----------------------------------------------------------------------------------

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x in the graph's (IR) layout, batch first -> the graph's first output."""
        return self.activations(x)[self.graph.outputs[0]]

    def activations(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        """Every activation tensor (fake-quantized: real values on their grids) by name."""
        graph = self.graph
        grids = self.grids() if self.quantize else {}
        env: dict[str, torch.Tensor] = {}
        name = graph.inputs[0]
        env[name] = grids[self.groups[name]].fake_quantize(x) if self.quantize else x
        for node in graph.nodes:
            if self.quantize and node.op in _WEIGHTED:
                args = self._quantized_layer_inputs(node, env, grids)
            else:
                args = [self._value(i, env) if i else None for i in node.inputs]
            y = OPS[node.op](graph, node, args)
            out = node.outputs[0]
            if self.quantize and node.op not in _ON_GRID:
                y = grids[self.groups[out]].fake_quantize(y)
            env[out] = y
        return env

    def _value(self, name: str, env: Mapping[str, torch.Tensor]) -> torch.Tensor:
        return env[name] if name in env else self.constant(name)

    def _quantized_layer_inputs(
        self, node: Node, env: Mapping[str, torch.Tensor], grids: Mapping[str, Grid]
    ) -> list[torch.Tensor | None]:
        weights, bias = self._layer_codes(node, grids)
        return [env[node.inputs[0]], weights.fake(), None if bias is None else bias.fake()]

    def _layer_codes(self, node: Node, grids: Mapping[str, Grid]) -> tuple[_Codes, _Codes | None]:
        """The layer's weights and bias (None without one) with their integer codes now."""
        x_name, w_name, b_name = node.inputs
        w = self.constant(w_name)
        axis = weight_axis(node) if self.per_channel else None
        scales = weight_scales(w, axis)
        shape = [1] * w.ndim
        if axis is not None:
            shape[axis] = -1
        weights = _Codes(w, weight_codes(w, scales, axis), scales.reshape(shape))
        if not b_name:
            return weights, None
        b = self.constant(b_name)
        # The bias grid follows the input's scale but does not steer it (the scale's gradient comes from
        # the activations it rounds).
        bias_scales = grids[self.groups[x_name]].scale.detach() * torch.broadcast_to(scales, b.shape)
        return weights, _Codes(b, bias_codes(b, bias_scales), bias_scales)

    # -- what the tests compare with the exported graph ---------------------------------------------

    def integer_weights(self, node: Node) -> tuple[np.ndarray, np.ndarray | None]:
        """The int8 weight and int32 bias codes the layer computes with now."""
        weights, bias = self._layer_codes(node, self.grids())
        q_w = weights.codes.cpu().numpy().astype(np.int8)
        return q_w, None if bias is None else bias.codes.cpu().numpy().astype(np.int32)


@dataclass(frozen=True)
class _Codes:
    """A trained constant and its integer codes (float64) at `scales` (broadcastable to it)."""

    values: torch.Tensor
    codes: torch.Tensor
    scales: torch.Tensor

    def fake(self) -> torch.Tensor:
        """The codes' real values forward; the constant's own gradient backward (STE)."""
        rounded = (self.codes * self.scales).to(self.values.dtype)
        return self.values + (rounded - self.values).detach()


def _group_span(
    groups: Mapping[str, str], ranges: Mapping[str, tuple[float, float]], root: str
) -> tuple[float, float]:
    members = [(lo, hi) for name, (lo, hi) in ranges.items() if groups.get(name) == root]
    if not members:
        raise QatError(f"tensor {root!r} has no calibrated range to start training from")
    lo, hi = min(m[0] for m in members), max(m[1] for m in members)
    return min(lo, 0.0), max(hi, 0.0)
