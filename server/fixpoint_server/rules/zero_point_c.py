"""wrong-zero-point (C side): kernel offsets that do not follow from the tensors' zero points.

CMSIS-NN's s8 kernels take input_offset = -zero_point of the input (in [-127, 128]) and output_offset
= +zero_point of the output (in [-128, 127]); weights are symmetric (filter_offset 0) and the s16
kernels' activations too (every offset 0). The recurrent kernels differ: cmsis_nn_svdf_params holds both
zero points themselves (arm_svdf_s8 / arm_svdf_state_s16_s8 negate the input's: `-zp_in`), and an
LSTM's output_offset is the zero point of its hidden state, which is also its output (int8 for
arm_lstm_unidirectional_s8; arm_lstm_unidirectional_s16's int16 state is symmetric, every offset 0).

Read from `.input_offset = ...` designated initializers, `params.input_offset = ...` statements (paired
with the kernel call that follows them; their struct's kind from that kernel), positional initializers
of the cmsis_nn_*_params structs, and the positional offsets of arm_elementwise_add/mul,
arm_vector_sum_s8 and arm_pad_s8 calls. Without a JSON the ranges are checked (128 as an output zero
point, or -128 as an input offset, is the uint8 habit); with one, each offset is compared with its
layer (matched by generated naming, the layer's name in the struct's name, or the call's arrays).
Each has a quick fix writing the right value.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from fixpoint_server.findings import Code, Edit, Finding, Fix, Related, Span
from fixpoint_server.parse.c_source import CallSite, CWorkspace, FieldAssignment, evaluate, referenced_name
from fixpoint_server.rules.cmsis import KERNELS, Layer, Layers, is_kernel, source_json
from fixpoint_server.rules.context import CheckContext, FileKind, Reads
from fixpoint_server.rules.incremental import c_workspace

CODES = (Code.WRONG_ZERO_POINT,)
READS = Reads(
    contents=frozenset({FileKind.C_SOURCE, FileKind.C_HEADER, FileKind.PARAMS_JSON, FileKind.MODEL}),
    outside=True,
)
"""Every C file (a call in one file, its arrays in another), the JSONs and the models they name."""


@dataclass(frozen=True)
class _Role:
    """What an offset is: which tensor's zero point it carries, with which sign, under which name in
    the layer's params (quantcore's `node.attrs["params"]`)."""

    key: str
    side: str
    """"input", "output", "pad" (the padding value: the input's zero point) or "filter"."""
    position: int
    """Which input (0 or 1) or output of the layer."""
    as_is: bool = False
    """An input's zero point itself, not negated (cmsis_nn_svdf_params.input_offset)."""
    meaning: str = ""
    """What the tensor is, where the struct says more than "input"/"output" (an LSTM's hidden state)."""

    @property
    def sign(self) -> int:
        return -1 if self.side == "input" and not self.as_is else 1

    @property
    def bounds(self) -> tuple[int, int]:
        # input_offset = -zp with zp in [-128, 127]; the others are zero points themselves
        return (-127, 128) if self.sign < 0 else (-128, 127)


_IN, _OUT = _Role("input_offset", "input", 0), _Role("output_offset", "output", 0)
_STRUCT_FIELDS = {
    "input_offset": _IN,
    "output_offset": _OUT,
    "filter_offset": _Role("filter_offset", "filter", 0),
}
_SVDF_FIELDS = {
    "input_offset": _Role("input_offset", "input", 0, as_is=True, meaning="the input's int8 zero point"),
    "output_offset": _Role("output_offset", "output", 0, meaning="the output's int8 zero point"),
}
"""cmsis_nn_svdf_params: both zero points as they are (arm_svdf_s8.c: `-zp_in` is what it adds)."""
_LSTM_FIELDS = {
    "input_offset": _IN,
    "output_offset": _Role(
        "output_offset", "output", 0, meaning="the hidden state's int8 zero point (the LSTM's output too)"
    ),
}
"""cmsis_nn_lstm_params: the hidden state's zero point is what arm_nn_lstm_step_s8 adds to the output
(arm_elementwise_mul_s16_s8's out_offset); input_offset is -zp like the fully connected kernels'."""
_STRUCT_ROLES = {"cmsis_nn_svdf_params": _SVDF_FIELDS, "cmsis_nn_lstm_params": _LSTM_FIELDS}
_KERNEL_ROLES = {
    "arm_svdf_s8": _SVDF_FIELDS,
    "arm_svdf_state_s16_s8": _SVDF_FIELDS,
    "arm_lstm_unidirectional_s8": _LSTM_FIELDS,
    "arm_lstm_unidirectional_s16": _LSTM_FIELDS,
}
_POSITIONAL = {
    "cmsis_nn_conv_params": ("input_offset", "output_offset"),
    "cmsis_nn_dw_conv_params": ("input_offset", "output_offset"),
    "cmsis_nn_transpose_conv_params": ("input_offset", "output_offset"),
    "cmsis_nn_fc_params": ("input_offset", "filter_offset", "output_offset"),
    "cmsis_nn_svdf_params": ("rank", "input_offset", "output_offset"),
    "cmsis_nn_lstm_params": (*("time_major", "batch_size", "time_steps", "input_size", "hidden_size"),
                             "input_offset", *("",) * 8, "output_offset"),
}  # fmt: skip
"""The order of the offsets in CMSIS-NN's parameter structs, for `= {-11, -128, ...}` initializers."""
_ELEMENTWISE = {
    "input_1_offset": _Role("input_1_offset", "input", 0),
    "input_2_offset": _Role("input_2_offset", "input", 1),
    "out_offset": _Role("out_offset", "output", 0),
}
_CALL_OFFSETS = {
    **dict.fromkeys(("arm_elementwise_add_s8", "arm_elementwise_mul_s8"), _ELEMENTWISE),
    **dict.fromkeys(("arm_elementwise_add_s16", "arm_elementwise_mul_s16"), _ELEMENTWISE),
    "arm_vector_sum_s8": {"lhs_offset": _IN},  # the fully-connected layer's input_offset
    "arm_pad_s8": {"pad_value": _Role("pad_value", "pad", 0)},
}


@dataclass(frozen=True)
class _Offset:
    role: _Role
    value: int
    label: str
    """How the message names it: "input_offset of l0_conv1_params", "out_offset of arm_elementwise_add_s8"."""
    path: Path
    span: Span
    wide: bool
    layer: Layer | None


def check(ctx: CheckContext) -> list[Finding]:
    ws = c_workspace(ctx)
    layers = Layers(ctx)
    findings = []
    for offset in (*_struct_offsets(ws, layers), *_call_offsets(ws, layers)):
        finding = _judge(offset)
        if finding is not None:
            findings.append(finding)
    return findings


# ---------------------------------------------------------------------------------------- reading


def _struct_offsets(ws: CWorkspace, layers: Layers) -> Iterator[_Offset]:
    users = _struct_users(ws)
    for path in ws.path_order():
        for assignment in ws.files[path].fields:
            name = _field_name(assignment)
            if name not in _STRUCT_FIELDS or assignment.int_value is None:
                continue
            calls = users.get(assignment.var, [])
            if assignment.kind != "designated":
                calls = _next_call(calls, path, assignment)
            role = _struct_role(name, assignment.struct_type, calls)
            if role is None:
                continue
            wide = any(call.name.endswith("_s16") for _, call in calls)
            layer = _struct_layer(ws, layers, path, assignment, calls) if layers else None
            label = f"{name} of {assignment.var}"
            yield _Offset(role, assignment.int_value, label, path, assignment.value_span, wide, layer)


def _struct_role(name: str, struct_type: str | None, calls: list[tuple[Path, CallSite]]) -> _Role | None:
    """What an offset field carries, by its struct's declared type, else by the kernel it is passed to
    (a `p.input_offset = x;` statement has no type in view); None for a field that struct lacks."""
    roles = _STRUCT_ROLES.get(struct_type or "")
    for _, call in calls if roles is None else ():
        roles = roles or _KERNEL_ROLES.get(call.name)
    if roles is None:
        return _STRUCT_FIELDS[name]
    return roles.get(name)


def _field_name(assignment: FieldAssignment) -> str:
    if assignment.field or assignment.position is None:
        return assignment.field
    order = _POSITIONAL.get(assignment.struct_type or "", ())
    return order[assignment.position] if assignment.position < len(order) else ""


def _struct_users(ws: CWorkspace) -> dict[str, list[tuple[Path, CallSite]]]:
    """Struct name -> the kernel calls that take it (`&conv_params`)."""
    users: dict[str, list[tuple[Path, CallSite]]] = {}
    for path, call in ws.calls():
        if is_kernel(call.name) and not call.name.endswith("_get_buffer_size"):
            for arg in call.args:
                name = referenced_name(arg.text)
                if name is not None and arg.text.lstrip().startswith("&"):
                    users.setdefault(name, []).append((path, call))
    return users


def _next_call(
    calls: list[tuple[Path, CallSite]], path: Path, assignment: FieldAssignment
) -> list[tuple[Path, CallSite]]:
    """The call a statement `p.input_offset = x;` prepares: the next one in its function taking &p
    (a struct reused for every layer gets new offsets before each call)."""
    later = [
        (p, c)
        for p, c in calls
        if p == path and c.function == assignment.function and c.start > assignment.start
    ]
    return [min(later, key=lambda pc: pc[1].start)] if later else []


def _struct_layer(
    ws: CWorkspace,
    layers: Layers,
    path: Path,
    assignment: FieldAssignment,
    calls: list[tuple[Path, CallSite]],
) -> Layer | None:
    source = source_json(ws, path)
    found = layers.named(assignment.var, source)
    for call_path, call in calls:
        found = found or layers.of_call(call, source_json(ws, call_path))
    return found


def _call_offsets(ws: CWorkspace, layers: Layers) -> Iterator[_Offset]:
    for path, call in ws.calls():
        roles = _CALL_OFFSETS.get(call.name)
        kernel = KERNELS.get(call.name)
        if roles is None or kernel is None:
            continue
        layer = layers.of_call(call, source_json(ws, path)) if layers else None
        for param, role in roles.items():
            arg = kernel.argument(call, param)
            value = evaluate(arg.text, ws.defines_for(path)) if arg is not None else None
            if arg is not None and value is not None:
                label = f"{param} of {call.name}"
                yield _Offset(role, value, label, path, arg.span, call.name.endswith("_s16"), layer)


# ---------------------------------------------------------------------------------------- judging


def _judge(offset: _Offset) -> Finding | None:
    role, value = offset.role, offset.value
    if role.side == "filter" or offset.wide:
        if value == 0:
            return None
        why = (
            "int8 weights are symmetric (zero point 0) in CMSIS-NN's s8 scheme" if role.side == "filter"
            else "the s16 kernels take symmetric int16 activations (zero point 0)"
        )  # fmt: skip
        return _finding(offset, f"{offset.label} is {value}, but {why}", 0, "Set it to 0", True)
    if offset.layer is not None and (expected := _expected(offset)) is not None:
        return _against_layer(offset, *expected)
    return _out_of_range(offset)


def _expected(offset: _Offset) -> tuple[int, str | None, int | None] | None:
    """(expected value, tensor name, its zero point) from the layer's params and the JSON's tensors."""
    layer, role = offset.layer, offset.role
    assert layer is not None
    names = layer.node.outputs if role.side == "output" else [i for i in layer.node.inputs if i]
    tensor = names[role.position] if role.position < len(names) else None
    quant = layer.model.graph.tensor(tensor).quant if tensor is not None else None
    zero_point = int(quant.zero_point) if quant is not None and quant.zero_point.size == 1 else None
    params = layer.node.attrs.get("params") or {}
    if isinstance(params.get(role.key), int):
        return int(params[role.key]), tensor, zero_point
    if zero_point is not None:
        return role.sign * zero_point, tensor, zero_point
    return None


def _against_layer(
    offset: _Offset, expected: int, tensor: str | None, zero_point: int | None
) -> Finding | None:
    value, role, layer = offset.value, offset.role, offset.layer
    assert layer is not None
    if value == expected:
        return None
    verb = "writes" if role.side == "output" else "reads"
    rule = "the negated zero point" if role.sign < 0 else "the zero point"
    rule += f" ({role.meaning})" if role.meaning else ""
    source = layer.params.path.name
    has = f" {tensor!r} with zero point {zero_point} ({source})" if tensor is not None else f" ({source})"
    message = (
        f"{offset.label} is {value}, but layer {layer.name!r} {verb}{has}: it must be {rule},"
        f" {expected}{_habit(role, value, expected)}"
    )
    related: tuple[Related, ...] = ()
    if tensor is not None:
        where = layer.params.span(("tensors", tensor, "zero_point"))
        related = (Related(layer.params.path, where, f"zero point of {tensor!r}"),)
    finding = _finding(offset, message, expected, f"Set {role.key} to {expected} (from {source})", True)
    return Finding(
        finding.code, finding.message, finding.path, finding.span, None, finding.fixes, related,
        {**finding.data, "layer": layer.name},
    )  # fmt: skip


def _habit(role: _Role, value: int, expected: int) -> str:
    if _uint8_habit(role, value):
        return " - 128 is the uint8 habit; an int8 zero point is in [-128, 127]"
    if expected != 0 and value == -expected:
        return " - the sign is flipped"
    if abs(value - expected) == 128:
        return " - off by 128: a uint8 zero point (the int8 one + 128)?"
    return ""


def _uint8_habit(role: _Role, value: int) -> bool:
    """128 written as a zero point: output_offset 128, or input_offset -128 (zero point 128)."""
    return value == 128 * role.sign


def _out_of_range(offset: _Offset) -> Finding | None:
    role, value = offset.role, offset.value
    low, high = role.bounds
    if low <= value <= high:
        return None
    if role.sign < 0:
        meaning = "input_offset is the negated int8 zero point of the input, so the zero point would be"
        meaning += f" {-value}"
    else:
        meaning = f"it is {role.meaning or 'the int8 zero point'} itself"
    message = f"{offset.label} is {value}, outside [{low}, {high}] for an s8 kernel: {meaning}"
    if not _uint8_habit(role, value):
        return _finding(offset, message, None, "", False)
    message += "; 128 as a zero point is the uint8 habit (an int8 zero point is in [-128, 127])"
    title = "Set it to 0, the int8 zero point of uint8's 128 (the same real range)"
    return _finding(offset, message, 0, title, False)


def _finding(offset: _Offset, message: str, fixed: int | None, title: str, preferred: bool) -> Finding:
    fixes = (
        ()
        if fixed is None
        else (Fix(title, (Edit(offset.path, offset.span, str(fixed)),), preferred=preferred),)
    )
    data = {"offset": offset.role.key, "value": offset.value, "expected": fixed}
    return Finding(Code.WRONG_ZERO_POINT, message, offset.path, offset.span, None, fixes, (), data)
