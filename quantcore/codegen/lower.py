"""Lowering: a quantized graph (every layer carrying its CMSIS-NN kernel and integer params) -> a Plan.

Each layer becomes one call whose struct values come straight from the node's "params" - the numbers the
reference executor (runtime/int8_exec.py) runs and the quant-params JSON records - so the C computes what
the reference computes. Constants become aligned, padded arrays; activations become arena views placed
by arena.py; the one shared scratch buffer is sized by codegen/buffers.py for the target core.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from quantcore.codegen import plan as P
from quantcore.codegen.arena import ArenaPlan, align_up, plan_arena, tensor_bytes
from quantcore.codegen.errors import CodegenError
from quantcore.codegen.names import IDENTIFIER_MAX, NAME_PART, Symbols, c_identifier
from quantcore.cores import Core
from quantcore.ir import DType, Graph, Node, Op

CTYPES = {DType.INT8: "int8_t", DType.INT16: "int16_t", DType.INT32: "int32_t", DType.INT64: "int64_t"}
_ITEMSIZE = {"int8_t": 1, "int16_t": 2, "int32_t": 4, "int64_t": 8}
_MAX_ALIGNMENT = 4096
PREFIX_MAX = 24
"""Characters of --prefix: it starts every global identifier, which stays within IDENTIFIER_MAX."""
_LONGEST_SUFFIX = len("_multiplier")
"""The longest suffix a layer's constants add to `<prefix>_<layer symbol>`."""


@dataclass
class _Lowering:
    """What lowering one graph accumulates: the tensors' views, the constants emitted so far."""

    graph: Graph
    prefix: str
    alignment: int
    tensors: Mapping[str, P.TensorBuffer]
    constants: list[P.ConstBuffer] = field(default_factory=list)

    def constant(self, symbol: str, ctype: str, values: Any, layer: str, description: str) -> str:
        """Emit a constant array, padded with zeros to a multiple of the alignment; returns its symbol."""
        array = np.asarray(values).reshape(-1)
        # tolist gives an integer array's Python ints at once (fixpoint quantize costs every candidate's
        # memory through here: an element-by-element int() was most of that).
        flat = tuple(array.tolist()) if array.dtype.kind in "iu" else tuple(int(v) for v in array)
        item = _ITEMSIZE[ctype]
        padded = align_up(max(len(flat), 1) * item, max(self.alignment, item)) // item
        name = f"{self.prefix}_{symbol}"
        buffer = P.ConstBuffer(
            name,
            ctype,
            flat + (0,) * (padded - len(flat)),
            len(flat),
            padded,
            self.alignment,
            description,
            layer,
        )
        self.constants.append(buffer)
        return name

    def shape(self, name: str) -> tuple[int, ...]:
        return self.graph.tensor(name).shape


def lower(graph: Graph, *, prefix: str = "model", core: Core = Core.CORTEX_M4, alignment: int = 16) -> P.Plan:
    """The plan of the C program that runs `graph` (single input, single output) on `core`."""
    _check_settings(graph, prefix, alignment)
    arena = plan_arena(graph, alignment)
    ctx = _Lowering(graph, prefix, alignment, _tensor_buffers(graph, arena))
    layers = tuple(_layer(ctx, index, node) for index, node in enumerate(graph.nodes))
    return P.Plan(
        prefix=prefix,
        graph_name=graph.name,
        core=core.label,
        rounding=str(graph.meta.get("rounding", "double")),
        alignment=alignment,
        constants=tuple(ctx.constants),
        tensors=tuple(ctx.tensors.values()),
        layers=layers,
        input=_io(ctx, graph.inputs[0]),
        output=_io(ctx, graph.outputs[0]),
        arena=P.ArenaFigures(arena.arena_bytes, arena.tensor_bytes, arena.lower_bound, arena.peak_live_bytes),
        scratch_bytes=_scratch(graph, core, alignment),
        requantize_functions=_requantize_functions(layers),
    )


