"""missing-cmsis-nn: C code calls CMSIS-NN's kernels, but the build neither links nor compiles CMSIS-NN,
or gives the compiler no include path to CMSIS-NN's Include folder.

Evidence is gathered over every build file of the workspace except those inside a CMSIS-NN checkout
(its own CMakeLists.txt always "compiles CMSIS-NN", whether the firmware uses it or not):
- linked: -lcmsis-nn / -lcmsisnn, a libcmsis-nn.a, a CMake target or library named like CMSIS-NN
  (cmsis-nn, CMSISNN, cmsis_nn), a platformio lib_deps entry naming CMSIS-NN;
- compiled: a source, pattern or subdirectory inside CMSIS-NN (CMSIS-NN/Source/..., add_subdirectory,
  FetchContent_Declare), a compile command for one, or a CMSIS-NN checkout under platformio's lib/;
- include path: -I / include_directories / target_include_directories naming CMSIS-NN's Include folder
  (or fixpoint.toml's [cmsis_nn] path + /Include), or what CMake's cmsis-nn target carries when a
  CMSIS-NN subdirectory is added, or what platformio adds for lib_deps and lib/.

The call site is the first call of an arm_*_s8 / arm_*_s16 function in the user's sources (else the
first #include "arm_nnfunctions.h"). Both the build file to fix (the top-most hand-written one; the link
or flags line, else its end) and the call site get a finding, with the same quick fixes: they add
-lcmsis-nn and -I<CMSIS-NN>/Include to the Makefile's LDLIBS / CFLAGS, CMake's target_link_libraries /
target_include_directories, or platformio's build_flags.

A workspace without build files is not checked: nothing says what the build links, and flagging every
tree built from an IDE project would be noise.

A build that compiles CMSIS-NN file by file (its sources listed one by one, no library, folder, pattern
or subdirectory) must list every source a called kernel links against. For the recurrent kernels
(KERNEL_SOURCES: the LSTMs and SVDFs, whose support functions are spread over four of CMSIS-NN's
folders) each missing file is named on the first call and on the build file, with a quick fix that lists
them beside the last CMSIS-NN source the build file names.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from fixpoint_server.findings import Code, Edit, Finding, Fix, LineIndex, Related, Span
from fixpoint_server.parse.build_files import (
    BuildFacts,
    BuildKind,
    IncludeDir,
    LibraryKind,
    SourceKind,
    SourceRef,
    Statement,
    glob_match,
    in_cmsis_nn,
    mentions_cmsis_nn,
)
from fixpoint_server.rules.build_edits import append_to, at_end, flag_statement, ini_flag, make_flag
from fixpoint_server.rules.build_facts import builds_cmsis_nn, root_relative, user_build_facts
from fixpoint_server.rules.context import CheckContext, FileKind, Reads

CODES = (Code.MISSING_CMSIS_NN,)
LIBRARY = "cmsis-nn"
HEADER = "arm_nnfunctions.h"
KERNEL_CALL = re.compile(r"arm_\w*_s(?:8|16)(?:_\w+)?")
"""CMSIS-NN's int8/int16 API: arm_convolve_s8, arm_fully_connected_s16, arm_convolve_s8_get_buffer_size."""
_CALL_IN_TEXT = re.compile(r"\b(arm_\w*_s(?:8|16)(?:_\w+)?)\s*\(")
_COMMENT_OR_STRING = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"', re.DOTALL)
_KIND_ORDER = {BuildKind.CMAKE: 0, BuildKind.MAKE: 1, BuildKind.PLATFORMIO: 2}


@dataclass(frozen=True)
class CallSite:
    path: Path
    span: Span
    name: str
    """The kernel called, or the header included."""


@dataclass(frozen=True)
class Missing:
    library: bool
    """Neither linked nor compiled."""
    include: bool


READS = Reads(contents=frozenset(k for k in FileKind if k.is_build or k.is_c))
"""The build files, and the C files (the first CMSIS-NN call or include)."""


def check(ctx: CheckContext) -> list[Finding]:
    facts = user_build_facts(ctx)
    if not facts:
        return []
    site = first_call_site(ctx)
    if site is None:
        return []
    missing = _missing(ctx, facts)
    if not missing.library and not missing.include:
        return _unlisted_sources(ctx, facts)
    target = _primary(ctx, facts)
    return _findings(ctx, site, target, missing)


