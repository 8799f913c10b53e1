"""The checkers: one module per rule family, each `check(ctx) -> list[Finding]`, pure over a snapshot.

A rule module exposes `CODES` (the Codes it reports), `READS` (a context.Reads: what its findings
depend on) and `check`; a rule whose findings for a file follow from that file's facts plus a few
workspace-level inputs also exposes `PER_FILE`, `prepare`, `check_file` (and maybe `check_rest`), and
its `check` is incremental.split_check of them (see rules/incremental.py: the server re-runs only what a
change invalidates). `run_rules` runs them all from scratch, applies the project's severities
([checks.severity]: a level, or "off" to drop the rule) and sorts the findings (`finish`). A rule that
crashes on some input must not take the others down: its exception becomes one finding on the project
file, naming the rule, so the bug is visible and the other diagnostics stay correct.
"""

from __future__ import annotations

import importlib
import logging
import traceback
from collections.abc import Iterable, Mapping
from types import ModuleType

from fixpoint_server.findings import Code, Finding, Severity, Span
from fixpoint_server.rules.context import CheckContext

RULE_MODULES = (
    "params_json",
    "stale_generated",
    "misaligned_array",
    "unscaled_bias",
    "zero_point_c",
    "kernel_opt_level",
    "missing_cmsis_nn",
    "skipped_file",
)
"""Modules of fixpoint_server.rules, in the order their findings are computed."""

log = logging.getLogger(__name__)


def rule_modules() -> list[ModuleType]:
    modules = []
    for name in RULE_MODULES:
        try:
            modules.append(importlib.import_module(f"fixpoint_server.rules.{name}"))
        except ModuleNotFoundError as exc:
            if exc.name != f"fixpoint_server.rules.{name}":
                raise
    return modules


def selected(ctx: CheckContext, only: Iterable[Code] | None = None) -> list[ModuleType]:
    """The rule modules to run: those reporting a wanted code that the project does not turn off."""
    wanted = set(only) if only is not None else None
    overrides = ctx.project.checks.severity
    return [
        module
        for module in rule_modules()
        if (wanted is None or wanted & set(module.CODES))
        and not all(overrides.get(c.code) == "off" for c in module.CODES)
    ]


def run_rules(ctx: CheckContext, only: Iterable[Code] | None = None) -> list[Finding]:
    findings: list[Finding] = []
    for module in selected(ctx, only):
        try:
            found = list(module.check(ctx))
        except Exception as exc:  # a rule's bug must not silence the other rules
            log.error("rule %s failed:\n%s", module.__name__, traceback.format_exc())
            found = [crashed_finding(ctx, module, module.CODES[0], exc)]
        findings.extend(found)
    return finish(ctx, findings, only)


def finish(
    ctx: CheckContext, findings: Iterable[Finding], only: Iterable[Code] | None = None
) -> list[Finding]:
    """The rules' findings with the project's severities applied, sorted."""
    wanted = set(only) if only is not None else None
    overrides = ctx.project.checks.severity
    return sorted(_apply_severity(findings, overrides, wanted), key=Finding.sort_key)


def _apply_severity(
    findings: Iterable[Finding], overrides: Mapping[str, str], wanted: set[Code] | None
) -> Iterable[Finding]:
    for finding in findings:
        if wanted is not None and finding.code not in wanted:
            continue
        level = overrides.get(finding.code.code)
        if level == "off":
            continue
        if level is not None:
            finding = Finding(
                finding.code, finding.message, finding.path, finding.span, Severity(level),
                finding.fixes, finding.related, finding.data,
            )  # fmt: skip
        yield finding


def crashed_finding(ctx: CheckContext, module: ModuleType, code: Code, exc: Exception) -> Finding:
    where = ctx.project.path or ctx.root
    return Finding(
        code,
        f"internal error in the {module.__name__.rsplit('.', 1)[-1]} checker ({type(exc).__name__}: {exc});"
        " its findings are missing - please report this with the file that caused it",
        where,
        Span.at(0),
        Severity.HINT,
    )
