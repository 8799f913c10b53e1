"""The evaluation report: JSON keys and infinities, CSV columns, atomic writes, and the terminal table."""

from __future__ import annotations

import csv
import json
import math
import os
import re
import stat
import sys
from pathlib import Path
from typing import Any

import pytest

from quantcore.verify.metrics import compare
from quantcore.verify.report import CSV_COLUMNS, EvaluationReport, LayerMetrics, ReportError

LONG_NAME = "model/block_3/depthwise_conv2d/BiasAdd_and_a_name_long_enough_to_wrap_in_a_narrow_table"


def _reject_constant(name: str) -> Any:
    raise AssertionError(f"not strict JSON: {name}")


def strict_loads(text: str) -> Any:
    """json.loads accepts Infinity and NaN by default; a strict parser would not, so neither do we."""
    return json.loads(text, parse_constant=_reject_constant)


def make_report(**changes: Any) -> EvaluationReport:
    layers = [
        LayerMetrics.from_metrics("conv1", "CONV_2D", compare([1, 2, 3, 4], [1, 2, 3, 5], layer="conv1")),
        LayerMetrics.from_metrics(LONG_NAME, "DEPTHWISE_CONV_2D", compare([1, 2], [1, 2.5], layer="dw")),
        LayerMetrics.from_metrics("relu", "RELU", compare([1, 2], [1, 2], layer="relu")),
        LayerMetrics("fc", "FULLY_CONNECTED", sqnr_db=41.5, cosine=0.9999, rel_l2=0.0084, max_abs=0.03125),
    ]
    fields: dict[str, Any] = {
        "model": "models/kws.onnx",
        "params_file": "models/kws.qparams.json",
        "samples": 200,
        "top1_float": 0.915,
        "top1_int8": 0.905,
        "agreement": 0.98,
        "output_sqnr_db": 27.25,
        "layers": layers,
    }
    fields.update(changes)
    return EvaluationReport(**fields)


def test_json_has_the_agreed_keys_and_values() -> None:
    data = strict_loads(make_report().to_json())
    assert data["top1_float"] == 0.915
    assert data["top1_int8"] == 0.905
    assert data["agreement"] == 0.98
    assert data["output_sqnr_db"] == 27.25
    assert data["samples"] == 200
    assert data["top1_drop_points"] == pytest.approx(1.0, abs=1e-12)  # 100 * (0.915 - 0.905) in float
    assert data["worst_layer"] == LONG_NAME  # 10 log10(5 / 0.25) = 13.0 dB < conv1's 14.8 dB
    conv1 = data["layers"][0]
    assert {"name", "sqnr_db", "cosine", "rel_l2", "max_abs"} <= conv1.keys()
    assert (conv1["name"], conv1["op"]) == ("conv1", "CONV_2D")
    assert conv1["sqnr_db"] == 14.771212547196624
    assert conv1["rel_l2"] == 1 / math.sqrt(30)
    assert conv1["cosine"] == 34 / math.sqrt(30 * 39)
    assert conv1["max_abs"] == 1.0
    assert conv1["nonfinite"] == {}
    assert [layer["name"] for layer in data["layers"]] == ["conv1", LONG_NAME, "relu", "fc"]
    assert data["layers"][3]["psnr_db"] is None  # not computed, and not listed as non-finite
    assert data["layers"][3]["nonfinite"] == {}


def test_infinities_are_null_with_a_nonfinite_entry() -> None:
    zero_ref = LayerMetrics.from_metrics("dead", "RELU", compare([0.0, 0.0], [0.0, 0.25], layer="dead"))
    rep = make_report(output_sqnr_db=math.inf, layers=[*make_report().layers, zero_ref])
    text = rep.to_json()
    assert "Infinity" not in text and "NaN" not in text
    data = strict_loads(text)
    assert data["output_sqnr_db"] is None
    assert data["nonfinite"] == {"output_sqnr_db": "inf"}
    relu = data["layers"][2]
    assert (relu["sqnr_db"], relu["psnr_db"], relu["rel_l2"], relu["cosine"]) == (None, None, 0.0, 1.0)
    assert relu["nonfinite"] == {"sqnr_db": "inf", "psnr_db": "inf"}
    dead = data["layers"][4]
    assert dead["nonfinite"] == {"sqnr_db": "-inf", "psnr_db": "-inf", "rel_l2": "inf"}
    assert data["worst_layer"] == "dead"  # -inf is the worst there is


def test_nan_is_written_as_null_too() -> None:
    odd = LayerMetrics("odd", "ADD", sqnr_db=20.0, cosine=math.nan, rel_l2=0.1, max_abs=0.5)
    data = strict_loads(make_report(layers=[odd]).to_json())
    assert data["layers"][0]["cosine"] is None
    assert data["layers"][0]["nonfinite"] == {"cosine": "nan"}


def test_without_labels_top1_is_null_and_not_nonfinite() -> None:
    data = strict_loads(make_report(top1_float=None, top1_int8=None).to_json())
    assert (data["top1_float"], data["top1_int8"], data["top1_drop_points"]) == (None, None, None)
    assert data["nonfinite"] == {}


def test_json_reads_back_with_infinities_restored() -> None:
    rep = make_report(output_sqnr_db=-math.inf, top1_int8=None)
    back = EvaluationReport.from_json(rep.to_json())
    assert back == rep
    assert back.layers[2].sqnr_db == math.inf


@pytest.mark.parametrize("text", ["not json", "{}", '{"model": "m"}', "[1, 2]"])
def test_reading_something_else_is_a_report_error(text: str) -> None:
    with pytest.raises(ReportError, match=r"out\.json: not a fixpoint evaluation report"):
        EvaluationReport.from_json(text, source="out.json")


