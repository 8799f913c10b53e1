"""Average pools as depthwise convolutions: the rule that weighs the SQNR gained against the memory added
(quantcore/quantize/lowering.py), the option that forces it, how the JSON and the readers name it, and
models with imported int8 parameters, which are never substituted."""

from __future__ import annotations

import copy
import math
import re
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from quantcore import pipeline
from quantcore.cli import main
from quantcore.data import DataSet
from quantcore.errors import InputError
from quantcore.ir import Graph, Op
from quantcore.ir.io_layout import to_firmware
from quantcore.quantize import lowering, params_json
from quantcore.quantize.document import DocumentError, from_document
from quantcore.quantize.mixed_precision import Budget, Memory
from quantcore.runtime import int8_exec
from tests import needs

GAINED = re.compile(r"^\+\d+\.\d\d dB for \d+ B$")


def _pooled(channels: int, h: int, w: int, fc_bias: float = 0.0) -> onnx.ModelProto:
    """Conv 3x3 (1 -> channels) - ReLU - AveragePool over the whole h x w map - Flatten - Gemm (3)."""
    rng = np.random.default_rng(0)
    inits = [
        numpy_helper.from_array(rng.normal(0, 1, (channels, 1, 3, 3)).astype(np.float32), "c.w"),
        numpy_helper.from_array(np.zeros(channels, np.float32), "c.b"),
        numpy_helper.from_array(rng.normal(0, 0.5, (3, channels)).astype(np.float32), "fc.w"),
        numpy_helper.from_array(np.array([fc_bias, -fc_bias, fc_bias / 2], np.float32), "fc.b"),
    ]
    nodes = [
        helper.make_node("Conv", ["x", "c.w", "c.b"], ["c"], name="conv", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"], name="relu"),
        helper.make_node("AveragePool", ["r"], ["pool"], name="pool", kernel_shape=[h, w]),
        helper.make_node("Flatten", ["pool"], ["flat"], name="flatten"),
        helper.make_node("Gemm", ["flat", "fc.w", "fc.b"], ["y"], name="fc", transB=1),
    ]
    graph = helper.make_graph(
        nodes,
        "pooled",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, h, w])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model


def _spikes(n: int, seed: int = 1) -> np.ndarray:
    """8x8 inputs, near zero but for one spike each: the pool's input range is ~20x its output's."""
    rng = np.random.default_rng(seed)
    x = rng.normal(0, 0.05, (n, 1, 8, 8)).astype(np.float32)
    x.reshape(n, -1)[np.arange(n), rng.integers(0, 64, n)] = rng.uniform(4, 8, n)
    return x


@pytest.fixture(scope="module")
def spiky(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, DataSet]:
    """Big gain, small cost: 2 channels, an 8x8 window; substituting gains ~10 dB for a few hundred B."""
    path = tmp_path_factory.mktemp("spiky") / "spiky.onnx"
    onnx.save(_pooled(2, 8, 8), path)
    return path, DataSet(_spikes(128))


@pytest.fixture(scope="module")
def wide(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, DataSet]:
    """Small gain, big cost: a keyword-spotting net's 25x5 pool over 64 channels (8.8 KB of constants,
    scratch 256 -> 16,000 B on Cortex-M4), read by a layer whose output rounding (its large biases)
    dominates the output error, so running the pool at its own scale gains only ~1 dB."""
    path = tmp_path_factory.mktemp("wide") / "wide.onnx"
    onnx.save(_pooled(64, 25, 5, fc_bias=60.0), path)
    return path, DataSet(np.random.default_rng(3).normal(0, 1, (128, 1, 25, 5)).astype(np.float32))


def _quantize(case: tuple[Path, DataSet], **options: object) -> pipeline.QuantizeResult:
    path, data = case
    return pipeline.quantize(pipeline.load_model(path), data, pipeline.QuantizeOptions(**options))  # type: ignore[arg-type]


def _layer(document: dict, name: str) -> dict:  # type: ignore[type-arg]
    return next(layer for layer in document["layers"] if layer["name"] == name)


# -- the rule ---------------------------------------------------------------------------------------