def _check_settings(graph: Graph, prefix: str, alignment: int) -> None:
    if not prefix.isidentifier() or not prefix.isascii():
        raise CodegenError(f"prefix {prefix!r} is not a C identifier; use letters, digits and _")
    if len(prefix) > PREFIX_MAX:
        raise CodegenError(
            f"prefix {prefix!r} has {len(prefix)} characters; give at most {PREFIX_MAX} (it starts every"
            f" generated identifier, which must stay within {IDENTIFIER_MAX} characters)"
        )
    if alignment < 1 or alignment > _MAX_ALIGNMENT or alignment & (alignment - 1):
        raise CodegenError(f"alignment {alignment} must be a power of two from 1 to {_MAX_ALIGNMENT}")
    if len(graph.inputs) != 1 or len(graph.outputs) != 1:
        raise CodegenError(
            f"graph {graph.name!r} has {len(graph.inputs)} inputs and {len(graph.outputs)} outputs;"
            " code generation supports exactly one of each"
        )
    for tensor in graph.activations():
        if tensor.dtype not in (DType.INT8, DType.INT16) or tensor.quant is None:
            raise CodegenError(
                f"tensor {tensor.name!r} is {tensor.dtype.label} without int8/int16 quantization;"
                " generate from a quantized graph (fixpoint quantize, then fixpoint generate)"
            )


def _scratch(graph: Graph, core: Core, alignment: int) -> int:
    """The largest scratch any layer asks for, padded to the alignment like every generated array (the
    kernels are told their own sizes; the padding only keeps the project's alignment policy)."""
    from quantcore.codegen.buffers import scratch_bytes

    largest = max((int(scratch_bytes(graph, node, core)) for node in graph.nodes), default=0)
    return align_up(largest, alignment)


def _tensor_buffers(graph: Graph, arena: ArenaPlan) -> dict[str, P.TensorBuffer]:
    symbols = Symbols()
    views = {}
    for tensor in graph.activations():
        views[tensor.name] = P.TensorBuffer(
            name=tensor.name,
            symbol=symbols.unique(f"t_{tensor.name}"),
            ctype=CTYPES[tensor.dtype],
            shape=tensor.shape,
            bytes=tensor_bytes(graph, tensor.name),
            offset=arena.offsets[tensor.name],
            alias_of=arena.aliases.get(tensor.name),
        )
    return views


def _io(ctx: _Lowering, name: str) -> P.IoInfo:
    from quantcore.ir import io_layout

    tensor = ctx.graph.tensor(name)
    assert tensor.quant is not None  # _check_settings
    rank = len(tensor.shape)
    layout = "NHWC" if rank == 4 else "NC" if rank == 2 else None  # the kernels' layout, whatever the model's
    model = io_layout.model_layout(ctx.graph, name)
    return P.IoInfo(
        ctx.tensors[name],
        float(tensor.quant.scale),
        int(tensor.quant.zero_point),
        layout,
        model.value if model is not None else None,
        io_layout.model_shape(ctx.graph, name),
    )


def _requantize_functions(layers: tuple[P.Layer, ...]) -> tuple[P.RequantizeFunction, ...]:
    seen: dict[str, P.RequantizeFunction] = {}
    for layer in layers:
        if isinstance(layer.call, P.RequantizeCall):
            fn = P.RequantizeFunction(layer.call.function, layer.inputs[0].ctype, layer.output.ctype)
            seen.setdefault(fn.name, fn)
    return tuple(seen.values())


# -- layers ---------------------------------------------------------------------------------------


def _layer(ctx: _Lowering, index: int, node: Node) -> P.Layer:
    # <prefix>_l<index>_<name>_multiplier within IDENTIFIER_MAX; the index makes it unique, and the name
    # part is c_identifier(name) whole for the default prefix (the language server finds layers by it).
    lead = f"l{index}_"
    room = IDENTIFIER_MAX - len(ctx.prefix) - 1 - len(lead) - _LONGEST_SUFFIX
    symbol = lead + c_identifier(node.name, min(NAME_PART, room))
    lowerer = _MOVES.get(node.op) or _KERNELS.get(str(node.attr("kernel")))
    if lowerer is None:
        raise CodegenError(
            f"layer {node.name!r} ({node.op.json_name}): no C lowering for kernel {node.attr('kernel')!r}"
        )
    data_inputs = [i for i in node.inputs if i and not ctx.graph.tensor(i).is_constant]
    return P.Layer(
        index=index,
        name=node.name,
        symbol=symbol,
        op=node.op.json_name,
        inputs=tuple(ctx.tensors[i] for i in data_inputs),
        output=ctx.tensors[node.outputs[0]],
        call=lowerer(ctx, node, symbol, dict(node.attr("params") or {})),
    )


Lowerer = Callable[[_Lowering, Node, str, dict[str, Any]], P.Call]


