"""Fake quantization in torch: DOMAIN.md section 2's int8 scheme as float operations that round exactly
where the integer kernels round, with gradients for training.

Values. Every number the exported document holds is computed here with the formula and the float64
arithmetic the quantizer uses, so the forward pass uses exactly the integers the export writes:
activation (scale, zero point) come from quant_params itself (range widened to contain 0, exact
zero-point rounding and clamping, degenerate and minimum scales); weight scales are max|w| / 127 per
output channel (1 for an all-zero channel), weights round half away from zero into [-127, 127]; biases
are round(b / (s_in * s_w[c])) saturated to int32. A value that must be exact and differentiable is
written `exact + (expr - expr.detach())`: forward gives `exact` bit for bit (x - x is 0), backward the
derivative of `expr`.

Gradients.
- Rounding: straight-through (the identity), as in every QAT scheme since Bengio et al. 2013.
- Weights: straight-through to w; the weight scale is not trained, since the scheme fixes it at
  max|w| / 127 of the current weights (learning it would leave the scheme).
- Activation ranges (lo, hi): LSQ+ (Bhalgat et al. 2020, "LSQ+: learnable offset"), here through the
  range: autograd through scale = (hi - lo) / 255 and zero_point = -128 - lo / scale, the zero point's
  rounding straight-through. Inside the range this is LSQ's round(x/s) - x/s for the scale; values
  that saturate pull the end they hit (the gradient of TensorFlow's FakeQuantWithMinMaxVars). Chosen
  over PACT, which learns only a ReLU's upper clip and has no rounding term: these networks also have
  two-sided tensors (linear bottlenecks, residual sums, logits) and one rule covers both ends. LSQ's
  gradient scale 1/sqrt(N * Qp) is left out: Adam, the optimizer used, is invariant to a constant
  gradient scale per parameter, and the ranges are parametrised in units of their initial width instead.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from quantcore.calibrate.qparams import quant_params
from quantcore.quantize.scheme import WEIGHT_QMAX

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1


def round_half_away(x: torch.Tensor) -> torch.Tensor:
    """TFLite's rounding (std::round), as quantcore.quantize.scheme rounds: halves away from zero."""
    return torch.sign(x) * torch.floor(torch.abs(x) + 0.5)


def exact_with_grad(exact: torch.Tensor, expr: torch.Tensor) -> torch.Tensor:
    """`exact` in the forward pass, the gradient of `expr` in the backward pass."""
    return exact.detach() + (expr - expr.detach())


def ste_round(x: torch.Tensor) -> torch.Tensor:
    return exact_with_grad(round_half_away(x.detach()), x)


@dataclass(frozen=True)
class QParams:
    """An activation's (scale, zero point): exact values as floats/ints, and as tensors with gradients."""

    scale: float
    zero_point: int
    scale_t: torch.Tensor
    zero_point_t: torch.Tensor


def fixed_qparams(scale: float, zero_point: int) -> QParams:
    """Parameters an op fixes (softmax output): nothing to learn."""
    s = torch.tensor(scale, dtype=torch.float64)
    return QParams(scale, zero_point, s, torch.tensor(float(zero_point), dtype=torch.float64))


def range_qparams(lo: torch.Tensor, hi: torch.Tensor) -> QParams:
    """quant_params(lo, hi) with LSQ+ gradients to lo and hi (float64 scalars)."""
    scale, zero_point = quant_params(float(lo), float(hi))
    lo_w, hi_w = torch.clamp(lo, max=0.0), torch.clamp(hi, min=0.0)
    width = (hi_w - lo_w) / 255.0
    if float(width) > 0:
        zp_expr = -128.0 - lo_w / width
    else:  # degenerate range (always 0): no gradient to give
        zp_expr = lo_w * 0.0
    s_t = exact_with_grad(torch.tensor(scale, dtype=torch.float64), width)
    zp_t = exact_with_grad(torch.tensor(float(zero_point), dtype=torch.float64), zp_expr)
    return QParams(scale, zero_point, s_t, zp_t)


def fake_quantize(x: torch.Tensor, qp: QParams, qmin: int = -128, qmax: int = 127) -> torch.Tensor:
    """(clamp(round(x / s) + zp, qmin, qmax) - zp) * s: quantize and dequantize, as the kernels write
    the tensor and its consumer reads it. [qmin, qmax] includes a fused activation's clamp."""
    q = torch.clamp(ste_round(x / qp.scale_t) + qp.zero_point_t, qmin, qmax)
    return ((q - qp.zero_point_t) * qp.scale_t).to(x.dtype)


def weight_scales(w: torch.Tensor, axis: int | None) -> torch.Tensor:
    """max|w| / 127 per channel along `axis` (per tensor when None), 1 for an all-zero channel: float64,
    no gradient (quantcore.quantize.scheme.weight_scales)."""
    a = w.detach().to(torch.float64).abs()
    peak = a.max() if axis is None else a.movedim(axis, 0).reshape(a.shape[axis], -1).amax(dim=1)
    return torch.where(peak > 0, peak / WEIGHT_QMAX, torch.ones_like(peak))


def quantized_weights(w: torch.Tensor, scales: torch.Tensor, axis: int | None) -> torch.Tensor:
    """The int8 weight values (as float64): round half away of w / s, clamped to [-127, 127]."""
    shape = [1] * w.ndim
    if axis is not None:
        shape[axis] = -1
    q = round_half_away(w.detach().to(torch.float64) / scales.reshape(shape))
    return torch.clamp(q, -WEIGHT_QMAX, WEIGHT_QMAX)


def fake_weights(w: torch.Tensor, scales: torch.Tensor, axis: int | None) -> torch.Tensor:
    shape = [1] * w.ndim
    if axis is not None:
        shape[axis] = -1
    exact = (quantized_weights(w, scales, axis) * scales.reshape(shape)).to(w.dtype)
    return exact_with_grad(exact, w)


def quantized_bias(b: torch.Tensor, input_scale: float, scales: torch.Tensor) -> torch.Tensor:
    """The int32 bias values (as float64): round(b / (s_in * s_w[c])), saturated."""
    q = round_half_away(b.detach().to(torch.float64) / (input_scale * scales))
    return torch.clamp(q, INT32_MIN, INT32_MAX)


def fake_bias(b: torch.Tensor, input_scale: float, scales: torch.Tensor) -> torch.Tensor:
    exact = (quantized_bias(b, input_scale, scales) * (input_scale * scales)).to(b.dtype)
    return exact_with_grad(exact, b)
