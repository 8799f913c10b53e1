"""kernel-opt-level: compiler flags the project's policy forbids on CMSIS-NN and generated model sources,
and a CMSIS_NN_USE_SINGLE_ROUNDING setting that differs from the rounding the parameters were made for.

Kernel sources are the files matching kernel_globs(ctx) (CMSIS-NN's folders and the generated folder)
and paths inside a CMSIS-NN checkout by name (CMSIS/NN/Source, $(CMSIS_NN)/...). A flag reaches them
when its scope names them (a `CMSIS-NN/%.o:` target-specific value, set_source_files_properties on the
generated sources, a compile command for one of them, a CMake target whose sources are kernels or that
is CMSIS-NN's own), or when it applies to every source of a build file that compiles kernels. A later
-O for the same files wins, as it does on the compiler's command line (make appends target-specific
values after the global ones), so a global -O3 with `CMSIS-NN/%.o: CFLAGS += -O1` is fine for CMSIS-NN.

compile_commands.json is generated (CMake, bear): its flags are reported once per flag, only when no
hand-written build file already reports that flag, and without a quick fix, which belongs in the file
that generates it. Build files inside a CMSIS-NN checkout are not checked; CMSIS-NN's CMakeLists.txt is
reached through add_subdirectory, where its CMSIS_OPTIMIZATION_LEVEL (default -Ofast) is checked.
The rounding macro is only known to be missing when the build compiles CMSIS-NN's sources itself: a
prebuilt library was compiled elsewhere, with whatever it was compiled with.
"""

from __future__ import annotations

import functools
import posixpath
from collections.abc import Iterable
from pathlib import Path

from fixpoint_server.findings import Code, Edit, Finding, Fix, Related, Severity, Span
from fixpoint_server.parse.build_files import (
    CMSIS_NN_OPTIMIZATION_VARIABLE,
    BuildFacts,
    BuildKind,
    Definition,
    FlagUse,
    LibraryKind,
    Scope,
    ScopeKind,
    SourceKind,
    SourceRef,
    glob_match,
    in_cmsis_nn,
    mentions_cmsis_nn,
    pattern_covers,
)
from fixpoint_server.rules.build_edits import flag_statement, ini_flag, line_before, make_flag
from fixpoint_server.rules.build_facts import (
    builds_cmsis_nn,
    confirmed,
    evaluation_problems,
    root_relative,
    user_build_facts,
)
from fixpoint_server.rules.context import CheckContext, FileKind, Reads, kernel_globs
from quantcore.kernels.requantize import Rounding

CODES = (Code.KERNEL_OPT_LEVEL,)
ROUNDING_MACRO = "CMSIS_NN_USE_SINGLE_ROUNDING"
KERNEL_LEVEL = "-O1"
"""What the user's notes ask for on kernel sources, and what the quick fix puts in a forbidden -O's place."""

RISKS = {
    "-O3": "-O3 auto-vectorisation is reported to break fixed-point kernels; the policy asks for -O1",
    "-Ofast": "-Ofast is -O3 (auto-vectorisation, reported to break fixed-point kernels) plus -ffast-math;"
    " the policy asks for -O1",
    "-O0": "-O0 gives no speed-up from CMSIS-NN: its inline SIMD helpers stay function calls",
    "-fno-builtin": "-fno-builtin stops memcpy/memset being inlined, and the kernels copy in loops: slow",
    "-ffreestanding": "-ffreestanding implies -fno-builtin: memcpy/memset are not inlined, kernels slow down",
    "-fno-omit-frame-pointer": "-fno-omit-frame-pointer reserves r7 as the Thumb frame pointer, which"
    " CMSIS-NN's inline assembly uses: build errors or clobbered registers",
}
"""The risk of each default forbidden flag, said once, where the flag is."""
_SCOPE_RANK = {ScopeKind.ALL: 0, ScopeKind.TARGET: 1, ScopeKind.FILES: 2}

READS = Reads(
    contents=frozenset(k for k in FileKind if k.is_build),
    listing=frozenset({FileKind.C_SOURCE}),
    outside=True,
)
"""The build files' text, which C sources exist (not their text), and what the build system says (it
reads files the index may not list: included makefiles, a build tree's replies)."""


