"""The conformance runner and CLI on doctored copies of real cases: failures, skips, renamed networks."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from quantcore.cli import main
from quantcore.conformance.runner import Status, run_all


def _copy_case(src_json: Path, dest: Path, kernel: str, case: str, rename: str | None = None) -> Path:
    """Copy one case into dest/<kernel>/, optionally renaming the case (its array prefix too)."""
    meta = json.loads(src_json.read_text())
    arrays = dict(np.load(src_json.with_suffix(".npz")))
    if rename:
        arrays = {k.replace(meta["case"], rename, 1): v for k, v in arrays.items()}
        meta["arrays"] = {k.replace(meta["case"], rename, 1): v for k, v in meta["arrays"].items()}
        meta["case"] = rename
    meta["kernel"] = kernel
    folder = dest / kernel
    folder.mkdir(parents=True, exist_ok=True)
    out = folder / f"{meta['case']}.json"
    out.write_text(json.dumps(meta))
    np.savez(out.with_suffix(".npz"), **arrays)
    return out


def test_a_corrupted_expected_byte_fails_with_its_index(vectors: Path, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    copied = _copy_case(vectors / "arm_convolve_s8" / "basic.json", tmp_path, "arm_convolve_s8", "basic")
    arrays = dict(np.load(copied.with_suffix(".npz")))
    arrays["basic_output_ref"][7] ^= 1
    np.savez(copied.with_suffix(".npz"), **arrays)
    assert main(["conformance", "--vectors", str(tmp_path)]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("FAIL  arm_convolve_s8/basic  first difference at index 7")
    assert lines[-1] == "0 passed, 1 failed, 0 skipped"


def test_unknown_kernel_is_a_skip_not_a_pass(vectors: Path, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    _copy_case(vectors / "arm_convolve_s8" / "basic.json", tmp_path, "arm_convolve_s8", "basic")
    # A family with no integer reference: the float SVDF (its cases are the int8 ones, relabelled).
    for case in ("svdf_int8", "svdf_int8_2"):
        _copy_case(vectors / "arm_svdf_s8" / f"{case}.json", tmp_path, "arm_svdf_f32", case)
    assert main(["conformance", "--vectors", str(tmp_path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert "skip  arm_svdf_f32/svdf_int8  no reference for arm_svdf_f32 yet" in out
    assert out[-1] == "1 passed, 0 failed, 2 skipped"


def test_networks_are_wired_from_layer_names_not_from_their_case_name(vectors: Path, tmp_path: Path) -> None:
    src = vectors / "arm_ds_cnn_s_s8" / "ds_cnn_s.json"
    _copy_case(src, tmp_path, "arm_kws_tiny_s8", "kws_tiny", rename="kws_tiny")
    [result] = run_all(tmp_path)
    assert (result.kernel, result.case, result.status) == ("arm_kws_tiny_s8", "kws_tiny", Status.PASS)


def test_a_network_with_a_layer_missing_its_weights_fails_naming_the_array(
    vectors: Path, tmp_path: Path
) -> None:
    copied = _copy_case(
        vectors / "arm_ds_cnn_s_s8" / "ds_cnn_s.json", tmp_path, "arm_ds_cnn_s_s8", "ds_cnn_s"
    )
    arrays = dict(np.load(copied.with_suffix(".npz")))
    del arrays["ds_cnn_s_layer_5_conv_2d_weights"]
    np.savez(copied.with_suffix(".npz"), **arrays)
    [result] = run_all(tmp_path)
    assert result.status is Status.FAIL
    assert "ds_cnn_s_layer_5_conv_2d_weights is missing" in result.detail


@pytest.mark.parametrize(
    ("kernel", "case", "define"),
    [
        ("arm_convolve_s8", "basic", "BASIC_STRIDE_X"),
        ("arm_ds_cnn_s_s8", "ds_cnn_s", "AVERAGE_POOL_2D_10_STRIDE_W"),
    ],
)
def test_a_define_that_is_not_an_integer_fails_naming_it(
    vectors: Path, tmp_path: Path, kernel: str, case: str, define: str
) -> None:
    copied = _copy_case(vectors / kernel / f"{case}.json", tmp_path, kernel, case)
    meta = json.loads(copied.read_text())
    meta["defines"][define] = 1.5
    copied.write_text(json.dumps(meta))
    [result] = run_all(tmp_path)
    assert result.status is Status.FAIL
    assert result.detail == f"error: {copied}: define {define} is 1.5, not an integer"


def test_missing_folder_is_a_clear_error(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    assert main(["conformance", "--vectors", str(tmp_path / "nope")]) == 2
    assert "is not a directory of test vectors" in capsys.readouterr().err


@pytest.mark.parametrize("bad", ["{not json", json.dumps({"case": "x"})])
def test_malformed_case_file_names_the_file(tmp_path: Path, bad: str, capsys) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "k").mkdir()
    (tmp_path / "k" / "x.json").write_text(bad)
    np.savez(tmp_path / "k" / "x.npz", a=np.zeros(1))
    assert main(["conformance", "--vectors", str(tmp_path)]) == 2  # a broken input file: bad input
    assert "x.json: not a valid case description" in capsys.readouterr().err
