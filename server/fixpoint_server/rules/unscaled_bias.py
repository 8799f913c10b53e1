"""unscaled-bias: a bias that CMSIS-NN's kernels read as anything but int32 round(b / (s_in * s_w[c])).

- A bias argument of an s8 kernel call whose array is not a 32-bit integer array (int8/q7_t: the
  articles' `q7_t *bias` habit; float: a float bias copied unscaled); the s16 kernels want int64. A
  cast at the call (`(const int32_t *)conv1_bias`) hides this from the compiler, not from the kernel.
- With a quant-params JSON and its model: an array that belongs to a layer (generated name
  `<prefix>_l<i>_<layer>_bias`, a user name holding the layer's identifier and "bias", or the bias
  argument of a call whose other arguments name the layer) whose values are not the layer's integer
  bias. The message names the first differing element and recognises the usual wrong scalings.
Each offers "Rescale bias from <json>" when the layer is known.

This module also holds what the C rules share: the CMSIS-NN kernel signatures (KERNELS), the
workspace's C facts (c_workspace) and the matching of C names to the JSON's layers (Layers).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from fixpoint_server.findings import Code, Edit, Finding, Fix, Related
from fixpoint_server.parse.c_source import (
    Argument,
    ArrayDef,
    ArrayKind,
    CallSite,
    CWorkspace,
    Element,
    initializer_list,
    referenced_name,
)
from fixpoint_server.parse.params import ParamsFile, QuantizedModel
from fixpoint_server.rules.context import CheckContext
from quantcore.codegen.names import c_identifier
from quantcore.ir import Node

CODES = (Code.UNSCALED_BIAS,)

# ------------------------------------------------------------------------------ CMSIS-NN kernels


@dataclass(frozen=True)
class Kernel:
    """A CMSIS-NN function's parameters by name, in order (arm_nnfunctions.h of CMSIS-NN v7)."""

    name: str
    params: tuple[str, ...]
    bias_bytes: int | None = None
    """Bytes of one bias element the kernel reads: 4 (int32) for s8, 8 (int64) for s16."""

    def argument(self, call: CallSite, param: str) -> Argument | None:
        if param not in self.params:
            return None
        index = self.params.index(param)
        return call.args[index] if index < len(call.args) else None


_CONV = ("ctx", "conv_params", "quant_params", "input_dims", "input_data", "filter_dims", "filter_data",
         "bias_dims", "bias_data", "output_dims", "output_data")  # fmt: skip
_CONV_UPSCALE = (*_CONV[:9], "upscale_dims", *_CONV[9:])
_DEPTHWISE = ("ctx", "dw_conv_params", *_CONV[2:])
_FULLY_CONNECTED = ("ctx", "fc_params", *_CONV[2:])
_TRANSPOSE = ("ctx", "output_ctx", "transpose_conv_params", *_CONV[2:])
_POOL = ("ctx", "pool_params", "input_dims", "input_data", "filter_dims", "output_dims", "output_data")
_ADD = ("input_1_vect", "input_2_vect", "input_1_offset", "input_1_mult", "input_1_shift", "input_2_offset",
        "input_2_mult", "input_2_shift", "left_shift", "output", "out_offset", "out_mult", "out_shift",
        "out_activation_min", "out_activation_max", "block_size")  # fmt: skip
_MUL = ("input_1_vect", "input_2_vect", "input_1_offset", "input_2_offset", "output", "out_offset",
        "out_mult", "out_shift", "out_activation_min", "out_activation_max", "block_size")  # fmt: skip


