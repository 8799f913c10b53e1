"""The rules are stated once (findings.Code and its rule_docs/<code>.md) and every other description is
that one: `fixpoint check --list-rules` in each format, the README's rule table, the diagnostics' link
(codeDescription) to the explanation, the hover that shows it. (The VS Code extension's copies:
tests/extension/test_rule_list.py.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_lsp
from fixpoint_server import diagnostics
from fixpoint_server.features.hover import explain_rules
from fixpoint_server.findings import RULE_DOCS, Code, Finding, Severity, Span, rule_catalog
from lsprotocol import types as lsp
from pytest_lsp import ClientServerConfig, LanguageClient

from tests.server.firmware_tree import make_tree

REPO = Path(__file__).resolve().parents[2]
SECTIONS = ("**What it checks.**", "**Why it matters.**", "**How to fix.**")


def _list_rules(fmt: str) -> str:
    proc = subprocess.run(
        [sys.executable, "-m", "quantcore.cli", "check", "--list-rules", "--format", fmt],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    return proc.stdout


def test_every_rule_has_one_explanation_file_with_its_three_parts() -> None:
    assert sorted(p.name for p in RULE_DOCS.iterdir()) == sorted(f"{c.code}.md" for c in Code)
    for code in Code:
        text = code.doc_path.read_text(encoding="utf-8")
        assert text.startswith(f"# {code.code}\n\n"), code.doc_path
        body = code.explanation
        assert body == text.removeprefix(f"# {code.code}\n").strip()
        assert [body.find(s) for s in SECTIONS] == sorted(body.find(s) for s in SECTIONS), code.code
        assert body.startswith(SECTIONS[0]) and all(s in body for s in SECTIONS), code.code
        assert "\n#" not in body, f"{code.code}: the explanation has headings of its own"


def test_codes_and_summaries_are_one_line_and_unique() -> None:
    assert len({c.code for c in Code}) == len(Code)
    for code in Code:
        assert code.code.islower() and " " not in code.code
        assert "\n" not in code.summary and "|" not in code.summary, code.code
        assert not code.summary.endswith("."), code.code  # the extension's settings add ". Restarts ..."


def test_list_rules_json_is_the_catalog() -> None:
    printed = json.loads(_list_rules("json"))
    assert printed == rule_catalog()
    assert [r["code"] for r in printed] == [c.code for c in Code]
    first = printed[0]
    assert set(first) == {"code", "severity", "summary", "explanation"}
    assert (first["code"], first["severity"]) == ("unscaled-bias", "error")
    assert first["summary"] == (
        "a bias passed to an s8 kernel that is not int32, or not round(b / (s_in * s_w[c])) of its layer"
    )
    assert first["explanation"] == Code.UNSCALED_BIAS.explanation
    assert first["explanation"].startswith("**What it checks.** The bias a CMSIS-NN s8 kernel reads")


def test_list_rules_text_is_one_line_per_rule() -> None:
    lines = _list_rules("text").splitlines()
    assert len(lines) == len(Code)
    assert lines[1] == f"{'misaligned-array':18} {'warning':8} {Code.MISALIGNED_ARRAY.summary}"
    for line, code in zip(lines, Code, strict=True):
        assert line.split()[:2] == [code.code, code.default_severity.value]
        assert line.endswith(code.summary)


def test_list_rules_sarif_is_the_rule_descriptors_with_their_help() -> None:
    sarif = json.loads(_list_rules("sarif"))
    run = sarif["runs"][0]
    assert run["results"] == []
    rules = run["tool"]["driver"]["rules"]
    assert [r["id"] for r in rules] == [c.code for c in Code]
    skipped = rules[-1]
    assert skipped["shortDescription"] == {"text": Code.SKIPPED_FILE.summary}
    assert skipped["defaultConfiguration"] == {"level": "warning"}
    assert skipped["help"] == {
        "text": Code.SKIPPED_FILE.explanation,
        "markdown": Code.SKIPPED_FILE.explanation,
    }


def readme_table() -> str:
    """The README's rule table as the catalog gives it (the lead pastes it when a rule changes)."""
    rows = [
        f"| [`{c.code}`]({c.doc_path.relative_to(REPO).as_posix()}) | {c.default_severity.value}"
        f" | {c.summary} |"
        for c in Code
    ]
    return "\n".join(["| code | default | finds |", "|---|---|---|", *rows])


def test_the_readme_rule_table_is_the_catalog() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    lines = readme.splitlines()
    start = lines.index("| code | default | finds |")
    end = next(i for i in range(start, len(lines)) if not lines[i].startswith("|"))
    found = "\n".join(lines[start:end])
    assert found == readme_table(), (
        "README.md's rule table differs from findings.Code; paste this in its place:\n\n" + readme_table()
    )