def test_the_rule_weighs_the_gain_against_the_bytes_added() -> None:
    assert lowering.refusal(9.9, Memory(176, 208)) is None
    assert lowering.refusal(1.0, Memory(4096, 0)) is None  # exactly the price of one dB
    assert lowering.refusal(1.0, Memory(4000, 97)) == "4097 B for +1.00 dB > 4096 B per dB"
    assert lowering.refusal(1.17, Memory(8768, 15744)) == "24512 B for +1.17 dB > 4096 B per dB"
    assert lowering.refusal(0.05, Memory(0, 0)) == "gain +0.05 dB < 0.1 dB"
    assert lowering.refusal(math.nan, Memory(0, 0)) == "gain +nan dB < 0.1 dB"  # exact before and after
    # Bytes one memory saves are no credit against the other's: 2148 B, not 2048, for 0.5 dB.
    assert lowering.refusal(0.5, Memory(-100, 2148)) == "2148 B for +0.50 dB > 4096 B per dB"


def test_big_gain_small_cost_runs_the_pool_as_a_depthwise_convolution(spiky: tuple[Path, DataSet]) -> None:
    result = _quantize(spiky)
    entry = result.document["transforms"]["pool_as_depthwise"]
    assert (entry["mode"], entry["applied"], entry["core"]) == ("auto", True, "cortex-m4")
    record = entry["layers"]["pool"]
    assert record["substituted"] and GAINED.match(record["why"]), record
    gain = record["output_sqnr_db"]["on"] - record["output_sqnr_db"]["off"]
    assert gain > 5
    assert record["range_ratio"] > 10
    added = record["added_bytes"]["flash"] + record["added_bytes"]["ram"]
    assert 0 < added < 1000 and record["why"] == f"+{gain:.2f} dB for {added} B"
    assert (_layer(result.document, "pool")["op"], _layer(result.document, "pool")["kernel"]) == (
        "depthwise_conv2d",
        "arm_depthwise_conv_wrapper_s8",
    )
    assert lowering.op_label(result.qgraph.node("pool")) == f"avg_pool (as depthwise_conv2d: {record['why']})"


def test_small_gain_big_cost_keeps_the_average_pool(wide: tuple[Path, DataSet]) -> None:
    result = _quantize(wide)
    record = result.document["transforms"]["pool_as_depthwise"]["layers"]["pool"]
    assert record["added_bytes"] == {"flash": 8768, "ram": 15744}  # weights + bias + multipliers; scratch
    gain = record["output_sqnr_db"]["on"] - record["output_sqnr_db"]["off"]
    assert 0.1 < gain < 24512 / 4096
    assert not record["substituted"] and record["why"] == f"24512 B for {gain:+.2f} dB > 4096 B per dB"
    assert result.document["transforms"]["pool_as_depthwise"]["applied"] is False
    assert (_layer(result.document, "pool")["op"], _layer(result.document, "pool")["kernel"]) == (
        "avg_pool",
        "arm_avgpool_s8",
    )
    assert lowering.op_label(result.qgraph.node("pool")) == "avg_pool"


def test_the_memory_is_costed_for_the_core(wide: tuple[Path, DataSet]) -> None:
    """MVE's depthwise kernel asks for 4 * 124 * kh * kw bytes of scratch (62,000 B here), where the pure-C
    one asks for none: the same pool costs flash only on a Cortex-M0."""
    m55 = _quantize(wide, core="cortex-m55", equalize=False, bias_correction=False)
    m0 = _quantize(wide, core="cortex-m0", equalize=False, bias_correction=False)
    assert m55.document["transforms"]["pool_as_depthwise"]["core"] == "cortex-m55"
    assert m55.document["transforms"]["pool_as_depthwise"]["layers"]["pool"]["added_bytes"]["ram"] > 60000
    assert m0.document["transforms"]["pool_as_depthwise"]["layers"]["pool"]["added_bytes"] == {
        "flash": 8768,
        "ram": 0,
    }


def test_a_budget_refuses_what_the_rule_would_take(spiky: tuple[Path, DataSet]) -> None:
    unlimited = _quantize(spiky, equalize=False, bias_correction=False)
    flash = unlimited.document["transforms"]["pool_as_depthwise"]["layers"]["pool"]["added_bytes"]["flash"]
    plain = _quantize(spiky, pool_as_depthwise=False, equalize=False, bias_correction=False)
    from quantcore.codegen.lower import lower

    budget = lower(plain.qgraph).weight_bytes + flash - 1
    result = _quantize(spiky, budget=Budget(flash=budget), equalize=False, bias_correction=False)
    record = result.document["transforms"]["pool_as_depthwise"]["layers"]["pool"]
    assert not record["substituted"] and record["why"] == f"flash {budget + 1} B > budget {budget} B"


