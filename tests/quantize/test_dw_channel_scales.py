"""Per-channel activation scales into depthwise convolutions (quantcore/quantize/channel_scales.py): the
scales, the tensors that may take them, how both layers fold them (exact integers), the automatic rule,
the quant-params JSON (recorded, replayed, and checked: a wrong depthwise bias scale is still caught)."""

from __future__ import annotations

import copy
import dataclasses
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest

from quantcore import pipeline
from quantcore.calibrate.collect import CalibrationPlan, calibrate
from quantcore.cli import main
from quantcore.data import DataSet
from quantcore.ir import Graph
from quantcore.passes.equalize import ChannelScaled, equalize
from quantcore.quantize import channel_scales, lowering, params_json
from quantcore.quantize.document import from_document
from quantcore.quantize.graph import QuantConfig, quantize_graph
from quantcore.quantize.params import QuantizationError
from quantcore.runtime import int8_exec
from quantcore.runtime.ir_float import IrFloat
from quantcore.scheme.arith import quantize_bias
from quantcore.scheme.scaling import quantize_multipliers
from tests.onnx_models import depthwise_cnn, residual_cnn, small_cnn


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, pipeline.LoadedModel, DataSet]:
    folder = tmp_path_factory.mktemp("dw")
    onnx.save(depthwise_cnn(), folder / "dw.onnx")
    np.save(folder / "calib.npy", np.random.default_rng(1).uniform(0, 1, (64, 1, 12, 12)).astype(np.float32))
    loaded = pipeline.load_model(folder / "dw.onnx")
    return folder, loaded, pipeline.load_data(folder / "calib.npy", loaded.graph)


@pytest.fixture(scope="module")
def forced(model: tuple[Path, pipeline.LoadedModel, DataSet]) -> pipeline.QuantizeResult:
    _, loaded, data = model
    options = pipeline.QuantizeOptions(dw_channel_scales=True, bias_correction=False, equalize=False)
    return pipeline.quantize(loaded, data, options)


def _scale(qgraph: Graph, name: str) -> Any:
    quant = qgraph.tensor(name).quant
    assert quant is not None
    return quant.scale


def test_each_channel_gets_the_smallest_scale_around_the_shared_zero_point() -> None:
    # A ReLU output [0, 6]: zero point -128, scale 6/255; channel 1 spans half of it, channel 2 nothing.
    scales = channel_scales.channel_scales(
        6 / 255, -128, (0.0, 6.0), (np.array([0.0, 0.0, 0.0]), np.array([6.0, 3.0, 0.0]))
    )
    assert scales.tolist() == [6 / 255, 3 / 255, 6 / 255 / 256]
    # Zero point 0 of [-1, 1]: the negative side decides where it is wider; values past the tensor's
    # range (a method that clipped it) are clipped too.
    scales = channel_scales.channel_scales(
        2 / 255, 0, (-1.0, 1.0), (np.array([-0.5, -0.1, -4.0]), np.array([0.2, 0.5, 0.1]))
    )
    assert scales.tolist() == [0.5 / 128, 0.5 / 127, 1 / 128]


def test_candidates_are_conv_outputs_read_only_by_depthwise_layers(
    model: tuple[Path, pipeline.LoadedModel, DataSet], tmp_path: Path
) -> None:
    _, loaded, _ = model
    assert channel_scales.candidates(loaded.graph) == {"a1": ("conv1", ["dw1"]), "a3": ("pw", ["dw2"])}
    assert channel_scales.candidates(loaded.graph, imported=True) == {}
    onnx.save(small_cnn(), tmp_path / "small.onnx")  # its depthwise reads a max pool: one scale
    assert channel_scales.candidates(pipeline.load_model(tmp_path / "small.onnx").graph) == {}


