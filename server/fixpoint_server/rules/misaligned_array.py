"""misaligned-array: kernel-facing arrays without the project's alignment, or not padded to it.

CMSIS-NN's kernels read weights, biases, requantization tables and activations with word and SIMD
loads: LDRD/LDM (which fault on unaligned addresses) and packed 32-bit loads on the DSP cores, 128-bit
vector loads (VLDRB/VLDRW, fastest on 16-byte boundaries, some faulting on misaligned words) with MVE on
Cortex-M55. An array counts as kernel-facing when it is
- an argument of an arm_*_s8 / _s16 (or legacy _q7 / _q15) kernel call,
- the value of a field (`.multiplier = x`, `.buf = scratch`) of a struct passed to such a call or of a
  cmsis_nn_* type,
- named like one (weight, wt, bias, arena, scratch, buffer), or
- defined in a Fixpoint-generated file.
Its alignment must be at least the project's `alignment` (default 16) and its size a multiple of it,
so the next array starts aligned and the last vector load stays inside the array. Quick fixes add
`__attribute__((aligned(N)))` (or raise the value written), and pad the array with zeros.
"""

from __future__ import annotations

import fnmatch
import functools
import re
from collections.abc import Iterator
from pathlib import Path

from fixpoint_server.findings import Code, Edit, Finding, Fix
from fixpoint_server.parse.c_source import ArrayDef, ArrayKind, CFile, CWorkspace, evaluate, referenced_name
from fixpoint_server.rules.cmsis import KERNELS, c_workspace, is_kernel
from fixpoint_server.rules.context import CheckContext

CODES = (Code.MISALIGNED_ARRAY,)

_NAME_PARTS = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")
_KERNEL_FACING_WORDS = ("weight", "wt", "bias", "arena", "scratch", "buffer", "buff")
_SIZE_WORDS = ("sizeof", "ARRAY_SIZE", "COUNT_OF", "countof", "_countof", "NELEMS", "ARRAY_LEN")
_NOT_KERNEL_TYPES = ("char", "float", "double", "float32_t", "float64_t", "bool", "_Bool")


def check(ctx: CheckContext) -> list[Finding]:
    required = ctx.project.alignment
    ws = c_workspace(ctx)
    uses = _kernel_uses(ws)
    sized: set[str] | None = None
    findings: list[Finding] = []
    for path, array in ws.arrays():
        if array.kind is not ArrayKind.DEFINITION or _vendored(ctx, path):
            continue
        use = uses.get(array.name) or _by_name_or_file(ws, path, array)
        if use is None:
            continue
        found = _alignment_finding(ws, path, array, use, required)
        if found is not None:
            findings.append(found)
        total = ws.total_bytes(path, array)
        if total is not None and total > 0 and total % required:
            sized = _sized_names(ctx, ws) if sized is None else sized
            findings.append(_padding_finding(ws, path, array, use, required, total, array.name in sized))
    return findings


def _kernel_uses(ws: CWorkspace) -> dict[str, str]:
    """Array name -> how a kernel call reaches it: as an argument, or through a struct's field."""
    uses: dict[str, str] = {}
    passed_structs: dict[str, str] = {}
    for _, call in ws.calls():
        if not is_kernel(call.name):
            continue
        kernel = KERNELS.get(call.name)
        for index, arg in enumerate(call.args):
            name = referenced_name(arg.text)
            if name is None:
                continue
            role = (
                kernel.params[index]
                if kernel is not None and index < len(kernel.params)
                else f"argument {index + 1}"
            )
            uses.setdefault(name, f"it is passed as {role} to {call.name}")
            passed_structs.setdefault(name, call.name)
    for path in sorted(ws.files):
        for assignment in ws.files[path].fields:
            name = referenced_name(assignment.value)
            kernel_name = passed_structs.get(assignment.var)
            cmsis_type = (assignment.struct_type or "").startswith("cmsis_nn_")
            if name is None or not assignment.field or not (kernel_name or cmsis_type):
                continue
            via = f", passed to {kernel_name}" if kernel_name else ""
            uses.setdefault(name, f"the kernels read it through {assignment.var}.{assignment.field}{via}")
    return uses


