"""misaligned-array: kernel-facing arrays without the alignment a kernel's loads need on the configured
core, and arrays under the project's own alignment policy that are not aligned or padded to it.

Two questions, kept apart so that a warning is only given where it is true:

- What the kernel's loads need (every array a kernel reads). CMSIS-NN reads int8 data through memcpy
  (arm_nn_read_s8x4: one LDR that tolerates any address on Cortex-M3/M4/M7/M33, byte loads on
  Cortex-M0) and with VLDRB on MVE (byte alignment), so int8 weights and activations need none; its
  own builds and tests run them unaligned. What does need alignment is what it reads through wider
  pointers: an int32 bias (`*bias++`, vldrwq_s32), per-channel multipliers and shifts, the int16 data of
  the s16 kernels and the scratch buffer each kernel casts ctx->buf to (see cmsis.read_of). Such an
  array declared with its own type is aligned by C; one declared narrower (an int8_t buffer cast to
  int32_t *) is not. How much that matters depends on the core (cmsis.configured_core): every unaligned
  halfword or word load faults on Cortex-M0/M0+ (an error), the LDRD/LDM the compiler pairs word loads
  into and MVE's VLDRH/VLDRW fault on the others (a warning), the host tolerates it (a hint). An array
  only named like a kernel's (weights, bias, scratch) and passed to no kernel gets at most a hint.
- The project's policy (fixpoint.toml's `alignment`, default 16): the generated folder always, and
  hand-written sources matching `[checks] aligned` globs, are held to it - aligned to it and padded to a
  multiple of it so the next array starts aligned - as `fixpoint generate` does for its own arrays.

CMSIS-NN's tail loads are predicated (vctp8q in arm_nn_vec_mat_mult_t_s8), so padding is never needed
by the kernels themselves, only by the policy. Quick fixes add `__attribute__((aligned(N)))` (or raise
the value written), and pad a policy array with zeros.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from fixpoint_server.findings import Code, Edit, Finding, Fix, Severity
from fixpoint_server.parse.c_source import ArrayDef, ArrayKind, CFile, CWorkspace, evaluate, referenced_name
from fixpoint_server.rules.cmsis import (
    KERNELS,
    CoreFacts,
    Read,
    configured_core,
    field_read_of,
    is_kernel,
    read_of,
)
from fixpoint_server.rules.context import CheckContext, FileKind, Reads
from fixpoint_server.rules.incremental import (
    ALL,
    C_KINDS,
    LiveWorkspace,
    c_workspace,
    file_summaries,
    split_check,
    whole_workspace,
)
from quantcore.cores import Extension

CODES = (Code.MISALIGNED_ARRAY,)
BUILD_KINDS = frozenset(k for k in FileKind if k.is_build)

_NAME_PARTS = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")
_KERNEL_FACING_WORDS = ("weight", "wt", "bias", "arena", "scratch", "buffer", "buff")
_SIZE_WORDS = ("sizeof", "ARRAY_SIZE", "COUNT_OF", "countof", "_countof", "NELEMS", "ARRAY_LEN")
_NOT_KERNEL_TYPES = (
    *("char", "bool", "_Bool"),
    *("float", "double", "float16_t", "float32_t", "float64_t", "_Float16", "__fp16"),
)


_SCRATCH_READ = Read(
    "int32_t",
    4,
    "CMSIS-NN casts ctx->buf to int32_t * (arm_fully_connected_s8.c with MVE, arm_avgpool_s8.c,"
    " arm_transpose_conv_s8.c) or int16_t * (arm_convolve_s8.c)",
)
_READ_BY_WORD = {
    "bias": Read("int32_t", 4, "an s8 kernel's bias_data is const int32_t * (*bias++, vldrwq_s32)"),
    "arena": _SCRATCH_READ,
    "scratch": _SCRATCH_READ,
    "buffer": _SCRATCH_READ,
    "buff": _SCRATCH_READ,
}


@dataclass(frozen=True)
class Use:
    """How a kernel reaches an array, and how it loads it."""

    how: str
    """For messages: "it is passed as bias_data to arm_fully_connected_s8"."""
    read: Read | None
    """The loads' element type (None: not known - a kernel the tables lack, or a weights array)."""
    certain: bool = True
    """False: only the array's name (or file) says a kernel reads it."""


