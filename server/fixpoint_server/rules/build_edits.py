"""Quick-fix edits to build files: a flag or item added to a Makefile variable, a CMake command or
platformio's build_flags, or a new line where there is none to extend. The rules that fix a build
(kernel-opt-level, missing-cmsis-nn) place their edits through these, so a Makefile, CMakeLists.txt or
platformio.ini is edited the same way whichever rule asks.
"""

from __future__ import annotations

from fixpoint_server.findings import Edit, Span
from fixpoint_server.parse.build_files import BuildFacts, BuildKind, Statement
from fixpoint_server.rules.context import CheckContext


def flag_statement(facts: BuildFacts, names: tuple[str, ...], *, env_only: bool = True) -> Statement | None:
    """The last statement of those names: in a Makefile a global one (not target-specific), in
    platformio.ini one in an [env] section unless `env_only` is False (then any section's)."""
    found = [s for s in facts.statements if s.keyword in names]
    if facts.kind is BuildKind.MAKE:
        found = [s for s in found if s.target is None]
    if facts.kind is BuildKind.PLATFORMIO and env_only:
        found = [s for s in found if (s.target or "").startswith("env")]
    return found[-1] if found else None


def append_to(facts: BuildFacts, statement: Statement, item: str) -> Edit:
    """`item` at the end of the statement's value (before a CMake command's `)`)."""
    return Edit(facts.path, statement.append_at, " " + item)


def at_end(ctx: CheckContext, facts: BuildFacts, line: str) -> Edit:
    """A new last line (after a line break the file may lack)."""
    text = ctx.text(facts.path) or ""
    head = "" if not text or text.endswith("\n") else "\n"
    return Edit(facts.path, facts.end, f"{head}{line}\n")


def line_before(ctx: CheckContext, facts: BuildFacts, span: Span, new_line: str) -> Edit:
    """`new_line` inserted before the statement that contains `span`, with its indentation."""
    statement = next((s.span for s in facts.statements if s.span.line <= span.line <= s.span.end_line), span)
    lines = (ctx.text(facts.path) or "").split("\n")
    current = lines[statement.line] if statement.line < len(lines) else ""
    indent = current[: len(current) - len(current.lstrip())]
    return Edit(facts.path, Span.at(statement.line, 0), f"{indent}{new_line}\n")


def make_flag(
    ctx: CheckContext, facts: BuildFacts, flag: str, statement: Statement | None, variable: str
) -> Edit:
    """A Makefile flag: on `statement` when there is one, else a new `variable += flag` line at the end."""
    return (
        append_to(facts, statement, flag)
        if statement is not None
        else at_end(ctx, facts, f"{variable} += {flag}")
    )


def ini_flag(ctx: CheckContext, facts: BuildFacts, flag: str, statement: Statement | None) -> Edit:
    """platformio flags: on the build_flags `statement` when there is one, else a new build_flags line in
    the first [env] section, else a new [env] section at the end (one build_flags option per section:
    a second one would be a duplicate key)."""
    if statement is not None:
        return append_to(facts, statement, flag)
    sections = [s for s in facts.statements if s.keyword == "section" and (s.target or "").startswith("env")]
    if sections:
        return Edit(facts.path, sections[0].append_at, f"\nbuild_flags = {flag}")
    return at_end(ctx, facts, f"[env]\nbuild_flags = {flag}")
