"""What the build rules (kernel-opt-level, missing-cmsis-nn) agree on about the workspace's build files:
which of them are the user's, which of their sources build CMSIS-NN itself, and what the build system
itself says where the workspace is trusted (parse/build_files/build_query.py): `confirmed` keeps a
flag's reach only where make's evaluated database and dry run, or CMake's file-API reply, agree.

The build query is off unless the caller enables it (enable_build_query: the language server in a
trusted workspace, `fixpoint check --build-query`); then the text readers' findings stand wherever it
has no answer (no make, a failed run, an unsaved Makefile, no reply).

Not a rule: it has no CODES and is not in RULE_MODULES.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from fixpoint_server.parse.build_files import (
    BuildFacts,
    BuildKind,
    SourceKind,
    SourceRef,
    in_cmsis_nn,
    mentions_cmsis_nn,
    pattern_covers,
)
from fixpoint_server.parse.build_files.build_query import BuildQuery, Evaluated
from fixpoint_server.parse.build_files.make_text import expand_make
from fixpoint_server.parse.digest import digest
from fixpoint_server.rules.context import CheckContext, FactsCache

_QUERY_ENTRY = ("build-query", Path())
"""Where the FactsCache holds the workspace's BuildQuery, when the caller enabled it (it lives as long as
the cache: the server's, across snapshots)."""


def root_relative(ctx: CheckContext, path: Path) -> str:
    """`path` relative to the workspace root, '/'-separated (what in_cmsis_nn and the globs match)."""
    prefix = str(ctx.root).rstrip("/") + "/"
    text = str(path)  # string slicing: this runs for every source of a 2,000-file tree
    return text[len(prefix) :] if text.startswith(prefix) else Path(ctx.relative(path)).as_posix()


def user_build_facts(ctx: CheckContext) -> list[BuildFacts]:
    """The facts of every build file outside a CMSIS-NN checkout: CMSIS-NN's own CMakeLists.txt always
    "compiles CMSIS-NN", whether the firmware uses it or not, and is reached through add_subdirectory."""
    return [
        f
        for p in ctx.build_files()
        if not in_cmsis_nn(root_relative(ctx, p)) and (f := ctx.build_file(p)) is not None
    ]


def builds_cmsis_nn(facts: BuildFacts, ref: SourceRef, root: Path) -> bool:
    """Whether `ref` compiles CMSIS-NN's own code: a source, pattern or folder inside a CMSIS-NN checkout,
    or a subdirectory (add_subdirectory, FetchContent_Declare) named like CMSIS-NN."""
    return in_cmsis_nn(facts.rooted(ref.expanded, root) + "/") or (
        ref.kind is SourceKind.SUBDIRECTORY and mentions_cmsis_nn(ref.expanded)
    )


# ---------------------------------------------------------------------------- the build system's answer


def enable_build_query(cache: FactsCache, query: BuildQuery) -> None:
    """Let the build rules ask the build system (make runs the workspace's code: trusted workspaces only)."""
    with cache.lock:
        cache.entries[_QUERY_ENTRY] = ("enabled", query)


def build_query(ctx: CheckContext) -> BuildQuery | None:
    with ctx.cache.lock:
        held = ctx.cache.entries.get(_QUERY_ENTRY)
    return held[1] if held is not None and isinstance(held[1], BuildQuery) else None


def _answers(ctx: CheckContext) -> list[Evaluated]:
    """Every answer the build query has for this snapshot's build files (once per snapshot)."""

    def compute() -> list[Evaluated]:
        query = build_query(ctx)
        if query is None:
            return []
        # The user's build files only: a CMSIS-NN checkout's own are not checked, so never run either.
        known = user_build_facts(ctx)
        includes = {f.path: [w for i in f.includes for w in i.expanded.split()] for f in known if f.includes}
        return query.evaluated([f.path for f in known], includes)

    return ctx.memo("build-query", compute)


def evaluations(ctx: CheckContext) -> list[Evaluated]:
    """The build system's usable answers, computed from the text each build file has now (an unsaved
    edit, or a file changed since, leaves its build to the text reader until the next answer)."""
    return ctx.memo(
        "build-query-current", lambda: [r for r in _answers(ctx) if r.usable and _current(ctx, r)]
    )


def evaluation_problems(ctx: CheckContext) -> list[tuple[Path, str]]:
    """(the Makefile or a CMake file, why the build system gave no answer) of each failed query."""
    found = []
    for result in _answers(ctx):
        place = result.entry if result.tool == "make" else min(result.describes, default=None)
        if result.problem is not None and place is not None:
            found.append((place, result.problem))
    return found


def _current(ctx: CheckContext, result: Evaluated) -> bool:
    return all(ctx.derived("build-query-digest", p, digest) == d for p, d in result.digests.items())


def _of(ctx: CheckContext, facts: BuildFacts) -> list[Evaluated]:
    known = evaluations(ctx)
    if not known:
        return []
    path = ctx.memo(("resolved", facts.path), facts.path.resolve)
    return [r for r in known if path in r.describes]


def confirmed(
    ctx: CheckContext,
    facts: BuildFacts,
    flag: str,
    context: str,
    labels: list[str],
    by_text: Callable[[list[str]], list[str]] | None = None,
) -> list[str]:
    """The `labels` (kernel sources, root-relative; folders end in '/') that `flag`, written in `facts`
    in `context` (a make variable, "recipe", a CMake command), really reaches by the build system's
    answer. A make variable's value must still hold the flag (the taken branch of an ifeq, after
    filter-out and the includes), and a source the evaluated build compiles must have it in effect on
    its command line (the last -O wins); a source it does not compile is dropped, and what is not a
    source (a CMake target, a package) stays. Without an answer about compiled sources, `by_text(labels)`
    (the text reader's own narrowing: a later -O for the same files wins) decides."""
    evaluated = _of(ctx, facts)
    narrowed = by_text(labels) if by_text is not None else labels
    if not evaluated:
        return narrowed
    if facts.kind is BuildKind.MAKE and not any(_variable_holds(r, context, flag) for r in evaluated):
        return []
    compiling = [r for r in evaluated if r.compiled]
    if not compiling:
        return narrowed
    return [label for label in labels if any(_source_has(r, label, flag) for r in compiling)]


def _variable_holds(result: Evaluated, name: str, flag: str) -> bool:
    """Whether make's variable `name` holds `flag` in some value (global, target- or pattern-specific);
    True for what this cannot tell (a recipe's words, a function make did not expand for us)."""
    if name == "recipe" or not name:
        return True
    for value in result.variables.get(name, ()):
        expanded = expand_make(value, dict(result.globals))
        if flag in expanded.split() or "$" in expanded:
            return True
    return False


def _source_has(result: Evaluated, label: str, flag: str) -> bool:
    lists = result.flag_lists(label)
    if not lists:
        if " " in label:  # "target cmsis-nn", "CMSIS-NN (lib_deps)": not a source the answer names
            return True
        lists = tuple(
            flags
            for source, compiled in result.compiled.items()
            if source.startswith(label) or pattern_covers(label, source)
            for flags in compiled
        )
    return any(_in_effect(flags, flag) for flags in lists)


def _in_effect(flags: tuple[str, ...], flag: str) -> bool:
    if flag.startswith("-O"):
        levels = [f for f in flags if f.startswith("-O")]
        return bool(levels) and levels[-1] == flag
    if flag.startswith("-D"):  # a definition, with or without a value
        return any(f == flag or f.startswith(flag + "=") for f in flags)
    return flag in flags