def check(ctx: CheckContext) -> list[Finding]:
    if not ctx.build_files():
        return []  # no build file, no flags: nothing to check (and nothing to classify)
    kernels = KernelSources(ctx)
    findings: list[Finding] = []
    for facts in kernels.written:
        findings.extend(_flag_findings(ctx, kernels, facts))
        findings.extend(_cmsis_default(ctx, kernels, facts))
    reported = {str(f.data["flag"]) for f in findings}
    for facts in kernels.generated:
        findings.extend(_generated_findings(ctx, kernels, facts, reported))
    findings.extend(_rounding(ctx, kernels))
    findings.extend(_unevaluated(ctx))
    return findings


class KernelSources:
    """Which sources the flag policy covers, and which of them each build file's facts reach."""

    def __init__(self, ctx: CheckContext) -> None:
        self.ctx = ctx
        self.root = ctx.root
        self.globs = tuple(kernel_globs(ctx))
        self.files = [
            rel for p in ctx.files_of(FileKind.C_SOURCE) if self.is_kernel(rel := root_relative(ctx, p))
        ]
        self.by_stem: dict[str, list[str]] = {}
        for rel in self.files:
            self.by_stem.setdefault(posixpath.splitext(posixpath.basename(rel))[0], []).append(rel)
        known = user_build_facts(ctx)
        self.written = [f for f in known if f.kind is not BuildKind.COMPILE_COMMANDS]
        self.generated = [f for f in known if f.kind is BuildKind.COMPILE_COMMANDS]
        self._reach: dict[tuple[int, Scope], list[str]] = {}
        self._local: dict[tuple[int, str], str] = {}

    def local(self, facts: BuildFacts, rooted: str) -> str:
        key = (id(facts), rooted)
        if key not in self._local:
            self._local[key] = facts.local(rooted, self.root)
        return self._local[key]

    def is_kernel(self, rooted: str) -> bool:
        # The answer only changes with the globs: cached across checks (per keystroke, 2,000 files).
        return bool(self.ctx.cache.get(
            "kernel-source", Path(rooted), repr(self.globs),
            lambda: in_cmsis_nn(rooted) or any(glob_match(g, rooted) for g in self.globs),
        ))  # fmt: skip

    def reach(self, facts: BuildFacts, scope: Scope) -> list[str]:
        """The kernel sources `scope` reaches: root-relative files, or patterns when no file matches."""
        key = (id(facts), scope)  # every flag of a file asks about the same few scopes
        if key not in self._reach:
            self._reach[key] = self._compute_reach(facts, scope)
        return self._reach[key]

    def _compute_reach(self, facts: BuildFacts, scope: Scope) -> list[str]:
        if scope.kind is ScopeKind.FILES:
            found = [f for f in self.files if scope.matches(self.local(facts, f))]
            return found or [
                r for r in (facts.rooted(p, self.root) for p in scope.patterns) if self.is_kernel(r)
            ]
        if scope.kind is ScopeKind.TARGET and facts.kind is BuildKind.CMAKE:
            own = self.sources(facts, [s for s in facts.sources if s.target == scope.target])
            return own + ([f"target {scope.target}"] if mentions_cmsis_nn(scope.target) else [])
        return self.everything(facts)

    def sources(self, facts: BuildFacts, refs: Iterable[SourceRef]) -> list[str]:
        found: list[str] = []
        for ref in refs:
            rooted = facts.rooted(ref.expanded, self.root)
            if ref.kind is SourceKind.SUBDIRECTORY:
                if self.is_kernel(rooted + "/x.c") or mentions_cmsis_nn(ref.expanded):
                    found.append(rooted + "/")
                continue
            found.extend(self.matched(rooted, ref.kind) or ([rooted] if self.is_kernel(rooted) else []))
        return list(dict.fromkeys(found))

    def matched(self, rooted: str, kind: SourceKind) -> list[str]:
        """The kernel files a glob matches, or the one an object is built from (build/x.o <- x.c)."""
        if kind is SourceKind.GLOB:
            return [f for f in self.files if pattern_covers(rooted, f)]
        stem, suffix = posixpath.splitext(posixpath.basename(rooted))
        if suffix not in (".o", ".obj"):
            return []
        return [f for f in self.by_stem.get(stem, []) if pattern_covers(rooted, f)]

    def everything(self, facts: BuildFacts) -> list[str]:
        """What a flag for every source reaches: this file's sources, those of the files that include it,
        platformio's default folders and CMSIS-NN from lib_deps."""
        found = self.sources(facts, facts.sources)
        for includer in self.includers(facts):
            found.extend(self.sources(includer, includer.sources))
        for pattern in facts.default_sources:
            rooted = facts.rooted(pattern, self.root)
            found.extend(f for f in self.files if glob_match(rooted, f))
        packages = [lib for lib in facts.libraries if lib.kind is LibraryKind.PACKAGE]
        found.extend(f"{lib.name} (lib_deps)" for lib in packages if mentions_cmsis_nn(lib.name))
        return list(dict.fromkeys(found))

    def includers(self, facts: BuildFacts) -> list[BuildFacts]:
        name = facts.path.name
        return [
            f
            for f in self.written
            if f is not facts and any(Path(i.expanded).name == name for i in f.includes)
        ]

    def covers(self, facts: BuildFacts, scope: Scope, label: str) -> bool:
        if scope.kind is ScopeKind.FILES:
            return scope.matches(self.local(facts, label))
        if scope.kind is ScopeKind.TARGET and facts.kind is BuildKind.CMAKE:
            return label in self.reach(facts, scope)
        return True

    def effective(self, facts: BuildFacts, use: FlagUse, labels: list[str]) -> list[str]:
        """The labels no later -O overrides (for an -O flag; other flags do not override each other)."""
        if not use.flag.startswith("-O"):
            return labels
        later = [o for o in facts.flags if o.flag.startswith("-O") and o.span != use.span and _wins(o, use)]
        return [label for label in labels if not any(self.covers(facts, o.scope, label) for o in later)]