def _kernels() -> dict[str, Kernel]:
    table = [Kernel(name, _CONV, 4) for name in (
        "arm_convolve_wrapper_s8", "arm_convolve_1x1_s8_fast", "arm_convolve_1x1_s8", "arm_convolve_1_x_n_s8",
    )]  # fmt: skip
    table += [Kernel("arm_convolve_s8", _CONV_UPSCALE, 4), Kernel("arm_convolve_wrapper_s16", _CONV, 8)]
    table += [Kernel("arm_convolve_s16", _CONV, 8)]
    table += [Kernel(name, _DEPTHWISE, 4) for name in (
        "arm_depthwise_conv_wrapper_s8", "arm_depthwise_conv_s8", "arm_depthwise_conv_3x3_s8",
        "arm_depthwise_conv_s8_opt",
    )]  # fmt: skip
    table += [Kernel(name, _DEPTHWISE, 8) for name in (
        "arm_depthwise_conv_wrapper_s16", "arm_depthwise_conv_s16", "arm_depthwise_conv_fast_s16",
    )]  # fmt: skip
    table += [Kernel(name, _FULLY_CONNECTED, 4) for name in (
        "arm_fully_connected_s8", "arm_fully_connected_per_channel_s8", "arm_fully_connected_wrapper_s8",
    )]  # fmt: skip
    table += [Kernel("arm_fully_connected_s16", _FULLY_CONNECTED, 8)]
    table += [
        Kernel(name, _TRANSPOSE, 4) for name in ("arm_transpose_conv_wrapper_s8", "arm_transpose_conv_s8")
    ]
    table += [Kernel(name, _POOL) for name in ("arm_max_pool_s8", "arm_avgpool_s8", "arm_max_pool_s16",
                                               "arm_avgpool_s16")]  # fmt: skip
    table += [Kernel("arm_elementwise_add_s8", _ADD), Kernel("arm_elementwise_add_s16", _ADD)]
    table += [Kernel("arm_elementwise_mul_s8", _MUL), Kernel("arm_elementwise_mul_s16", _MUL)]
    table += [
        Kernel("arm_vector_sum_s8", ("vector_sum_buf", "vector_cols", "vector_rows", "vector_data",
                                     "lhs_offset", "rhs_offset", "bias_data"), 4),
        Kernel("arm_pad_s8", ("input", "output", "pad_value", "input_size", "pre_pad", "post_pad")),
        Kernel("arm_softmax_s8", ("input", "num_rows", "row_size", "mult", "shift", "diff_min", "output")),
    ]  # fmt: skip
    return {k.name: k for k in table}


KERNELS = _kernels()
"""The kernels whose arguments the C rules read, by name."""
_KERNEL_SUFFIX = re.compile(r"_(?:s8|s16|s4|q7|q15)(?:_|$)")


def is_kernel(name: str) -> bool:
    """Whether `name` is a CMSIS-NN integer kernel (or helper) whose pointers it reads with SIMD loads."""
    return name in KERNELS or (name.startswith("arm_") and _KERNEL_SUFFIX.search(name) is not None)


# --------------------------------------------------------------------------------- the C workspace


def c_workspace(ctx: CheckContext) -> CWorkspace:
    """Every C file's facts, merged (built once per snapshot and shared by the C rules)."""

    def build() -> CWorkspace:
        files = {}
        for path in ctx.c_files():
            cfile = ctx.c_file(path)
            if cfile is not None:
                files[path] = cfile
        return CWorkspace(files)

    return ctx.memo("c-workspace", build)


def source_json(ws: CWorkspace, path: Path) -> str | None:
    """The JSON a generated file names in its header (its layers are the ones to compare with)."""
    cfile = ws.files.get(path)
    return cfile.generated.params_name if cfile is not None and cfile.generated is not None else None


# -------------------------------------------------------------------------------------- the layers


@dataclass(frozen=True)
class Layer:
    params: ParamsFile
    model: QuantizedModel
    index: int
    node: Node
    ident: str
    """c_identifier(node.name): how the layer's name appears in C."""

    @property
    def name(self) -> str:
        return self.node.name

    def tensor_scale(self, position: int) -> np.ndarray | None:
        names = self.node.inputs
        if position >= len(names) or not names[position]:
            return None
        quant = self.model.graph.tensor(names[position]).quant
        return None if quant is None else np.asarray(quant.scale, dtype=np.float64).reshape(-1)

    def bias(self) -> np.ndarray | None:
        """The layer's integer bias as the quantized graph holds it, None when the layer has none."""
        if len(self.node.inputs) < 3 or not self.node.inputs[2]:
            return None
        data = self.model.graph.tensor(self.node.inputs[2]).data
        return None if data is None else np.asarray(data, dtype=np.int64).reshape(-1)


_GENERATED = re.compile(r"(?:^|_)l(\d+)_")
_BIASY = re.compile(r"bias|(?:^|_)b(?:$|_|\d)", re.IGNORECASE)


