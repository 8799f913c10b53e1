"""The extension's copies of the server's rules are generated from `fixpoint check --list-rules --format
json` (vscode-extension/scripts/gen-rules.js, run by `npm run build`) and committed: src/rules.json
(src/severity.ts's table) and package.json's `fixpoint.severity.<rule>` settings. These tests keep the
committed copies equal to findings.Code - a rule added or reworded in the server without regenerating
them fails here - and run the generator itself on a package.json whose settings are out of date."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from fixpoint_server.findings import Code

from tests import needs

REPO = Path(__file__).resolve().parents[2]
EXTENSION = REPO / "vscode-extension"
GENERATOR = EXTENSION / "scripts" / "gen-rules.js"
PREFIX = "fixpoint.severity."
needs_node = needs.tool("node", "npm")


def _properties(package: dict[str, Any]) -> dict[str, Any]:
    properties: dict[str, Any] = package["contributes"]["configuration"]["properties"]
    return properties


def _node(*args: str, cwd: Path, python: str = sys.executable) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, FIXPOINT_PYTHON=python)
    return subprocess.run(
        ["node", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120, check=False
    )


def test_the_severity_table_is_the_servers_rules() -> None:
    table = json.loads((EXTENSION / "src" / "rules.json").read_text())
    assert table == [
        {"code": c.code, "severity": c.default_severity.value, "summary": c.summary} for c in Code
    ]


def test_every_rule_has_its_severity_setting_in_the_rules_order() -> None:
    properties = _properties(json.loads((EXTENSION / "package.json").read_text()))
    severity = {k.removeprefix(PREFIX): v for k, v in properties.items() if k.startswith(PREFIX)}
    assert list(severity) == [c.code for c in Code]
    for code in Code:
        setting = severity[code.code]
        assert setting["default"] == "default"
        assert setting["enum"] == ["default", "error", "warning", "info", "hint", "off"]
        assert setting["markdownDescription"] == (
            f"Severity of `{code.code}` findings (default: {code.default_severity.value}): {code.summary}."
            " Restarts the server."
        )
        assert f"the rule's default ({code.default_severity.value})" in setting["enumDescriptions"][0]


@needs_node
def test_the_committed_copies_are_what_the_build_generates() -> None:
    proc = _node(str(GENERATOR), "--check", cwd=EXTENSION)
    assert proc.returncode == 0, proc.stderr + proc.stdout


@needs_node
def test_the_generator_rewrites_stale_settings_in_place(tmp_path: Path) -> None:
    """A copy of the extension inside a copy of the repository's layout, with a removed rule's setting
    left over, one rule's setting missing and another's description out of date: the build's step
    writes the rules' settings where they were, keeps every other setting, and writes rules.json."""
    ext = tmp_path / "vscode-extension"
    (ext / "scripts").mkdir(parents=True)
    (ext / "src").mkdir()
    shutil.copy(GENERATOR, ext / "scripts")
    (tmp_path / "server" / "fixpoint_server").mkdir(parents=True)
    (tmp_path / "server" / "fixpoint_server" / "findings.py").write_text("")  # "inside the repository"
    package = json.loads((EXTENSION / "package.json").read_text())
    properties = _properties(package)
    expected_order = list(properties)
    stale: dict[str, Any] = {}
    for key, value in properties.items():
        if key == PREFIX + "unscaled-bias":
            stale[key] = {**value, "markdownDescription": "old"}
            stale[PREFIX + "gone-rule"] = {"type": "string"}
        elif key != PREFIX + "skipped-file":
            stale[key] = value
    package["contributes"]["configuration"]["properties"] = stale
    (ext / "package.json").write_text(json.dumps(package, indent=2) + "\n")

    proc = _node(str(ext / "scripts" / "gen-rules.js"), cwd=ext)

    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "gen-rules: 9 rules; src/rules.json and package.json's settings up to date"
    assert (ext / "package.json").read_text() == (EXTENSION / "package.json").read_text()
    assert list(_properties(json.loads((ext / "package.json").read_text()))) == expected_order
    assert (ext / "src" / "rules.json").read_text() == (EXTENSION / "src" / "rules.json").read_text()
    assert _node(str(ext / "scripts" / "gen-rules.js"), "--check", cwd=ext).returncode == 0


@needs_node
def test_without_a_python_with_fixpoint_the_build_keeps_the_committed_copies(tmp_path: Path) -> None:
    ext = tmp_path / "vscode-extension"
    shutil.copytree(EXTENSION / "scripts", ext / "scripts")
    (ext / "src").mkdir()
    shutil.copy(EXTENSION / "src" / "rules.json", ext / "src")
    shutil.copy(EXTENSION / "package.json", ext)
    (tmp_path / "server" / "fixpoint_server").mkdir(parents=True)
    (tmp_path / "server" / "fixpoint_server" / "findings.py").write_text("")
    missing = str(tmp_path / "no-python")

    proc = _node(str(ext / "scripts" / "gen-rules.js"), cwd=ext, python=missing)

    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[0] == (
        f"gen-rules: {missing} could not list the rules (spawnSync {missing} ENOENT);"
        " using the committed src/rules.json"
    )
    assert (ext / "package.json").read_text() == (EXTENSION / "package.json").read_text()
    check = _node(str(ext / "scripts" / "gen-rules.js"), "--check", cwd=ext, python=missing)
    assert check.returncode == 2
    assert "no Python with Fixpoint to compare with (set FIXPOINT_PYTHON)" in check.stderr


def test_the_extensions_readme_names_every_rule() -> None:
    row = next(
        line
        for line in (EXTENSION / "README.md").read_text().splitlines()
        if line.startswith("| diagnostics |")
    )
    listed = row[row.index("(") + 1 : row.index(")")]
    assert listed == ", ".join(f"`{c.code}`" for c in Code)