def _tile(pair: Any) -> P.Tile:
    h, w = (int(v) for v in pair)
    return P.Tile(h, w)


def _clamp(p: Mapping[str, Any]) -> P.Clamp:
    return P.Clamp(int(p["act_min"]), int(p["act_max"]))


def _bias(ctx: _Lowering, node: Node, symbol: str, channels: int, wide: bool) -> str:
    """The bias array; a zero one when the layer has none, since CMSIS-NN's conv paths reject NULL."""
    ctype = "int64_t" if wide else "int32_t"
    name = node.inputs[2] if len(node.inputs) > 2 else ""
    values = ctx.graph.constant(name) if name else np.zeros(channels, np.int64)
    return ctx.constant(f"{symbol}_bias", ctype, values, node.name, f"bias ({channels},) {ctype}")


def _weights(ctx: _Lowering, node: Node, symbol: str, layout: str) -> tuple[str, tuple[int, ...]]:
    w = ctx.graph.constant(node.inputs[1])
    if w.dtype != np.int8:
        raise CodegenError(f"layer {node.name!r}: weights {node.inputs[1]!r} are {w.dtype}, not int8")
    description = f"weights {tuple(w.shape)} {layout} int8"
    symbol = ctx.constant(f"{symbol}_weights", "int8_t", w, node.name, description)
    return symbol, tuple(int(d) for d in w.shape)


def _per_channel(ctx: _Lowering, node: Node, symbol: str, p: Mapping[str, Any]) -> tuple[str, str]:
    count = len(p["multiplier"])
    mult = ctx.constant(f"{symbol}_multiplier", "int32_t", p["multiplier"], node.name, "Q31 multipliers")
    shift = ctx.constant(f"{symbol}_shift", "int32_t", p["shift"], node.name, f"shifts ({count},)")
    return mult, shift


def _conv(ctx: _Lowering, node: Node, symbol: str, p: dict[str, Any]) -> P.ConvCall:
    kernel = str(node.attr("kernel"))
    depthwise, wide = node.op is Op.DEPTHWISE_CONV2D, kernel.endswith("_s16")
    weights, w_shape = _weights(ctx, node, symbol, "[1][H][W][C*M]" if depthwise else "OHWI")
    out = P.Dims.nhwc(ctx.shape(node.outputs[0]))
    multiplier, shift = _per_channel(ctx, node, symbol, p)
    return P.ConvCall(
        kernel=kernel,
        depthwise=depthwise,
        wide=wide,
        input_offset=int(p["input_offset"]),
        output_offset=int(p["output_offset"]),
        ch_mult=int(p.get("ch_mult", 1)),
        stride=_tile(p["stride"]),
        padding=_tile(p["padding"]),
        dilation=_tile(p["dilation"]),
        clamp=_clamp(p),
        input_dims=P.Dims.nhwc(ctx.shape(node.inputs[0])),
        filter_dims=P.Dims(*w_shape),
        bias_dims=P.Dims(1, 1, 1, out.c),
        output_dims=out,
        weights=weights,
        bias=_bias(ctx, node, symbol, out.c, wide),
        multiplier=multiplier,
        shift=shift,
    )


def _fully_connected(ctx: _Lowering, node: Node, symbol: str, p: dict[str, Any]) -> P.FullyConnectedCall:
    kernel = str(node.attr("kernel"))
    wide, per_channel = kernel.endswith("_s16"), isinstance(p["multiplier"], list)
    weights, (outputs, depth) = _weights(ctx, node, symbol, "[out][in]")
    batch = ctx.shape(node.inputs[0])[0]
    multiplier: int | str = int(p["multiplier"]) if not per_channel else ""
    shift: int | str = int(p["shift"]) if not per_channel else ""
    if per_channel:
        multiplier, shift = _per_channel(ctx, node, symbol, p)
    return P.FullyConnectedCall(
        kernel=kernel,
        wide=wide,
        per_channel=per_channel,
        input_offset=int(p["input_offset"]),
        filter_offset=int(p.get("filter_offset", 0)),
        output_offset=int(p["output_offset"]),
        clamp=_clamp(p),
        multiplier=multiplier,
        shift=shift,
        input_dims=P.Dims(batch, 1, 1, depth),
        filter_dims=P.Dims(depth, 1, 1, outputs),
        bias_dims=P.Dims(1, 1, 1, outputs),
        output_dims=P.Dims(batch, 1, 1, outputs),
        weights=weights,
        bias=_bias(ctx, node, symbol, outputs, wide),
    )