class Layers:
    """The layers of every quant-params JSON whose model builds, and which C names belong to them."""

    def __init__(self, ctx: CheckContext) -> None:
        self.layers: list[Layer] = []
        for params in ctx.params_files():
            model = ctx.quantized(params) if params.document is not None else None
            if model is None or model.error is not None:
                continue  # params_json and stale-generated say why; nothing to compare with here
            for index, node in enumerate(model.graph.nodes):
                self.layers.append(Layer(params, model, index, node, c_identifier(node.name)))

    def __bool__(self) -> bool:
        return bool(self.layers)

    def _of(self, source: str | None) -> list[Layer]:
        mine = [layer for layer in self.layers if source is not None and layer.params.path.name == source]
        return mine or self.layers

    def generated(self, name: str, source: str | None = None) -> Layer | None:
        """The layer of a generated name: `model_l3_pwconv_bias`, `l3_pwconv_params`, `l3_pwconv`."""
        for match in _GENERATED.finditer(name):
            rest = name[match.end() :]
            for layer in self._of(source):
                if layer.index == int(match.group(1)) and (
                    rest == layer.ident or rest.startswith(layer.ident + "_")
                ):
                    return layer
        return None

    def named(self, name: str, source: str | None = None) -> Layer | None:
        """The layer a C name belongs to: generated naming, else the longest layer identifier the name
        holds between non-alphanumerics (`conv1_bias`, `CONV1_BIAS`, `conv1Params`; not `conv10_bias`)."""
        found = self.generated(name, source)
        if found is not None:
            return found
        best: Layer | None = None
        for layer in self._of(source):
            if len(layer.ident) < 2 or (best is not None and len(best.ident) >= len(layer.ident)):
                continue
            # case-insensitive name, but a lowercase letter after it continues a longer word (camelCase ok)
            pattern = rf"(?<![A-Za-z0-9])(?i:{re.escape(layer.ident)})(?![a-z0-9])"
            if re.search(pattern, name):
                best = layer
        return best

    def of_call(self, call: CallSite, source: str | None = None) -> Layer | None:
        """The layer a kernel call runs: its generated function (`l4_residual`), the names of its
        weights, bias or parameter structs, or the name of the function it is in."""
        if call.function is not None and (found := self.generated(call.function, source)) is not None:
            return found
        kernel = KERNELS.get(call.name)
        roles = ("filter_data", "bias_data", "conv_params", "dw_conv_params", "fc_params", "quant_params")
        for role in roles if kernel is not None else ():
            arg = kernel.argument(call, role) if kernel is not None else None
            name = referenced_name(arg.text) if arg is not None else None
            if name is not None and (found := self.named(name, source)) is not None:
                return found
        return self.named(call.function, source) if call.function is not None else None


# ------------------------------------------------------------------------------------------ the rule

_FLOATS = ("float", "double", "float32_t", "float64_t", "float16_t", "__fp16")


def check(ctx: CheckContext) -> list[Finding]:
    ws = c_workspace(ctx)
    layers = Layers(ctx)
    findings: list[Finding] = []
    typed: set[tuple[Path, str]] = set()
    owners: dict[tuple[Path, str], Layer] = {}
    for path, call in ws.calls():
        kernel = KERNELS.get(call.name)
        if kernel is None or kernel.bias_bytes is None:
            continue
        target = _bias_array(ws, path, call, kernel)
        if target is None:
            continue
        bias_path, array, wanted = target
        layer = layers.of_call(call, source_json(ws, path)) if layers else None
        if layer is not None:
            owners.setdefault((bias_path, array.name), layer)
        if (bias_path, array.name) not in typed and (wrong := _wrong_type(array, wanted)) is not None:
            typed.add((bias_path, array.name))
            findings.append(_type_finding(ws, path, call, kernel, bias_path, array, wrong, wanted, layer))
    for (bias_path, array), layer in _named_biases(ws, layers, owners):
        if (bias_path, array.name) not in typed:
            findings.extend(_values_finding(ws, bias_path, array, layer))
    return findings


def _bias_array(
    ws: CWorkspace, path: Path, call: CallSite, kernel: Kernel
) -> tuple[Path, ArrayDef, int] | None:
    """(file, array, bytes per element the kernel reads) of the call's bias argument, following a
    `cmsis_nn_bias_data` struct (arm_convolve_wrapper_s16) to its `.data` array."""
    arg = kernel.argument(call, "bias_data")
    name = referenced_name(arg.text) if arg is not None else None
    if name is None or name in ("NULL", "nullptr"):
        return None
    wanted = kernel.bias_bytes or 4
    found = ws.definition(name, near=path)
    if found is None:
        fields = {f.field: f for _, f in ws.fields_of(name)}
        data = referenced_name(fields["data"].value) if "data" in fields else None
        if data is None:
            return None
        if "is_int32_bias" in fields and fields["is_int32_bias"].value.strip() in ("true", "1"):
            wanted = 4
        found = ws.definition(data, near=path)
    if found is None or (found[1].kind is ArrayKind.LOCAL and found[0] != path):
        return None
    return found[0], found[1], wanted