def _rank(use: FlagUse) -> tuple[int, Span]:
    # CMAKE_<LANG>_FLAGS come first on CMake's command lines, whatever line they are set on.
    return (-1 if use.context.startswith("CMAKE_") else _SCOPE_RANK[use.scope.kind]), use.span


def _wins(later: FlagUse, use: FlagUse) -> bool:
    return _rank(later) > _rank(use)


def forbidden(flag: str, policy: Iterable[str]) -> str | None:
    """The policy entry `flag` breaks (an entry ending in '=' forbids every value)."""
    return next((p for p in policy if flag == p or (p.endswith("=") and flag.startswith(p))), None)


def _listing(labels: list[str]) -> str:
    shown = ", ".join(labels[:3])
    return shown + (f" and {len(labels) - 3} more" if len(labels) > 3 else "")


def _risk(flag: str, entry: str) -> str:
    return (
        RISKS.get(entry)
        or f"{flag} is forbidden on kernel sources by fixpoint.toml's [checks] forbidden_flags"
    )


def _reached(kernels: KernelSources, facts: BuildFacts) -> dict[Span, tuple[FlagUse, str, list[str]]]:
    """Forbidden flags of one file by span (one written flag can have several scopes) and what they reach."""
    policy = kernels.ctx.project.checks.forbidden_flags
    found: dict[Span, tuple[FlagUse, str, list[str]]] = {}
    for use in facts.flags:
        entry = forbidden(use.flag, policy)
        if entry is None:
            continue
        narrow = functools.partial(kernels.effective, facts, use)  # the text's own order of -O flags
        labels = confirmed(kernels.ctx, facts, use.flag, use.context, kernels.reach(facts, use.scope), narrow)
        if labels:
            _, _, known = found.setdefault(use.span, (use, entry, []))
            known.extend(label for label in labels if label not in known)
    return found


def _flag_findings(ctx: CheckContext, kernels: KernelSources, facts: BuildFacts) -> list[Finding]:
    findings = []
    for use, entry, labels in _reached(kernels, facts).values():
        message = f"{use.flag} on kernel sources ({_listing(labels)}): {_risk(use.flag, entry)}"
        findings.append(
            Finding(
                Code.KERNEL_OPT_LEVEL,
                message,
                facts.path,
                use.span,
                fixes=_flag_fixes(ctx, facts.path, use),
                data={"flag": use.flag, "files": labels, "context": use.context},
            )
        )
    return findings


