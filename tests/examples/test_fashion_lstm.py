"""The recurrent example (examples/fashion_lstm): run_example.py within its recorded figures - float and
int8 top-1, the output and LSTM-layer SQNR - and its firmware verified byte for byte on every target it
reaches (the host, and qemu-m4/qemu-m55 when the Arm toolchain and QEMU are installed)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.examples.test_examples import target_tools_missing

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "fashion_lstm"
EXPECTED = json.loads((EXAMPLE / "expected.json").read_text())


@pytest.fixture(scope="module")
def out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from quantcore.errors import QuantcoreError
    from quantcore.targets import cmsis_nn

    try:
        cmsis_nn.locate(None)
    except QuantcoreError as exc:
        pytest.skip(f"the example verifies its firmware: no CMSIS-NN checkout ({exc})")
    folder = tmp_path_factory.mktemp("fashion_lstm")
    command = [sys.executable, str(EXAMPLE / "run_example.py"), "--out", str(folder)]
    if target_tools_missing() is not None:
        command.append("--host-only")
    done = subprocess.run(command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert done.returncode == 0, done.stdout
    return folder


def _evaluation(out: Path) -> dict[str, Any]:
    report: dict[str, Any] = json.loads((out / "evaluation.json").read_text())
    return report


def test_top1_float_and_int8(out: Path) -> None:
    evaluation = _evaluation(out)
    assert evaluation["samples"] == EXPECTED["samples"]
    assert evaluation["top1_float"] == pytest.approx(EXPECTED["top1_float"], abs=EXPECTED["top1_tolerance"])
    assert evaluation["top1_int8"] == pytest.approx(EXPECTED["top1_int8"], abs=EXPECTED["top1_tolerance"])


def test_sqnr_within_the_recorded_bounds(out: Path) -> None:
    evaluation = _evaluation(out)
    lstm = next(layer for layer in evaluation["layers"] if layer["op"] == "lstm")
    assert evaluation["output_sqnr_db"] >= EXPECTED["output_sqnr_db_min"]
    assert lstm["sqnr_db"] >= EXPECTED["lstm_sqnr_db_min"]


@pytest.mark.parametrize("target", ["host", "qemu-m4", "qemu-m55"])
def test_firmware_verified_byte_for_byte(out: Path, target: str) -> None:
    report_path = out / f"verify_{target}.json"
    if not report_path.exists():
        pytest.skip(f"not run here: {target_tools_missing()}")
    report = json.loads(report_path.read_text())
    assert (report["verdict"], report["mismatched_bytes_total"]) == ("pass", 0)
    assert report["arena_bytes"] == EXPECTED["arena_bytes"]
    assert report["state_bytes"] == EXPECTED["lstm_buffer_bytes"]
