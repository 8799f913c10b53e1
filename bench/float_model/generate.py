"""`generate_float`: a prepared float graph -> float_model.c and float_model.h, plain-C float32 kernels.

The graph is the one quantcore.pipeline.load_model gives (NHWC, BatchNorm folded, activations fused into
node.attrs["activation"] / ["clip"]); the C follows quantcore.runtime.float_exec's semantics op by op.
Lowering (here) turns every node into a dict of numbers - shapes, strides, arena offsets, constant
indices; model_f32.c.j2 turns those into C. The kernels are what an engineer writes without CMSIS-NN:
direct loops over NHWC with the valid kernel taps computed per output pixel (no padding branch in the
inner loops); conv2d and fully connected keep one float accumulator per output over contiguous dot
products (OHWI / [out, in] weights), depthwise and the pools accumulate a pixel's channels in place, tap
by tap; no im2col, no intrinsics or hand-written SIMD, no loop unrolling by hand. Reshape/Identity cost
nothing (aliases). See model_f32.c.j2 for each kernel.

Activations live in one static float arena placed by quantcore.codegen.arena.plan_arena (greedy by size,
lifetimes from the graph, Reshape/Identity aliasing their input), the planner the int8 code uses, so the
two arenas differ by the element size and the graph, not by the planner.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2
import numpy as np

from quantcore.codegen.arena import ArenaPlan, plan_arena
from quantcore.ir import Activation, DType, Graph, Layout, Node, Op
from quantcore.templating import c_comment, c_string, write_text

TEMPLATES = Path(__file__).resolve().parent
PREFIX = "float_model"
ALIGNMENT = 16
"""Arena alignment in bytes (offsets stay multiples of 4 floats)."""


class Unsupported(Exception):
    """The graph uses an op or a form of one the float kernels do not implement; the message says which."""


@dataclass(frozen=True)
class FloatModel:
    """What generate_float wrote and the figures of the float model."""

    directory: Path
    source: Path
    header: Path
    name: str
    layers: int
    """Layer functions (nodes that run code; aliasing Reshape/Identity nodes run none)."""
    input_name: str
    output_name: str
    input_shape: tuple[int, ...]
    output_shape: tuple[int, ...]
    arena_bytes: int
    weight_bytes: int
    """The const float tables (weights, biases, other constants) in flash."""

    @property
    def input_count(self) -> int:
        return math.prod(self.input_shape)

    @property
    def output_count(self) -> int:
        return math.prod(self.output_shape)


def f32(value: float) -> str:
    """A C float literal that parses back to exactly this float32: numpy's shortest round-trip digits."""
    number = np.float32(value)
    if not np.isfinite(number):
        raise ValueError(f"{value!r} is not a finite float32")
    text = str(number)
    return f"{text}f" if any(ch in text for ch in ".e") else f"{text}.0f"


def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES)),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,
    )
    env.filters.update(c_comment=c_comment, c_string=c_string, f32=f32)
    return env


def render(template: str, **context: Any) -> str:
    return environment().get_template(template).render(**context)


# ---------------------------------------------------------------- lowering