def test_write_json_writes_to_json_and_leaves_no_temporary(tmp_path: Path) -> None:
    rep = make_report()
    target = tmp_path / "eval.json"
    rep.write_json(target)
    assert target.read_text(encoding="utf-8") == rep.to_json()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["eval.json"]
    assert stat.S_IMODE(target.stat().st_mode) == 0o644  # not mkstemp's 0o600


def test_write_csv_columns_and_values(tmp_path: Path) -> None:
    zero_ref = LayerMetrics.from_metrics("dead", "RELU", compare([0.0], [0.5], layer="dead"))
    rep = make_report(layers=[*make_report().layers, zero_ref])
    target = tmp_path / "eval.csv"
    rep.write_csv(target)
    with target.open(newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        assert tuple(reader.fieldnames or ()) == CSV_COLUMNS
        rows = list(reader)
    assert CSV_COLUMNS == ("name", "op", "sqnr_db", "psnr_db", "cosine", "rel_l2", "max_abs")
    assert [row["name"] for row in rows] == ["conv1", LONG_NAME, "relu", "fc", "dead"]
    for row, layer in zip(rows, rep.layers, strict=True):
        assert row["op"] == layer.op
        for key in ("sqnr_db", "cosine", "rel_l2", "max_abs"):
            assert float(row[key]) == getattr(layer, key), (layer.name, key)  # repr round-trips exactly
    assert (rows[2]["sqnr_db"], rows[2]["psnr_db"]) == ("inf", "inf")
    assert (rows[4]["sqnr_db"], rows[4]["rel_l2"]) == ("-inf", "inf")
    assert rows[3]["psnr_db"] == ""  # not computed
    assert sorted(p.name for p in tmp_path.iterdir()) == ["eval.csv"]


@pytest.mark.parametrize("writer", ["write_json", "write_csv"])
def test_a_failed_write_keeps_the_old_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, writer: str
) -> None:
    target = tmp_path / "eval.out"
    target.write_text("previous report\n", encoding="utf-8")
    target.chmod(0o600)

    def fail(src: str, dst: str) -> None:
        assert Path(src).read_text(encoding="utf-8")  # the new content was complete before the rename
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", fail)  # report.py calls os.replace through the os module
    with pytest.raises(ReportError, match=r"eval.out: cannot write the report \(No space left on device\)"):
        getattr(make_report(), writer)(target)
    assert target.read_text(encoding="utf-8") == "previous report\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["eval.out"]


def test_replacing_a_file_keeps_its_mode(tmp_path: Path) -> None:
    target = tmp_path / "eval.json"
    target.write_text("old", encoding="utf-8")
    target.chmod(0o600)
    make_report().write_json(target)
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert strict_loads(target.read_text(encoding="utf-8"))["samples"] == 200


def test_writing_into_a_missing_folder_names_the_path(tmp_path: Path) -> None:
    target = tmp_path / "missing" / "eval.json"
    with pytest.raises(ReportError, match=re.escape(f"{target}: cannot write the report there")):
        make_report().write_json(os.fspath(target))


@pytest.mark.parametrize("plain", [False, True])
def test_table_lists_every_layer_and_marks_the_worst(plain: bool) -> None:
    rep = make_report()
    text = rep.format_table(width=60, plain=plain)
    lines = text.splitlines()
    table = lines[: next(i for i, line in enumerate(lines) if line.startswith("model: "))]
    for layer in rep.layers:  # one row each, name and op on it: never wrapped or cut
        assert sum(layer.name in line and layer.op in line for line in table) == 1, layer.name
    marked = [line for line in lines if "<- worst" in line]
    assert len(marked) == 1 and LONG_NAME in marked[0]
    assert "\x1b" not in text  # plain text for logs: no colour codes
    assert all(line == line.rstrip() for line in lines)
    for header in ("SQNR dB", "cosine", "rel L2", "max abs"):
        assert header in text
    conv1 = next(line for line in lines if line.lstrip().startswith("conv1"))
    assert "14.77" in conv1 and "0.993999" in conv1 and "1.826e-01" in conv1
    assert "top-1: float 91.50 %, int8 90.50 % (drop 1.00 points)" in text
    assert "agreement float/int8: 98.00 %" in text
    assert "output SQNR: 27.25 dB" in text
    assert f"worst layer: {LONG_NAME} (DEPTHWISE_CONV_2D), SQNR 13.01 dB" in text


def test_table_without_labels_or_inexact_layers() -> None:
    exact = LayerMetrics.from_metrics("relu", "RELU", compare([1.0], [1.0], layer="relu"))
    text = make_report(top1_float=None, top1_int8=None, layers=[exact]).format_table()
    assert "top-1: not measured (no labels given)" in text
    assert "<- worst" not in text
    assert "worst layer: none (every layer exact)" in text


def test_cosine_just_below_one_is_not_shown_as_one() -> None:
    near = LayerMetrics("fc", "FULLY_CONNECTED", sqnr_db=60.0, cosine=0.9999996, rel_l2=1e-3, max_abs=1e-3)
    text = make_report(layers=[near]).format_table(plain=True)
    assert "0.999999" in text and "1.000000" not in text


def test_table_falls_back_to_plain_text_without_rich(monkeypatch: pytest.MonkeyPatch) -> None:
    rep = make_report()
    assert rep.format_table() != rep.format_table(plain=True)  # rich is installed: a different drawing
    monkeypatch.setitem(sys.modules, "rich", None)  # import rich now raises ImportError
    assert rep.format_table() == rep.format_table(plain=True)
