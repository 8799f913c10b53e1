"""Float .tflite recurrent layers through the public commands: `fixpoint quantize --calib` (TFLite's integer
scheme from the calibrated ranges), then `fixpoint verify` on the host, qemu-m4 and qemu-m55 - every
layer's bytes equal to Fixpoint's int8 reference over cases run in a row, the state kept in the layer's
static buffers from one invoke to the next as TFLite's variable tensors are. TFLM's float mnist_lstm
(trained_lstm.tflite: arm_lstm_unidirectional_s8), and a float SVDF written by tests/tflm.py
(arm_svdf_state_s16_s8)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from quantcore import cli
from quantcore.targets import cmsis_nn
from quantcore.targets.build import read_header
from tests import tflm

pytestmark = pytest.mark.cmsis_nn

CASES = 6
TARGETS = ["host", "qemu-m4", "qemu-m55"]


class Prepared:
    def __init__(self, folder: Path) -> None:
        self.model = tflm.model("trained_lstm")
        calib, _ = tflm.mnist_digits(100, seed=1)
        x, y = tflm.mnist_digits(CASES, seed=2)
        self.calib, self.data = folder / "calib.npz", folder / "data.npz"
        np.savez(self.calib, x=calib)
        np.savez(self.data, x=x, y=y)
        self.params = folder / "p.json"
        argv = ["quantize", str(self.model), "--calib", str(self.calib), "-o", str(self.params)]
        assert cli.main(argv) == 0


@pytest.fixture(scope="module")
def prepared(tmp_path_factory: pytest.TempPathFactory) -> Prepared:
    return Prepared(tmp_path_factory.mktemp("float_lstm"))


def test_params_file_holds_the_streaming_lstm(prepared: Prepared) -> None:
    document = json.loads(prepared.params.read_text())
    (layer,) = [entry for entry in document["layers"] if entry["op"] == "lstm"]
    assert layer["kernel"] == "arm_lstm_unidirectional_s8"
    assert layer["params"]["cell_scale_power"] == -11


@pytest.mark.parametrize("target", TARGETS)
def test_firmware_matches_the_reference_byte_for_byte(
    target: str,
    prepared: Prepared,
    cross: cmsis_nn.CmsisNn,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["verify", "--target", target, "--model", str(prepared.model), "--params", str(prepared.params)]
    argv += ["--data", str(prepared.data), "--build-dir", str(tmp_path / "build"), "--json"]
    capsys.readouterr()
    assert cli.main(argv) == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["verdict"], report["cases"], report["mismatched_bytes_total"]) == ("pass", CASES, 0)
    lstm = report["layers"][0]
    assert (lstm["name"], lstm["bytes"], lstm["mismatched_bytes"]) == (
        "tfl.unidirectional_sequence_lstm",
        28 * 20,  # per case: 28 steps of 20 units
        0,
    )
    model_c = (tmp_path / "build" / "model" / "model.c").read_text()
    # the streaming call: the layer's own hidden state buffer, kept across invokes
    assert "_hidden_state," in model_c and ".hidden_state = NULL" not in model_c
    # the same state as the generated trained_lstm_int8 (TensorFlow's twin): int8 hidden state, int16
    # cell state and the two int16 work buffers of 20 values, each padded to 16 bytes
    assert read_header(tmp_path / "build" / "model").state_bytes == 32 + 3 * 48 == 176


SVDF_FEATURES, SVDF_FILTERS, SVDF_MEMORY, SVDF_RANK = 16, 12, 8, 2
SVDF_CASES = 12
"""More cases than the memory's 8 steps: the state's oldest column leaves it while the cases run."""


@pytest.fixture(scope="module")
def svdf(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """The float SVDF model, its params file (calibrated on 1000 normal inputs) and SVDF_CASES inputs."""
    folder = tmp_path_factory.mktemp("float_svdf")
    model = folder / "svdf.tflite"
    model.write_bytes(tflm.float_svdf_model(SVDF_FEATURES, SVDF_FILTERS, SVDF_MEMORY, SVDF_RANK, seed=3))
    rng = np.random.default_rng(1)
    calib, data, params = folder / "calib.npz", folder / "data.npz", folder / "p.json"
    np.savez(calib, x=rng.standard_normal((1000, SVDF_FEATURES)).astype(np.float32))
    np.savez(data, x=rng.standard_normal((SVDF_CASES, SVDF_FEATURES)).astype(np.float32))
    assert cli.main(["quantize", str(model), "--calib", str(calib), "-o", str(params)]) == 0
    return model, params, data


@pytest.mark.parametrize("target", TARGETS)
def test_float_svdf_firmware_matches_the_reference_byte_for_byte(
    target: str,
    svdf: tuple[Path, Path, Path],
    cross: cmsis_nn.CmsisNn,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    model, params, data = svdf
    (layer,) = json.loads(params.read_text())["layers"]
    assert layer["kernel"] == "arm_svdf_state_s16_s8"
    argv = ["verify", "--target", target, "--model", str(model), "--params", str(params)]
    argv += ["--data", str(data), "--build-dir", str(tmp_path / "build"), "--json"]
    capsys.readouterr()
    assert cli.main(argv) == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["verdict"], report["cases"], report["mismatched_bytes_total"]) == ("pass", SVDF_CASES, 0)
    assert report["layers"][0]["bytes"] == SVDF_FILTERS // SVDF_RANK  # per case: one output per unit