def _second_pass_ranges(
    model: Any, input_name: str, data: DataSet, names: list[str], batch_size: int
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """The reference: each named activation's per-channel (min, max) over `data`, read in the IR's
    channel-last layout by a float pass of its own (what quantize did before calibration collected them)."""
    lows: dict[str, np.ndarray] = {}
    highs: dict[str, np.ndarray] = {}
    for batch in data.batches(batch_size):
        values = model.activations({input_name: batch}, layout=True)
        for name in names:
            v = np.asarray(values[name])
            axes = tuple(range(v.ndim - 1))
            lo, hi = v.min(axis=axes).astype(np.float64), v.max(axis=axes).astype(np.float64)
            lows[name] = np.minimum(lows[name], lo) if name in lows else lo
            highs[name] = np.maximum(highs[name], hi) if name in highs else hi
    return {name: (lows[name], highs[name]) for name in names}


def test_calibration_collects_the_per_channel_ranges_a_second_pass_would_read(
    model: tuple[Path, pipeline.LoadedModel, DataSet],
) -> None:
    # calibrate reads the float model's own layout (NCHW here); an equalized model and the IR executor
    # hand back the IR's channel-last layout: each must give the second pass's numbers exactly.
    _, loaded, data = model
    graph = loaded.graph
    wanted = channel_scales.possible(graph)
    assert wanted == ["a1", "a3", "d2"]  # d2: read by the global average pool, an AVG_POOL in the IR
    equalized = equalize(graph)
    nhwc = DataSet(data.x.transpose(0, 2, 3, 1), None)  # the IR executor takes the IR's layout
    for g, float_model, x in [
        (graph, loaded.float_model, data),
        (graph, IrFloat(graph), nhwc),
        (equalized.graph, ChannelScaled(loaded.float_model, equalized.divisors), data),
    ]:
        calibration, _ = calibrate(g, float_model, x, CalibrationPlan(batch_size=16), wanted)
        direct = _second_pass_ranges(float_model, g.inputs[0], x, wanted, 16)
        assert list(calibration.channels) == wanted
        for name, (lo, hi) in direct.items():
            got_lo, got_hi = calibration.channels[name]
            assert got_lo.dtype == got_hi.dtype == np.float64 and got_lo.shape == (g.tensor(name).shape[-1],)
            assert np.array_equal(got_lo, lo) and np.array_equal(got_hi, hi)
        assert len(set(calibration.channels["a1"][1].tolist())) == 8  # channels differ: the axis matters
    assert calibrate(graph, loaded.float_model, data, CalibrationPlan())[0].channels == {}


def test_a_substituted_pools_input_is_among_the_tensors_calibration_collects(tmp_path: Path) -> None:
    onnx.save(residual_cnn(1), tmp_path / "res.onnx")
    graph = pipeline.load_model(tmp_path / "res.onnx").graph
    substituted = lowering.substitute(graph, ["pool3"])
    # conv3's output, read by the pool only, becomes a candidate once the pool is a depthwise layer.
    assert "c3full" not in channel_scales.candidates(graph)
    assert "c3full" in channel_scales.candidates(substituted)
    assert set(channel_scales.candidates(substituted)) <= set(channel_scales.possible(graph))
    assert channel_scales.possible(graph, imported=True) == []


def test_both_layers_fold_the_scales_into_their_multipliers_and_the_bias(
    forced: pipeline.QuantizeResult,
) -> None:
    qgraph = forced.qgraph
    s_x, s_a1, s_a2, s_a3, s_d2 = (_scale(qgraph, n) for n in ("x", "a1", "a2", "a3", "d2"))
    assert s_a1.shape == (8,) and s_a3.shape == (6,) and np.ndim(s_a2) == 0
    assert qgraph.tensor("a1").quant.axis == 3  # type: ignore[union-attr]
    assert max(s_a1) / min(s_a1) > 4  # the channels really differ (the model's 16x spread)

    def params(layer: str) -> dict[str, Any]:
        return dict(qgraph.node(layer).attr("params"))

    def weight_scales(layer: str) -> np.ndarray:
        return np.asarray(_scale(qgraph, qgraph.node(layer).inputs[1]), np.float64)

    # Producer: s_in * s_w[c] / s_out[c]; reader: s_in[c] * s_w[c] / s_out; dw2 has ch_mult 2.
    cases = [
        ("conv1", float(s_x) * weight_scales("conv1") / s_a1, float(s_x)),
        ("dw1", s_a1 * weight_scales("dw1") / float(s_a2), s_a1),
        ("pw", float(s_a2) * weight_scales("pw") / s_a3, float(s_a2)),
        ("dw2", np.repeat(s_a3, 2) * weight_scales("dw2") / float(s_d2), np.repeat(s_a3, 2)),
    ]
    for layer, real, s_in in cases:
        mult, shift = quantize_multipliers(real)
        assert (params(layer)["multiplier"], params(layer)["shift"]) == (mult.tolist(), shift.tolist()), layer
        float_bias = forced.model.graph.constant(forced.model.graph.node(layer).inputs[2])
        bias = qgraph.constant(qgraph.node(layer).inputs[2])
        assert bias.tolist() == quantize_bias(float_bias, s_in, weight_scales(layer)).tolist(), layer
    assert params("dw1")["input_offset"] == -int(qgraph.tensor("a1").quant.zero_point)  # type: ignore[union-attr]
    assert (params("conv1")["act_min"], params("conv1")["act_max"]) == (-128, 127)


def test_per_channel_scales_lower_the_error_of_the_depthwise_layers(
    model: tuple[Path, pipeline.LoadedModel, DataSet], forced: pipeline.QuantizeResult
) -> None:
    _, loaded, data = model
    off = pipeline.quantize(
        loaded, data, pipeline.QuantizeOptions(dw_channel_scales=False, bias_correction=False, equalize=False)
    )
    on_layers = {x.name: x.sqnr_db for x in pipeline.evaluate(loaded, forced.document, data).layers}
    off_layers = {x.name: x.sqnr_db for x in pipeline.evaluate(loaded, off.document, data).layers}
    # conv1's channels span ranges up to 16x apart: every layer's error falls, the output's too.
    # (Deterministic figures: one BLAS thread, fixed data; rounded to show them, not to tolerate.)
    assert {k: round(v, 2) for k, v in on_layers.items()} == {
        "conv1": 46.90, "dw1": 46.83, "pw": 48.77, "dw2": 41.96, "gap": 43.09, "fc": 41.92
    }  # fmt: skip
    assert {k: round(v, 2) for k, v in off_layers.items()} == {
        "conv1": 44.77, "dw1": 44.31, "pw": 46.64, "dw2": 41.45, "gap": 42.95, "fc": 41.68
    }  # fmt: skip


def test_the_document_records_replays_and_validates(forced: pipeline.QuantizeResult) -> None:
    doc = forced.document
    assert params_json.validate(doc) == []
    entry = doc["transforms"]["dw_channel_scales"]
    assert (entry["mode"], entry["applied"]) == ("on", True)
    record = {k: v for k, v in entry["tensors"]["a1"].items() if k != "noise_db"}
    assert record == {"producer": "conv1", "readers": ["dw1"], "per_channel": True, "why": "forced on"}
    scales = np.asarray(doc["tensors"]["a1"]["scale"])
    shared = max(scales)  # the widest channel spans the tensor's range: its scale is the shared one
    noise = -10 * np.log10(np.mean((scales / shared) ** 2))
    assert entry["tensors"]["a1"]["noise_db"] == round(noise, 3) == 6.015
    a1 = doc["tensors"]["a1"]
    assert a1["axis"] == 3 and len(a1["scale"]) == 8 and isinstance(a1["zero_point"], int)
    replayed = from_document(forced.model.graph, doc)
    for node in forced.qgraph.nodes:
        assert replayed.node(node.name).attr("params") == node.attr("params"), node.name
        if node.inputs[2:] and node.inputs[2]:
            assert (
                replayed.constant(node.inputs[2]).tolist() == forced.qgraph.constant(node.inputs[2]).tolist()
            )
    x = np.random.default_rng(3).uniform(0, 1, (4, 12, 12, 1)).astype(np.float32)
    a = int8_exec.run(forced.qgraph, int8_exec.quantize_inputs(forced.qgraph, {"x": x}))
    b = int8_exec.run(replayed, int8_exec.quantize_inputs(replayed, {"x": x}))
    assert all(np.array_equal(a[k], b[k]) for k in a)


def test_a_depthwise_bias_scale_without_the_per_channel_input_scale_is_caught(
    forced: pipeline.QuantizeResult,
) -> None:
    doc = copy.deepcopy(forced.document)
    s_in = doc["tensors"]["a1"]["scale"]
    s_w = doc["tensors"]["dw1.weight"]["scale"]
    wrong = max(s_in) * s_w[3]  # the tensor-wide scale, as if the input had one scale
    doc["tensors"]["dw1.bias"]["scale"][3] = wrong
    (problem,) = params_json.validate(doc)
    assert problem.path == ("tensors", "dw1.bias", "scale", 3)
    assert problem.message.startswith(
        f"{wrong!r} does not follow from the recorded scales: s_in[3] {s_in[3]:.6g} * s_w[3]"
        f" {s_w[3]:.6g} gives {s_in[3] * s_w[3]!r}"
    )


def test_a_multiplier_that_ignores_the_per_channel_scale_is_caught(forced: pipeline.QuantizeResult) -> None:
    doc = copy.deepcopy(forced.document)
    doc["layers"][1]["params"]["multiplier"][0] += 1  # dw1
    (problem,) = params_json.validate(doc)
    assert problem.path == ("layers", 1, "params", "multiplier", 0)
    assert "s_in[0] " in problem.message


def test_per_channel_scales_are_refused_where_a_kernel_takes_one_scale(
    forced: pipeline.QuantizeResult,
) -> None:
    doc = copy.deepcopy(forced.document)
    a2 = doc["tensors"]["a2"]  # dw1 -> pw (a conv2d reads it)
    a2["scale"], a2["axis"] = [a2["scale"]] * 8, 3
    doc["transforms"]["dw_channel_scales"]["tensors"]["a2"] = {
        "producer": "dw1", "readers": ["pw"], "per_channel": True, "why": "by hand"
    }  # fmt: skip
    (problem,) = params_json.validate(doc)
    assert problem.path == ("layers", 2, "inputs", 0)
    assert "only a depthwise_conv2d layer's multipliers absorb; conv2d takes one scale" in problem.message
    del doc["transforms"]["dw_channel_scales"]["tensors"]["a2"]
    problems = params_json.validate(doc)
    assert ("tensors", "a2", "scale") in [p.path for p in problems]


def test_a_per_channel_tensor_must_be_recorded_and_have_one_scale_per_channel(
    forced: pipeline.QuantizeResult,
) -> None:
    doc = copy.deepcopy(forced.document)
    doc["transforms"]["dw_channel_scales"]["tensors"]["a1"]["per_channel"] = False
    (problem,) = params_json.validate(doc)
    assert problem.path == ("tensors", "a1", "scale")
    assert "does not record the tensor as per channel" in problem.message
    doc = copy.deepcopy(forced.document)
    doc["tensors"]["a1"]["scale"].pop()
    (problem,) = params_json.validate(doc)
    assert problem.message == "must have 8 entries, one per channel of axis 3 of shape [1, 12, 12, 8], got 7"


def test_a_relu6_clamp_that_differs_per_channel_keeps_one_scale(
    model: tuple[Path, pipeline.LoadedModel, DataSet],
) -> None:
    _, loaded, data = model
    calibration, _ = calibrate(loaded.graph, loaded.float_model, data, CalibrationPlan())
    found = channel_scales.candidates(loaded.graph)
    # Ranges past 6 (as learned ranges may be): 6.0 lands on a different code for each channel.
    channels = (np.zeros(8), np.linspace(6.5, 8.0, 8))
    calibration = dataclasses.replace(
        calibration, ranges={**calibration.ranges, "a1": (0.0, 8.0)}, channels={"a1": channels}
    )
    config = QuantConfig(channel_scales=frozenset({"a1"}))
    with pytest.raises(QuantizationError, match="fused relu6 clamp falls on different codes per channel"):
        quantize_graph(loaded.graph, calibration, config)
    choice = channel_scales.choose(
        {"a1": found["a1"]},
        None,
        lambda names: quantize_graph(loaded.graph, calibration, QuantConfig(channel_scales=names)),
        lambda _: 0.0,
        (quantize_graph(loaded.graph, calibration), 0.0),
    )
    assert not choice.applied
    assert choice.tensors["a1"]["why"].startswith("kept per-tensor: layer 'conv1': its fused relu6 clamp")


def test_auto_keeps_a_tensor_only_where_the_output_sqnr_rises(
    model: tuple[Path, pipeline.LoadedModel, DataSet],
) -> None:
    _, loaded, _ = model
    found = channel_scales.candidates(loaded.graph)
    graphs: dict[frozenset[str], Graph] = {}
    scores = {
        frozenset(): 30.0,
        frozenset({"a1"}): 31.5,
        frozenset({"a1", "a3"}): 32.4,
        frozenset({"a1", "c"}): 40.0,
    }

    def build(names: frozenset[str]) -> Graph:
        graphs[names] = loaded.graph.evolve(name="+".join(sorted(names)))  # a distinct graph per choice
        return graphs[names]

    def score(graph: Graph) -> float:
        return scores[next(k for k, g in graphs.items() if g is graph)]

    # "c" would gain most, but its own noise falls too little to be tried (nothing built or scored).
    found = {**found, "c": ("x", ["y"])}
    noise = {"a1": 6.0, "a3": 5.0, "c": 4.9}
    choice = channel_scales.choose(found, None, build, score, (loaded.graph, 30.0), noise)
    assert choice.applied == {"a1"} and choice.sqnr == 31.5 and choice.qgraph is graphs[frozenset({"a1"})]
    assert choice.tensors["a1"]["why"] == "+1.50 dB" and choice.tensors["a1"]["noise_db"] == 6.0
    assert choice.tensors["a3"]["why"] == "kept per-tensor: gain +0.90 dB < 1.0 dB"
    assert choice.tensors["a3"]["output_sqnr_db"] == {"off": 31.5, "on": 32.4}
    assert choice.tensors["c"] == {
        "producer": "x", "readers": ["y"], "noise_db": 4.9, "per_channel": False,
        "why": "kept per-tensor: its noise falls 4.90 dB < 5.0 dB",
    }  # fmt: skip
    assert frozenset({"a1", "c"}) not in graphs
    assert channel_scales.choose(found, False, build, score, (loaded.graph, 30.0)).tensors == {}


def test_the_cli_switch_and_line(
    model: tuple[Path, pipeline.LoadedModel, DataSet], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder, _, _ = model
    base = ["quantize", str(folder / "dw.onnx"), "--calib", str(folder / "calib.npy")]
    assert main([*base, "--dw-channel-scales", "off", "-o", str(tmp_path / "off.json")]) == 0
    off = params_json.load(tmp_path / "off.json")
    assert off["transforms"]["dw_channel_scales"] == {"mode": "off", "applied": False, "tensors": {}}
    assert all(not isinstance(t["scale"], list) for t in off["tensors"].values() if t["kind"] == "activation")
    capsys.readouterr()
    assert main([*base, "-o", str(tmp_path / "auto.json")]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("depthwise inputs: "))
    auto = params_json.load(tmp_path / "auto.json")["transforms"]["dw_channel_scales"]
    assert auto["mode"] == "auto" and set(auto["tensors"]) == {"a1", "a3"}
    for name, record in auto["tensors"].items():
        how = "per channel" if record["per_channel"] else "per tensor"
        assert f"'{name}' {how} ({record['why']})" in line