def test_a_diagnostic_links_to_its_rules_explanation(tmp_path: Path) -> None:
    path = tmp_path / "model.c"
    path.write_text("int8_t bias[4];\n")
    finding = Finding(Code.UNSCALED_BIAS, "bias is int8", path, Span.at(0, 0, 6))
    diag = diagnostics.diagnostic(finding, diagnostics.Positions(path, lambda p: p.read_text()))
    assert diag.code == "unscaled-bias"
    assert diag.code_description is not None
    href = diag.code_description.href
    assert href == (RULE_DOCS / "unscaled-bias.md").as_uri()
    assert href.startswith("file:///") and href.endswith("/fixpoint_server/rule_docs/unscaled-bias.md")


def test_the_hover_explains_each_rule_once() -> None:
    text = explain_rules([Code.UNSCALED_BIAS, Code.SKIPPED_FILE, Code.UNSCALED_BIAS])
    assert text is not None
    parts = text.split("\n\n---\n\n")
    assert len(parts) == 2
    bias = Code.UNSCALED_BIAS
    assert parts[0] == f"**unscaled-bias** (error by default): {bias.summary}\n\n{bias.explanation}"
    assert parts[1].startswith("**skipped-file** (warning by default): a file or folder not read")
    assert explain_rules([]) is None


def test_a_finding_with_its_own_severity_keeps_the_rules_link(tmp_path: Path) -> None:
    path = tmp_path / "a.c"
    path.write_text("x\n")
    finding = Finding(Code.STALE_GENERATED, "m", path, Span.at(0), Severity.INFO)
    diag = diagnostics.diagnostic(finding, diagnostics.Positions(path, lambda p: p.read_text()))
    assert diag.severity == lsp.DiagnosticSeverity.Information
    assert diag.code_description == lsp.CodeDescription(href=Code.STALE_GENERATED.doc_path.as_uri())


# -- the real server over stdio: every published diagnostic carries its link -----------------------


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """The firmware tree with two findings of different rules: a generated source edited by hand
    (stale-generated), a FIFO named like a source (skipped-file)."""
    root = make_tree(tmp_path / "fw")
    model_c = next((root / "src" / "model").glob("*.c"))
    model_c.write_text(model_c.read_text() + "/* edited */\n")
    os.mkfifo(root / "src" / "pipe.c")
    return root


@pytest_lsp.fixture(
    config=ClientServerConfig(server_command=[sys.executable, "-m", "fixpoint_server", "--stdio"])
)
async def client(lsp_client: LanguageClient, tree: Path) -> AsyncIterator[LanguageClient]:
    await lsp_client.initialize_session(
        lsp.InitializeParams(
            capabilities=lsp.ClientCapabilities(),
            root_uri=tree.as_uri(),
            workspace_folders=[lsp.WorkspaceFolder(uri=tree.as_uri(), name="fw")],
        )
    )
    yield lsp_client
    await lsp_client.shutdown_session()


async def test_published_diagnostics_link_to_the_explanation_files(client: LanguageClient) -> None:
    await client.workspace_execute_command_async(
        lsp.ExecuteCommandParams(command="fixpoint.checkWorkspace", arguments=[])
    )
    published = [d for diags in client.diagnostics.values() for d in diags]
    codes = {d.code for d in published}
    assert {"stale-generated", "skipped-file"} <= codes, codes
    for d in published:
        assert d.code_description is not None, d
        target = Path(lsp_uri_path(d.code_description.href))
        assert target == next(c for c in Code if c.code == d.code).doc_path
        assert target.read_text(encoding="utf-8").startswith(f"# {d.code}\n")


def lsp_uri_path(uri: str) -> str:
    from urllib.parse import unquote, urlparse

    parsed = urlparse(uri)
    assert parsed.scheme == "file", uri
    return unquote(parsed.path)


async def test_hover_on_a_finding_explains_its_rule(client: LanguageClient, tree: Path) -> None:
    await client.workspace_execute_command_async(
        lsp.ExecuteCommandParams(command="fixpoint.checkWorkspace", arguments=[])
    )
    model_c = next((tree / "src" / "model").glob("*.c"))
    stale = [d for d in client.diagnostics[model_c.as_uri()] if d.code == "stale-generated"]
    assert stale, client.diagnostics[model_c.as_uri()]
    hover = await client.text_document_hover_async(
        lsp.HoverParams(
            text_document=lsp.TextDocumentIdentifier(uri=model_c.as_uri()), position=stale[0].range.start
        )
    )
    assert hover is not None and isinstance(hover.contents, lsp.MarkupContent)
    code = Code.STALE_GENERATED
    assert hover.contents.value.endswith(
        f"**stale-generated** (warning by default): {code.summary}\n\n{code.explanation}"
    )
