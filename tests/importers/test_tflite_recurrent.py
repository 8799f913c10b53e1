"""TFLite's recurrent layers from TFLM's own int8 models: UNIDIRECTIONAL_SEQUENCE_LSTM (mnist_lstm,
micro_speech_lstm) and SVDF (keyword_scrambled, int16 state; keyword_scrambled_8bit, int8 state at zero
point 0), run by Fixpoint's int8 reference executor against TFLM's interpreter byte for byte - every
layer, over several invokes in a row, the state carried from one to the next as TFLM carries its variable
tensors - and what cannot run on CMSIS-NN refused."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pytest
import tflite

from quantcore import pipeline
from quantcore.errors import ModelError
from quantcore.importers._tflite_read import read_model
from quantcore.quantize.consistency import problems
from quantcore.quantize.document import from_document
from quantcore.runtime import float_exec, int8_exec
from quantcore.verify import tflm as tflm_compare
from tests import tflm

INVOKES = 6
INT16_FEATURES = 3000
"""The int16 input range the keyword models get (|q| <= 3000, ~1.9 at their scale 0.000625)."""
BIAS_DIVISOR = 1000
"""keyword_scrambled's scrambled SVDF biases saturate every output; divided by this they do not."""


@pytest.fixture(scope="module")
def unsaturated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("svdf") / "keyword_scrambled_bias.tflite"
    path.write_bytes(tflm.svdf_biases_divided(tflm.model("keyword_scrambled").read_bytes(), BIAS_DIVISOR))
    return path


