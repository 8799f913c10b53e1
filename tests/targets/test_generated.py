"""End to end with the real code generator: generate, build, run, compare."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from quantcore import cli
from quantcore.targets import cmsis_nn


@pytest.mark.parametrize(
    ("command", "target"), [("verify", "host"), ("verify", "qemu-m4"), ("flash-verify", "qemu-m55")]
)
def test_a_generated_model_verifies_bit_exact(
    gdb: cmsis_nn.CmsisNn,
    maxpool_files: tuple[Path, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    command: str,
    target: str,
) -> None:
    monkeypatch.chdir(tmp_path)
    model, params = maxpool_files
    code = cli.main([command, "--target", target, "--model", str(model), "--params", str(params), "--json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 0 and report["verdict"] == "pass", report
    assert [layer["name"] for layer in report["layers"]] == ["pool_a", "pool_b"]
