"""int16 layers in generated C: every s16 kernel and the conversions, byte for byte against the reference
on the host and on QEMU boards, through `fixpoint verify` as users run it."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest

from quantcore import cli, pipeline
from quantcore.data import DataSet
from quantcore.quantize import params_json
from quantcore.targets import cmsis_nn
from tests.onnx_models import outlier_cnn, residual_cnn

# conv1 reads the graph input (int8 -> int16 conversion); max pool, depthwise, 1x1 conv, the residual
# add and the gate conv run at int16; the mul reads int16 and runs at int8 (int16 -> int8 conversion);
# the average pool reads the int8 concat, and the fully connected layer's int16 output goes through a
# conversion into the softmax.
INT16_LAYERS = ("conv1", "pool1", "dwconv", "pwconv", "residual", "gate", "pool2", "fc")
S16_KERNELS = {
    "arm_convolve_wrapper_s16",
    "arm_max_pool_s16",
    "arm_depthwise_conv_wrapper_s16",
    "arm_elementwise_add_s16",
    "arm_avgpool_s16",
    "arm_fully_connected_s16",
}


@pytest.fixture(scope="module")
def residual_int16(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("int16")
    model_path = folder / "residual.onnx"
    onnx.save(residual_cnn(), model_path)
    model = pipeline.load_model(model_path)
    x = np.random.default_rng(3).uniform(0, 1, (64, 1, 12, 12)).astype(np.float32)
    options = pipeline.QuantizeOptions(int16_layers=frozenset(INT16_LAYERS))
    result = pipeline.quantize(model, DataSet(x, None), options)
    kernels = {layer["kernel"] for layer in result.document["layers"]}
    assert kernels >= S16_KERNELS and "fixpoint_requantize" in kernels
    params = folder / "residual.params.json"
    params_json.write(params, result.document)
    return model_path, params


def _verify(model: Path, params: Path, target: str, capsys: pytest.CaptureFixture[str]) -> dict:
    code = cli.main(["verify", "--target", target, "--model", str(model), "--params", str(params), "--json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 0 and report["verdict"] == "pass", report
    return report


@pytest.mark.parametrize("target", ["host", "qemu-m4", "qemu-m55"])
def test_int16_layers_and_conversions_are_bit_exact(
    cross: cmsis_nn.CmsisNn,
    residual_int16: tuple[Path, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    target: str,
) -> None:
    monkeypatch.chdir(tmp_path)
    report = _verify(*residual_int16, target, capsys)
    names = [layer["name"] for layer in report["layers"]]
    assert set(INT16_LAYERS) <= set(names)
    assert any(".to_int16" in name for name in names) and any(".to_int8" in name for name in names)


def test_an_automatic_int16_choice_generates_and_verifies(
    cross: cmsis_nn.CmsisNn,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    onnx.save(outlier_cnn(factor=1.0), tmp_path / "m.onnx")
    np.save(
        tmp_path / "calib.npy", np.random.default_rng(1).uniform(0, 1, (96, 1, 16, 16)).astype(np.float32)
    )
    args = ["quantize", "m.onnx", "--calib", "calib.npy", "--int16", "auto", "-o", "p.json"]
    assert cli.main(args) == 0
    capsys.readouterr()
    chosen = params_json.load(tmp_path / "p.json")["mixed_precision"]["layers"]
    assert chosen
    for target in ("host", "qemu-m7"):
        _verify(tmp_path / "m.onnx", tmp_path / "p.json", target, capsys)


def test_the_default_int16_output_is_bit_exact_through_verify_and_flash_verify(
    gdb: cmsis_nn.CmsisNn,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`fixpoint quantize` with its defaults makes the fully connected output layer int16
    (arm_fully_connected_s16 writing the graph output, its int8 input converted); the generated C gives
    the reference executor's int16 output bytes on the host, on QEMU boards through semihosting, and
    through the GDB stub and the UART (flash-verify)."""
    monkeypatch.chdir(tmp_path)
    onnx.save(outlier_cnn(factor=1.0), tmp_path / "m.onnx")
    np.save(
        tmp_path / "calib.npy", np.random.default_rng(1).uniform(0, 1, (96, 1, 16, 16)).astype(np.float32)
    )
    assert cli.main(["quantize", "m.onnx", "--calib", "calib.npy", "-o", "p.json"]) == 0
    capsys.readouterr()
    document = params_json.load(tmp_path / "p.json")
    assert document["transforms"]["int16_output"]["applied"] is True
    assert document["tensors"]["logits"]["dtype"] == "int16"
    for target in ("host", "qemu-m4", "qemu-m55"):
        report = _verify(tmp_path / "m.onnx", tmp_path / "p.json", target, capsys)
        assert [layer["name"] for layer in report["layers"]][-2:] == ["flat.to_int16", "fc"]
        assert (
            report["layers"][-1]["bytes"] == 10 * 2 and report["mismatched_bytes_total"] == 0
        )  # 10 int16 logits
    argv = ["flash-verify", "--target", "qemu-m55", "--model", "m.onnx", "--params", "p.json", "--json"]
    assert cli.main(argv) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["verdict"] == "pass" and report["mismatched_bytes_total"] == 0
    # The int16 logits: 54.42 dB measured on qemu-m55 (int8 logits give ~35-40); the bound is 3 dB under.
    assert report["layers"][-1]["name"] == "fc" and report["layers"][-1]["float_sqnr_db"] > 51
