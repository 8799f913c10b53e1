"""What computing one ONNX node at import will cost, known before it runs.

Constant folding (quantcore/importers/_fold.py) runs nodes whose inputs are all constants. A hostile
model makes that unbounded with a few bytes: ConstantOfShape [1, 1, 40000, 40000] asks for 6.4 GB, Range
0..10^12 for 8 TB, a 3x3 MaxPool over a large constant for hours of onnx.reference's Python loops. So
each operator folded has an estimator here that reads the node's attributes and its concrete input
values and returns, without computing anything, an upper bound of the elements it will output and the
arithmetic it will do. An operator with no estimator is never run at import.

Only operators whose onnx.reference implementation is vectorised numpy (or counted with `SLOW`) are
listed; they cover what exporters put on constant paths (shape arithmetic, casts, QuantizeLinear of
weights) and every operator the importer maps.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

SLOW = 1000
"""Cost of one window element in onnx.reference's pooling, which loops in Python (about 1 us, against
about 1 ns for a multiply-add of its numpy Conv and MatMul)."""


@dataclass(frozen=True)
class Call:
    """One node about to run: its type, attributes (Python values) and concrete inputs."""

    op_type: str
    attrs: Mapping[str, Any]
    inputs: Sequence[Any]
    """numpy arrays, None for an absent optional input, lists for sequences."""
    outputs: int
    """How many outputs the node has."""
    opset: int

    def input(self, index: int) -> Any:
        return self.inputs[index] if index < len(self.inputs) else None

    def shape(self, index: int) -> tuple[int, ...]:
        value = self.input(index)
        if not isinstance(value, np.ndarray | np.generic):
            raise Malformed(f"its input {index} is not a tensor")
        return tuple(int(d) for d in np.shape(value))


@dataclass(frozen=True)
class Cost:
    """An upper bound of what a node computes."""

    largest: int
    """Elements of its largest output."""
    total: int
    """Elements of all its outputs."""
    operations: int
    """Arithmetic done: one per input and output element, more for contractions and windows."""


class Malformed(Exception):
    """The node's constant inputs or attributes do not describe a computation (the message says why)."""


Estimator = Callable[[Call], Cost]


def size(value: Any) -> int:
    """Elements of a tensor, a sequence of tensors (summed) or an absent input (0)."""
    if value is None:
        return 0
    if isinstance(value, list | tuple):
        return sum(size(v) for v in value)
    return int(np.size(value))


def _inputs(call: Call) -> int:
    return sum(size(v) for v in call.inputs)


def _outputs(call: Call, largest: int, total: int | None = None, work: int = 0) -> Cost:
    """The cost of writing outputs of at most `largest` elements each (`total` in all: by default every
    output as large as the largest), reading every input, and `work` more operations."""
    total = largest * max(call.outputs, 1) if total is None else total
    return Cost(largest, total, _inputs(call) + total + work)


def _ints(call: Call, index: int, what: str) -> list[int]:
    value = call.input(index)
    if not isinstance(value, np.ndarray) or value.dtype.kind not in "iu" or value.ndim > 1:
        raise Malformed(f"its {what} (input {index}) is not a 1-D integer tensor")
    return [int(v) for v in value.reshape(-1)]


def _scalar(call: Call, index: int, what: str) -> float | int:
    value = call.input(index)
    if not isinstance(value, np.ndarray) or value.size != 1 or value.dtype.kind not in "iuf":
        raise Malformed(f"its {what} (input {index}) is not a number")
    number = value.reshape(-1)[0]
    return int(number) if value.dtype.kind in "iu" else float(number)


def _prod(dims: Sequence[int]) -> int:
    return math.prod(dims)


def _broadcast(shapes: Sequence[Sequence[int]]) -> tuple[int, ...]:
    """numpy's broadcast of the shapes, in Python integers (dims of any size, no array made)."""
    rank = max((len(s) for s in shapes), default=0)
    out = [1] * rank
    for shape in shapes:
        for i, d in enumerate(shape, rank - len(shape)):
            if d < 0:
                raise Malformed(f"a shape has a negative dimension {d}")
            if d != 1 and out[i] not in (1, d):
                shown = " and ".join(str(tuple(s)) for s in shapes)
                raise Malformed(f"its input shapes {shown} do not broadcast")
            out[i] = d if d != 1 else out[i]
    return tuple(out)


# -- estimators -----------------------------------------------------------------------------------------


