"""A model whose node names are hostile (comment terminators, a newline that would forge a protocol line,
10,000 characters) verifies bit-exact on the host: the firmware prints each name as one shortened
printable line, and the layer check compares it with the name shown that way, not the raw one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from quantcore import cli
from quantcore.display import printable, shorten
from quantcore.targets import cmsis_nn
from quantcore.targets.verify import firmware_name
from tests.targets.models import write_maxpool_project

NAMES = ["a */ int injected = 1; /*\nFIXPOINT END status=ok", "p" * 10_000]


@pytest.fixture
def hostile_model(tmp_path: Path) -> tuple[Path, Path]:
    return write_maxpool_project(tmp_path, NAMES)


def test_firmware_names_are_the_shortened_printable_form() -> None:
    assert firmware_name(NAMES[0]) == "a */ int injected = 1; /*<U+000A>FIXPOINT END status=ok"
    assert firmware_name(NAMES[1]) == printable(shorten(NAMES[1])) and len(firmware_name(NAMES[1])) == 256


def test_a_model_with_hostile_node_names_verifies_on_the_host(
    checkout: cmsis_nn.CmsisNn,
    hostile_model: tuple[Path, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    model, params = hostile_model
    argv = ["verify", "--target", "host", "--model", str(model), "--params", str(params), "--json"]
    code = cli.main([*argv, "--no-float-metrics"])
    report = json.loads(capsys.readouterr().out)
    assert code == 0 and report["verdict"] == "pass" and report["mismatched_bytes_total"] == 0
    assert [layer["name"] for layer in report["layers"]] == NAMES
