"""The fake-quantized network trains with exactly the integers the exported JSON holds, and computes
what the bit-exact int8 reference computes with them."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest

from tests import needs

torch = needs.module("torch", "torch is an optional extra: pip install 'fixpoint[torch]'")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from quantcore import pipeline  # noqa: E402
from quantcore.data import DataSet  # noqa: E402
from quantcore.ir import Op  # noqa: E402
from quantcore.ir.io_layout import to_firmware  # noqa: E402
from quantcore.kernels.requantize import Rounding  # noqa: E402
from quantcore.qat.fake_quant import FakeQuantNet  # noqa: E402
from quantcore.qat.train import QatOptions, qat  # noqa: E402
from quantcore.quantize import params_json  # noqa: E402
from quantcore.quantize.document import finetuned_weights, from_document, write_finetuned  # noqa: E402
from quantcore.runtime import int8_exec  # noqa: E402
from tests.onnx_models import _opset13, outlier_cnn, residual_cnn, small_cnn  # noqa: E402

MODELS = {"small_cnn": (small_cnn, 16), "residual_cnn": (residual_cnn, 12)}


def _data(side: int, n: int, seed: int) -> DataSet:
    return DataSet(np.random.default_rng(seed).uniform(0, 1, (n, 1, side, side)).astype(np.float32))


@pytest.fixture(scope="module", params=sorted(MODELS))
def trained(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple:
    build, side = MODELS[request.param]
    folder = tmp_path_factory.mktemp(request.param)
    onnx.save(build(batch=1), folder / "m.onnx")
    model = pipeline.load_model(folder / "m.onnx")
    result = qat(
        model, _data(side, 256, 1), _data(side, 128, 2), QatOptions(epochs=2, batch_size=32, lr=1e-3)
    )
    assert result.document is not None and result.net is not None
    write_finetuned(folder / "p.json", result.document, result.weights)
    return model, result, folder / "p.json", side


def _reloaded(model: pipeline.LoadedModel, params: Path):  # type: ignore[no-untyped-def]
    document = params_json.load(params)
    return from_document(model.graph, document, finetuned_weights(document, params))


def test_the_json_holds_the_integers_the_network_trained_with(trained: tuple) -> None:
    model, result, params, _ = trained
    net: FakeQuantNet = result.net
    qgraph = _reloaded(model, params)
    weighted = [n for n in net.graph.nodes if n.op in (Op.CONV2D, Op.DEPTHWISE_CONV2D, Op.FULLY_CONNECTED)]
    assert len(weighted) >= 4
    for node in weighted:
        q_w, q_b = net.integer_weights(node)
        exported = qgraph.node(node.name)
        np.testing.assert_array_equal(qgraph.constant(exported.inputs[1]), q_w, err_msg=node.name)
        np.testing.assert_array_equal(qgraph.constant(exported.inputs[2]), q_b, err_msg=node.name)
    grids = net.grids()
    for tensor in qgraph.activations():
        grid = grids[net.groups[tensor.name]]
        assert tensor.quant is not None
        assert (float(tensor.quant.scale), int(tensor.quant.zero_point)) == (
            float(grid.scale.detach()),
            grid.zero_point,
        ), tensor.name


def test_the_best_epoch_is_exported(trained: tuple) -> None:
    """The kept epoch's network is the one exported: trained weights when an epoch beat the start, and
    otherwise exactly the start's (a small net's output SQNR moves by tenths of a dB with any change of
    its scales, so on random data training need not beat the start)."""
    _, result, _, _ = trained
    net: FakeQuantNet = result.net
    kept = result.document["finetuned"]["kept_epoch"]
    start = {n: net.graph.constant(n) for n in result.weights}  # net.graph keeps the start weights
    changed = [n for n, w in result.weights.items() if not np.array_equal(w, start[n])]
    if kept == 0:
        assert changed == [] and float(net.range_offsets.detach().abs().max()) == 0.0
    else:
        assert len(changed) == len(result.weights)
        assert float(net.range_offsets.detach().abs().max()) > 0


def test_ranges_that_start_at_zero_keep_zero_exact(trained: tuple) -> None:
    """A ReLU output's range starts at 0: it keeps lo = 0 (zero point -128), never spends codes below."""
    _, result, _, _ = trained
    for name, entry in result.document["tensors"].items():
        if entry["kind"] == "activation" and entry.get("method") == "qat" and entry["observed"]["min"] >= 0:
            assert entry["range"]["min"] == 0.0 and entry["zero_point"] == -128, name


def test_a_softmax_output_keeps_its_fixed_grid(trained: tuple) -> None:
    _, result, _, _ = trained
    fixed = [e for e in result.document["tensors"].values() if e.get("method") == "fixed"]
    assert fixed and all((e["scale"], e["zero_point"]) == (1 / 256, -128) for e in fixed)