# ----------------------------------------------------------------------- a kernel's own source files

KERNEL_SOURCES: dict[str, tuple[str, ...]] = {
    "arm_lstm_unidirectional_s8": (
        "Source/LSTMFunctions/arm_lstm_unidirectional_s8.c",
        "Source/NNSupportFunctions/arm_nn_lstm_step_s8.c",
        "Source/NNSupportFunctions/arm_nn_lstm_calculate_gate_s8_s16.c",
        "Source/NNSupportFunctions/arm_nn_vec_mat_mul_result_acc_s8_s16.c",
        "Source/BasicMathFunctions/arm_elementwise_mul_s16.c",
        "Source/BasicMathFunctions/arm_elementwise_mul_acc_s16.c",
        "Source/BasicMathFunctions/arm_elementwise_mul_s16_s8.c",
        "Source/ActivationFunctions/arm_nn_activation_s16.c",
        "Source/NNSupportFunctions/arm_nntables.c",
    ),
    "arm_lstm_unidirectional_s16": (
        "Source/LSTMFunctions/arm_lstm_unidirectional_s16.c",
        "Source/NNSupportFunctions/arm_nn_lstm_step_s16.c",
        "Source/NNSupportFunctions/arm_nn_lstm_calculate_gate_s16.c",
        "Source/NNSupportFunctions/arm_nn_vec_mat_mul_result_acc_s16.c",
        "Source/BasicMathFunctions/arm_elementwise_mul_s16.c",
        "Source/BasicMathFunctions/arm_elementwise_mul_acc_s16.c",
        "Source/BasicMathFunctions/arm_elementwise_mul_s16_batch_offset.c",
        "Source/ActivationFunctions/arm_nn_activation_s16.c",
        "Source/NNSupportFunctions/arm_nntables.c",
    ),
    "arm_svdf_s8": (
        "Source/SVDFunctions/arm_svdf_s8.c",
        "Source/NNSupportFunctions/arm_nn_vec_mat_mult_t_s8.c",
    ),
    "arm_svdf_state_s16_s8": (
        "Source/SVDFunctions/arm_svdf_state_s16_s8.c",
        "Source/NNSupportFunctions/arm_nn_vec_mat_mult_t_svdf_s8.c",
    ),
}
"""The CMSIS-NN sources (checkout-relative) whose functions each kernel's link needs, itself included:
the closure of its undefined symbols over libcmsis-nn.a (the same on the host, Cortex-M4/M7 and M55's
MVE build; tests/server/test_recurrent_rules.py recomputes it with nm)."""


def _unlisted_sources(ctx: CheckContext, facts: list[BuildFacts]) -> list[Finding]:
    """Calls of KERNEL_SOURCES' kernels whose sources a file-by-file CMSIS-NN build leaves out."""
    listed = _listed_cmsis_sources(ctx, facts)
    if listed is None:
        return []
    stems = {_stem(ref.expanded) for _, ref in listed}
    findings: list[Finding] = []
    for site in _kernel_sites(ctx):
        unlisted = [f for f in KERNEL_SOURCES[site.name] if _stem(f) not in stems]
        if unlisted:
            findings.extend(_unlisted_findings(ctx, site, unlisted, _anchor(listed)))
    return findings


def _listed_cmsis_sources(
    ctx: CheckContext, facts: list[BuildFacts]
) -> list[tuple[BuildFacts, SourceRef]] | None:
    """The CMSIS-NN source files the build lists one by one, None when it builds CMSIS-NN any other way
    (a library, a folder, a pattern, a subdirectory, a package: all of it) or not at all."""
    listed = []
    for f in facts:
        if _links(f) or _in_platformio_lib(ctx, f):
            return None
        for ref in f.sources:
            if not builds_cmsis_nn(f, ref, ctx.root):
                continue
            if ref.kind is not SourceKind.FILE or not ref.expanded.endswith((".c", ".o", ".obj")):
                return None
            listed.append((f, ref))
    return listed or None


def _anchor(listed: list[tuple[BuildFacts, SourceRef]]) -> tuple[BuildFacts, SourceRef]:
    """Where the missing files go: the last CMSIS-NN source written out by name (not one reached through
    `$(SRCS:.c=.o)`), else the last one listed."""
    written = [(f, ref) for f, ref in listed if _stem(ref.path_text) == _stem(ref.expanded)]
    return (written or listed)[-1]