def _flag_fixes(ctx: CheckContext, path: Path, use: FlagUse) -> tuple[Fix, ...]:
    policy = ctx.project.checks.forbidden_flags
    if use.flag.startswith("-O") and forbidden(KERNEL_LEVEL, policy) is None:
        return (
            Fix(
                f"Use {KERNEL_LEVEL} for kernel sources",
                (Edit(path, use.span, KERNEL_LEVEL),),
                preferred=True,
            ),
        )
    return (Fix(f"Remove {use.flag}", (Edit(path, use.removal, ""),), preferred=True),)


def _generated_findings(
    ctx: CheckContext, kernels: KernelSources, facts: BuildFacts, reported: set[str]
) -> list[Finding]:
    """compile_commands.json: one finding per flag (on its first use), the other uses as related."""
    groups: dict[str, list[tuple[FlagUse, str, list[str]]]] = {}
    for use, entry, labels in _reached(kernels, facts).values():
        if use.flag not in reported:
            groups.setdefault(use.flag, []).append((use, entry, labels))
    findings = []
    for flag, uses in groups.items():
        first, entry, _ = uses[0]
        files = list(dict.fromkeys(label for _, _, labels in uses for label in labels))
        message = (
            f"{flag} on kernel sources ({_listing(files)}): {_risk(flag, entry)}; compile_commands.json is"
            " generated, change the build file that writes it"
        )
        related = tuple(Related(facts.path, u.span, f"{flag} here too") for u, _, _ in uses[1:20])
        findings.append(
            Finding(
                Code.KERNEL_OPT_LEVEL,
                message,
                facts.path,
                first.span,
                related=related,
                data={"flag": flag, "files": files},
            )
        )
    return findings


# ------------------------------------------------------------------------------ CMSIS-NN's CMake default


def _cmsis_default(ctx: CheckContext, kernels: KernelSources, facts: BuildFacts) -> list[Finding]:
    """add_subdirectory(CMSIS-NN) builds it with CMSIS_OPTIMIZATION_LEVEL, -Ofast unless set."""
    if facts.kind is not BuildKind.CMAKE or forbidden("-Ofast", ctx.project.checks.forbidden_flags) is None:
        return []
    subdirs = [
        s
        for s in facts.sources
        if s.kind is SourceKind.SUBDIRECTORY and builds_cmsis_nn(facts, s, kernels.root)
    ]
    if not subdirs or _cmsis_level_set(kernels):
        return []
    ref = subdirs[0]
    if not confirmed(ctx, facts, "-Ofast", "", [facts.rooted(ref.expanded, kernels.root) + "/"]):
        return []  # the build tree's reply: CMSIS-NN's sources are not compiled with -Ofast
    message = (
        f"CMSIS-NN ({ref.path_text}) is compiled with its CMSIS_OPTIMIZATION_LEVEL, -Ofast unless set:"
        f" {RISKS['-Ofast']}; set it before adding CMSIS-NN (or pass -D{CMSIS_NN_OPTIMIZATION_VARIABLE}=-O1"
        " to cmake)"
    )
    line = f'set({CMSIS_NN_OPTIMIZATION_VARIABLE} "{KERNEL_LEVEL}" CACHE STRING "CMSIS-NN -O level" FORCE)'
    fix = Fix(
        f"Set {CMSIS_NN_OPTIMIZATION_VARIABLE} to {KERNEL_LEVEL}",
        (line_before(ctx, facts, ref.span, line),),
        preferred=True,
    )
    return [
        Finding(Code.KERNEL_OPT_LEVEL, message, facts.path, ref.span, fixes=(fix,), data={"flag": "-Ofast"})
    ]


def _cmsis_level_set(kernels: KernelSources) -> bool:
    """Some CMake file sets CMSIS-NN's level: the variable, or an -O on a CMSIS-NN target (it comes later)."""
    return any(
        use.flag.startswith("-O")
        and use.scope.kind is ScopeKind.TARGET
        and mentions_cmsis_nn(use.scope.target)
        for facts in kernels.written
        if facts.kind is BuildKind.CMAKE
        for use in facts.flags
    )