def test_choose_scores_each_pool_against_the_graph_without_it() -> None:
    """lowering.choose with the figures supplied: what is built, measured and kept, and the reason the
    substituted node carries."""
    from quantcore.passes import prepare
    from quantcore.runtime import float_exec
    from tests.ir_builder import GraphBuilder

    b = GraphBuilder((1, 2, 8, 8), seed=6)
    graph = prepare(b.conv(4, 3, pad=1).relu().gap().flatten().fc(3).build())
    x = np.random.default_rng(5).normal(size=(8, 8, 8, 2))
    env = float_exec.run(graph, {"input": x})
    ranges = {t.name: (float(env[t.name].min()), float(env[t.name].max())) for t in graph.activations()}
    pool = next(n.name for n in graph.nodes if n.op is Op.AVG_POOL)
    built: list[dict[str, str]] = []

    def build(pools: Mapping[str, str]) -> Graph:
        built.append(dict(pools))
        return lowering.substitute(graph, dict(pools))

    def substituted(g: Graph) -> bool:
        return g.node(pool).op is Op.DEPTHWISE_CONV2D

    def score(g: Graph) -> float:
        return 30.0 if substituted(g) else 28.0

    def cheap(g: Graph) -> Memory:
        return Memory(1000 + 300 * substituted(g), 2000 + 200 * substituted(g))

    def dear(g: Graph) -> Memory:
        return Memory(1000 + 8193 * substituted(g), 2000)

    choice = lowering.choose(graph, ranges, None, build, score, cheap, Budget())
    assert built == [{}, {pool: ""}]
    assert choice.substituted == {pool: "+2.00 dB for 500 B"}
    assert choice.qgraph.node(pool).attr(lowering.AS_POOL) == "+2.00 dB for 500 B"
    assert choice.layers[pool]["added_bytes"] == {"flash": 300, "ram": 200}
    refused = lowering.choose(graph, ranges, None, build, score, dear, Budget())
    assert not substituted(refused.qgraph)
    assert refused.layers[pool]["why"] == "8193 B for +2.00 dB > 4096 B per dB"
    built.clear()
    forced = lowering.choose(graph, ranges, True, build, score, dear, Budget())
    assert built == [{pool: "forced on"}] and forced.layers[pool]["why"] == "forced on"
    built.clear()
    off = lowering.choose(graph, ranges, False, build, score, cheap, Budget())
    assert built == [{}] and off.layers == {}


# -- the option -------------------------------------------------------------------------------------


