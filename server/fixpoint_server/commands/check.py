"""`fixpoint check PATH [--format text|json|sarif]`: the editor's rules, headless (CI, pre-commit).
`fixpoint check --list-rules [--format ...]`: the rules themselves (findings.Code).

PATH is a firmware folder (its fixpoint.toml, when present, is used) or one file inside one (the whole
project is checked, findings of that file printed). Exit status: 1 when an error-severity finding
exists, 0 otherwise, 2 for bad input. json is a list of {file, line, column, end_line, end_column, code,
severity, message} with 1-based lines and columns, as compilers print them; sarif is SARIF 2.1.0 for
code-scanning tools.

--list-rules prints each rule's code, default severity and summary (text); json is a list of {code,
severity, summary, explanation} - the VS Code extension's build generates its severity settings from
it; sarif is the tool's rule descriptors (with each explanation as help) and no results.

The tree may be hostile (a FIFO named like a source, a symlink to /dev/zero, 1,500 nested folders):
the index reads only regular files inside the project, walks iteratively within budgets, and what it
did not read is a skipped-file finding. Text output shows names from the tree with their control
characters escaped, so a file named `a\nb.c` cannot forge a line of the report.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from fixpoint_server import __version__
from fixpoint_server.findings import Code, Finding, Severity, rule_catalog
from quantcore.display import one_line

SARIF_LEVEL = {
    Severity.ERROR: "error",
    Severity.WARNING: "warning",
    Severity.INFO: "note",
    Severity.HINT: "note",
}


def register(sub: Any) -> None:
    p = sub.add_parser("check", help="run the editor's checks over a firmware tree (exit 1 on errors)")
    p.add_argument(
        "path", type=Path, nargs="?", default=Path("."), help="firmware folder or file (default .)"
    )
    p.add_argument("--format", choices=("text", "json", "sarif"), default="text")
    p.add_argument(
        "--list-rules",
        action="store_true",
        help="print the rules (code, default severity, summary; json and sarif add the explanation) and exit",
    )
    p.add_argument(
        "--build-query",
        action="store_true",
        help="ask make (make -pnBk runs the tree's $(shell ...)) and existing CMake build trees' file-API"
        " replies to confirm build-file findings; only on a tree you trust",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.list_rules:
        print(render_rules(args.format))
        return 0
    target = args.path.resolve()
    if not target.exists():
        print(f"fixpoint check: {args.path} does not exist", file=sys.stderr)
        return 2
    findings, root = check_path(target, build_query=args.build_query)
    if not target.is_dir():
        findings = [f for f in findings if f.path == target]
    print(render(findings, root, args.format))
    return 1 if any(f.effective_severity is Severity.ERROR for f in findings) else 0


def check_path(target: Path, build_query: bool = False) -> tuple[list[Finding], Path]:
    """Every finding of the project that `target` is in (the nearest folder with a fixpoint.toml)."""
    from fixpoint_server import settings
    from fixpoint_server.index import WorkspaceIndex
    from fixpoint_server.rules import run_rules
    from fixpoint_server.rules.context import FileKind

    root = _project_root(target)
    project, problems = settings.load(root)
    index = WorkspaceIndex(root, project)
    index.scan()
    ctx = index.context()
    params, c_files = ctx.files_of(FileKind.PARAMS_JSON), ctx.c_files()
    index.project = settings.discover(root, project, params, c_files, index.read)
    if build_query:
        from fixpoint_server.parse.build_files.build_query import BuildQuery
        from fixpoint_server.rules.build_facts import enable_build_query

        enable_build_query(index.cache, BuildQuery(root, background=False))
    return run_rules(index.context()) + problems, root


def _project_root(target: Path) -> Path:
    folder = target if target.is_dir() else target.parent
    for candidate in (folder, *folder.parents):
        if (candidate / "fixpoint.toml").is_file():
            return candidate
    return folder


def render(findings: list[Finding], root: Path, fmt: str) -> str:
    if fmt == "json":
        return json.dumps([_entry(f, root) for f in findings], indent=2)
    if fmt == "sarif":
        return json.dumps(_sarif(findings, root), indent=2)
    lines = [
        f"{one_line(_relative(f.path, root))}:{f.span.line + 1}:{f.span.column + 1}:"
        f" {f.effective_severity.value}: {one_line(f.message)} [{f.code.code}]"
        for f in findings
    ]
    errors = sum(f.effective_severity is Severity.ERROR for f in findings)
    lines.append(f"{len(findings)} finding{'s' * (len(findings) != 1)}, {errors} error{'s' * (errors != 1)}")
    return "\n".join(lines)


def render_rules(fmt: str) -> str:
    if fmt == "json":
        return json.dumps(rule_catalog(), indent=2)
    if fmt == "sarif":
        return json.dumps(_sarif([], Path(".")), indent=2)
    return "\n".join(f"{c.code:18} {c.default_severity.value:8} {c.summary}" for c in Code)


def _relative(path: Path, root: Path) -> str:
    return str(path.relative_to(root)) if path.is_relative_to(root) else str(path)


def _entry(f: Finding, root: Path) -> dict[str, Any]:
    return {
        "file": _relative(f.path, root),
        "line": f.span.line + 1,
        "column": f.span.column + 1,
        "end_line": f.span.end_line + 1,
        "end_column": f.span.end_column + 1,
        "code": f.code.code,
        "severity": f.effective_severity.value,
        "message": f.message,
    }


def _sarif(findings: list[Finding], root: Path) -> dict[str, Any]:
    rules = [
        {
            "id": c.code,
            "shortDescription": {"text": c.summary},
            "help": {"text": c.explanation, "markdown": c.explanation},
            "defaultConfiguration": {"level": SARIF_LEVEL[c.default_severity]},
        }
        for c in Code
    ]
    results = [
        {
            "ruleId": f.code.code,
            "level": SARIF_LEVEL[f.effective_severity],
            "message": {"text": f.message},
            "locations": [
                {
                    "physicalLocation": {
                        "artifactLocation": {"uri": _relative(f.path, root)},
                        "region": {
                            "startLine": f.span.line + 1,
                            "startColumn": f.span.column + 1,
                            "endLine": f.span.end_line + 1,
                            "endColumn": f.span.end_column + 1,
                        },
                    }
                }
            ],
        }
        for f in findings
    ]
    driver = {"name": "fixpoint", "version": __version__, "rules": rules}
    return {
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{"tool": {"driver": driver}, "results": results}],
    }
