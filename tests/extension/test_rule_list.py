"""The extension lists the server's rules: its severity table (src/severity.ts) and its settings
(package.json `fixpoint.severity.<rule>`) name every rule `fixpoint check --list-rules` has, with the
same default severity - a rule added to the server without them could not be tuned in VS Code."""

from __future__ import annotations

import json
import re
from pathlib import Path

from fixpoint_server.findings import Code

EXTENSION = Path(__file__).resolve().parents[2] / "vscode-extension"


def _server_rules() -> dict[str, str]:
    return {code.code: code.default_severity.value for code in Code}


def test_the_severity_table_has_every_rule_with_its_default() -> None:
    text = (EXTENSION / "src" / "severity.ts").read_text()
    table = dict(re.findall(r"\{ code: '([a-z-]+)', severity: '([a-z]+)'", text))
    assert table == _server_rules()


def test_every_rule_has_a_severity_setting() -> None:
    settings = json.loads((EXTENSION / "package.json").read_text())["contributes"]["configuration"]
    properties = (
        settings["properties"]
        if isinstance(settings, dict)
        else {k: v for block in settings for k, v in block["properties"].items()}
    )
    rules = {
        key.removeprefix("fixpoint.severity.") for key in properties if key.startswith("fixpoint.severity.")
    }
    assert rules == set(_server_rules())