def same_as_first(call: Call) -> Cost:
    """Outputs no larger than the first input (elementwise on one tensor, reshapes, reductions, slices)."""
    return _outputs(call, size(call.input(0)))


def split(call: Call) -> Cost:
    """Split: the outputs share the input's elements."""
    whole = size(call.input(0))
    return _outputs(call, whole, total=whole)


def broadcast(call: Call) -> Cost:
    """Elementwise over several inputs with numpy broadcasting."""
    shapes = [call.shape(i) for i, v in enumerate(call.inputs) if v is not None]
    return _outputs(call, _prod(_broadcast(shapes)))


def no_inputs(call: Call) -> Cost:
    """A Constant: its value is already in the file (charged when made); a sparse one is not densified."""
    if "sparse_value" in call.attrs:
        raise Malformed("its value is a sparse tensor; Fixpoint reads dense constants only")
    return Cost(0, 0, 0)


def shape_of(call: Call) -> Cost:
    return _outputs(call, len(call.shape(0)) + 1)


def concat(call: Call) -> Cost:
    return _outputs(call, _inputs(call))


def constant_of_shape(call: Call) -> Cost:
    dims = _ints(call, 0, "shape")
    if any(d < 0 for d in dims):
        raise Malformed(f"its shape {dims} has a negative dimension")
    return _outputs(call, _prod(dims))


def expand(call: Call) -> Cost:
    return _outputs(call, _prod(_broadcast([call.shape(0), _ints(call, 1, "shape")])))


def tile(call: Call) -> Cost:
    shape, repeats = call.shape(0), _ints(call, 1, "repeats")
    if len(repeats) != len(shape) or any(r < 0 for r in repeats):
        raise Malformed(f"its repeats {repeats} do not match the input's rank {len(shape)}")
    return _outputs(call, _prod([d * r for d, r in zip(shape, repeats, strict=True)]))