READS = Reads(contents=C_KINDS | BUILD_KINDS)
"""The C files, and the build files (their -mcpu= says which core the firmware is built for)."""
PER_FILE = C_KINDS
"""Its findings for a file follow from that file's arrays, the kernel uses of the whole workspace and
the configured core (prepare) and, for padding, the names whose size some file takes."""


def check(ctx: CheckContext) -> list[Finding]:
    return split_check(ctx, PER_FILE, prepare, check_file)


@dataclass(frozen=True)
class _Shared:
    """What every file's findings depend on beyond the file itself: the kernels' uses of each array name
    (from every file's calls and fields) and the configured core (fixpoint.toml, the build files)."""

    uses: dict[str, Use]
    core: CoreFacts


def prepare(ctx: CheckContext) -> _Shared:
    core = configured_core(ctx)
    return _Shared(_kernel_uses(ctx, c_workspace(ctx), core.extension), core)


def check_file(ctx: CheckContext, path: Path, shared: _Shared) -> list[Finding]:
    """The findings of the arrays `path` defines."""
    ws = c_workspace(ctx)
    cfile = ws.files.get(path)
    if cfile is None or _vendored(ctx, path):
        return []
    findings: list[Finding] = []
    for array in cfile.arrays:
        if array.kind is not ArrayKind.DEFINITION:
            continue
        use = shared.uses.get(array.name) or _by_name_or_file(ws, path, array)
        if use is None:
            continue
        policy = _policy(ctx, ws, path)
        if policy is None:
            found = _access_finding(ws, path, array, use, shared.core)
            findings.extend([found] if found is not None else [])
            continue
        required = max(ctx.project.alignment, use.read.size if use.read is not None else 1)
        found = _alignment_finding(ws, path, array, use.how, required, policy)
        findings.extend([found] if found is not None else [])
        total = ws.total_bytes(path, array)
        if total is not None and total > 0 and total % required:
            sized = _sized(ctx, array.name)
            findings.append(_padding_finding(ws, path, array, use.how, required, total, sized, policy))
    return findings


def _kernel_uses(ctx: CheckContext, ws: CWorkspace, extension: Extension | None) -> dict[str, Use]:
    """Array name -> how a kernel call reaches it (as an argument, or through a struct's field) and reads
    it; of several uses, the one with the widest loads. Each file's part is kept until the file changes
    (_UsesIn), so a keystroke merges those of the few files with kernel calls or fields, not 2,000
    files' facts."""
    summaries = file_summaries(ctx, "misaligned-uses", _UsesIn.of)
    uses: dict[str, Use] = {}
    passed_structs: dict[str, str] = {}
    for path in ws.order:  # the calls in path order, as ws.calls() gives them
        for name, use, kernel_name in summaries[path].calls:
            _note(uses, name, use)
            passed_structs.setdefault(name, kernel_name)
    for path in ws.path_order():
        for name, var, field_name, struct_type in summaries[path].fields:
            passed_to = passed_structs.get(var)
            if not (passed_to or (struct_type or "").startswith("cmsis_nn_")):
                continue
            via = f", passed to {passed_to}" if passed_to else ""
            how = f"the kernels read it through {var}.{field_name}{via}"
            _note(uses, name, _field_use(how, passed_to, struct_type, field_name, extension))
    return uses


@dataclass(frozen=True)
class _UsesIn:
    """One file's part of the kernel uses: what its kernel calls pass (name, use, kernel), and its field
    assignments that name an array (name, struct variable, field, struct type)."""

    calls: tuple[tuple[str, Use, str], ...]
    fields: tuple[tuple[str, str, str, str | None], ...]

    @classmethod
    def of(cls, cfile: CFile) -> _UsesIn:
        calls = []
        for call in cfile.calls:
            if not is_kernel(call.name):
                continue
            kernel = KERNELS.get(call.name)
            for index, arg in enumerate(call.args):
                name = referenced_name(arg.text)
                if name is None:
                    continue
                known = kernel is not None and index < len(kernel.params)
                role = kernel.params[index] if kernel is not None and known else f"argument {index + 1}"
                read = read_of(call.name, role) if known else None
                calls.append((name, Use(f"it is passed as {role} to {call.name}", read), call.name))
        fields = []
        for assignment in cfile.fields:
            name = referenced_name(assignment.value)
            if name is not None and assignment.field:
                fields.append((name, assignment.var, assignment.field, assignment.struct_type))
        return cls(tuple(calls), tuple(fields))


