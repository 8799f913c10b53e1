"""Per-channel scales into depthwise convolutions need no new kernel, only other integers: `fixpoint
verify` builds the generated C with the real CMSIS-NN and every layer matches the reference executor,
byte for byte, on the host and on QEMU boards (the DSP and the MVE depthwise paths)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest

from quantcore import cli
from quantcore.quantize import params_json
from quantcore.targets import cmsis_nn
from tests.onnx_models import depthwise_cnn


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("dwscales")
    onnx.save(depthwise_cnn(), folder / "m.onnx")
    np.save(folder / "calib.npy", np.random.default_rng(1).uniform(0, 1, (64, 1, 12, 12)).astype(np.float32))
    args = ["quantize", str(folder / "m.onnx"), "--calib", str(folder / "calib.npy"), "--dw-channel-scales"]
    # With the int16 output too: both transforms' integers in one program, verified together.
    assert cli.main([*args, "on", "--int16-output", "on", "-o", str(folder / "p.json")]) == 0
    return folder / "m.onnx", folder / "p.json"


@pytest.mark.parametrize("target", ["host", "qemu-m4", "qemu-m55"])
def test_per_channel_depthwise_inputs_verify_bit_exact(
    cross: cmsis_nn.CmsisNn,
    files: tuple[Path, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    target: str,
) -> None:
    model, params = files
    doc = params_json.load(params)
    assert doc["transforms"]["dw_channel_scales"]["applied"]
    assert [
        n for n, t in doc["tensors"].items() if isinstance(t["scale"], list) and t["kind"] == "activation"
    ] == [
        "a1",
        "a3",
    ]
    monkeypatch.chdir(tmp_path)
    capsys.readouterr()
    code = cli.main(["verify", "--target", target, "--model", str(model), "--params", str(params), "--json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 0 and report["verdict"] == "pass", report
    assert [layer["name"] for layer in report["layers"]] == [
        "conv1",
        "dw1",
        "pw",
        "dw2",
        "gap",
        "flatten",
        "flat.to_int16",
        "fc",
    ]