def test_every_layer_computes_what_its_int8_kernel_computes(trained: tuple) -> None:
    """Layer by layer: each int8 kernel of the exported graph, fed the fake-quantized network's own input
    codes, gives the codes the network computed. Not identical everywhere: the kernels requantize with a
    31-bit fixed-point multiplier where the floats divide by the exact scale, and a value within float32
    error of a rounding boundary can land one code over; average pools hit such boundaries often (sums
    of codes divided by 4 tie at .5). Measured: 99.4-100 % identical codes per layer, 94.8-95.8 % for
    the average pools, never more than 1 apart."""
    model, result, params, side = trained
    qgraph = _reloaded(model, params)
    x = to_firmware(qgraph, qgraph.inputs[0], _data(side, 200, 7).x)
    with torch.no_grad():
        values = result.net.activations(torch.as_tensor(np.ascontiguousarray(x)))
    codes = {}
    for tensor in qgraph.activations():
        quant = tensor.quant
        real = values[tensor.name].numpy().astype(np.float64)
        codes[tensor.name] = (np.round(real / float(quant.scale)) + int(quant.zero_point)).astype(np.int8)
    kernels = set()
    for node in qgraph.nodes:
        expected = int8_exec.run_node(qgraph, node, codes, Rounding.DOUBLE).astype(np.int64)
        got = codes[node.outputs[0]].astype(np.int64)
        assert np.abs(got - expected).max() <= 1, node.name
        agreement = 0.9 if node.attr("kernel") == "arm_avgpool_s8" else 0.99
        assert np.mean(got == expected) >= agreement, node.name
        kernels.add(node.attr("kernel"))
    assert {"arm_convolve_wrapper_s8", "arm_depthwise_conv_wrapper_s8", "arm_softmax_s8"} <= kernels


def test_one_layer_agrees_to_the_code(tmp_path: Path) -> None:
    """A lone conv reads an input already on its grid: fake quantization and the int8 kernel differ only
    where the real value lies within the fixed-point multiplier's error (~2^-31 relative) of a rounding
    boundary - almost never, and then by one code."""
    rng = np.random.default_rng(5)
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w", "b"], ["y"], name="conv", pads=[1, 1, 1, 1])],
        "one",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 8, 8])],
        [
            numpy_helper.from_array(rng.normal(0, 0.4, (4, 3, 3, 3)).astype(np.float32), "w"),
            numpy_helper.from_array(rng.normal(0, 0.2, 4).astype(np.float32), "b"),
        ],
    )
    onnx.save(_opset13(graph), tmp_path / "one.onnx")
    model = pipeline.load_model(tmp_path / "one.onnx")
    data = DataSet(rng.uniform(-1, 1, (64, 3, 8, 8)).astype(np.float32))
    doc = pipeline.quantize(
        model, data, pipeline.QuantizeOptions(bias_correction=False, int16_output=False)
    ).document
    qgraph = from_document(model.graph, doc)
    ranges = {
        name: (e["range"]["min"], e["range"]["max"]) for name, e in doc["tensors"].items() if "range" in e
    }
    net = FakeQuantNet(model.graph, ranges)
    x = to_firmware(qgraph, "x", data.x)
    with torch.no_grad():
        fake = net(torch.as_tensor(np.ascontiguousarray(x))).numpy()
    out = qgraph.tensor("y").quant
    fake_codes = np.round(fake / float(out.scale)) + int(out.zero_point)
    codes = int8_exec.run(qgraph, int8_exec.quantize_inputs(qgraph, {"x": x}))["y"]
    assert np.abs(fake_codes - codes).max() <= 1
    assert np.mean(fake_codes == codes) >= 0.999


def test_training_recovers_what_plain_ptq_loses(tmp_path: Path) -> None:
    """The outlier net per tensor without equalization loses a lot to PTQ; fine-tuning with the float
    model as teacher wins output SQNR back, on the calibration samples and on unseen ones."""
    onnx.save(outlier_cnn(batch=1), tmp_path / "m.onnx")
    model = pipeline.load_model(tmp_path / "m.onnx")
    start = pipeline.QuantizeOptions(per_channel=False, equalize=False, bias_correction=False)
    options = QatOptions(epochs=3, batch_size=32, lr=1e-3, range_lr=1e-2, start=start)
    result = qat(model, _data(16, 512, 1), _data(16, 128, 2), options)
    assert result.document is not None
    sqnr = result.document["finetuned"]["output_sqnr_db"]
    assert sqnr["qat"] > sqnr["ptq"] + 3.0, sqnr
    unseen = _data(16, 256, 9)
    report = pipeline.evaluate(model, result.document, unseen, finetuned=result.weights)
    before = pipeline.evaluate(model, result.start_document, unseen)
    assert report.output_sqnr_db > before.output_sqnr_db + 3.0


def test_the_untrained_start_is_exactly_the_ptq_start(trained: tuple) -> None:
    """Epoch 0 - the fake-quantized network before any step, exported - scores exactly what the PTQ
    document it starts from scores: same ranges, same weights, same corrected biases, same integers."""
    _, result, _, _ = trained
    entry = result.document["finetuned"]
    assert entry["epoch_output_sqnr_db"][0] == entry["output_sqnr_db"]["ptq"]
    assert len(entry["epoch_output_sqnr_db"]) == 3  # the start and 2 epochs
    kept = entry["kept_epoch"]
    assert (
        entry["output_sqnr_db"]["qat"]
        == max(entry["epoch_output_sqnr_db"])
        == entry["epoch_output_sqnr_db"][kept]
    )