def _field_use(
    how: str, kernel: str | None, struct_type: str | None, field: str, extension: Extension | None
) -> Use:
    """A struct field's use; with no core configured, a read only some code paths make (ctx->buf as
    int32_t kernel sums with MVE only) is not certain, nor is a ctx->buf of a kernel the table lacks."""
    paths = [extension] if extension is not None else list(Extension)
    reads = {field_read_of(kernel, struct_type, field, path) for path in paths}
    if None in reads:
        return Use(how, _SCRATCH_READ if field == "buf" else None, certain=False)
    widest = max((r for r in reads if r is not None), key=lambda r: r.size)
    return Use(how, widest, certain=len(reads) == 1)


def _note(uses: dict[str, Use], name: str, use: Use) -> None:
    """Keep the first use, unless a later one loads wider elements (and so needs more alignment)."""
    old = uses.get(name)
    if old is None or (use.read is not None and use.read.size > (old.read.size if old.read else 1)):
        uses[name] = use


def _by_name_or_file(ws: CWorkspace, path: Path, array: ArrayDef) -> Use | None:
    cfile = ws.files[path]
    if cfile.generated is not None:
        return Use("Fixpoint generated it for the CMSIS-NN kernels", None, certain=False)
    if array.ctype in _NOT_KERNEL_TYPES or array.elem_size is None:
        return None  # text and float buffers named "buffer" are not what the s8 kernels read
    parts = [p.lower() for p in _NAME_PARTS.findall(array.name)]
    while parts and (parts[-1].isdigit() or parts[-1] == "data"):
        parts.pop()  # conv1_bias_data, buffer_2: the role is the word before
    last = parts[-1] if parts else ""  # the role is the last word: null_bias_input is an input, not a bias
    word = next((w for w in _KERNEL_FACING_WORDS if last.startswith(w) and (w != "wt" or last == w)), None)
    if word is None:
        return None
    how = f"its name says it is a kernel's {word} array (no kernel call in the workspace passes it)"
    return Use(how, _READ_BY_WORD.get(word), certain=False)


def _policy(ctx: CheckContext, ws: CWorkspace, path: Path) -> str | None:
    """Why the project's alignment policy holds this file's arrays (with the fixpoint.toml line that
    says so), or None: generated by Fixpoint, in the generated folder, or opted in by [checks] aligned."""
    toml = ctx.project.path.name if ctx.project.path is not None else "fixpoint.toml"
    setting = f"alignment = {ctx.project.alignment}" + ("" if ctx.project.path else ", the default")
    if ws.files[path].generated is not None:
        return (
            f"Fixpoint generated this file, and the project's alignment policy holds it ({toml}: {setting})"
        )
    relative = ctx.relative(path).replace("\\", "/")
    folder = _generated_folder(ctx)
    if folder is not None and relative.startswith(folder + "/"):
        where = f"it is in the generated folder {folder}/"
        return f"{where}, under the project's alignment policy ({toml}: {setting})"
    glob = _first_match(relative, ctx.project.checks.aligned)
    if glob is not None:
        return (
            f"{toml}'s [checks] aligned = \"{glob}\" puts it under the project's alignment policy ({setting})"
        )
    return None


def _generated_folder(ctx: CheckContext) -> str | None:
    return ctx.memo("generated-folder", lambda: _generated_relative(ctx))


def _generated_relative(ctx: CheckContext) -> str | None:
    try:
        return ctx.project.generated.resolve().relative_to(ctx.root.resolve()).as_posix()
    except (ValueError, OSError):
        return None


def _vendored(ctx: CheckContext, path: Path) -> bool:
    """CMSIS-NN's own sources and tests (kernel_sources globs) are Arm's to align, not the user's."""
    globs = ctx.project.checks.kernel_sources  # the answer only changes with them: cached across checks
    return bool(ctx.cache.get("vendored", path, repr(globs), lambda: _matches(ctx, path)))


