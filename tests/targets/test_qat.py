"""Parameters from quantization-aware training generate firmware like any other: `fixpoint verify` builds
the C with the fine-tuned weights (read from the sidecar next to the JSON) and every layer matches the
reference, byte for byte, on the host and on QEMU boards."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest

from quantcore import cli
from quantcore.quantize import params_json
from quantcore.targets import cmsis_nn
from tests import needs
from tests.onnx_models import residual_cnn

needs.module("torch", "torch is an optional extra: pip install 'fixpoint[torch]'")


@pytest.fixture(scope="module")
def qat_files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("qat")
    onnx.save(residual_cnn(), folder / "m.onnx")
    rng = np.random.default_rng(6)
    np.save(folder / "train.npy", rng.uniform(0, 1, (128, 1, 12, 12)).astype(np.float32))
    args = ["qat", str(folder / "m.onnx"), "--train", str(folder / "train.npy"), "--batch-size", "32"]
    assert cli.main([*args, "--lr", "1e-3", "-o", str(folder / "p.json")]) == 0
    return folder / "m.onnx", folder / "p.json"


@pytest.mark.parametrize("target", ["host", "qemu-m4", "qemu-m7", "qemu-m55"])
def test_fine_tuned_parameters_verify_bit_exact(
    cross: cmsis_nn.CmsisNn,
    qat_files: tuple[Path, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    target: str,
) -> None:
    model, params = qat_files
    assert "finetuned" in params_json.load(params)
    monkeypatch.chdir(tmp_path)
    capsys.readouterr()
    code = cli.main(["verify", "--target", target, "--model", str(model), "--params", str(params), "--json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 0 and report["verdict"] == "pass", report
    assert len(report["layers"]) >= 10
