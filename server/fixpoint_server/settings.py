"""The project's settings as the server uses them: fixpoint.toml, or defaults found by looking at the tree.

With a fixpoint.toml, every bad value is a project-settings finding at its key's line (the default is
kept and the server goes on). Without one, the project is what the tree suggests: the only quant-params
JSON (if there is exactly one), the model it records, and the folder holding Fixpoint-generated sources.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from fixpoint_server.findings import Code, Finding, Span
from quantcore.codegen.files import read_header
from quantcore.project import FILENAME, SEVERITIES, Problem, Project, load_project


def load(root: Path) -> tuple[Project, list[Finding]]:
    """The settings of the project at `root` and the problems of its fixpoint.toml (if any)."""
    path = root / FILENAME
    if not path.is_file():
        return Project(generated=root / "generated"), []
    project, problems = load_project(path)
    problems += _unknown_rules(project)
    try:
        text = path.read_text(errors="replace")
    except OSError:
        text = ""
    return project, [_finding(path, text, p) for p in problems]


def discover(root: Path, project: Project, params: Iterable[Path], c_files: Iterable[Path]) -> Project:
    """Fill what fixpoint.toml did not say from the tree: params, model, generated folder."""
    if project.path is not None:
        return project
    candidates = sorted(params)
    only = candidates[0] if len(candidates) == 1 else None
    model = _recorded_model(only) if only is not None else None
    generated = _generated_folder(c_files)
    return dataclasses.replace(
        project,
        params=only or project.params,
        model=model or project.model,
        generated=generated or project.generated,
    )


def editor_severities(value: Any) -> dict[str, str]:
    """The editor's {rule: level} (initializationOptions.severity), unknown rules and levels dropped."""
    if not isinstance(value, dict):
        return {}
    known = {c.code for c in Code}
    return {rule: level for rule, level in value.items() if rule in known and level in SEVERITIES}


def with_severities(project: Project, editor: dict[str, str]) -> Project:
    """`project` with the editor's severities over fixpoint.toml's (the editor's settings are the user's)."""
    if not editor:
        return project
    checks = dataclasses.replace(project.checks, severity={**project.checks.severity, **editor})
    return dataclasses.replace(project, checks=checks)


def _recorded_model(params: Path) -> Path | None:
    import json

    try:
        recorded = json.loads(params.read_text())["model"]["path"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    candidate = params.parent / str(recorded)
    return candidate if candidate.is_file() else None


def _generated_folder(c_files: Iterable[Path]) -> Path | None:
    for path in sorted(c_files):
        if path.suffix == ".h":
            try:
                with path.open(errors="replace") as f:
                    head = f.read(4096)
            except OSError:
                continue
            if read_header(head) is not None:
                return path.parent
    return None


def _unknown_rules(project: Project) -> list[Problem]:
    known = {c.code for c in Code}
    return [
        Problem(f"checks.severity.{rule}", f"unknown rule; the rules are {', '.join(sorted(known))}")
        for rule in project.checks.severity
        if rule not in known
    ]


def _finding(path: Path, text: str, problem: Problem) -> Finding:
    return Finding(
        Code.PROJECT_SETTINGS,
        f"{problem.key or FILENAME}: {problem.message} (the default is used)",
        path,
        key_span(text, problem.key),
    )


def key_span(text: str, dotted: str) -> Span:
    """The line of `dotted` (e.g. "budget.flash") in a TOML text: the key inside its table, else the table."""
    if not dotted:
        return Span.at(0)
    *tables, key = dotted.split(".")
    lines = text.split("\n")
    current: list[str] = []
    fallback = 0
    for n, line in enumerate(lines):
        header = re.match(r"\s*\[([^\]]+)\]", line)
        if header:
            current = [part.strip() for part in header.group(1).split(".")]
            if current == [*tables, key]:
                return Span(n, 0, n, len(line))  # the key is a table of its own
            if current == tables:
                fallback = n
            continue
        if current == tables and re.match(rf'\s*("?){re.escape(key)}\1\s*=', line):
            return Span(n, 0, n, len(line))
    return Span(fallback, 0, fallback, len(lines[fallback]) if lines else 0)