def _matches(ctx: CheckContext, path: Path) -> bool:
    return _first_match(ctx.relative(path).replace("\\", "/"), ctx.project.checks.kernel_sources) is not None


def _first_match(relative: str, globs: Sequence[str]) -> str | None:
    for glob in globs:
        # fnmatch's * crosses folders; a leading **/ may also match no folder at all
        if fnmatch.fnmatch(relative, glob) or (
            glob.startswith("**/") and fnmatch.fnmatch(relative, glob[3:])
        ):
            return glob
    return None


# -------------------------------------------------------------------------------------- alignment


def _access_finding(ws: CWorkspace, path: Path, array: ArrayDef, use: Use, core: CoreFacts) -> Finding | None:
    """An array outside the policy: flagged only when the kernel's loads need more alignment than it has
    (C aligns an array to its own element; GCC's aligned attribute can raise that, never lower it)."""
    read = use.read
    written = ws.alignment(path, array)
    if read is None or read.size <= 1 or (array.align is not None and written is None):
        return None  # bytes need nothing; an alignment written with macros no file defines: cannot tell
    have = max(written or 1, array.elem_size or 1)
    if have >= read.size:
        return None
    severity, effect = _effect(core, read)
    if not use.certain:
        severity = Severity.HINT
    reads = f"{read.ctype} ({read.source}), which needs {read.size}-byte alignment: {effect}"
    if use.certain:
        message = (
            f"{_describe(ws, path, array)} {_has(array, written)}, but {use.how}, which reads it as {reads}"
        )
    else:
        such = f"a kernel reads such an array as {reads}"
        message = f"{_describe(ws, path, array)} {_has(array, written)}; {use.how}: {such}"
    fix = Fix(
        f"Align {array.name} to {read.size} bytes", (_align_edit(ws, path, array, read.size),), preferred=True
    )
    data = {"array": array.name, "required": read.size, "alignment": have, "core": core.label or None}
    return Finding(Code.MISALIGNED_ARRAY, message, path, array.name_span, severity, (fix,), (), data)


def _effect(core: CoreFacts, read: Read) -> tuple[Severity, str]:
    """How loud, and why: what a {read.ctype} load off its alignment does on the configured core."""
    n, ctype = read.size, read.ctype
    if not core.known:
        if n == 2:
            return Severity.HINT, (
                "no core is configured (fixpoint.toml's target or [board] core, or -mcpu= in a build"
                " file); an unaligned halfword load faults on Cortex-M0/M0+ and with MVE's VLDRH, not on"
                " Cortex-M3/M4/M7/M33"
            )
        return Severity.WARNING, (
            "no core is configured (fixpoint.toml's target or [board] core, or -mcpu= in a build file),"
            f" and off a {n}-byte boundary every Cortex-M core has a load of it that faults: any word load on"
            " Cortex-M0/M0+, the LDRD/LDM the compiler pairs word loads into on Cortex-M3/M4/M7/M33, VLDRW"
            " with MVE on Cortex-M55/M85"
        )
    where = f"{_pretty(core.label)} ({core.evidence})"
    if core.host:
        return Severity.HINT, f"the target is the host ({core.evidence}), which tolerates unaligned loads"
    if not core.unaligned_loads:
        return Severity.ERROR, (
            f"{where} has no unaligned access at all (ARMv6-M/ARMv8-M Baseline): every load of it off a"
            f" {n}-byte boundary is a HardFault"
        )
    if core.extension is Extension.MVE and n in (2, 4):
        vector = "VLDRH" if n == 2 else "VLDRW"
        return Severity.WARNING, (
            f"on {where} CMSIS-NN's MVE path loads it with {vector}, which faults (UsageFault UNALIGNED) off"
            f" a {n}-byte boundary"
        )
    if n == 2:
        return Severity.HINT, (
            f"on {where} LDRH tolerates an unaligned address (it would fault on Cortex-M0/M0+ or with MVE)"
        )
    return Severity.WARNING, (
        f"on {where} a single LDR tolerates an unaligned address, but the compiler takes any {ctype} * to"
        f" be {n}-byte aligned and may pair its loads into LDRD/LDM, which fault (UsageFault UNALIGNED) off"
        " a 4-byte boundary"
    )