def _unevaluated(ctx: CheckContext) -> list[Finding]:
    """A hint where the build system was asked and gave no answer: these findings are the text's."""
    return [
        Finding(
            Code.KERNEL_OPT_LEVEL,
            f"The build system gave no answer ({problem}): kernel-opt-level reads this build's text only,"
            " every branch of a conditional included",
            path,
            Span.at(0),
            Severity.HINT,
        )
        for path, problem in evaluation_problems(ctx)
    ]


# -------------------------------------------------------------------------------------------- rounding


def _rounding(ctx: CheckContext, kernels: KernelSources) -> list[Finding]:
    defined = [
        (facts, d, labels)
        for facts in kernels.written + kernels.generated
        for d in facts.definitions
        if d.name == ROUNDING_MACRO
        and (labels := confirmed(ctx, facts, f"-D{ROUNDING_MACRO}", "", kernels.reach(facts, d.scope)))
    ]
    if ctx.project.rounding is Rounding.SINGLE:
        return [] if any(_cmsis(labels) for _, _, labels in defined) else _missing_single(ctx, kernels)
    return _unwanted_single(defined)


def _cmsis(labels: list[str]) -> list[str]:
    return [label for label in labels if in_cmsis_nn(label) or mentions_cmsis_nn(label)]


def _unwanted_single(defined: list[tuple[BuildFacts, Definition, list[str]]]) -> list[Finding]:
    findings: dict[tuple[Path, Span], Finding] = {}
    for facts, d, labels in defined:
        message = (
            f"{ROUNDING_MACRO} is defined for kernel sources ({_listing(labels)}), but the parameters were"
            ' computed for double rounding (fixpoint.toml rounding = "double"): results differ from the'
            " reference in the last bit"
        )
        fixes: tuple[Fix, ...] = ()
        if facts.kind is not BuildKind.COMPILE_COMMANDS:
            fixes = (
                Fix(
                    f"Remove the {ROUNDING_MACRO} definition",
                    (Edit(facts.path, d.removal, ""),),
                    preferred=True,
                ),
            )
        findings.setdefault(
            (facts.path, d.span),
            Finding(
                Code.KERNEL_OPT_LEVEL,
                message,
                facts.path,
                d.span,
                fixes=fixes,
                data={"flag": "-D" + ROUNDING_MACRO},
            ),
        )
    return list(findings.values())


def _missing_single(ctx: CheckContext, kernels: KernelSources) -> list[Finding]:
    for facts in kernels.written:
        for ref in facts.sources:
            labels = _cmsis(kernels.sources(facts, [ref]))
            if labels:
                message = (
                    f'fixpoint.toml says rounding = "single", but {ROUNDING_MACRO} is not defined for'
                    f" CMSIS-NN's sources ({_listing(labels)}): the parameters were computed for single"
                    " rounding, so results differ from the reference in the last bit"
                )
                fix = Fix(f"Define {ROUNDING_MACRO}", (_define_edit(ctx, facts, ref.span),), preferred=True)
                return [
                    Finding(
                        Code.KERNEL_OPT_LEVEL,
                        message,
                        facts.path,
                        ref.span,
                        fixes=(fix,),
                        data={"flag": "-D" + ROUNDING_MACRO},
                    )
                ]
    return []


def _define_edit(ctx: CheckContext, facts: BuildFacts, span: Span) -> Edit:
    """Where the definition goes: CMake before the statement adding CMSIS-NN's sources, Make and
    platformio on their global flags (a new line at the end of a Makefile that has none)."""
    flag = f"-D{ROUNDING_MACRO}"
    if facts.kind is BuildKind.CMAKE:
        return line_before(ctx, facts, span, f"add_compile_definitions({ROUNDING_MACRO})")
    if facts.kind is BuildKind.MAKE:
        return make_flag(ctx, facts, flag, flag_statement(facts, ("CFLAGS", "CPPFLAGS")), "CFLAGS")
    return ini_flag(ctx, facts, flag, flag_statement(facts, ("build_flags",), env_only=False))
