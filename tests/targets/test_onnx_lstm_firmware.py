"""A torch.nn.LSTM classifier exported by torch.onnx.export's defaults, through the public commands as a
user runs them: `fixpoint quantize --calib`, `fixpoint evaluate`, then `fixpoint verify` on the host and
the emulated boards - every layer's bytes equal to Fixpoint's int8 reference, every case from the zero
state (the generated C makes CMSIS-NN's stateless LSTM call)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from quantcore import cli
from quantcore.targets import cmsis_nn
from tests.lstm_models import torch_lstm_classifier

pytestmark = pytest.mark.cmsis_nn

SEQ, FEATURES, HIDDEN, CLASSES = 12, 10, 16, 5
CASES = 6


class Prepared:
    """The exported model, its calibration and test data, and `fixpoint quantize`'s params file."""

    def __init__(self, folder: Path, head: str = "flatten") -> None:
        self.model = torch_lstm_classifier(
            folder / "classifier.onnx", SEQ, FEATURES, HIDDEN, CLASSES, head=head
        )
        rng = np.random.default_rng(21)
        # a smooth signal plus noise, so that the steps are related as in a real sequence
        time = np.linspace(0, 2 * np.pi, SEQ)[None, :, None]
        phase = rng.uniform(0, 2 * np.pi, (100 + CASES, 1, FEATURES))
        x = (np.sin(time + phase) + 0.3 * rng.standard_normal((100 + CASES, SEQ, FEATURES))).astype(
            np.float32
        )
        self.calib, self.test = folder / "calib.npz", folder / "test.npz"
        np.savez(self.calib, x=x[:100])
        np.savez(self.test, x=x[100:], y=np.zeros(CASES, np.int64))
        self.params = folder / "params.json"
        assert (
            cli.main(["quantize", str(self.model), "--calib", str(self.calib), "-o", str(self.params)]) == 0
        )


@pytest.fixture(scope="module")
def prepared(tmp_path_factory: pytest.TempPathFactory) -> Prepared:
    return Prepared(tmp_path_factory.mktemp("onnx_lstm"))


def _json(argv: list[str], capsys: pytest.CaptureFixture[str]) -> dict[str, object]:
    capsys.readouterr()
    assert cli.main(argv) == 0
    report: dict[str, object] = json.loads(capsys.readouterr().out)
    return report


def test_params_file_holds_the_lstm(prepared: Prepared) -> None:
    document = json.loads(prepared.params.read_text())
    (layer,) = [entry for entry in document["layers"] if entry["op"] == "lstm"]
    assert layer["kernel"] == "arm_lstm_unidirectional_s8"
    assert layer["inputs"] == ["node_lstm__2:batch_major"]
    assert set(layer["params"]["gates"]) == {"input", "forget", "cell", "output"}
    assert layer["params"]["output_offset"] == -layer["params"]["hidden_offset"]
    assert document["tensors"][layer["outputs"][0]]["dtype"] == "int8"


def test_evaluate_measures_the_output_against_float(
    prepared: Prepared, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["evaluate", str(prepared.model), str(prepared.params), "--data", str(prepared.test), "--json"]
    report = _json(argv, capsys)
    layers = {entry["op"]: entry for entry in report["layers"]}  # type: ignore[attr-defined]
    # A quality bar, not a numeric identity: int8 hidden states over 12 steps keep ~40 dB (measured 40-41).
    assert layers["lstm"]["sqnr_db"] > 30.0
    assert report["output_sqnr_db"] > 30.0  # type: ignore[operator]


@pytest.mark.parametrize("target", ["host", "qemu-m4", "qemu-m55"])
def test_firmware_matches_the_reference_byte_for_byte(
    prepared: Prepared,
    target: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    cross: cmsis_nn.CmsisNn,
) -> None:
    argv = ["verify", "--target", target, "--model", str(prepared.model), "--params", str(prepared.params)]
    argv += ["--data", str(prepared.test), "--build-dir", str(tmp_path / "build"), "--json"]
    report = _json(argv, capsys)
    assert (report["verdict"], report["cases"], report["mismatched_bytes_total"]) == ("pass", CASES, 0)
    lstm = [layer for layer in report["layers"] if layer["name"] == "node_lstm__2"]  # type: ignore[attr-defined]
    assert [layer["bytes"] for layer in lstm] == [SEQ * HIDDEN]
    # the cell state and two int16 work buffers; no hidden state is kept between invokes
    assert report["state_bytes"] == HIDDEN * (2 + 2 + 2)


@pytest.mark.parametrize(("head", "target"), [("h_n", "host"), ("h_n", "qemu-m4"), ("last", "host")])
def test_last_step_classifier_matches_the_reference(
    head: str, target: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], cross: cmsis_nn.CmsisNn
) -> None:
    """h_n[-1] or y[:, -1] -> Linear: the layer's output is the last step, copied out of its own sequence
    buffer."""
    folder = tmp_path / "model"
    folder.mkdir()
    prepared = Prepared(folder, head=head)
    argv = ["verify", "--target", target, "--model", str(prepared.model), "--params", str(prepared.params)]
    argv += ["--data", str(prepared.test), "--build-dir", str(tmp_path / "build"), "--json"]
    report = _json(argv, capsys)
    assert (report["verdict"], report["cases"], report["mismatched_bytes_total"]) == ("pass", CASES, 0)
    lstm = [layer for layer in report["layers"] if layer["name"] == "node_lstm__2"]  # type: ignore[attr-defined]
    assert [layer["bytes"] for layer in lstm] == [HIDDEN]
    # the cell state, two int16 work buffers and the int8 output sequence the last step is copied from
    assert report["state_bytes"] == HIDDEN * (2 + 2 + 2 + SEQ)