def _stem(path: str) -> str:
    """arm_svdf_s8 for CMSIS-NN/Source/SVDFunctions/arm_svdf_s8.c, build/arm_svdf_s8.o, arm_svdf_s8.c.obj."""
    name = path.replace("\\", "/").rsplit("/", 1)[-1]
    return name.split(".", 1)[0]


def _kernel_sites(ctx: CheckContext) -> list[CallSite]:
    """The first call of each KERNEL_SOURCES kernel outside CMSIS-NN itself, in file order."""
    scanned = _scanned(ctx)
    first: dict[str, CallSite] = {}
    for path in ctx.c_files():
        if in_cmsis_nn(root_relative(ctx, path)):
            continue
        site = scanned.get(path)
        calls, _ = site if site is not None else _scan(ctx, path)
        for call in calls:
            if call.name in KERNEL_SOURCES:
                first.setdefault(call.name, call)
    return list(first.values())


def _unlisted_findings(
    ctx: CheckContext, site: CallSite, unlisted: list[str], last: tuple[BuildFacts, SourceRef]
) -> list[Finding]:
    facts, ref = last
    names = ", ".join(unlisted)
    why = (
        f"the build compiles CMSIS-NN file by file and lists no {names}: the link fails with undefined"
        " references"
    )
    at = f"{root_relative(ctx, site.path)}:{site.span.line + 1}"
    cut = ref.path_text.find("Source/")
    prefix = ref.path_text[:cut] if cut >= 0 else ""
    listing = " ".join(prefix + name for name in unlisted)
    fix = Fix(
        f"List {site.name}'s CMSIS-NN sources",
        (Edit(facts.path, Span.at(ref.span.end_line, ref.span.end_column), " " + listing),),
        preferred=True,
    )
    data = {"call": site.name, "unlisted": unlisted}
    where = f"{root_relative(ctx, facts.path)}:{ref.span.line + 1}"
    return [
        Finding(
            Code.MISSING_CMSIS_NN,
            f"{site.name} ({at}) needs {len(unlisted)} more of CMSIS-NN's sources, but {why}",
            facts.path,
            ref.span,
            fixes=(fix,),
            related=(Related(site.path, site.span, f"{site.name} is called here"),),
            data=data,
        ),
        Finding(
            Code.MISSING_CMSIS_NN,
            f"{site.name} is a CMSIS-NN kernel, but {why}",
            site.path,
            site.span,
            fixes=(fix,),
            related=(
                Related(facts.path, ref.span, f"the last CMSIS-NN source listed: add them here ({where})"),
            ),
            data=data,
        ),
    ]


# ---------------------------------------------------------------------------------------- call sites


def first_call_site(ctx: CheckContext) -> CallSite | None:
    """The first CMSIS-NN call outside CMSIS-NN itself, else the first include of its header."""
    include: CallSite | None = None
    scanned = _scanned(ctx)
    for path in ctx.c_files():
        if in_cmsis_nn(root_relative(ctx, path)):
            continue
        site = scanned.get(path)
        calls, includes = site if site is not None else _scan(ctx, path)
        if calls:
            return calls[0]
        include = include or (includes[0] if includes else None)
    return include


def _scanned(ctx: CheckContext) -> dict[Path, tuple[list[CallSite], list[CallSite]] | None]:
    """_scan of every C file the scanner read, kept across checks per file (a keystroke in one file
    must not walk 2,000 files' facts); empty without the C scanner (then _scan reads the text)."""
    try:
        from fixpoint_server.rules.incremental import file_summaries_by_path

        return file_summaries_by_path(ctx, "cmsis-nn-sites", lambda path, cfile: _sites(path, cfile))
    except ModuleNotFoundError as exc:
        if exc.name is None or not exc.name.startswith("fixpoint_server.parse.c_source"):
            raise
        return {}


def _sites(path: Path, cfile: object) -> tuple[list[CallSite], list[CallSite]] | None:
    """The kernel calls and header includes in one file's C facts (None: facts without calls, read
    from the text by _scan)."""
    calls = getattr(cfile, "calls", None)
    if calls is None:
        return None
    found = [CallSite(path, c.name_span, c.name) for c in calls if KERNEL_CALL.fullmatch(c.name)]
    includes = [CallSite(path, i.span, HEADER) for i in getattr(cfile, "includes", ()) if _names_header(i)]
    return found, includes