def _by_name_or_file(ws: CWorkspace, path: Path, array: ArrayDef) -> str | None:
    cfile = ws.files[path]
    if cfile.generated is not None:
        return "Fixpoint generated it for the CMSIS-NN kernels"
    if array.ctype in _NOT_KERNEL_TYPES or array.elem_size is None:
        return None  # text and float buffers named "buffer" are not what the s8 kernels read
    parts = [p.lower() for p in _NAME_PARTS.findall(array.name)]
    word = next(
        (w for w in _KERNEL_FACING_WORDS for p in parts if p.startswith(w) and (w != "wt" or p == w)), None
    )
    return f"its name says it is a kernel's {word} array" if word else None


def _vendored(ctx: CheckContext, path: Path) -> bool:
    """CMSIS-NN's own sources and tests (kernel_sources globs) are Arm's to align, not the user's."""
    globs = ctx.project.checks.kernel_sources  # the answer only changes with them: cached across checks
    return bool(ctx.cache.get("vendored", path, repr(globs), lambda: _matches(ctx, path)))


def _matches(ctx: CheckContext, path: Path) -> bool:
    relative = ctx.relative(path).replace("\\", "/")
    for glob in ctx.project.checks.kernel_sources:
        # fnmatch's * crosses folders; a leading **/ may also match no folder at all
        if fnmatch.fnmatch(relative, glob) or (
            glob.startswith("**/") and fnmatch.fnmatch(relative, glob[3:])
        ):
            return True
    return False


# -------------------------------------------------------------------------------------- alignment


def _alignment_finding(
    ws: CWorkspace, path: Path, array: ArrayDef, use: str, required: int
) -> Finding | None:
    alignment = ws.alignment(path, array)
    if array.align is not None and alignment is None:
        return None  # an alignment written with macros no file defines: cannot tell
    if alignment is not None and alignment >= required:
        return None
    have = (
        f"is aligned to only {alignment} bytes" if array.align is not None
        else f"has no alignment attribute (so only its element's {array.elem_size or 1}-byte alignment)"
    )  # fmt: skip
    message = (
        f"{_describe(ws, path, array)} {have}, but must be aligned to {required} bytes (the project's"
        f" alignment): {use}, and CMSIS-NN reads it with word and SIMD loads (LDRD/LDM on"
        f" Cortex-M4/M7, MVE vector loads on Cortex-M55) that fault or slow down off a {required}-byte"
        " boundary"
    )
    fix = Fix(
        f"Align {array.name} to {required} bytes", (_align_edit(ws, path, array, required),), preferred=True
    )
    data = {"array": array.name, "required": required, "alignment": alignment}
    return Finding(Code.MISALIGNED_ARRAY, message, path, array.name_span, None, (fix,), (), data)


def _align_edit(ws: CWorkspace, path: Path, array: ArrayDef, required: int) -> Edit:
    """Raise the value written in the array's own attribute, else add one after the declarator
    (GCC and Clang take the largest of several aligned attributes, so an extra one is safe)."""
    if array.align is not None and array.align.value_span is not None and array.align.text:
        return Edit(path, array.align.value_span, str(required))
    at = ws.files[path].span(array.dims_end, array.dims_end)
    return Edit(path, at, f" __attribute__((aligned({required})))")


def _describe(ws: CWorkspace, path: Path, array: ArrayDef) -> str:
    count, total = ws.count(path, array), ws.total_bytes(path, array)
    if count is None:
        return f"{array.name} ({array.ctype}[{']['.join(array.dims)}])"
    size = f", {total} bytes" if total is not None else ""
    return f"{array.name} ({array.ctype}[{count}]{size})"