def _pool(ctx: _Lowering, node: Node, symbol: str, p: dict[str, Any]) -> P.PoolCall:
    kernel = str(node.attr("kernel"))
    kh, kw = (int(k) for k in p["kernel"])
    return P.PoolCall(
        kernel=kernel,
        average=kernel.startswith("arm_avgpool"),
        stride=_tile(p["stride"]),
        padding=_tile(p["padding"]),
        clamp=_clamp(p),
        input_dims=P.Dims.nhwc(ctx.shape(node.inputs[0])),
        filter_dims=P.Dims(1, kh, kw, 1),
        output_dims=P.Dims.nhwc(ctx.shape(node.outputs[0])),
    )


def _block_size(ctx: _Lowering, node: Node) -> int:
    shapes = {ctx.shape(name) for name in (*node.inputs, node.outputs[0])}
    if len(shapes) != 1:
        # The elementwise kernels walk both inputs with one block_size: no broadcasting.
        raise CodegenError(f"layer {node.name!r} ({node.op.json_name}): inputs of shapes {sorted(shapes)}")
    return P.Dims.nhwc(ctx.shape(node.outputs[0])).count


def _add(ctx: _Lowering, node: Node, symbol: str, p: dict[str, Any]) -> P.AddCall:
    names = (
        "input_1_offset", "input_1_mult", "input_1_shift", "input_2_offset", "input_2_mult",
        "input_2_shift", "left_shift", "out_offset", "out_mult", "out_shift",
    )  # fmt: skip
    values = {k: int(p.get(k, 0)) for k in names}
    return P.AddCall(str(node.attr("kernel")), **values, clamp=_clamp(p), block_size=_block_size(ctx, node))


def _mul(ctx: _Lowering, node: Node, symbol: str, p: dict[str, Any]) -> P.MulCall:
    names = ("input_1_offset", "input_2_offset", "out_offset", "out_mult", "out_shift")
    values = {k: int(p.get(k, 0)) for k in names}
    return P.MulCall(str(node.attr("kernel")), **values, clamp=_clamp(p), block_size=_block_size(ctx, node))


def _softmax(ctx: _Lowering, node: Node, symbol: str, p: dict[str, Any]) -> P.SoftmaxCall:
    shape = ctx.shape(node.outputs[0])
    axis = node.attr("axis", len(shape) - 1)
    if axis != len(shape) - 1:
        raise CodegenError(f"layer {node.name!r}: arm_softmax_s8 runs over the last axis, not axis {axis}")
    rows = int(np.prod(shape[:-1], dtype=np.int64))
    return P.SoftmaxCall(
        str(node.attr("kernel")), rows, int(shape[-1]), int(p["mult"]), int(p["shift"]), int(p["diff_min"])
    )


def _requantize(ctx: _Lowering, node: Node, symbol: str, p: dict[str, Any]) -> P.RequantizeCall:
    source, target = ctx.graph.tensor(node.inputs[0]), ctx.graph.tensor(node.outputs[0])
    function = f"fixpoint_requantize_{_short(source.dtype)}_{_short(target.dtype)}"
    return P.RequantizeCall(
        kernel="fixpoint_requantize",
        function=function,
        count=P.Dims.nhwc(target.shape).count,
        input_offset=int(p["input_offset"]),
        output_offset=int(p["output_offset"]),
        multiplier=int(p["multiplier"]),
        shift=int(p["shift"]),
        clamp=_clamp(p),
    )


def _short(dtype: DType) -> str:
    return {DType.INT8: "s8", DType.INT16: "s16"}[dtype]


# -- data movement --------------------------------------------------------------------------------


def _only_int8(ctx: _Lowering, node: Node, kernel: str) -> None:
    if ctx.graph.tensor(node.outputs[0]).dtype is not DType.INT8:
        raise CodegenError(
            f"layer {node.name!r} ({node.op.json_name}) moves int16 data; {kernel} only takes int8."
            " Run the layers around it at int8, or put it before the int16 conversion"
        )


def _alias(ctx: _Lowering, node: Node, symbol: str, p: dict[str, Any]) -> P.Call:
    if ctx.tensors[node.outputs[0]].alias_of is None:
        raise CodegenError(
            f"layer {node.name!r} ({node.op.json_name}) changes the byte size of its tensor;"
            " a reshape must keep its element type and count"
        )
    return P.AliasCall()