def _scan(ctx: CheckContext, path: Path) -> tuple[list[CallSite], list[CallSite]]:
    """Kernel calls and header includes of one file, from the C scanner (a regex when it is missing)."""
    try:
        cfile = ctx.c_file(path)
    except ModuleNotFoundError as exc:
        if exc.name != "fixpoint_server.parse.c_source":
            raise
        return _scan_text(ctx, path)
    if cfile is None:
        return [], []
    sites = _sites(path, cfile)
    return sites if sites is not None else _scan_text(ctx, path)


def _names_header(include: object) -> bool:
    return Path(str(getattr(include, "name", ""))).name == HEADER


def _scan_text(ctx: CheckContext, path: Path) -> tuple[list[CallSite], list[CallSite]]:
    text = ctx.text(path) or ""
    masked = _COMMENT_OR_STRING.sub(lambda m: re.sub(r"[^\n]", " ", m[0]), text)
    index = LineIndex(text)
    calls = [CallSite(path, index.span(m.start(1), m.end(1)), m[1]) for m in _CALL_IN_TEXT.finditer(masked)]
    includes = [
        CallSite(path, index.span(m.start(), m.end()), HEADER)
        for m in re.finditer(r"#\s*include\s*[<\"](?:[^>\"]*/)?" + re.escape(HEADER) + '[>"]', text)
    ]
    return calls, includes


# ------------------------------------------------------------------------------------------- evidence


def _missing(ctx: CheckContext, facts: list[BuildFacts]) -> Missing:
    linked = any(_links(f) for f in facts)
    compiled = any(_compiles(ctx, f) for f in facts)
    cmake_target = any(f.kind is BuildKind.CMAKE and _compiles(ctx, f) for f in facts) and any(
        lib.kind is LibraryKind.TARGET and mentions_cmsis_nn(lib.name) for f in facts for lib in f.libraries
    )
    include = cmake_target or any(_includes(ctx, f) for f in facts)
    return Missing(library=not (linked or compiled), include=not include)


def _links(facts: BuildFacts) -> bool:
    return any(mentions_cmsis_nn(lib.name) for lib in facts.libraries)


def _compiles(ctx: CheckContext, facts: BuildFacts) -> bool:
    sources = any(builds_cmsis_nn(facts, ref, ctx.root) for ref in facts.sources)
    return sources or _in_platformio_lib(ctx, facts)


def _in_platformio_lib(ctx: CheckContext, facts: BuildFacts) -> bool:
    """A CMSIS-NN checkout inside platformio's source or lib folders: its library finder builds it."""
    globs = [facts.rooted(p, ctx.root) for p in facts.default_sources]
    cmsis = (r for p in ctx.c_files() if in_cmsis_nn(r := root_relative(ctx, p)))
    return bool(globs) and any(glob_match(g, r) for r in cmsis for g in globs)


def _includes(ctx: CheckContext, facts: BuildFacts) -> bool:
    if any(_is_cmsis_include(ctx, facts, inc) for inc in facts.include_dirs):
        return True
    packages = [lib for lib in facts.libraries if lib.kind is LibraryKind.PACKAGE]
    return any(mentions_cmsis_nn(lib.name) for lib in packages) or _in_platformio_lib(ctx, facts)


def _is_cmsis_include(ctx: CheckContext, facts: BuildFacts, inc: IncludeDir) -> bool:
    path = (inc.expanded or inc.path_text).rstrip("/")
    if Path(path).name.lower() != "include":
        return False
    if mentions_cmsis_nn(path):
        return True
    configured = ctx.project.cmsis_nn
    if configured is None:
        return False
    resolved = os.path.normpath(os.path.join(facts.path.parent, path))
    return resolved == os.path.normpath(configured / "Include")


# ---------------------------------------------------------------------------------------- the findings


def _primary(ctx: CheckContext, facts: list[BuildFacts]) -> BuildFacts:
    """The build file to fix: hand-written, nearest the root, CMakeLists.txt before Makefile before
    platformio.ini before included .cmake/.mk files; compile_commands.json only when it is all there is."""

    def key(f: BuildFacts) -> tuple[int, int, int, str]:
        depth = len(Path(root_relative(ctx, f.path)).parts)
        included = f.path.suffix.lower() in (".mk", ".cmake", ".make")
        return (
            f.kind is BuildKind.COMPILE_COMMANDS,
            depth,
            3 if included else _KIND_ORDER.get(f.kind, 4),
            str(f.path),
        )

    return min(facts, key=key)