# ---------------------------------------------------------------------------------------- padding


def _padding_finding(
    ws: CWorkspace, path: Path, array: ArrayDef, use: str, required: int, total: int, sized: bool
) -> Finding:
    padded = -(-total // required) * required
    elem = array.elem_size or 1
    message = (
        f"{_describe(ws, path, array)} is not a multiple of {required} bytes: {use}; pad it to"
        f" {padded} bytes ({padded // elem} elements) so the next array starts aligned and the kernels'"
        f" last {required}-byte vector load stays inside it"
    )
    fixes: tuple[Fix, ...] = ()
    if sized:
        message += f" (no automatic fix: the code takes sizeof({array.name}), which padding would change)"
    else:
        edits = _padding_edits(ws, path, array, padded // elem)
        if edits:
            fixes = (Fix(f"Pad {array.name} with zeros to {padded} bytes", edits),)
    data = {"array": array.name, "required": required, "bytes": total, "padded": padded}
    return Finding(Code.MISALIGNED_ARRAY, message, path, array.dims_span, None, fixes, (), data)


def _padding_edits(ws: CWorkspace, path: Path, array: ArrayDef, padded_count: int) -> tuple[Edit, ...]:
    """Grow the one dimension to the padded count and append zeros to a literal value list.

    Harmless for what CMSIS-NN reads: every kernel takes its element counts from the dims structs
    and the call's arguments, never from the array's size, so the trailing zeros are never read (a
    weight table is read by count). The caller has already ruled out code that takes sizeof(array)."""
    count = ws.count(path, array)
    if count is None or len(array.dims) != 1:
        return ()
    edits = []
    dim = array.dims[0]
    if dim:
        literal = evaluate(dim) is not None and re.fullmatch(r"\s*\w+\s*", dim)
        new_dim = str(padded_count) if literal else f"{dim} + {padded_count - count}"
        edits.append(Edit(path, array.dims_span, f"[{new_dim}]"))
    zeros = _append_zeros(ws, path, array, padded_count - count)
    if zeros is not None:
        edits.append(zeros)
    return tuple(edits)  # empty for `[]` sized by a macro's list: nothing mechanical to grow


def _append_zeros(ws: CWorkspace, path: Path, array: ArrayDef, extra: int) -> Edit | None:
    """Zeros after the last value of the array's own flat `{...}` list (None for macros, nested lists)."""
    cfile = ws.files[path]
    start, end = array.init_start, array.init_end
    if start is None or end is None or cfile.masked[start] != "{" or "{" in cfile.masked[start + 1 : end]:
        return None
    last = end - 2
    while last > start and cfile.masked[last].isspace():
        last -= 1
    if last <= start:
        return None
    zeros = ", ".join(["0"] * extra)
    text = f" {zeros}," if cfile.masked[last] == "," else f", {zeros}"
    return Edit(path, cfile.span(last + 1, last + 1), text)


def _sized_names(ctx: CheckContext, ws: CWorkspace) -> set[str]:
    """Names whose size the code takes (sizeof(x), ARRAY_SIZE(x) ...): padding those changes behaviour.
    Found with str.find per word, and kept per file until it changes (a weights table is tens of MB)."""
    names: set[str] = set()
    for path, cfile in ws.files.items():
        names.update(ctx.derived("sized", path, functools.partial(_sized_of, cfile)) or ())
    return names


def _sized_of(cfile: CFile, _text: str) -> frozenset[str]:
    return frozenset(_sized_in(cfile.masked))


def _sized_in(text: str) -> Iterator[str]:
    follow = re.compile(r"\s*\(?\s*([A-Za-z_]\w*)")
    for word in _SIZE_WORDS:
        pos = text.find(word)
        while pos != -1:
            before = text[pos - 1] if pos else " "
            match = follow.match(text, pos + len(word))
            if not (before.isalnum() or before == "_") and match is not None:
                yield match.group(1)
            pos = text.find(word, pos + len(word))
