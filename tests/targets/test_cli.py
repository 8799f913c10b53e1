"""fixpoint build / verify / flash-verify end to end, in process, on the fixture model."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from quantcore import cli
from quantcore.targets import cmsis_nn
from tests.targets.models import MAXPOOL_SRC


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    try:
        code = cli.main(list(argv))
    except SystemExit as exit_:  # an option argparse refused
        code = int(exit_.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def model_args(
    maxpool_files: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> list[str]:
    monkeypatch.chdir(tmp_path)  # no stray ./fixpoint.toml
    model, params = maxpool_files
    return ["--model", str(model), "--params", str(params), "--src", str(MAXPOOL_SRC)]


def test_verify_on_the_host_passes_and_prints_json(
    checkout: cmsis_nn.CmsisNn, model_args: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _run(capsys, "verify", "--target", "host", *model_args, "--cases", "3", "--json")
    report = json.loads(out)
    assert code == 0 and report["verdict"] == "pass" and report["target"] == "host"
    assert [layer["name"] for layer in report["layers"]] == ["pool_a", "pool_b"]
    assert report["mismatched_bytes_total"] == 0 and report["cases"] == 3 and report["arena_bytes"] == 48
    # Max pooling selects int8 inputs, it adds no rounding: 153.76 dB measured (float rounding alone).
    assert report["inputs"] == "random (seed 0)" and report["layers"][0]["float_sqnr_db"] > 150
    assert report["flash_bytes"] > 0 and report["ram_bytes"] > 0


def test_verify_on_qemu_prints_the_per_layer_table(
    cross: cmsis_nn.CmsisNn, model_args: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _run(capsys, "verify", "--target", "qemu-m7", *model_args)
    assert code == 0 and "pool_a" in out and "PASS: 0 mismatched bytes" in out and "QEMU mps2-an500" in out


def test_verify_with_data_quantizes_the_samples(
    checkout: cmsis_nn.CmsisNn, model_args: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import numpy as np

    np.save(tmp_path / "x.npy", np.random.default_rng(3).normal(size=(5, 2, 4, 4)).astype(np.float32))
    code, out, _ = _run(
        capsys, "verify", "--target", "host", *model_args, "--data", str(tmp_path / "x.npy"), "--json"
    )
    report = json.loads(out)
    assert code == 0 and report["cases"] == 5 and report["inputs"].endswith("x.npy")


def test_flash_verify_on_qemu_m55_goes_through_gdb_and_the_uart(
    gdb: cmsis_nn.CmsisNn, model_args: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _run(
        capsys, "flash-verify", "--target", "qemu-m55", *model_args, "--json", "--no-float-metrics"
    )
    report = json.loads(out)
    assert (
        code == 0 and report["verdict"] == "pass" and report["channel"].startswith("UART of QEMU mps3-an547")
    )
    assert report["flash_budget"] == 512 * 1024


def test_a_wrong_firmware_fails_with_exit_1_and_names_the_mismatch(
    checkout: cmsis_nn.CmsisNn,
    model_args: list[str],
    variant: Callable[[str, str], Path],
    capsys: pytest.CaptureFixture[str],
) -> None:
    model_args[-1] = str(
        variant("halved", "for (int i = 0; i < 32; ++i) { arena[i] = (int8_t)(arena[i] / 2); }")
    )
    code, out, _ = _run(capsys, "verify", "--target", "host", *model_args, "--json", "--no-float-metrics")
    report = json.loads(out)
    assert code == 1 and report["verdict"] == "fail" and report["mismatched_bytes_total"] > 0
    first = report["layers"][0]["first_mismatch"]
    assert set(first) == {"case", "channel", "index", "expected", "actual"}


def test_an_over_budget_model_is_refused_before_flashing(
    gdb: cmsis_nn.CmsisNn,
    model_args: list[str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from quantcore.targets import board

    def never(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("flashed although over budget")

    monkeypatch.setattr(board, "run_on_qemu_board", never)
    (tmp_path / "fixpoint.toml").write_text('target = "qemu-m4"\n[budget]\nflash = "2K"\nram = "64K"\n')
    code, _, err = _run(capsys, "flash-verify", *model_args)
    assert code == 1 and "does not fit qemu-m4's budget: flash:" in err and "budget 2048" in err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["verify", "--target", "qemu-m99"], "unknown target 'qemu-m99'; known targets: host, qemu-m4"),
        (["verify", "--target", "host", "--cases", "0"], "argument --cases: must be from 1 to 10,000, got 0"),
        (["verify", "--target", "host"], "needs the model and its parameters"),
        (["build", "--target", "host", "--src", "nowhere"], "--src nowhere is not a directory"),
    ],
)
def test_bad_input_exits_2_with_a_clear_message(
    argv: list[str],
    message: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    code, _, err = _run(capsys, *argv)
    assert code == 2 and message in err


def test_a_bad_fixpoint_toml_exits_2_naming_the_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "fixpoint.toml").write_text('[flash]\nbackend = "usb"\n')
    code, out, err = _run(capsys, "build", "--target", "host", "--json")
    assert code == 2 and "flash.backend" in err and json.loads(out)["verdict"] == "bad-input"


def test_build_writes_the_firmware_and_reports_memory(
    cross: cmsis_nn.CmsisNn,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    code, out, _ = _run(
        capsys, "build", "--target", "qemu-m4", "--src", str(MAXPOOL_SRC), "--cases", "2", "--json"
    )
    report = json.loads(out)
    assert code == 0 and Path(report["firmware"]).is_file() and report["cases"] == 2
    assert Path(report["firmware"]).parent == tmp_path / "build" / "qemu-m4"
    assert report["flash_bytes"] > report["arena_bytes"] == 48


def test_without_a_cmsis_nn_checkout_verify_says_how_to_get_one(
    model_args: list[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "empty-cache"))
    monkeypatch.delenv(cmsis_nn.ENV_VAR, raising=False)
    code, out, err = _run(capsys, "verify", "--target", "qemu-m4", *model_args, "--json")
    assert code == 2 and json.loads(out)["kind"] == "CmsisNnNotFound"  # an input the user provides
    assert "fixpoint cmsis-nn install" in err and cmsis_nn.ENV_VAR in err
    assert not (tmp_path / "build" / "qemu-m4" / "firmware.elf").exists()