def _transpose(ctx: _Lowering, node: Node, symbol: str, p: dict[str, Any]) -> P.TransposeCall:
    _only_int8(ctx, node, "arm_transpose_s8")
    perm = [int(a) for a in node.attr("perm")]
    lead = 4 - len(perm)
    # arm_transpose_s8's 4-D path is the general one; shorter ranks become 4-D with leading ones.
    full = tuple([*range(lead), *(a + lead for a in perm)])
    assert len(full) == 4
    return P.TransposeCall(
        "arm_transpose_s8",
        P.Dims.nhwc(ctx.shape(node.inputs[0])),
        P.Dims.nhwc(ctx.shape(node.outputs[0])),
        (full[0], full[1], full[2], full[3]),
    )


def _pad(ctx: _Lowering, node: Node, symbol: str, p: dict[str, Any]) -> P.PadCall:
    _only_int8(ctx, node, "arm_pad_s8")
    pads = [int(v) for v in node.attr("pads")]
    half = len(pads) // 2
    lead = [0] * (4 - half)
    quant = ctx.graph.tensor(node.inputs[0]).quant
    fill = int(quant.zero_point) if quant is not None else 0
    return P.PadCall(
        "arm_pad_s8",
        P.Dims.nhwc(ctx.shape(node.inputs[0])),
        P.Dims(*(lead + pads[:half])),
        P.Dims(*(lead + pads[half:])),
        fill,
    )


# arm_concatenation_s8_x copies rows of input_x contiguous values: x is the innermost axis (NHWC's C),
# then y (W), z (H) and w (N), whatever the kernel names suggest.
_CONCAT_AXES = {3: "x", 2: "y", 1: "z", 0: "w"}


def _concat(ctx: _Lowering, node: Node, symbol: str, p: dict[str, Any]) -> P.ConcatCall:
    _only_int8(ctx, node, "arm_concatenation_s8")
    out_shape = ctx.shape(node.outputs[0])
    axis = int(node.attr("axis")) + 4 - len(out_shape)
    parts, offset = [], 0
    for name in node.inputs:
        n, h, w, c = (1,) * (4 - len(ctx.shape(name))) + ctx.shape(name)
        parts.append(P.ConcatPart(ctx.tensors[name], c, w, h, n, offset))
        offset += (n, h, w, c)[axis]
    letter = _CONCAT_AXES[axis]
    size = ((1,) * (4 - len(out_shape)) + out_shape)[axis]
    return P.ConcatCall(f"arm_concatenation_s8_{letter}", letter, size, tuple(parts))


_MOVES: dict[Op, Lowerer] = {
    Op.RESHAPE: _alias,
    Op.IDENTITY: _alias,
    Op.TRANSPOSE: _transpose,
    Op.PAD: _pad,
    Op.CONCAT: _concat,
}


def _svdf(ctx: _Lowering, node: Node, symbol: str, p: dict[str, Any]) -> P.SvdfCall:
    wf, wt = ctx.graph.constant(node.inputs[1]), ctx.graph.constant(node.inputs[2])
    filters, depth = (int(d) for d in wf.shape)
    memory, rank = int(wt.shape[1]), int(p["rank"])
    units = filters // rank
    bias = ctx.graph.constant(node.inputs[3]) if node.inputs[3] else np.zeros(units, np.int32)
    kernel = str(node.attr("kernel"))
    time_ctype, time_type = ("int8_t", "int8") if kernel == "arm_svdf_s8" else ("int16_t", "int16")
    return P.SvdfCall(
        kernel=kernel,
        batch=int(ctx.shape(node.inputs[0])[0]),
        input_size=depth,
        filters=filters,
        memory=memory,
        units=units,
        rank=rank,
        input_offset=int(p["input_offset"]),
        output_offset=int(p["output_offset"]),
        input_multiplier=int(p["input_multiplier"]),
        input_shift=int(p["input_shift"]),
        output_multiplier=int(p["output_multiplier"]),
        output_shift=int(p["output_shift"]),
        input_clamp=P.Clamp(*(int(v) for v in p["input_activation"])),
        output_clamp=P.Clamp(*(int(v) for v in p["output_activation"])),
        weights_feature=ctx.constant(
            f"{symbol}_weights_feature", "int8_t", wf, node.name, f"feature weights {tuple(wf.shape)} int8"
        ),
        weights_time=ctx.constant(
            f"{symbol}_weights_time", time_ctype, wt, node.name, f"time weights {tuple(wt.shape)} {time_type}"
        ),
        bias=ctx.constant(f"{symbol}_bias", "int32_t", bias, node.name, f"bias ({units},) int32"),
        alignment=ctx.alignment,
    )