@pytest.fixture(scope="module")
def int8_state(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """keyword_scrambled_8bit with its int8 SVDF states at zero point 0: arm_svdf_s8's model."""
    path = tmp_path_factory.mktemp("svdf") / "keyword_scrambled_int8_state.tflite"
    raw = tflm.model("keyword_scrambled_8bit").read_bytes()
    path.write_bytes(tflm.svdf_biases_divided(tflm.svdf_int8_state_model(raw, 16), BIAS_DIVISOR))
    return path


def _path(name: str, unsaturated: Path, int8_state: Path) -> Path:
    made = {"unsaturated": unsaturated, "int8_state": int8_state}
    return made[name] if name in made else tflm.model(name)


def _inputs(interpreter: object, seed: int) -> np.ndarray:
    """INVOKES seeded inputs: int8 over the whole range, int16 features within INT16_FEATURES."""
    details = interpreter.get_input_details(0)  # type: ignore[attr-defined]
    dtype = np.dtype(details["dtype"])
    bound = 127 if dtype == np.int8 else INT16_FEATURES
    rng = np.random.default_rng(seed)
    return rng.integers(-bound - 1, bound + 1, size=(INVOKES, *details["shape"][1:])).astype(dtype)


def _tflm_layers(path: Path, xs: np.ndarray, names: list[str]) -> dict[str, np.ndarray]:
    """Every named tensor after each of TFLM's invokes, in a row (one interpreter: its state carried)."""
    interpreter = tflm.interpreter(path)
    indices = {t.name: t.index for t in read_model(path.read_bytes(), str(path)).tensors}
    rows: dict[str, list[np.ndarray]] = {name: [] for name in names}
    for x in xs:
        interpreter.set_input(x[np.newaxis], 0)
        interpreter.invoke()
        for name in names:
            rows[name].append(np.array(interpreter.GetTensor(indices[name], 0)["tensor_data"]).reshape(-1))
    return {name: np.stack(row) for name, row in rows.items()}


MODELS = ["trained_lstm_int8", "micro_speech_lstm", "keyword_scrambled", "unsaturated", "int8_state"]


@pytest.mark.parametrize("name", MODELS)
def test_every_layer_matches_tflm_over_invokes_in_a_row(
    name: str, unsaturated: Path, int8_state: Path
) -> None:
    path = _path(name, unsaturated, int8_state)
    qgraph = pipeline.quantize_imported(pipeline.load_model(path)).qgraph
    xs = _inputs(tflm.interpreter(path), seed=21)
    names = [n.outputs[0] for n in qgraph.nodes]
    theirs = _tflm_layers(path, xs, names)
    env = int8_exec.run(qgraph, {qgraph.inputs[0]: xs})
    differing = {n: int(np.count_nonzero(env[n].reshape(INVOKES, -1) != theirs[n])) for n in names}
    assert differing == dict.fromkeys(names, 0)


@pytest.mark.parametrize(
    ("name", "layer", "distinct"),
    [("trained_lstm_int8", 0, 200), ("unsaturated", 1, 20), ("int8_state", 1, 5)],
)
def test_the_state_is_carried_from_one_invoke_to_the_next(
    name: str, layer: int, distinct: int, unsaturated: Path, int8_state: Path
) -> None:
    """The recurrent layer's output takes many values (the check is not met by a saturated layer), and
    running each invoke from the reset state instead of the carried one gives other bytes than TFLM's."""
    path = _path(name, unsaturated, int8_state)
    qgraph = pipeline.quantize_imported(pipeline.load_model(path)).qgraph
    xs = _inputs(tflm.interpreter(path), seed=5)
    out = qgraph.nodes[layer].outputs[0]
    theirs = _tflm_layers(path, xs, [out])[out]
    carried = int8_exec.run(qgraph, {qgraph.inputs[0]: xs})[out].reshape(INVOKES, -1)
    fresh = np.concatenate([int8_exec.run(qgraph, {qgraph.inputs[0]: x[np.newaxis]})[out] for x in xs])
    assert np.array_equal(carried, theirs)
    assert np.unique(carried).size >= distinct
    assert np.count_nonzero(fresh.reshape(INVOKES, -1) != theirs) > 0


def test_lstm_parameters_are_tflms() -> None:
    """mnist_lstm: input zero point -128, hidden state zero point 0 (scale 0.0078), cell state 2^-12 and
    cell clip 10: every integer TFLM's CMSIS-NN glue passes, computed as it computes them."""
    qgraph = pipeline.quantize_imported(pipeline.load_model(tflm.model("trained_lstm_int8"))).qgraph
    node = qgraph.nodes[0]
    params = dict(node.attr("params"))
    gates = params.pop("gates")
    assert node.attr("kernel") == "arm_lstm_unidirectional_s8"
    assert params == {
        "time_major": False,
        "input_offset": 128,
        "hidden_offset": 0,
        "forget_to_cell_multiplier": 1 << 30,  # 2^-15 * s_cell / s_cell = 2^-15
        "forget_to_cell_shift": -14,
        "input_to_cell_multiplier": 1 << 30,  # 2^-15 * 2^-15 / 2^-12 = 2^-18
        "input_to_cell_shift": -17,
        "output_multiplier": 2146304392,  # 2^-30 / 0.0078168
        "output_shift": -23,
        "output_offset": 0,
        "cell_clip": 32767,  # 10 / 2^-12 = 40960, clamped to int16
        "cell_scale_power": -12,
        "cell_activation": "tanh",
    }
    assert gates["forget"] == {
        "input_multiplier": 2042355287,
        "input_shift": -3,
        "hidden_multiplier": 1590606064,
        "hidden_shift": -2,
    }


@pytest.mark.parametrize("name", ["trained_lstm_int8", "keyword_scrambled"])
def test_params_json_rebuilds_the_same_layers(name: str) -> None:
    model = pipeline.load_model(tflm.model(name))
    result = pipeline.quantize_imported(model)
    assert list(problems(result.document)) == []
    rebuilt = from_document(model.graph, result.document)
    xs = _inputs(tflm.interpreter(tflm.model(name)), seed=3)
    ours = int8_exec.run(result.qgraph, {result.qgraph.inputs[0]: xs})
    again = int8_exec.run(rebuilt, {rebuilt.inputs[0]: xs})
    assert all(np.array_equal(ours[n.outputs[0]], again[n.outputs[0]]) for n in result.qgraph.nodes)


def test_tflm_comparison_reads_the_int16_edges() -> None:
    """keyword_scrambled takes int16 features and answers int16 (its softmax) behind an int32 QUANTIZE:
    `fixpoint evaluate`'s TFLM line compares the int16 values."""
    model = pipeline.load_model(tflm.model("keyword_scrambled"))
    result = pipeline.quantize_imported(model)
    quant = result.qgraph.tensor(result.qgraph.inputs[0]).quant
    assert quant is not None and quant.dtype.label == "int16"
    q = np.random.default_rng(8).integers(-INT16_FEATURES, INT16_FEATURES + 1, size=(INVOKES, 96))
    x = tflm.real_values(q, float(quant.scale), int(quant.zero_point))
    comparison = tflm_compare.compare(str(model.path), model.graph, result.qgraph, x)
    assert (comparison.mismatched_bytes, comparison.compared_bytes, comparison.samples) == (
        0,
        2 * INVOKES,
        INVOKES,
    )


REFUSALS = {
    "peepholes": (
        9,
        7,
        "operator 0 UNIDIRECTIONAL_SEQUENCE_LSTM (output 'tfl.unidirectional_sequence_lstm'): it has peephole"
        " weights (CMSIS-NN's arm_lstm_unidirectional_s8 has no peephole connections)",
    ),
    "projection": (
        16,
        8,
        "operator 0 UNIDIRECTIONAL_SEQUENCE_LSTM (output 'tfl.unidirectional_sequence_lstm'): it has a"
        " projection layer (CMSIS-NN's arm_lstm_unidirectional_s8 has none)",
    ),
    "cifg": (
        1,
        -1,
        "operator 0 UNIDIRECTIONAL_SEQUENCE_LSTM (output 'tfl.unidirectional_sequence_lstm'): it couples the"
        " input and forget gates (CIFG: no input gate weights); CMSIS-NN's kernel needs all four gates",
    ),
}


@pytest.mark.parametrize("case", list(REFUSALS))
def test_what_cmsis_nns_lstm_lacks_is_refused_naming_the_operator(case: str, tmp_path: Path) -> None:
    position, tensor, why = REFUSALS[case]
    path = tmp_path / "lstm.tflite"
    path.write_bytes(tflm.with_operator_input(tflm.model("trained_lstm_int8").read_bytes(), position, tensor))
    with pytest.raises(ModelError) as error:
        pipeline.load_model(path)
    assert str(error.value) == f"{path}: 1 operator is not supported: {why}; re-convert the model with" + (
        " supported operators in their place (SUPPORTED_OPS.md)"
    )


def test_the_lstm_state_is_declared_outside_the_arena_and_counted(tmp_path: Path) -> None:
    """mnist_lstm (batch 1, 20 units): int8 hidden + int16 cell state + two int16 work buffers, each
    aligned and zero-padded to the 16-byte alignment as every generated array (32 + 3 * 48 = 176 B of
    140 B used) - the layer's own static buffers, which model.h declares and the memory audit reads."""
    from quantcore.codegen.generate import generate
    from quantcore.targets.build import read_header

    qgraph = pipeline.quantize_imported(pipeline.load_model(tflm.model("trained_lstm_int8"))).qgraph
    generate(qgraph, tmp_path / "model", force=True)
    header = read_header(tmp_path / "model")
    assert header.state_bytes == 32 + 3 * 48
    source = (tmp_path / "model" / "model.c").read_text()
    aligned = "__attribute__((aligned(MODEL_ALIGNMENT)));"
    assert f"static int8_t l0_tfl_unidirectional_sequence_lstm_hidden_state[32] {aligned}" in source
    assert f"static int16_t l0_tfl_unidirectional_sequence_lstm_cell_state[24] {aligned}" in source


STEPS, SEQUENCES = 6, 3
"""The rebuilt LSTMs: 6 time steps of 3 sequences (batch > 1: what time-major changes)."""


@pytest.fixture(scope="module")
def lstm_layouts(tmp_path_factory: pytest.TempPathFactory) -> dict[bool, Path]:
    """mnist_lstm's LSTM alone, time-major and batch-major (same weights, scales and options)."""
    folder, raw = tmp_path_factory.mktemp("lstm"), tflm.model("trained_lstm_int8").read_bytes()
    paths = {}
    for time_major in (True, False):
        paths[time_major] = folder / f"lstm_time_major_{time_major}.tflite"
        paths[time_major].write_bytes(tflm.lstm_model(raw, STEPS, SEQUENCES, time_major))
    return paths


def test_a_time_major_lstm_matches_tflm_and_its_batch_major_twin(lstm_layouts: dict[bool, Path]) -> None:
    """Time-major (time, batch, features) runs the kernel with time_major set: TFLM's bytes over invokes
    in a row, and the batch-major model's on the same sequences laid out (batch, time, features); the
    float layer (fixpoint evaluate's reference) reads the layout the same way."""
    graphs = {tm: pipeline.quantize_imported(pipeline.load_model(p)).qgraph for tm, p in lstm_layouts.items()}
    assert [n.attr("params")["time_major"] for n in graphs[True].nodes] == [True]
    assert graphs[True].tensor(graphs[True].inputs[0]).shape == (STEPS, SEQUENCES, 28)
    rng = np.random.default_rng(13)
    xs = rng.integers(-128, 128, size=(INVOKES, STEPS, SEQUENCES, 28)).astype(np.int8)
    interpreter = tflm.interpreter(lstm_layouts[True])
    theirs = []
    for x in xs:  # the whole (time, batch, features) input each invoke
        interpreter.set_input(x, 0)
        interpreter.invoke()
        theirs.append(interpreter.get_output(0))
    ours = {
        tm: int8_exec.run(g, {g.inputs[0]: xs.reshape(-1, *xs.shape[2:]) if tm else _batch_major(xs)})
        for tm, g in graphs.items()
    }
    time_major = ours[True][graphs[True].outputs[0]].reshape(INVOKES, STEPS, SEQUENCES, 20)
    batch_major = ours[False][graphs[False].outputs[0]].reshape(INVOKES, SEQUENCES, STEPS, 20)
    assert np.array_equal(time_major, np.stack(theirs))
    assert np.unique(time_major).size >= 200
    assert np.array_equal(time_major, batch_major.transpose(0, 2, 1, 3))
    floats = {}
    for tm, path in lstm_layouts.items():
        model = pipeline.load_model(path)
        x = xs.astype(np.float64) * 0.00392157
        x = x.reshape(-1, *xs.shape[2:]) if tm else _batch_major(x)
        floats[tm] = float_exec.run(model.graph, {model.graph.inputs[0]: x})[model.graph.outputs[0]]
    assert np.array_equal(
        floats[True].reshape(INVOKES, STEPS, SEQUENCES, 20),
        floats[False].reshape(INVOKES, SEQUENCES, STEPS, 20).transpose(0, 2, 1, 3),
    )


def _batch_major(xs: np.ndarray) -> np.ndarray:
    """(invokes, time, batch, features) -> the batch-major model's rows: (invokes * batch, time, features)."""
    return xs.transpose(0, 2, 1, 3).reshape(-1, STEPS, xs.shape[3])


@pytest.mark.parametrize("time_major", [True, False], ids=["time_major", "batch_major"])
def test_a_16x8_lstm_runs_arm_lstm_unidirectional_s16_as_tflm_does(time_major: bool, tmp_path: Path) -> None:
    """TensorFlow's 16x8 LSTM (int16 input, output and hidden state, int64 biases; mnist_lstm's weights):
    arm_lstm_unidirectional_s16, TFLM's bytes over invokes in a row, rebuilt alike from the params JSON."""
    path = tmp_path / "lstm_16x8.tflite"
    raw = tflm.model("trained_lstm_int8").read_bytes()
    path.write_bytes(tflm.lstm_model(raw, STEPS, SEQUENCES, time_major, int16=True))
    model = pipeline.load_model(path)
    result = pipeline.quantize_imported(model)
    qgraph = result.qgraph
    assert [n.attr("kernel") for n in qgraph.nodes] == ["arm_lstm_unidirectional_s16"]
    lead = (STEPS, SEQUENCES) if time_major else (SEQUENCES, STEPS)
    xs = np.random.default_rng(16).integers(-32768, 32768, size=(INVOKES, *lead, 28)).astype(np.int16)
    interpreter = tflm.interpreter(path)
    theirs = []
    for x in xs:
        interpreter.set_input(x, 0)
        interpreter.invoke()
        theirs.append(interpreter.get_output(0))
    ours = int8_exec.run(qgraph, {qgraph.inputs[0]: xs.reshape(-1, *xs.shape[2:])})[qgraph.outputs[0]]
    assert ours.dtype == np.int16
    assert np.array_equal(ours.reshape(INVOKES, *lead, 20), np.stack(theirs))
    assert np.unique(ours).size >= 1000
    assert list(problems(result.document)) == []
    rebuilt = from_document(model.graph, result.document)
    again = int8_exec.run(rebuilt, {rebuilt.inputs[0]: xs.reshape(-1, *xs.shape[2:])})[rebuilt.outputs[0]]
    assert np.array_equal(again, ours)


def test_fixpoint_evaluate_feeds_tflm_a_whole_time_major_input_per_invoke(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A time-major 16x8 LSTM's input (6, 3, 28) is 6 samples of (3, 28) per inference: `fixpoint
    evaluate` compares 4 inferences' int16 outputs with TFLM's (each invoke given the whole input), and
    refuses a sample count that is not whole inferences, saying why (exit 2)."""
    from quantcore import cli

    path, params = tmp_path / "lstm_16x8.tflite", tmp_path / "p.json"
    raw = tflm.model("trained_lstm_int8").read_bytes()
    path.write_bytes(tflm.lstm_model(raw, STEPS, SEQUENCES, time_major=True, int16=True))
    assert cli.main(["quantize", str(path), "-o", str(params)]) == 0
    _, scale, zero_point = tflm.input_quantization(tflm.interpreter(path))
    q = np.random.default_rng(24).integers(-32768, 32768, size=(4 * STEPS, SEQUENCES, 28))
    data = tmp_path / "d.npy"
    np.save(data, tflm.real_values(q, scale, zero_point))
    capsys.readouterr()
    assert cli.main(["evaluate", str(path), str(params), "--data", str(data), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["tflm_mismatched_bytes"], report["tflm_compared_bytes"]) == (0, 4 * STEPS * SEQUENCES * 20)
    np.save(data, tflm.real_values(q[:-1], scale, zero_point))
    assert cli.main(["evaluate", str(path), str(params), "--data", str(data)]) == 2
    assert capsys.readouterr().err.strip() == (
        f"fixpoint evaluate: {data}: 23 samples; the model's input [6, 3, 28] takes 6 per inference (one"
        " per time step of a time-major recurrent input), so give a multiple of 6"
    )


def test_a_16x8_lstm_hidden_state_off_zero_is_refused(tmp_path: Path) -> None:
    """TensorFlow's 16x8 scheme is symmetric: an int16 hidden state of zero point 5 is refused, naming the
    operator (the firmware resets the state by bytes, which holds for zero point 0 only)."""
    raw = tflm.lstm_model(tflm.model("trained_lstm_int8").read_bytes(), STEPS, 1, False, int16=True)
    data = bytearray(raw)
    graph = tflite.Model.GetRootAsModel(raw, 0).Subgraphs(0)
    op = graph.Operators(0)
    for tensor in op.Inputs(tflm.LSTM_HIDDEN_INPUT), op.Outputs(0):  # the output is read at the hidden's
        quant = graph.Tensors(tensor).Quantization()
        struct.pack_into("<q", data, tflm.field_vector(quant, 10), 5)  # QuantizationParameters.zero_point[0]
    path = tmp_path / "lstm_16x8_zp.tflite"
    path.write_bytes(bytes(data))
    with pytest.raises(ModelError) as error:
        pipeline.load_model(path)
    assert str(error.value).endswith(
        "its int16 hidden state has zero point 5; TensorFlow's 16x8 scheme (and the firmware's reset of"
        " the state) takes int16 activations of zero point 0"
    )