def test_the_option_forces_it_either_way(
    spiky: tuple[Path, DataSet],
    wide: tuple[Path, DataSet],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    calib = tmp_path / "calib.npz"
    np.savez(calib, x=wide[1].x)
    out = tmp_path / "on.json"
    args = ["quantize", str(wide[0]), "--calib", str(calib), "-o", str(out)]
    assert main([*args, "--pool-as-depthwise", "on"]) == 0
    assert capsys.readouterr().out.splitlines()[0] == "avg_pool: 'pool' as depthwise_conv2d (forced on)"
    document = params_json.load(out)
    assert document["transforms"]["pool_as_depthwise"] == {
        "mode": "on",
        "applied": True,
        "layers": {
            "pool": {"substituted": True, "range_ratio": pytest.approx(6.847, abs=0.01), "why": "forced on"}
        },
    }
    assert _layer(document, "pool")["op"] == "depthwise_conv2d"
    assert main([*args, "--pool-as-depthwise", "auto"]) == 0
    line = capsys.readouterr().out.splitlines()[0]
    assert re.fullmatch(r"avg_pool: 'pool' kept \(24512 B for \+\d\.\d\d dB > 4096 B per dB\)", line), line
    np.savez(calib, x=spiky[1].x)
    args = ["quantize", str(spiky[0]), "--calib", str(calib), "-o", str(out)]
    assert main([*args, "--pool-as-depthwise", "off"]) == 0
    assert not capsys.readouterr().out.startswith("avg_pool")  # nothing was considered: no line
    document = params_json.load(out)
    assert document["transforms"]["pool_as_depthwise"] == {"mode": "off", "applied": False, "layers": {}}
    assert (_layer(document, "pool")["op"], _layer(document, "pool")["kernel"]) == (
        "avg_pool",
        "arm_avgpool_s8",
    )


# -- the JSON and its readers -----------------------------------------------------------------------


def _outputs(qgraph: Graph, x: np.ndarray) -> dict[str, np.ndarray]:
    feeds = int8_exec.quantize_inputs(qgraph, {qgraph.inputs[0]: to_firmware(qgraph, qgraph.inputs[0], x)})
    return int8_exec.run(qgraph, feeds)


def test_a_document_round_trips_to_the_same_graph(spiky: tuple[Path, DataSet], tmp_path: Path) -> None:
    result = _quantize(spiky)
    path = tmp_path / "p.json"
    params_json.write(path, result.document)  # validated against the schema
    rebuilt = from_document(result.model.graph, params_json.load(path))
    assert [(n.name, n.op, n.inputs, n.outputs) for n in rebuilt.nodes] == [
        (n.name, n.op, n.inputs, n.outputs) for n in result.qgraph.nodes
    ]
    for ours, theirs in zip(result.qgraph.nodes, rebuilt.nodes, strict=True):
        assert ours.attr("kernel") == theirs.attr("kernel") and ours.attr("params") == theirs.attr("params")
        assert ours.attr(lowering.AS_POOL) == theirs.attr(lowering.AS_POOL)
        for name in ours.inputs[1:]:
            if name:
                assert np.array_equal(result.qgraph.tensor(name).data, rebuilt.tensor(name).data), name
    assert lowering.op_label(rebuilt.node("pool")).startswith("avg_pool (as depthwise_conv2d: +")
    a, b = _outputs(result.qgraph, spiky[1].x[:16]), _outputs(rebuilt, spiky[1].x[:16])
    assert all(np.array_equal(a[k], b[k]) for k in a)


def test_a_file_written_before_the_entry_still_replays_the_substitution(spiky: tuple[Path, DataSet]) -> None:
    result = _quantize(spiky)
    old = copy.deepcopy(result.document)
    del old["transforms"]["pool_as_depthwise"]
    rebuilt = from_document(result.model.graph, params_json.loads(params_json.dump(old)))  # schema-valid
    assert rebuilt.node("pool").op is Op.DEPTHWISE_CONV2D
    assert lowering.op_label(rebuilt.node("pool")) == "avg_pool (as depthwise_conv2d)"  # no reason recorded
    a, b = _outputs(result.qgraph, spiky[1].x[:16]), _outputs(rebuilt, spiky[1].x[:16])
    assert all(np.array_equal(a[k], b[k]) for k in a)


def test_an_entry_that_disagrees_with_the_layers_is_refused(
    spiky: tuple[Path, DataSet], wide: tuple[Path, DataSet]
) -> None:
    substituted = _quantize(spiky)
    unrecorded = copy.deepcopy(substituted.document)
    unrecorded["transforms"]["pool_as_depthwise"]["layers"] = {}
    with pytest.raises(DocumentError) as raised:
        from_document(substituted.model.graph, unrecorded)
    assert str(raised.value) == (
        "$.layers: 'pool' runs the model's average pool as depthwise_conv2d, but"
        " $.transforms.pool_as_depthwise does not record it; re-run fixpoint quantize"
    )
    kept = _quantize(wide)
    claimed = copy.deepcopy(kept.document)
    claimed["transforms"]["pool_as_depthwise"]["layers"]["pool"]["substituted"] = True
    with pytest.raises(DocumentError) as raised:
        from_document(kept.model.graph, claimed)
    assert str(raised.value) == (
        "$.transforms.pool_as_depthwise.layers['pool']: substituted, but no depthwise_conv2d layer of"
        " that name replaces an average pool of the model; re-run fixpoint quantize for this model"
    )


def test_a_reason_from_a_file_is_shown_on_one_short_line(spiky: tuple[Path, DataSet]) -> None:
    result = _quantize(spiky)
    forged = copy.deepcopy(result.document)
    forged["transforms"]["pool_as_depthwise"]["layers"]["pool"]["why"] = "ok\nworst layer: none" + "x" * 500
    label = lowering.op_label(from_document(result.model.graph, forged).node("pool"))
    assert "\n" not in label and "ok<U+000A>worst layer: none" in label and len(label) < 120


def test_evaluate_names_the_substituted_pool(
    spiky: tuple[Path, DataSet], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    result = _quantize(spiky)
    params = tmp_path / "p.json"
    params_json.write(params, result.document)
    data = tmp_path / "data.npz"
    np.savez(data, x=spiky[1].x[:32])
    why = result.document["transforms"]["pool_as_depthwise"]["layers"]["pool"]["why"]
    report = pipeline.evaluate(result.model, result.document, DataSet(spiky[1].x[:32]), str(params))
    ops = {layer.name: layer.op for layer in report.layers}
    assert ops["pool"] == f"avg_pool (as depthwise_conv2d: {why})"
    assert main(["evaluate", str(spiky[0]), str(params), "--data", str(data)]) == 0
    assert f"avg_pool (as depthwise_conv2d: {why})" in capsys.readouterr().out


# -- imported int8 parameters -----------------------------------------------------------------------


class _Reader:
    def __init__(self, x: np.ndarray) -> None:
        self.items = iter([{"x": x[i : i + 1]} for i in range(len(x))])

    def get_next(self) -> dict[str, np.ndarray] | None:
        return next(self.items, None)


def test_a_qdq_model_keeps_its_pools(spiky: tuple[Path, DataSet], tmp_path: Path) -> None:
    quantization = needs.module("onnxruntime.quantization", "onnxruntime.quantization is needed")
    qdq = tmp_path / "qdq.onnx"
    quantization.quantize_static(
        str(spiky[0]),
        str(qdq),
        _Reader(spiky[1].x[:32]),
        quant_format=quantization.QuantFormat.QDQ,
        per_channel=True,
        activation_type=quantization.QuantType.QInt8,
        weight_type=quantization.QuantType.QInt8,
    )
    model = pipeline.load_model(qdq)
    assert lowering.imported(model.graph)
    result = pipeline.quantize(model, spiky[1])
    entry = result.document["transforms"]["pool_as_depthwise"]
    assert entry == {"mode": "auto", "applied": False, "imported": True, "core": "cortex-m4", "layers": {}}
    assert _layer(result.document, "pool")["op"] == "avg_pool"
    with pytest.raises(InputError) as raised:
        pipeline.quantize(model, spiky[1], pipeline.QuantizeOptions(pool_as_depthwise=True))
    assert str(raised.value) == (
        "qdq.onnx: --pool-as-depthwise on: the model brings its own int8 scales (QDQ), which an average"
        " pool run as a depthwise convolution would not keep; use auto or off (its pools stay average"
        " pools either way)"
    )


def test_an_int8_tflite_keeps_its_pools(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tests import tflm

    path = tflm.model("person_detect")
    result = pipeline.quantize_imported(pipeline.load_model(path))
    pools = [layer for layer in result.document["layers"] if layer["kernel"] == "arm_avgpool_s8"]
    assert len(pools) == 1 and pools[0]["op"] == "avg_pool"
    assert "pool_as_depthwise" not in result.document.get("transforms", {})
    out = tmp_path / "p.json"
    assert main(["quantize", str(path), "-o", str(out), "--pool-as-depthwise", "on"]) == 2
    assert not out.exists()
    assert (
        capsys.readouterr()
        .err.strip()
        .endswith(
            "person_detect.tflite: --pool-as-depthwise on: the model is int8 already, and its average pools"
            " must stay what TensorFlow Lite Micro runs; use auto or off (its pools stay average pools"
            " either way)"
        )
    )


def test_a_model_the_code_generator_refuses_keeps_its_pools_and_says_why(tmp_path: Path) -> None:
    """int16 around the residual net's pad cannot be generated (arm_pad_s8 is int8 only): the pools
    cannot be costed, so they are kept with that reason instead of quantize failing (found by fuzzing)."""
    from quantcore.calibrate.method import Method, RangeMethod
    from tests.onnx_models import residual_cnn

    path = tmp_path / "residual.onnx"
    onnx.save(residual_cnn(1), path)
    data = DataSet(np.random.default_rng(1).uniform(0, 1, (24, 1, 12, 12)).astype(np.float32))
    options = pipeline.QuantizeOptions(
        method=RangeMethod(Method.MINMAX), int16_layers=frozenset({"conv1", "gating"}), equalize=False
    )
    document = pipeline.quantize(pipeline.load_model(path), data, options).document
    layers = document["transforms"]["pool_as_depthwise"]["layers"]
    assert layers and not any(record["substituted"] for record in layers.values())
    assert all(
        record["why"].startswith("kept: the memory cost cannot be measured (layer 'pad' (pad) moves int16")
        for record in layers.values()
    )
