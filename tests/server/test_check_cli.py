"""`fixpoint check`: the editor's rules headless, as CI and pre-commit hooks run them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from quantcore import cli
from tests.server.firmware_tree import make_tree

NET_C = """\
#include "arm_nnfunctions.h"

static const int8_t conv2_weights[30] = {1, 2, 3};
"""


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(["check", *argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def seeded(tmp_path: Path) -> Path:
    """The firmware tree with a uint8 zero point in the JSON and an unaligned, unpadded weight array that
    fixpoint.toml puts under the project's alignment policy (int8 weights outside it need none)."""
    tree = make_tree(tmp_path / "fw")
    params = tree / "model" / "residual.params.json"
    params.write_text(params.read_text().replace('"zero_point": -128,', '"zero_point": 128,', 1))
    (tree / "src" / "net.c").write_text(NET_C)
    toml = tree / "fixpoint.toml"
    toml.write_text(toml.read_text() + '\n[checks]\naligned = ["src/net.c"]\n')
    return tree


def test_a_clean_tree_passes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tree = make_tree(tmp_path / "fw")
    code, out, _ = _run(capsys, str(tree))
    assert (code, out) == (0, "0 findings, 0 errors\n")


def test_json_lists_every_finding_with_one_based_positions(
    seeded: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _run(capsys, str(seeded), "--format", "json")
    findings = json.loads(out)
    assert code == 1  # the zero point is an error
    by_code = {}
    for f in findings:
        by_code.setdefault(f["code"], []).append(f)
    assert set(by_code) == {"wrong-zero-point", "misaligned-array", "stale-generated"}
    zero_point = by_code["wrong-zero-point"][0]
    line = next(
        n for n, row in enumerate((seeded / zero_point["file"]).read_text().split("\n"), 1) if "128," in row
    )
    assert zero_point["file"] == "model/residual.params.json" and zero_point["line"] == line
    assert zero_point["severity"] == "error" and "must be in [-128, 127]" in zero_point["message"]
    assert {(f["file"], f["line"]) for f in by_code["misaligned-array"]} == {("src/net.c", 3)}
    assert {f["file"] for f in by_code["stale-generated"]} == {
        "src/model/model.h",
        "src/model/model.c",
        "src/model/model_data.c",
    }
    assert set(findings[0]) == {
        "file",
        "line",
        "column",
        "end_line",
        "end_column",
        "code",
        "severity",
        "message",
    }


def test_text_is_compiler_style_and_a_file_path_narrows_the_output(
    seeded: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _run(capsys, str(seeded / "src" / "net.c"))
    lines = out.splitlines()
    assert code == 0  # misaligned-array is a warning: the errors are in other files
    assert lines[0].startswith("src/net.c:3:") and lines[0].endswith("[misaligned-array]")
    assert lines[-1] == f"{len(lines) - 1} findings, 0 errors"


def test_sarif_names_the_rules_and_the_results(seeded: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = _run(capsys, str(seeded), "--format", "sarif")
    sarif = json.loads(out)
    run = sarif["runs"][0]
    assert sarif["version"] == "2.1.0" and run["tool"]["driver"]["name"] == "fixpoint"
    assert "unscaled-bias" in {r["id"] for r in run["tool"]["driver"]["rules"]}
    error = next(r for r in run["results"] if r["ruleId"] == "wrong-zero-point")
    location = error["locations"][0]["physicalLocation"]
    assert error["level"] == "error" and location["artifactLocation"]["uri"] == "model/residual.params.json"


def test_severities_from_fixpoint_toml_apply_and_off_silences(
    seeded: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    toml = seeded / "fixpoint.toml"
    toml.write_text(
        toml.read_text() + '\n[checks.severity]\nwrong-zero-point = "off"\nmisaligned-array = "error"\n'
    )
    code, out, _ = _run(capsys, str(seeded), "--format", "json")
    findings = json.loads(out)
    assert code == 1 and "wrong-zero-point" not in {f["code"] for f in findings}
    assert {f["severity"] for f in findings if f["code"] == "misaligned-array"} == {"error"}


def test_a_missing_path_is_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(capsys, str(tmp_path / "nowhere"))
    assert code == 2 and "nowhere does not exist" in err