def _lstm(ctx: _Lowering, node: Node, symbol: str, p: dict[str, Any]) -> P.LstmCall:
    """The effective biases are constants: the weights' row sums times the input offset (plus the gate
    bias) and times the negated hidden zero point, as CMSIS-NN's TFLM glue computes them at prepare."""
    from quantcore.kernels.lstm import Activation
    from quantcore.runtime.recurrent_exec import lstm_params

    params = lstm_params(ctx.graph, node, p)
    batch, steps, size = ctx.shape(node.inputs[0])
    if params.time_major:  # (time, batch, features)
        batch, steps = steps, batch
    hidden = int(params.forget_gate.hidden_weights.shape[0])
    kernel = str(node.attr("kernel"))
    bias_ctype = "int64_t" if kernel == "arm_lstm_unidirectional_s16" else "int32_t"
    gates = {}
    for name in ("forget", "input", "cell", "output"):
        gate = getattr(params, f"{name}_gate")
        arrays = {}
        for part, values, ctype in (
            ("input_weights", gate.input_weights, "int8_t"),
            ("input_effective_bias", gate.input_effective_bias, bias_ctype),
            ("hidden_weights", gate.hidden_weights, "int8_t"),
            ("hidden_effective_bias", gate.hidden_effective_bias, bias_ctype),
        ):
            description = f"{name} gate {part.replace('_', ' ')} {tuple(values.shape)} {ctype}"
            arrays[part] = ctx.constant(f"{symbol}_{name}_{part}", ctype, values, node.name, description)
        gates[f"{name}_gate"] = P.LstmGateCall(
            input_multiplier=gate.input_multiplier,
            input_shift=gate.input_shift,
            hidden_multiplier=gate.hidden_multiplier,
            hidden_shift=gate.hidden_shift,
            activation="ARM_TANH" if gate.activation is Activation.TANH else "ARM_SIGMOID",
            **arrays,
        )
    return P.LstmCall(
        kernel=kernel,
        streaming=bool(node.attr("streaming", True)),
        last_step=bool(node.attr("last_step", False)),
        time_major=params.time_major,
        batch_size=int(batch),
        time_steps=int(steps),
        input_size=int(size),
        hidden_size=hidden,
        input_offset=int(p["input_offset"]),
        forget_to_cell_multiplier=params.forget_to_cell_multiplier,
        forget_to_cell_shift=params.forget_to_cell_shift,
        input_to_cell_multiplier=params.input_to_cell_multiplier,
        input_to_cell_shift=params.input_to_cell_shift,
        cell_clip=params.cell_clip,
        cell_scale_power=params.cell_scale_power,
        output_multiplier=params.output_multiplier,
        output_shift=params.output_shift,
        output_offset=params.output_offset,
        **gates,
        alignment=ctx.alignment,
    )


_KERNELS: dict[str, Lowerer] = {
    "arm_convolve_wrapper_s8": _conv,
    "arm_depthwise_conv_wrapper_s8": _conv,
    "arm_convolve_wrapper_s16": _conv,
    "arm_depthwise_conv_wrapper_s16": _conv,
    "arm_fully_connected_s8": _fully_connected,
    "arm_fully_connected_per_channel_s8": _fully_connected,
    "arm_fully_connected_s16": _fully_connected,
    "arm_avgpool_s8": _pool,
    "arm_max_pool_s8": _pool,
    "arm_avgpool_s16": _pool,
    "arm_max_pool_s16": _pool,
    "arm_elementwise_add_s8": _add,
    "arm_elementwise_add_s16": _add,
    "arm_elementwise_mul_s8": _mul,
    "arm_elementwise_mul_s16": _mul,
    "arm_softmax_s8": _softmax,
    "arm_softmax_s8_s16": _softmax,
    "fixpoint_requantize": _requantize,
    "arm_lstm_unidirectional_s8": _lstm,
    "arm_lstm_unidirectional_s16": _lstm,
    "arm_svdf_state_s16_s8": _svdf,
    "arm_svdf_s8": _svdf,
}