def _pretty(label: str) -> str:
    """cortex-m0plus -> Cortex-M0+ (as Arm writes it)."""
    return label.replace("cortex-m", "Cortex-M").replace("plus", "+")


def _has(array: ArrayDef, written: int | None) -> str:
    if array.align is not None:
        return f"is aligned to only {written} bytes"
    return f"has no alignment attribute (so only its element's {array.elem_size or 1}-byte alignment)"


def _alignment_finding(
    ws: CWorkspace, path: Path, array: ArrayDef, use: str, required: int, policy: str
) -> Finding | None:
    alignment = ws.alignment(path, array)
    if array.align is not None and alignment is None:
        return None  # an alignment written with macros no file defines: cannot tell
    if alignment is not None and alignment >= required:
        return None
    message = (
        f"{_describe(ws, path, array)} {_has(array, alignment)}, but must be aligned to {required} bytes:"
        f" {policy}; {use}"
    )
    fix = Fix(
        f"Align {array.name} to {required} bytes", (_align_edit(ws, path, array, required),), preferred=True
    )
    data = {"array": array.name, "required": required, "alignment": alignment, "policy": True}
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
    ws: CWorkspace, path: Path, array: ArrayDef, use: str, required: int, total: int, sized: bool, policy: str
) -> Finding:
    padded = -(-total // required) * required
    elem = array.elem_size or 1
    message = (
        f"{_describe(ws, path, array)} is not a multiple of {required} bytes: {policy}; {use}; pad it to"
        f" {padded} bytes ({padded // elem} elements) so the next array starts aligned"
    )
    fixes: tuple[Fix, ...] = ()
    if sized:
        message += f" (no automatic fix: the code takes sizeof({array.name}), which padding would change)"
    else:
        edits = _padding_edits(ws, path, array, padded // elem)
        if edits:
            fixes = (Fix(f"Pad {array.name} with zeros to {padded} bytes", edits),)
    data = {"array": array.name, "required": required, "bytes": total, "padded": padded, "policy": True}
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


def _sized(ctx: CheckContext, name: str) -> bool:
    """Whether some file takes the size of `name` (sizeof(x), ARRAY_SIZE(x) ...): padding it would change
    what the code does. Only files whose text holds the name are searched for the size words (one
    str.find in a weights table of tens of MB instead of one per word), and each file's answers are
    kept until its facts change."""
    if ctx.recorder is not None:
        ctx.recorder.reads.add(("files", ALL))  # every file's text may hold it
    return ctx.memo(("sized", name), lambda: _sized_anywhere(ctx, name))


def _sized_anywhere(ctx: CheckContext, name: str) -> bool:
    ws = whole_workspace(ctx)
    if not isinstance(ws, LiveWorkspace):
        return any(_SizedIn(cfile).holds(name) for cfile in ws.files.values())
    kept = ctx.cache.state("misaligned-sized", _SizedKept)
    for paths in ws.changed_since(kept.at, kept.files):
        for path in paths:
            kept.files.pop(path, None)
            for holding in kept.holding.values():
                holding.discard(path)
            cfile = ws.files.get(path)
            if cfile is not None:
                sized = kept.files[path] = _SizedIn(cfile)
                for other, holding in kept.holding.items():
                    if sized.holds(other):
                        holding.add(path)
    kept.at = ws.updates
    if name not in kept.holding:
        kept.holding[name] = {path for path, sized in kept.files.items() if sized.holds(name)}
    return bool(kept.holding[name])


@dataclass
class _SizedKept:
    """Per file what it says about sizeof'd names, and per name asked the files taking its size, as of
    the live workspace's update `at`."""

    at: int = -1
    files: dict[Path, _SizedIn] = field(default_factory=dict)
    holding: dict[str, set[Path]] = field(default_factory=dict)


@dataclass
class _SizedIn:
    """What one file's facts say about names whose size the code takes."""

    cfile: CFile
    names: frozenset[str] | None = None
    """Every name the file takes the size of (found once, when a name it holds is asked about)."""

    def holds(self, name: str) -> bool:
        if name not in self.cfile.masked:  # one str.find; most files never name the array
            return False
        if self.names is None:
            self.names = frozenset(_sized_in(self.cfile.masked))
        return name in self.names


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