class _Lowering:
    """Builds the template's data: constants (one table each, in first-use order) and layers."""

    def __init__(self, graph: Graph, plan: ArenaPlan) -> None:
        self.graph = graph
        self.plan = plan
        self.constants: list[dict[str, Any]] = []
        self._const_index: dict[str, int] = {}

    def constant(self, key: str, name: str, values: np.ndarray) -> dict[str, Any]:
        """A reference to the const table `key` (created on first use)."""
        if key not in self._const_index:
            data = np.ascontiguousarray(values, dtype=np.float32).ravel()
            self._const_index[key] = len(self.constants)
            self.constants.append({"name": name, "values": data.tolist(), "count": int(data.size)})
        return {"const": self._const_index[key], "offset": 0}

    def ref(self, name: str) -> dict[str, Any]:
        """A tensor: a const table, or its float offset in the arena."""
        tensor = self.graph.tensor(name)
        if tensor.is_constant:
            return self.constant(name, name, self.graph.constant(name))
        return {"const": None, "offset": self.plan.offsets[name] // 4}

    def shape(self, name: str) -> tuple[int, ...]:
        return tuple(int(d) for d in self.graph.tensor(name).shape)


def _activation(node: Node) -> dict[str, Any]:
    """The fused activation as a clamp: act 0 (none) or 1 with bounds lo/hi (None = unbounded)."""
    act = node.attr("activation", Activation.NONE)
    if act is Activation.NONE:
        return {"act": 0, "lo": None, "hi": None}
    if act is Activation.RELU:
        return {"act": 1, "lo": 0.0, "hi": None}
    if act is Activation.RELU6:
        return {"act": 1, "lo": 0.0, "hi": 6.0}
    if act is Activation.CLIP:
        lo, hi = node.attr("clip")
        return {"act": 1, "lo": lo, "hi": hi}
    raise Unsupported(f"{node.name}: activation {act!r}")


def _window(low: _Lowering, node: Node, kernel: tuple[int, int]) -> dict[str, Any]:
    """Geometry of a conv/pool node, checked against its output shape (float_exec's formula)."""
    x, y = low.shape(node.inputs[0]), low.shape(node.outputs[0])
    if len(x) != 4 or len(y) != 4 or low.graph.tensor(node.inputs[0]).layout is not Layout.NHWC:
        raise Unsupported(f"{node.name}: {node.op.json_name} needs a 4-D NHWC input, got {x}")
    top, left, bottom, right = (int(v) for v in node.attr("pads", (0, 0, 0, 0)))
    sh, sw = (int(v) for v in node.attr("strides", (1, 1)))
    dh, dw = (int(v) for v in node.attr("dilations", (1, 1)))
    kh, kw = kernel
    oh = (x[1] + top + bottom - dh * (kh - 1) - 1) // sh + 1
    ow = (x[2] + left + right - dw * (kw - 1) - 1) // sw + 1
    if (oh, ow) != y[1:3] or min(top, left, bottom, right) < 0:
        raise Unsupported(f"{node.name}: output {y} does not follow from input {x}, kernel {kernel}, pads")
    return {
        "in_h": x[1], "in_w": x[2], "in_c": x[3], "out_h": y[1], "out_w": y[2], "out_c": y[3],
        "k_h": kh, "k_w": kw, "stride_h": sh, "stride_w": sw, "pad_top": top, "pad_left": left,
        "dil_h": dh, "dil_w": dw, "pad_bottom": bottom, "pad_right": right,
    }  # fmt: skip


def _conv(low: _Lowering, node: Node) -> dict[str, Any]:
    w = low.graph.constant(node.inputs[1])
    out_c, kh, kw, cpg = (int(d) for d in w.shape)
    geo = _window(low, node, (kh, kw))
    groups = int(node.attr("groups", 1))
    if groups < 1 or cpg * groups != geo["in_c"] or out_c % groups or out_c != geo["out_c"]:
        raise Unsupported(f"{node.name}: weights {w.shape} do not fit groups={groups}, input {geo['in_c']}")
    return {**geo, "groups": groups, "weights": low.ref(node.inputs[1]), "bias": _bias(low, node)}


def _depthwise(low: _Lowering, node: Node) -> dict[str, Any]:
    w = low.graph.constant(node.inputs[1])
    _, kh, kw, out_c = (int(d) for d in w.shape)
    geo = _window(low, node, (kh, kw))
    if out_c != geo["out_c"] or out_c % geo["in_c"]:
        raise Unsupported(f"{node.name}: depthwise weights {w.shape} for {geo['in_c']} input channels")
    return {**geo, "mult": out_c // geo["in_c"], "weights": low.ref(node.inputs[1]), "bias": _bias(low, node)}


def _bias(low: _Lowering, node: Node) -> dict[str, Any] | None:
    name = node.inputs[2] if len(node.inputs) > 2 else ""
    return low.ref(name) if name else None


def _fully_connected(low: _Lowering, node: Node) -> dict[str, Any]:
    w = low.graph.constant(node.inputs[1])
    x, y = low.shape(node.inputs[0]), low.shape(node.outputs[0])
    if w.ndim != 2 or math.prod(x) != w.shape[1] or math.prod(y) != w.shape[0]:
        raise Unsupported(f"{node.name}: fully connected {x} x {w.shape} -> {y}")
    return {
        "in_n": int(w.shape[1]), "out_n": int(w.shape[0]),
        "weights": low.ref(node.inputs[1]), "bias": _bias(low, node),
    }  # fmt: skip


def _pool(low: _Lowering, node: Node) -> dict[str, Any]:
    kernel = node.attr("kernel")
    if not isinstance(kernel, Sequence) or len(kernel) != 2 or not all(isinstance(k, int) for k in kernel):
        raise Unsupported(f"{node.name}: pool kernel {kernel!r}")
    geo = _window(low, node, (int(kernel[0]), int(kernel[1])))
    if geo["in_c"] != geo["out_c"]:
        raise Unsupported(f"{node.name}: pool with {geo['in_c']} -> {geo['out_c']} channels")
    include = bool(node.attr("count_include_pad", False)) and node.op is Op.AVG_POOL
    extra_bottom, extra_right = (int(v) for v in node.attr("ceil_pads", (0, 0)))
    # count_include_pad: the declared padding counts in the divisor, ceil_mode's extra padding does not.
    return {
        **geo,
        "count_pad": int(include),
        "count_h_end": geo["in_h"] + geo["pad_bottom"] - extra_bottom,
        "count_w_end": geo["in_w"] + geo["pad_right"] - extra_right,
    }


def _global_avg_pool(low: _Lowering, node: Node) -> dict[str, Any]:
    x = low.shape(node.inputs[0])
    if len(x) != 4 or low.graph.tensor(node.inputs[0]).layout is not Layout.NHWC:
        raise Unsupported(f"{node.name}: global average pool needs a 4-D NHWC input, got {x}")
    return {"pixels": x[1] * x[2], "channels": x[3]}


def _inner_broadcast(small: tuple[int, ...], full: tuple[int, ...]) -> bool:
    """Whether `small` broadcast to `full` repeats its values whole: small (bar leading 1s) = full's tail."""
    trimmed = list(small)
    while trimmed and trimmed[0] == 1:
        trimmed.pop(0)
    return len(trimmed) <= len(full) and tuple(trimmed) == full[len(full) - len(trimmed) :]


def _binary(low: _Lowering, node: Node) -> dict[str, Any]:
    a, b = node.inputs
    y = low.shape(node.outputs[0])
    n = math.prod(y)
    sa, sb = low.shape(a), low.shape(b)
    if sa != y and sb == y:  # add and mul commute: the full-size operand goes first
        a, b, sa, sb = b, a, sb, sa
    if sa != y:
        raise Unsupported(f"{node.name}: {node.op.json_name} of {sa} and {sb} -> {y}")
    if math.prod(sb) == n and sb != y and not low.graph.tensor(b).is_constant:
        raise Unsupported(f"{node.name}: {node.op.json_name} of {sa} and {sb} (a reshaping broadcast)")
    if sb == y or _inner_broadcast(sb, y):
        rhs, nb = low.ref(b), math.prod(sb)
    elif low.graph.tensor(b).is_constant:  # any other numpy broadcast of a constant: materialised
        full = np.broadcast_to(low.graph.constant(b), y)
        rhs, nb = low.constant(f"{b}@{y}", f"{b} broadcast to {y}", full), n
    else:
        raise Unsupported(f"{node.name}: {node.op.json_name} broadcasting {sb} to {y}")
    return {"count": n, "rhs_count": nb, "lhs": low.ref(a), "rhs": rhs}


def _clip(low: _Lowering, node: Node) -> dict[str, Any]:
    lo, hi = (0.0, None) if node.op is Op.RELU else (node.attr("min"), node.attr("max"))
    return {"count": math.prod(low.shape(node.outputs[0])), "act": 1, "lo": lo, "hi": hi}


def _softmax(low: _Lowering, node: Node) -> dict[str, Any]:
    x = low.shape(node.inputs[0])
    if int(node.attr("axis", len(x) - 1)) != len(x) - 1:
        raise Unsupported(f"{node.name}: softmax over axis {node.attr('axis')} of {x} (only the last)")
    return {"rows": math.prod(x[:-1]), "row": x[-1]}


def _pad(low: _Lowering, node: Node) -> dict[str, Any]:
    x, y = low.shape(node.inputs[0]), low.shape(node.outputs[0])
    pads = [int(p) for p in node.attr("pads")]
    half = len(pads) // 2
    if node.attr("mode", "constant") != "constant" or len(x) > 4 or half != len(x) or min(pads) < 0:
        raise Unsupported(f"{node.name}: pad {pads} of {x} (constant, non-negative, rank <= 4 only)")
    if tuple(d + b + e for d, b, e in zip(x, pads[:half], pads[half:], strict=True)) != y:
        raise Unsupported(f"{node.name}: pad {pads} of {x} does not give {y}")
    lead = [1] * (4 - len(x))
    return {
        "shape_in": lead + list(x),
        "shape_out": lead + list(y),
        "before": [0] * len(lead) + pads[:half],
        "value": float(node.attr("value", 0.0)),
        "count": math.prod(y),
    }


def _concat(low: _Lowering, node: Node) -> dict[str, Any]:
    y = low.shape(node.outputs[0])
    axis = int(node.attr("axis"))
    parts, offset = [], 0
    for name in node.inputs:
        s = low.shape(name)
        inner = math.prod(s[axis:])
        parts.append({"src": low.ref(name), "inner": inner, "offset": offset})
        offset += inner
    if offset != math.prod(y[axis:]):
        raise Unsupported(f"{node.name}: concat of {[low.shape(i) for i in node.inputs]} -> {y}")
    return {"outer": math.prod(y[:axis]), "inner_out": offset, "parts": parts}


def _copy(low: _Lowering, node: Node) -> dict[str, Any]:
    return {"count": math.prod(low.shape(node.outputs[0]))}


_LOWER: dict[Op, tuple[str, Callable[[_Lowering, Node], dict[str, Any]]]] = {
    Op.CONV2D: ("conv2d", _conv),
    Op.DEPTHWISE_CONV2D: ("depthwise", _depthwise),
    Op.FULLY_CONNECTED: ("fully_connected", _fully_connected),
    Op.MAX_POOL: ("max_pool", _pool),
    Op.AVG_POOL: ("avg_pool", _pool),
    Op.GLOBAL_AVG_POOL: ("global_avg_pool", _global_avg_pool),
    Op.ADD: ("add", _binary),
    Op.MUL: ("mul", _binary),
    Op.RELU: ("clip", _clip),
    Op.CLIP: ("clip", _clip),
    Op.SOFTMAX: ("softmax", _softmax),
    Op.PAD: ("pad", _pad),
    Op.CONCAT: ("concat", _concat),
    Op.RESHAPE: ("copy", _copy),
    Op.IDENTITY: ("copy", _copy),
}
_FUSED_ACTIVATION = (
    Op.CONV2D,
    Op.DEPTHWISE_CONV2D,
    Op.FULLY_CONNECTED,
    Op.MAX_POOL,
    Op.AVG_POOL,
    Op.ADD,
    Op.MUL,
)
"""Ops whose output float_exec passes through the node's fused activation."""


def _check_graph(graph: Graph) -> None:
    if len(graph.inputs) != 1 or len(graph.outputs) != 1:
        raise Unsupported(f"{len(graph.inputs)} inputs and {len(graph.outputs)} outputs (one of each only)")
    for tensor in graph.activations():
        if tensor.dtype is not DType.FLOAT32:
            raise Unsupported(f"tensor {tensor.name} is {tensor.dtype.label}, not a float32 graph")
        if not tensor.shape or tensor.shape[0] != 1:
            raise Unsupported(f"tensor {tensor.name} has shape {tensor.shape}: batch 1 only")
    for node in graph.nodes:
        if node.op not in _LOWER:
            raise Unsupported(f"{node.name}: op {node.op.json_name} has no float kernel here")
        if len(node.outputs) != 1:
            raise Unsupported(f"{node.name}: {len(node.outputs)} outputs")


def lower(graph: Graph) -> dict[str, Any]:
    """The template context for `graph`; Unsupported naming the first node the kernels cannot run."""
    _check_graph(graph)
    plan = plan_arena(graph, ALIGNMENT)
    low = _Lowering(graph, plan)
    layers = []
    for step, node in enumerate(graph.nodes):
        kind, fn = _LOWER[node.op]
        source, target = node.inputs[0], node.outputs[0]
        aliased = target in plan.aliases and plan.offsets[target] == plan.offsets.get(source)
        if kind == "copy" and aliased:
            continue  # the same bytes: nothing runs
        layer = fn(low, node)
        if node.op in _FUSED_ACTIVATION:
            layer.update(_activation(node))
        layer.update(
            kind=kind,
            index=len(layers),
            step=step,
            name=node.name,
            op=node.op.json_name,
            # add/mul/concat reference their operands themselves (a broadcast constant may be replaced)
            source=None if kind in ("add", "mul", "concat") else low.ref(source),
            output=low.ref(target),
            in_shape=low.shape(source),
            out_shape=low.shape(target),
        )
        layers.append(layer)
    x, y = graph.inputs[0], graph.outputs[0]
    return {
        "model": graph.name,
        "prefix": PREFIX,
        "layers": layers,
        "kinds": sorted({layer["kind"] for layer in layers}),
        "constants": low.constants,
        "arena_bytes": plan.arena_bytes,
        "arena_floats": max(plan.arena_bytes // 4, 1),
        "input": low.ref(x),
        "output": low.ref(y),
        "input_count": math.prod(low.shape(x)),
        "output_count": math.prod(low.shape(y)),
        "weight_bytes": 4 * sum(c["count"] for c in low.constants),
        "unshared_bytes": plan.tensor_bytes,
    }


def unsupported(graph: Graph) -> str | None:
    """Why the float kernels cannot run `graph`, or None when they can."""
    try:
        lower(graph)
    except Unsupported as exc:
        return str(exc)
    return None


def generate_float(graph: Graph, out_dir: Path) -> FloatModel:
    """Write out_dir/float_model.c and .h for the prepared float `graph`; Unsupported if it cannot be."""
    context = lower(graph)
    out_dir = Path(out_dir)
    header = write_text(out_dir / f"{PREFIX}.h", render("model_f32.h.j2", **context))
    source = write_text(out_dir / f"{PREFIX}.c", render("model_f32.c.j2", **context))
    x, y = graph.inputs[0], graph.outputs[0]
    return FloatModel(
        directory=out_dir,
        source=source,
        header=header,
        name=graph.name,
        layers=len(context["layers"]),
        input_name=x,
        output_name=y,
        input_shape=tuple(graph.tensor(x).shape),
        output_shape=tuple(graph.tensor(y).shape),
        arena_bytes=context["arena_bytes"],
        weight_bytes=context["weight_bytes"],
    )
