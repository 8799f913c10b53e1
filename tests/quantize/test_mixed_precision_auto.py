"""The automatic int16 choice: tensor moves, the budget, the JSON record, a rebuilt graph."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest

from quantcore import cli, pipeline
from quantcore.data import DataSet
from quantcore.ir import DType
from quantcore.quantize import params_json
from quantcore.quantize.document import from_document
from quantcore.quantize.mixed_precision import Budget, moves
from tests.onnx_models import outlier_cnn, small_cnn


def _data(n: int = 96, seed: int = 1) -> DataSet:
    return DataSet(np.random.default_rng(seed).uniform(0, 1, (n, 1, 16, 16)).astype(np.float32), None)


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> pipeline.LoadedModel:
    path = tmp_path_factory.mktemp("mixed") / "outlier.onnx"
    onnx.save(outlier_cnn(factor=1.0), path)
    return pipeline.load_model(path)


def _auto(model: pipeline.LoadedModel, budget: Budget | None = None) -> pipeline.QuantizeResult:
    # The int16 output off: these tests are about the picker alone (test_int16_output.py: the two together).
    options = pipeline.QuantizeOptions(
        int16_auto=True, budget=budget or Budget(), bias_correction=False, int16_output=False
    )
    return pipeline.quantize(model, _data(), options)


def test_a_move_takes_the_producer_and_every_reader_of_a_tensor(tmp_path: Path) -> None:
    """conv1's output is read by the max pool, the pool's by conv2, ...; the softmax at the end of
    small_cnn has no s16 kernel, so the fully connected layer feeding it cannot carry int16."""
    onnx.save(small_cnn(seed=1), tmp_path / "small.onnx")
    graph = pipeline.load_model(tmp_path / "small.onnx").graph
    names = [n.name for n in graph.nodes]
    found = {m.tensor: m.layers for m in moves(graph, names)}
    producer = {n.outputs[0]: n.name for n in graph.nodes}
    by_layer = {producer[t]: sorted(layers) for t, layers in found.items()}
    assert by_layer["conv1"] == ["conv1", "pool1"]
    assert by_layer["pool1"] == ["dwconv", "pool1"]
    assert "fc" not in by_layer  # read by the softmax
    order = [producer[m.tensor] for m in moves(graph, list(reversed(names)))]
    assert order == sorted(order, key=lambda name: -names.index(name))  # the ranking's order


def test_auto_keeps_tensors_that_raise_the_output_sqnr_and_records_why(model: pipeline.LoadedModel) -> None:
    result = _auto(model)
    entry = result.document["mixed_precision"]
    assert params_json.validate(json.loads(json.dumps(result.document))) == []
    assert entry["layers"] and entry["output_sqnr_db"]["mixed"] >= entry["output_sqnr_db"]["int8"] + 0.1
    kept = [t for t in entry["trials"] if t["kept"]]
    assert sorted({layer for t in kept for layer in t["layers"]}) == entry["layers"]
    assert entry["memory"]["mixed"]["ram"] > entry["memory"]["int8"]["ram"]  # int16 tensors take twice
    wide = {n.name for n in result.qgraph.nodes if result.qgraph.tensor(n.outputs[0]).dtype is DType.INT16}
    assert set(entry["layers"]) <= wide
    # The graph rebuilt from the file is the one chosen (int16 tensors and conversions included).
    rebuilt = from_document(model.graph, json.loads(json.dumps(result.document)))
    assert [n.name for n in rebuilt.nodes] == [n.name for n in result.qgraph.nodes]
    held_out = _data(200, 9)
    mixed = pipeline.evaluate(model, result.document, held_out).output_sqnr_db
    plain = pipeline.evaluate(model, _auto(model, Budget(ram=0)).document, held_out).output_sqnr_db
    assert mixed > plain


def test_the_budget_bounds_the_choice(model: pipeline.LoadedModel) -> None:
    free = _auto(model).document["mixed_precision"]
    int8_ram = free["memory"]["int8"]["ram"]
    tight = Budget(ram=int8_ram + (free["memory"]["mixed"]["ram"] - int8_ram) // 2)
    entry = _auto(model, tight).document["mixed_precision"]
    assert entry["budget"] == {"flash": None, "ram": tight.ram}
    assert entry["memory"]["mixed"]["ram"] <= tight.ram
    assert len(entry["layers"]) < len(free["layers"])
    assert any("> budget" in t.get("reason", "") for t in entry["trials"])
    none = _auto(model, Budget(ram=0)).document["mixed_precision"]
    assert none["layers"] == [] and none["output_sqnr_db"]["mixed"] == none["output_sqnr_db"]["int8"]


def test_the_cli_prints_the_choice(
    model: pipeline.LoadedModel, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    np.save(tmp_path / "calib.npy", _data().x)
    out = tmp_path / "p.json"
    code = cli.main(
        ["quantize", str(model.path), "--calib", str(tmp_path / "calib.npy"), "--int16", "auto",
         "--ram-budget", "64K", "-o", str(out)]
    )  # fmt: skip
    assert code == 0
    printed = capsys.readouterr().out
    assert printed.startswith("int16: ") and "calibration output SQNR" in printed
    assert params_json.load(out)["mixed_precision"]["budget"]["ram"] == 65536
