"""The project's settings as the server uses them: fixpoint.toml, or defaults found by looking at the tree.

With a fixpoint.toml, every bad value is a project-settings finding at its key's line (the default is
kept and the server goes on). Without one, the project is what the tree suggests: the only quant-params
JSON (if there is exactly one), the model it records, and the folder holding Fixpoint-generated sources.

The workspace boundary holds for settings too: quantcore.project refuses a `model`, `params` or
`generated` that resolves outside the project folder, at its line, like any bad value; `refusal` tells
a command that needs such a setting why it must refuse rather than use the default in its place
(`generated = '../escape'` must not make a regeneration write anywhere). A fixpoint.toml that is not
a regular file inside the workspace (a FIFO, a symlink out) is not read; the skipped-file rule says so.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from fixpoint_server.findings import Code, Finding, Span
from quantcore import limits, untrusted
from quantcore.codegen.files import read_header
from quantcore.errors import InputError
from quantcore.project import FILENAME, SEVERITIES, Problem, Project, key_line, load_project

Reader = Callable[[Path], str | None]


def load(root: Path) -> tuple[Project, list[Finding]]:
    """The settings of the project at `root` and the problems of its fixpoint.toml (if any)."""
    path = root / FILENAME
    defaults = Project(generated=root / "generated")
    if not os.path.lexists(path):
        return defaults, []
    try:
        untrusted.regular_file(path, root=root)
    except untrusted.UntrustedInputError:
        return defaults, []  # a FIFO, a symlink out: never opened; the skipped-file rule says so
    project, problems = load_project(path)  # too large or not UTF-8: one problem, at line 1
    problems += _unknown_rules(project)
    if not problems:
        return project, []
    try:  # read again only for the lengths of the lines a finding spans
        text = untrusted.read_text(path, limit=limits.TOML_MAX_BYTES, root=root)
    except untrusted.UntrustedInputError:
        text = ""  # its problem says why; it is placed at the top
    return project, [_finding(path, text, p) for p in problems]


def refusal(findings: Iterable[Finding], key: str) -> str | None:
    """What was wrong with fixpoint.toml's `key` (it leads outside the workspace, or is no path at all),
    with its file:line, for a command that would otherwise use the default in its place; None if fine."""
    return next((str(f.data["refused"]) for f in findings if f.data.get("key") == key), None)


def discover(
    root: Path, project: Project, params: Iterable[Path], c_files: Iterable[Path], read: Reader
) -> Project:
    """Fill what fixpoint.toml did not say from the tree: params, model, generated folder. `read` is the
    index's reader (regular files inside the workspace only)."""
    if project.path is not None:
        return project
    candidates = sorted(params)
    only = candidates[0] if len(candidates) == 1 else None
    model = _recorded_model(root, only, read) if only is not None else None
    generated = _generated_folder(c_files, read)
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


def _recorded_model(root: Path, params: Path, read: Reader) -> Path | None:
    """The model the JSON records (params_json.model_path: relative, inside the workspace), if it exists."""
    try:
        document = untrusted.loads_json(read(params) or "", str(params))
        from quantcore.quantize import params_json  # the schema and jsonschema: only with a params JSON

        model = params_json.model_path(document, params, [root])
    except (ValueError, InputError):  # not JSON, nested too deep, no usable $.model.path
        return None
    return model if model.is_file() else None


def _generated_folder(c_files: Iterable[Path], read: Reader) -> Path | None:
    for path in sorted(c_files):
        if path.suffix == ".h":
            text = read(path)
            if text is not None and read_header(text) is not None:
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
    span = _span(text, problem)
    where = f"{FILENAME}:{span.line + 1}: {problem.key}" if problem.key else f"{FILENAME}:{span.line + 1}"
    return Finding(
        Code.PROJECT_SETTINGS,
        f"{problem.key or FILENAME}: {problem.message} (the default is used)",
        path,
        span,
        data={"key": problem.key, "refused": f"{where}: {problem.message}"},
    )


def _span(text: str, problem: Problem) -> Span:
    """The whole line of the problem: where load_project placed it, else its key's line (key_line, for
    the problems added here), else the top of the file."""
    if not problem.key and not problem.line:
        return Span.at(0)
    line = problem.line - 1 if problem.line else key_line(text, problem.key) or 0
    lines = text.split("\n")
    return Span(line, 0, line, len(lines[line]) if line < len(lines) else 0)