def _what(missing: Missing) -> str:
    link = f"no build file links it (-l{LIBRARY}, lib{LIBRARY}.a, a {LIBRARY} target) or compiles its sources"
    include = "no build file adds CMSIS-NN's Include folder to the include path"
    if missing.library and missing.include:
        return f"{link}, and {include}"
    if missing.library:
        return f"{link}: the link fails with undefined references"
    return f"{include}: {HEADER} is not found"


def _findings(ctx: CheckContext, site: CallSite, target: BuildFacts, missing: Missing) -> list[Finding]:
    where, span = _place(ctx, target, missing)
    fixes = build_fixes(ctx, target, missing)
    kind = "a CMSIS-NN kernel" if site.name != HEADER else "CMSIS-NN's header"
    at = f"{root_relative(ctx, site.path)}:{site.span.line + 1}"
    data = {"library": missing.library, "include": missing.include, "call": site.name}
    on_build = Finding(
        Code.MISSING_CMSIS_NN,
        f"{site.name} ({at}) needs CMSIS-NN, but {_what(missing)}",
        target.path,
        span,
        fixes=fixes,
        related=(Related(site.path, site.span, f"{site.name} is {kind}"),),
        data=data,
    )
    on_call = Finding(
        Code.MISSING_CMSIS_NN,
        f"{site.name} is {kind}, but {_what(missing)}",
        site.path,
        site.span,
        fixes=fixes,
        related=(Related(target.path, span, f"fix it here: {where}"),),
        data=data,
    )
    return [on_build, on_call]


def _place(ctx: CheckContext, facts: BuildFacts, missing: Missing) -> tuple[str, Span]:
    """Where the finding on the build file goes (and what it is called): the line a fix extends (the
    link line, the flags line), a CMake target's add_executable, else the file's last line."""
    link = _link_statement(facts) if missing.library else None
    include = _include_statement(facts) if missing.include else None
    statement = link or include or _target_statement(facts)
    if statement is not None:
        return statement.keyword, statement.name_span
    return "the end of the file", _last_line(ctx, facts)


def _target_statement(facts: BuildFacts) -> Statement | None:
    if facts.kind is not BuildKind.CMAKE:
        return None
    target = _target(facts)
    return next((s for s in facts.statements if s.keyword.startswith("add_") and s.target == target), None)


def _last_line(ctx: CheckContext, facts: BuildFacts) -> Span:
    lines = (ctx.text(facts.path) or "").rstrip().split("\n")
    return Span.at(len(lines) - 1, 0, len(lines[-1]))


def _target(facts: BuildFacts) -> str | None:
    """The CMake target the firmware is: its first executable, else its first library that is not CMSIS-NN."""
    executables = [t.name for t in facts.targets if t.kind == "executable"]
    libraries = [t.name for t in facts.targets if t.kind == "library" and not mentions_cmsis_nn(t.name)]
    names = executables or libraries
    return names[0] if names else None


def _link_statement(facts: BuildFacts) -> Statement | None:
    if facts.kind is BuildKind.MAKE:
        return flag_statement(facts, ("LDLIBS", "LIBS")) or flag_statement(facts, ("LDFLAGS",))
    if facts.kind is BuildKind.CMAKE:
        target = _target(facts)
        return next((s for s in facts.statements_named("target_link_libraries") if s.target == target), None)
    if facts.kind is BuildKind.PLATFORMIO:
        return flag_statement(facts, ("build_flags",))
    return None


def _include_statement(facts: BuildFacts) -> Statement | None:
    if facts.kind is BuildKind.MAKE:
        return flag_statement(facts, ("CFLAGS",)) or flag_statement(facts, ("CPPFLAGS",))
    if facts.kind is BuildKind.CMAKE:
        target = _target(facts)
        return next(
            (s for s in facts.statements_named("target_include_directories") if s.target == target), None
        )
    if facts.kind is BuildKind.PLATFORMIO:
        return flag_statement(facts, ("build_flags",))
    return None


# ------------------------------------------------------------------------------------------ quick fixes


