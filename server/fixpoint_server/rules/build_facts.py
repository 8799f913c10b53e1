"""What the build rules (kernel-opt-level, missing-cmsis-nn) agree on about the workspace's build files:
which of them are the user's, and which of their sources build CMSIS-NN itself.

Not a rule: it has no CODES and is not in RULE_MODULES.
"""

from __future__ import annotations

from pathlib import Path

from fixpoint_server.parse.build_files import (
    BuildFacts,
    SourceKind,
    SourceRef,
    in_cmsis_nn,
    mentions_cmsis_nn,
)
from fixpoint_server.rules.context import CheckContext


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