def range_(call: Call) -> Cost:
    start, limit, delta = (_scalar(call, i, w) for i, w in enumerate(("start", "limit", "delta")))
    if delta == 0 or not all(math.isfinite(v) for v in (start, limit, delta)):
        raise Malformed(f"Range({start}, {limit}, {delta}) has no finite number of elements")
    count = math.ceil((limit - start) / delta) if isinstance(delta, float) else -((start - limit) // delta)
    return _outputs(call, max(int(count), 0))


def pad(call: Call) -> Cost:
    shape = call.shape(0)
    pads = list(call.attrs.get("pads", ())) if call.opset < 11 else _ints(call, 1, "pads")
    axes = _ints(call, 3, "axes") if call.input(3) is not None else list(range(len(shape)))
    if len(pads) != 2 * len(axes) or any(not -len(shape) <= a < len(shape) for a in axes):
        raise Malformed(f"its pads {pads} do not match the axes {axes} of a {len(shape)}-D input")
    dims = list(shape)
    for i, axis in enumerate(axes):
        dims[axis] += pads[i] + pads[i + len(axes)]
    return _outputs(call, _prod([max(d, 0) for d in dims]))


def gather(call: Call) -> Cost:
    data, indices = call.shape(0), call.shape(1)
    if not data:
        raise Malformed("it gathers from a scalar")
    axis = int(call.attrs.get("axis", 0))
    if not -len(data) <= axis < len(data):
        raise Malformed(f"its axis {axis} is outside a {len(data)}-D input")
    axis %= len(data)
    return _outputs(call, _prod(data[:axis]) * _prod(indices) * _prod(data[axis + 1 :]))


def second_input(call: Call) -> Cost:
    """GatherElements: the output has the indices' shape."""
    return _outputs(call, size(call.input(1)))


def one_hot(call: Call) -> Cost:
    depth = _scalar(call, 1, "depth")
    return _outputs(call, size(call.input(0)) * max(int(depth), 0))


def non_zero(call: Call) -> Cost:
    return _outputs(call, max(len(call.shape(0)), 1) * size(call.input(0)))


def matmul(call: Call) -> Cost:
    a, b = call.shape(0), call.shape(1)
    if not a or not b:
        raise Malformed("MatMul of a scalar")
    m, k, n = (a[-2] if len(a) > 1 else 1), a[-1], (b[-1] if len(b) > 1 else 1)
    out = _prod(_broadcast([a[:-2], b[:-2]])) * m * n
    return _outputs(call, out, work=out * k)


def gemm(call: Call) -> Cost:
    a, b = call.shape(0), call.shape(1)
    if len(a) != 2 or len(b) != 2:
        raise Malformed(f"Gemm of shapes {a} and {b} (both must be 2-D)")
    m, k = a[::-1] if call.attrs.get("transA", 0) else a
    n = b[0] if call.attrs.get("transB", 0) else b[1]
    return _outputs(call, m * n, work=m * n * k)


def _window_output(call: Call, channels: int, extra: int) -> int:
    """Output elements of a convolution or pool over input 0: at most the padded input (+1 per
    dimension for ceil_mode) per channel, whatever the strides."""
    shape = call.shape(0)
    if len(shape) < 3:
        raise Malformed(f"its input {shape} has no spatial dimensions")
    spatial = shape[2:]
    pads = list(call.attrs.get("pads", ())) or [0] * (2 * len(spatial))
    if len(pads) != 2 * len(spatial):
        raise Malformed(f"its pads {pads} do not match a {len(spatial)}-D window")
    dims = [
        d + max(p, 0) + max(q, 0) + extra
        for d, p, q in zip(spatial, pads[: len(spatial)], pads[len(spatial) :], strict=True)
    ]
    return shape[0] * channels * _prod(dims)


def conv(call: Call) -> Cost:
    weights = call.shape(1)
    if len(weights) < 3:
        raise Malformed(f"its weights {weights} are not (M, C/group, kernel...)")
    out = _window_output(call, weights[0], 0)
    return _outputs(call, out, work=out * _prod(weights[1:]))


def pool(call: Call) -> Cost:
    kernel = [int(k) for k in call.attrs.get("kernel_shape", ())]
    out = _window_output(call, call.shape(0)[1] if len(call.shape(0)) > 1 else 1, 1)
    return _outputs(call, out, work=out * _prod(kernel) * SLOW)


def control_flow(call: Call) -> Cost:
    """Loop, Scan, If: their subgraphs' nodes are estimated one by one as they run (_fold)."""
    return Cost(0, 0, _inputs(call))


_SAME = (  # noqa: SIM905 - a word list reads better than dozens of quoted strings
    "Identity Cast CastLike Dropout Neg Abs Exp Log Sqrt Reciprocal Floor Ceil Round Sign Not Relu "
    "LeakyRelu Sigmoid Tanh Clip Elu Selu Celu HardSigmoid HardSwish Softplus Softsign ThresholdedRelu "
    "IsNaN IsInf BitwiseNot Sin Cos Tan Asin Acos Atan Sinh Cosh Asinh Acosh Atanh QuantizeLinear "
    "DequantizeLinear Softmax LogSoftmax Hardmax CumSum BatchNormalization InstanceNormalization "
    "LayerNormalization LpNormalization Reshape Flatten Squeeze Unsqueeze Transpose DepthToSpace "
    "SpaceToDepth Trilu Slice Compress EyeLike ReduceSum ReduceMean ReduceMax ReduceMin ReduceProd "
    "ReduceL1 ReduceL2 ReduceLogSum ReduceLogSumExp ReduceSumSquare ArgMax ArgMin GlobalAveragePool "
    "GlobalMaxPool Size"
).split()
_BROADCAST = (  # noqa: SIM905 - a word list reads better than dozens of quoted strings
    "Add Sub Mul Div Pow Mod Max Min Sum Mean Equal Greater GreaterOrEqual Less LessOrEqual And Or Xor "
    "BitShift BitwiseAnd BitwiseOr BitwiseXor PRelu Where"
).split()

ESTIMATORS: Mapping[str, Estimator] = {
    **dict.fromkeys(_SAME, same_as_first),
    **dict.fromkeys(_BROADCAST, broadcast),
    **dict.fromkeys(("Loop", "Scan", "If"), control_flow),
    "Constant": no_inputs,
    "Shape": shape_of,
    "Concat": concat,
    "Split": split,
    "ConstantOfShape": constant_of_shape,
    "Expand": expand,
    "Tile": tile,
    "Range": range_,
    "Pad": pad,
    "Gather": gather,
    "GatherElements": second_input,
    "OneHot": one_hot,
    "NonZero": non_zero,
    "MatMul": matmul,
    "Gemm": gemm,
    "Conv": conv,
    "MaxPool": pool,
    "AveragePool": pool,
}
"""ONNX operator (default domain) -> the estimator of its cost; only these are computed at import."""