def include_path(ctx: CheckContext, facts: BuildFacts) -> str:
    """-I's value: fixpoint.toml's [cmsis_nn] path (relative when inside the workspace), else a variable
    the user sets to their checkout."""
    configured = ctx.project.cmsis_nn
    if configured is not None:
        inside = configured.resolve().is_relative_to(ctx.root.resolve())
        path = os.path.relpath(configured, facts.path.parent) if inside else str(configured)
        return Path(path, "Include").as_posix()
    variable = {BuildKind.MAKE: "$(CMSIS_NN)", BuildKind.CMAKE: "${CMSIS_NN}"}.get(
        facts.kind, "${sysenv.CMSIS_NN}"
    )
    return f"{variable}/Include"


def build_fixes(ctx: CheckContext, facts: BuildFacts, missing: Missing) -> tuple[Fix, ...]:
    if facts.kind not in _KIND_ORDER:
        return ()  # compile_commands.json is generated: the fix belongs in what generates it
    include = include_path(ctx, facts)
    fixes = []
    if missing.library and missing.include:
        both = _edits(ctx, facts, Missing(True, True), include)
        fixes.append(Fix("Add CMSIS-NN's library and include path", tuple(both), preferred=True))
    if missing.library:
        link = _edits(ctx, facts, Missing(True, False), include)
        fixes.append(Fix(f"Link CMSIS-NN (-l{LIBRARY})", tuple(link), preferred=not missing.include))
    if missing.include:
        edits = _edits(ctx, facts, Missing(False, True), include)
        fixes.append(
            Fix(f"Add CMSIS-NN's include path ({include})", tuple(edits), preferred=not missing.library)
        )
    return tuple(fixes)


def _edits(ctx: CheckContext, facts: BuildFacts, wanted: Missing, include: str) -> list[Edit]:
    if facts.kind is BuildKind.PLATFORMIO:  # one build_flags option: a second one would be a duplicate key
        flags = [f"-l{LIBRARY}"] * wanted.library + [f"-I{include}"] * wanted.include
        return [ini_flag(ctx, facts, " ".join(flags), flag_statement(facts, ("build_flags",)))]
    edits = _link_edits(ctx, facts) if wanted.library else []
    return _merge(edits + (_include_edits(ctx, facts, include) if wanted.include else []))


def _merge(edits: list[Edit]) -> list[Edit]:
    """Insertions at the same place joined into one edit, so their order does not depend on the client."""
    merged: dict[tuple[Path, object], Edit] = {}
    for edit in edits:
        key = (edit.path, edit.span)
        known = merged.get(key)
        merged[key] = Edit(edit.path, edit.span, known.new_text + edit.new_text) if known else edit
    return list(merged.values())


def _after_target(ctx: CheckContext, facts: BuildFacts, target: str | None, line: str, fallback: str) -> Edit:
    """A new CMake command after the target's add_executable/add_library, else at the end of the file."""
    statement = _target_statement(facts)
    if target is None or statement is None:
        return at_end(ctx, facts, fallback)
    end = Span.at(statement.span.end_line, statement.span.end_column)
    return Edit(facts.path, end, f"\n{line}")


def _link_edits(ctx: CheckContext, facts: BuildFacts) -> list[Edit]:
    flag = f"-l{LIBRARY}"
    if facts.kind is BuildKind.MAKE:
        # LDLIBS, not LDFLAGS: libraries must come after the objects on GNU ld's command line.
        return [make_flag(ctx, facts, flag, flag_statement(facts, ("LDLIBS", "LIBS")), "LDLIBS")]
    if facts.kind is BuildKind.CMAKE:
        target = _target(facts)
        existing = _link_statement(facts)
        if existing is not None:
            return [append_to(facts, existing, LIBRARY)]
        line = f"target_link_libraries({target} PRIVATE {LIBRARY})"
        return [_after_target(ctx, facts, target, line, f"link_libraries({LIBRARY})")]
    return []


def _include_edits(ctx: CheckContext, facts: BuildFacts, include: str) -> list[Edit]:
    if facts.kind is BuildKind.MAKE:
        return [make_flag(ctx, facts, f"-I{include}", _include_statement(facts), "CFLAGS")]
    if facts.kind is BuildKind.CMAKE:
        target = _target(facts)
        existing = _include_statement(facts)
        if existing is not None:
            return [append_to(facts, existing, include)]
        line = f"target_include_directories({target} PRIVATE {include})"
        return [_after_target(ctx, facts, target, line, f"include_directories({include})")]
    return []
