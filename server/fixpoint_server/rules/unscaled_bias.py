"""unscaled-bias: a bias that CMSIS-NN's kernels read as anything but int32 round(b / (s_in * s_w[c])).

- A bias argument of an s8 kernel call whose array is not a 32-bit integer array (int8/q7_t: the
  articles' `q7_t *bias` habit; float: a float bias copied unscaled); the s16 kernels want int64. A
  cast at the call (`(const int32_t *)conv1_bias`) hides this from the compiler, not from the kernel.
- With a quant-params JSON and its model: an array that belongs to a layer (generated name
  `<prefix>_l<i>_<layer>_bias`, a user name holding the layer's identifier and "bias", or the bias
  argument of a call whose other arguments name the layer) whose values are not the layer's integer
  bias. The message names the first differing element and recognises the usual wrong scalings.
Each offers "Rescale bias from <json>" when the layer is known.

The CMSIS-NN kernel signatures, the workspace's C facts and the matching of C names to the JSON's
layers, which the other C rules use too, are in cmsis.py.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np

from fixpoint_server.findings import Code, Edit, Finding, Fix, Related
from fixpoint_server.parse.c_source import (
    ArrayDef,
    ArrayKind,
    CallSite,
    CWorkspace,
    Element,
    initializer_list,
    referenced_name,
)
from fixpoint_server.rules.cmsis import KERNELS, Kernel, Layer, Layers, source_json
from fixpoint_server.rules.context import CheckContext, FileKind, Reads
from fixpoint_server.rules.incremental import c_workspace

CODES = (Code.UNSCALED_BIAS,)
READS = Reads(
    contents=frozenset({FileKind.C_SOURCE, FileKind.C_HEADER, FileKind.PARAMS_JSON, FileKind.MODEL}),
    outside=True,
)
"""Every C file (a call in one file, its arrays in another), the JSONs and the models they name."""


_BIASY = re.compile(r"bias|(?:^|_)b(?:$|_|\d)", re.IGNORECASE)
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
    if array.declarators > 1:  # its type is shared: changing it would change the other arrays too
        message += f"; it is declared together with other arrays - split the declaration to give it {ctype}"
        fixes = ()
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
    s_in, s_w = layer.input_scales(), layer.tensor_scale(1)
    if s_in is None or s_w is None or not len(s_in) or not len(s_w):
        return ""
    per_channel = s_in.size > 1 and not np.all(s_in == s_in[0])  # a depthwise input's per-channel scales
    name = f"s_in[{channel}]" if per_channel else "s_in"
    s_in_c, s_w_c = s_in[min(channel, len(s_in) - 1)], s_w[min(channel, len(s_w) - 1)]
    return f" with {name} = {s_in_c:.6g}, s_w[{channel}] = {s_w_c:.6g}"


Scaling = Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]
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
    s_in, s_w = layer.input_scales(), layer.tensor_scale(1)  # s_in per channel: a depthwise input may vary
    n = min(len(got), len(expected))
    if s_in is None or s_w is None or n == 0 or len(s_in) < n:
        return ""
    q, values = expected[:n].astype(np.float64), np.asarray(got[:n], dtype=np.float64)
    if not values.any():
        return ": all zero - the bias is missing, or the float bias was rounded without scaling"
    scale_w = np.broadcast_to(s_w, q.shape) if s_w.size in (1, n) else None
    if scale_w is None:
        return ""
    for label, formula in _WRONG_SCALINGS:
        mistaken = formula(q, s_in[:n], scale_w)
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