def _wrong_type(array: ArrayDef, wanted: int) -> str | None:
    """Why the element type cannot be the kernel's bias; None when it can (or is unknown)."""
    if array.ctype in _FLOATS:
        return "floats: a float bias copied unscaled"
    if array.elem_size is None or array.elem_size == wanted:
        return None
    if array.elem_size == 1:
        return "8-bit integers: the `q7_t *bias` habit of CMSIS-NN's legacy q7 API"
    return f"{8 * array.elem_size}-bit integers"


def _type_finding(
    ws: CWorkspace, path: Path, call: CallSite, kernel: Kernel, bias_path: Path, array: ArrayDef,
    wrong: str, wanted: int, layer: Layer | None,
) -> Finding:  # fmt: skip
    arg = kernel.argument(call, "bias_data")
    assert arg is not None
    ctype = "int32_t" if wanted == 4 else "int64_t"
    cast = (
        " (the cast at the call hides this from the compiler, not from the kernel)" if "(" in arg.text else ""
    )
    message = (
        f"bias {array.name} is an array of {array.ctype} ({wrong}), but {kernel.name} reads bias_data as"
        f" {ctype}: each channel's"
        f" bias must be the {8 * wanted}-bit integer round(b / (s_in * s_w[c])), which the kernel adds"
        f" to its {8 * wanted}-bit accumulator; this array is read {wanted} bytes at a time{cast}"
    )
    related = (Related(path, arg.span, f"passed as bias_data to {kernel.name} here"),)
    fixes = _rescale_fixes(ws, bias_path, array, layer, ctype) if layer is not None else ()
    data = {"array": array.name, "kernel": kernel.name, "expected_type": ctype}
    return Finding(Code.UNSCALED_BIAS, message, bias_path, array.type_span, None, fixes, related, data)


def _named_biases(
    ws: CWorkspace, layers: Layers, owners: dict[tuple[Path, str], Layer]
) -> Iterator[tuple[tuple[Path, ArrayDef], Layer]]:
    """Bias arrays with a layer: passed to a call of that layer, or named after it."""
    if not layers:
        return
    for path, array in ws.arrays():
        if array.kind is not ArrayKind.DEFINITION or array.init_start is None:
            continue
        layer = owners.get((path, array.name))
        if layer is None and _BIASY.search(array.name):
            layer = layers.named(array.name, source_json(ws, path))
        if layer is not None and layer.bias() is not None:
            yield (path, array), layer


def _values_finding(ws: CWorkspace, path: Path, array: ArrayDef, layer: Layer) -> Iterator[Finding]:
    expected = layer.bias()
    elements = ws.elements(path, array)
    if expected is None or elements is None:
        return
    got = [e.value for e in elements]
    n = len(expected)
    differ = [c for c in range(min(n, len(got))) if got[c] != expected[c]]
    if not differ and len(got) >= n:
        return
    yield _mismatch(ws, path, array, layer, elements, expected, differ)


def _mismatch(
    ws: CWorkspace, path: Path, array: ArrayDef, layer: Layer, elements: list[Element], expected: np.ndarray,
    differ: list[int],
) -> Finding:  # fmt: skip
    got = [e.value for e in elements]
    source = layer.params.path.name
    cfile = ws.files[path]
    if differ:
        c = differ[0]
        where = cfile.span(elements[c].start, elements[c].end)
        head = f"{array.name}[{c}] is {got[c]}, but layer {layer.name!r} of {source} has bias {expected[c]}"
        tail = f"; {len(differ)} of {len(expected)} values differ{_diagnosis(layer, got, expected)}"
    else:
        where = array.init_span or array.name_span
        head = f"{array.name} has {len(got)} values, but layer {layer.name!r} of {source} has"
        head += f" {len(expected)} channels"
        tail = ""
    message = f"{head} (round(b / (s_in * s_w[c])){_scales(layer, differ[0] if differ else 0)}){tail}"
    fixes = _rescale_fixes(ws, path, array, layer, None)
    data = {"array": array.name, "layer": layer.name, "expected": [int(v) for v in expected]}
    return Finding(Code.UNSCALED_BIAS, message, path, where, None, fixes, (), data)


def _scales(layer: Layer, channel: int) -> str:
    s_in, s_w = layer.tensor_scale(0), layer.tensor_scale(1)
    if s_in is None or s_w is None or not len(s_in) or not len(s_w):
        return ""
    return f" with s_in = {s_in[0]:.6g}, s_w[{channel}] = {s_w[min(channel, len(s_w) - 1)]:.6g}"


Scaling = Callable[[np.ndarray, float, np.ndarray], np.ndarray]
_WRONG_SCALINGS: tuple[tuple[str, Scaling], ...] = (
    ("the float bias rounded: it was never divided by s_in * s_w[c]", lambda q, s_in, s_w: q * s_in * s_w),
    ("round(b / s_w[c]): the input scale s_in is missing", lambda q, s_in, s_w: q * s_in),
    ("round(b / s_in): the weight scale s_w[c] is missing", lambda q, s_in, s_w: q * s_w),
    ("round(b / (s_in * s_w[c] * 127)): scaled by an extra 127", lambda q, s_in, s_w: q / 127.0),
    ("round(b / (s_in * s_w[c])^2): divided by the scales twice", lambda q, s_in, s_w: q / (s_in * s_w)),
    ("round(b / (s_in * s_w[0])): one weight scale for every channel (per-tensor)",
     lambda q, s_in, s_w: q * s_w / s_w[0]),
)  # fmt: skip
"""Known wrong bias scalings as functions of the right integers q = b / (s_in * s_w): with b = q * s_in
* s_w, each is what the mistaken formula gives (up to the rounding of b, far below 1)."""


def _diagnosis(layer: Layer, got: list[int], expected: np.ndarray) -> str:
    s_in, s_w = layer.tensor_scale(0), layer.tensor_scale(1)
    n = min(len(got), len(expected))
    if s_in is None or s_w is None or n == 0:
        return ""
    q, values = expected[:n].astype(np.float64), np.asarray(got[:n], dtype=np.float64)
    if not values.any():
        return ": all zero - the bias is missing, or the float bias was rounded without scaling"
    scale_w = np.broadcast_to(s_w, q.shape) if s_w.size in (1, n) else None
    if scale_w is None:
        return ""
    for label, formula in _WRONG_SCALINGS:
        mistaken = formula(q, float(s_in[0]), scale_w)
        candidate = np.sign(mistaken) * np.floor(np.abs(mistaken) + 0.5)
        close = np.abs(values - candidate) <= np.maximum(1.0, 0.01 * np.abs(candidate))
        if close.all() and not np.array_equal(candidate, q):
            return f": looks like {label}"
    return ""


def _rescale_fixes(
    ws: CWorkspace, path: Path, array: ArrayDef, layer: Layer, ctype: str | None
) -> tuple[Fix, ...]:
    """Replace the initializer (and a wrong element type) with the layer's integer bias."""
    expected = layer.bias()
    cfile = ws.files.get(path)
    region = initializer_list(cfile.masked, array, ws.defines_for(path)) if cfile is not None else None
    if expected is None or cfile is None or region is None:
        return ()
    count = ws.count(path, array) or 0
    values = [int(v) for v in expected] + [0] * max(0, count - len(expected))  # keep the zero padding
    edits = [Edit(path, cfile.span(*region), _format_list(values))]
    if ctype is not None:
        edits.insert(0, Edit(path, array.type_span, ctype))
    if count and count < len(expected) and len(array.dims) == 1 and array.dims[0]:
        edits.insert(0, Edit(path, array.dims_span, f"[{len(expected)}]"))
    title = f"Rescale bias from {layer.params.path.name}"
    return (Fix(title, tuple(edits), preferred=True),)


def _format_list(values: list[int]) -> str:
    """Eight per line, as the generated model_data.c writes them."""
    if len(values) <= 8:
        return "{" + ", ".join(str(v) for v in values) + "}"
    rows = [", ".join(str(v) for v in values[i : i + 8]) + "," for i in range(0, len(values), 8)]
    return "{\n" + "".join(f"    {row}\n" for row in rows) + "}"
