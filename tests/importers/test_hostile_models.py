"""Models built to hurt: the importer refuses each with one line naming the node and the limit, at once.

Each case once hung, exhausted memory or crashed `fixpoint quantize` (and `fixpoint check` and the
language server, which load models the same way, through pipeline.load_model): a constant Loop of
10^12 iterations, a ConstantOfShape of 6.4 GB, Range/Tile/Expand/Pad/broadcasts of billions of elements,
a MaxPool over a large constant (onnx.reference pools in Python), shape inference's data propagation
materialising a Range. Every test runs under `deadline`: a regression hangs no one, it fails.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from quantcore import limits, pipeline
from quantcore.errors import ModelError, UnsupportedError
from quantcore.importers import import_onnx
from quantcore.importers._fold import EVALUATION_OVERHEAD, Budget
from quantcore.importers._fold_cost import Cost
from quantcore.importers._onnx_load import name_nodes
from quantcore.ir import Op
from quantcore.limits import ACTIVATION_MAX_ELEMENTS, FOLD_MAX_OPERATIONS
from tests import needs

from .models import model, run_ort, value

I64 = np.int64
ADVICE = "remove the computation from the model, or store its result in the model as an initializer"
PER_TENSOR = f"Fixpoint computes at most {limits.FOLD_MAX_ELEMENTS} per tensor - {ADVICE}"
LOOP_ADVICE = "export the model with the loop unrolled, or with its result stored as a constant"


class Hang(Exception):
    """The code under test ran past its deadline."""


@contextmanager
def deadline(seconds: float) -> Iterator[None]:
    """Fail (raise Hang) when the block runs longer than `seconds`: SIGALRM interrupts Python code."""

    def expire(signum: int, frame: Any) -> None:
        raise Hang(f"still running after {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def refusal(raw: bytes, seconds: float = 20) -> str:
    """The message import_onnx refuses `raw` (named m.onnx) with, within `seconds`."""
    with deadline(seconds), pytest.raises(ModelError) as info:
        import_onnx(raw, name="m.onnx")
    message = str(info.value)
    assert "\n" not in message
    return message


def _x_plus(constant_nodes: list[onnx.NodeProto], value_name: str, inits: dict[str, Any]) -> bytes:
    """y = x + <value>: a float model whose only layer adds a constant computed by `constant_nodes`."""
    nodes = [*constant_nodes, helper.make_node("Add", ["x", value_name], ["y"], name="add")]
    return model(nodes, [value("x", [1, 4])], [value("y", [1, 4])], inits).SerializeToString()


def _body(nodes: list[onnx.NodeProto], prefix: str = "") -> onnx.GraphProto:
    """A Loop body carrying one [1, 4] float value: (i, cond, v) -> (cond, v')."""
    p = prefix
    return helper.make_graph(
        [helper.make_node("Identity", [f"{p}c_in"], [f"{p}c_out"]), *nodes],
        f"{p}body",
        [
            value(f"{p}i", [], TensorProto.INT64),
            value(f"{p}c_in", [], TensorProto.BOOL),
            value(f"{p}v_in", [1, 4]),
        ],
        [value(f"{p}c_out", [], TensorProto.BOOL), value(f"{p}v_out", [1, 4])],
    )


def _add_one(prefix: str = "") -> onnx.GraphProto:
    one = helper.make_node(
        "Constant", [], [f"{prefix}one"], value=numpy_helper.from_array(np.ones((1, 4), np.float32))
    )
    return _body(
        [one, helper.make_node("Add", [f"{prefix}v_in", f"{prefix}one"], [f"{prefix}v_out"])], prefix
    )


def _loop(trip: int | None, body: onnx.GraphProto, extra: dict[str, Any] | None = None) -> bytes:
    inits = {"c": np.array(True), "v0": np.zeros((1, 4), np.float32), **(extra or {})}
    if trip is not None:
        inits["M"] = np.array(trip, I64)
    loop = helper.make_node(
        "Loop", ["M" if trip is not None else "", "c", "v0"], ["v"], name="loop0", body=body
    )
    return _x_plus([loop], "v", inits)


# -- loops ----------------------------------------------------------------------------------------------


def test_loop_of_a_trillion_iterations_is_refused_before_it_runs() -> None:
    assert refusal(_loop(10**12, _add_one())) == (
        f"m.onnx: node 'loop0': Loop runs 1000000000000 iterations at import; Fixpoint folds at most"
        f" {limits.FOLD_MAX_LOOP_ITERATIONS} - {LOOP_ADVICE}"
    )


def test_loop_without_trip_count_is_unbounded_and_refused() -> None:
    assert refusal(_loop(None, _add_one())) == (
        "m.onnx: node 'loop0': Loop has no trip count (it runs until its condition turns false), so its"
        " cost at import cannot be bounded; Fixpoint folds loops of at most"
        f" {limits.FOLD_MAX_LOOP_ITERATIONS} iterations - {LOOP_ADVICE}"
    )


def test_loop_within_the_limit_is_folded_to_the_value_onnxruntime_computes() -> None:
    raw = _loop(limits.FOLD_MAX_LOOP_ITERATIONS, _add_one())
    with deadline(60):
        graph = import_onnx(raw, name="m.onnx")
    (add,) = graph.nodes
    assert add.op is Op.ADD
    x = np.arange(4, dtype=np.float32).reshape(1, 4)
    (expected,) = run_ort(onnx.load_from_string(raw), {"x": x})
    np.testing.assert_array_equal(x + graph.constant(add.inputs[1]), expected)
    assert float(graph.constant(add.inputs[1])[0, 0]) == limits.FOLD_MAX_LOOP_ITERATIONS


def test_nested_loops_share_one_iteration_budget() -> None:
    inner = helper.make_node("Loop", ["M2", "", "o_v_in"], ["o_v_out"], name="inner", body=_add_one())
    outer = helper.make_graph(
        [helper.make_node("Identity", ["o_c_in"], ["o_c_out"]), inner],
        "outer_body",
        [value("o_i", [], TensorProto.INT64), value("o_c_in", [], TensorProto.BOOL), value("o_v_in", [1, 4])],
        [value("o_c_out", [], TensorProto.BOOL), value("o_v_out", [1, 4])],
    )
    message = refusal(_loop(100, outer, {"M2": np.array(100, I64)}))
    # 100 outer iterations are admitted first, then 39 inner loops of 100: the 40th passes 4096.
    assert message == (
        "m.onnx: node 'loop0': in its subgraph, node 'inner': Loop runs 100 iterations at import (4000"
        f" already run); Fixpoint folds at most {limits.FOLD_MAX_LOOP_ITERATIONS} - {LOOP_ADVICE}"
    )


def test_a_huge_tensor_inside_a_loop_body_is_refused_naming_both_nodes() -> None:
    big = helper.make_node("ConstantOfShape", ["shape"], ["big"], name="big")
    total = helper.make_node("ReduceSum", ["big"], ["total"], keepdims=0)
    body = _body([big, total, helper.make_node("Add", ["v_in", "total"], ["v_out"])])
    message = refusal(_loop(1, body, {"shape": np.array([40000, 40000], I64)}))
    assert message == (
        "m.onnx: node 'loop0': in its subgraph, node 'big': ConstantOfShape would compute 1600000000 elements"
        f" at import; {PER_TENSOR}"
    )


def test_a_scan_is_checked_before_onnx_reference_builds_it() -> None:
    """onnx.reference's Scan loops over num_scan_inputs when the node is built: 8 * 10^12 here."""
    scan = helper.make_node(
        "Scan", ["v0", "xs"], ["v"], name="scan0", body=_add_one(), num_scan_inputs=8 * 10**12
    )
    inits = {"v0": np.zeros((1, 4), np.float32), "xs": np.zeros((3, 1), np.float32)}
    assert refusal(_x_plus([scan], "v", inits)) == (
        "m.onnx: node 'scan0': Scan cannot be computed at import: its num_scan_inputs 8000000000000 is not"
        " between 1 and its 2 inputs"
    )


def test_a_scan_of_too_many_iterations_is_refused() -> None:
    body = helper.make_graph(
        [helper.make_node("Add", ["s_in", "x_t"], ["s_out"])],
        "body",
        [value("s_in", [1]), value("x_t", [1])],
        [value("s_out", [1])],
    )
    scan = helper.make_node("Scan", ["s0", "xs"], ["s"], name="scan0", body=body, num_scan_inputs=1)
    inits = {"s0": np.zeros(1, np.float32), "xs": np.zeros((5000, 1), np.float32)}
    assert refusal(_x_plus([scan], "s", inits)) == (
        f"m.onnx: node 'scan0': Scan runs 5000 iterations at import; Fixpoint folds at most"
        f" {limits.FOLD_MAX_LOOP_ITERATIONS} - {LOOP_ADVICE}"
    )


# -- tensors too large to compute -----------------------------------------------------------------------


def _sum_of(node: onnx.NodeProto, inits: dict[str, Any]) -> bytes:
    total = helper.make_node("ReduceSum", [node.output[0]], ["total"], name="sum", keepdims=0)
    cast = helper.make_node("Cast", ["total"], ["totalf"], name="cast", to=TensorProto.FLOAT)
    return _x_plus([node, total, cast], "totalf", inits)


@pytest.mark.parametrize(
    ("node", "inits", "elements"),
    [
        (
            helper.make_node("ConstantOfShape", ["s"], ["c"], name="n"),
            {"s": np.array([1, 1, 40000, 40000], I64)},
            1_600_000_000,
        ),
        (
            helper.make_node("Range", ["a", "b", "d"], ["c"], name="n"),
            {"a": np.array(0, I64), "b": np.array(10**12, I64), "d": np.array(1, I64)},
            10**12,
        ),
        (
            helper.make_node("Range", ["a", "b", "d"], ["c"], name="n"),
            {"a": np.array(0.0, np.float32), "b": np.array(1e9, np.float32), "d": np.array(0.5, np.float32)},
            2 * 10**9,
        ),
        (
            helper.make_node("Tile", ["t", "r"], ["c"], name="n"),
            {"t": np.ones((1, 4), np.float32), "r": np.array([10**9, 1], I64)},
            4 * 10**9,
        ),
        (
            helper.make_node("Expand", ["t", "s"], ["c"], name="n"),
            {"t": np.ones((1, 1), np.float32), "s": np.array([40000, 40000], I64)},
            1_600_000_000,
        ),
        (
            helper.make_node("Pad", ["t", "p"], ["c"], name="n"),
            {"t": np.ones((1, 4), np.float32), "p": np.array([0, 0, 40000, 40000], I64)},
            40001 * 40004,
        ),
        (
            helper.make_node("Add", ["a", "b"], ["c"], name="n"),
            {"a": np.ones((40000, 1), np.float32), "b": np.ones((1, 40000), np.float32)},
            1_600_000_000,
        ),
        (
            helper.make_node("OneHot", ["i", "depth", "vals"], ["c"], name="n"),
            {"i": np.zeros(4, I64), "depth": np.array(10**10, I64), "vals": np.array([0.0, 1.0], np.float32)},
            4 * 10**10,
        ),
    ],
    ids=["ConstantOfShape", "Range", "Range-float", "Tile", "Expand", "Pad", "broadcast", "OneHot"],
)
def test_outputs_beyond_the_tensor_limit_are_refused(
    node: onnx.NodeProto, inits: dict[str, Any], elements: int
) -> None:
    assert refusal(_sum_of(node, inits)) == (
        f"m.onnx: node 'n': {node.op_type} would compute {elements} elements at import; {PER_TENSOR}"
    )


def test_shape_inference_does_not_materialise_a_range_before_the_budget_sees_it() -> None:
    """ONNX's data propagation once built a Range of 10^9 values (20 GB) inside shape inference, before
    folding could refuse it: Shape of a Range is exactly what it propagates."""
    rng = helper.make_node("Range", ["a", "b", "d"], ["r"], name="n")
    shape = helper.make_node("Shape", ["r"], ["s"], name="shape")
    cast = helper.make_node("Cast", ["s"], ["sf"], name="cast", to=TensorProto.FLOAT)
    inits = {"a": np.array(0, I64), "b": np.array(10**9, I64), "d": np.array(1, I64)}
    start = time.monotonic()
    message = refusal(_x_plus([rng, shape, cast], "sf", inits), seconds=10)
    assert message.startswith("m.onnx: node 'n': Range would compute 1000000000 elements")
    assert time.monotonic() - start < 10


def test_work_beyond_the_operations_limit_is_refused() -> None:
    ones = numpy_helper.from_array(np.ones(1, np.float32))
    fill = helper.make_node("ConstantOfShape", ["s"], ["a"], name="fill", value=ones)
    matmul = helper.make_node("MatMul", ["a", "a"], ["m"], name="mm")
    total = helper.make_node("ReduceSum", ["m"], ["t"], keepdims=0)
    message = refusal(_x_plus([fill, matmul, total], "t", {"s": np.array([2048, 2048], I64)}))
    n = 2048 * 2048
    fill_cost = 2 + n + EVALUATION_OVERHEAD  # its 2-element input read, its output written
    matmul_cost = 2 * n + n + n * 2048 + EVALUATION_OVERHEAD  # inputs read, output written, multiply-adds
    assert message == (
        f"m.onnx: node 'mm': MatMul would bring the work of computing constants at import to"
        f" {fill_cost + matmul_cost} operations; Fixpoint spends at most {FOLD_MAX_OPERATIONS} on one model -"
        f" {ADVICE}"
    )


def test_a_max_pool_over_a_large_constant_is_refused_before_onnx_reference_loops_over_it() -> None:
    fill = helper.make_node(
        "ConstantOfShape", ["s"], ["a"], name="fill", value=numpy_helper.from_array(np.ones(1, np.float32))
    )
    pool = helper.make_node("MaxPool", ["a"], ["p"], name="pool", kernel_shape=[9, 9])
    total = helper.make_node("ReduceSum", ["p"], ["t"], keepdims=0)
    message = refusal(_x_plus([fill, pool, total], "t", {"s": np.array([1, 1, 512, 512], I64)}), seconds=10)
    assert message.startswith(
        "m.onnx: node 'pool': MaxPool would bring the work of computing constants at import"
    )


def test_an_operator_whose_cost_cannot_be_bounded_is_not_run_on_constants() -> None:
    resize = helper.make_node("Resize", ["t", "", "scales"], ["c"], name="n")
    inits = {"t": np.ones((1, 4), np.float32), "scales": np.array([1.0, 1.0], np.float32)}
    assert refusal(_x_plus([resize], "c", inits)) == (
        "m.onnx: node 'n': Resize on constant inputs is not computed at import: Fixpoint cannot bound its"
        " cost before it runs - store its result in the model as an initializer"
    )


def test_constants_that_do_not_broadcast_are_refused_with_their_shapes() -> None:
    add = helper.make_node("Add", ["a", "b"], ["c"], name="n")
    inits = {"a": np.ones(3, np.float32), "b": np.ones(4, np.float32)}
    assert refusal(_x_plus([add], "c", inits)) == (
        "m.onnx: node 'n': Add cannot be computed at import: its input shapes (3,) and (4,) do not broadcast"
    )


def test_the_total_of_all_folds_is_limited() -> None:
    budget = Budget()
    half = Cost(limits.FOLD_MAX_TOTAL_ELEMENTS // 2, limits.FOLD_MAX_TOTAL_ELEMENTS // 2, 0)
    budget.admit("a", "Tile", Cost(limits.FOLD_MAX_ELEMENTS, half.total, 0))
    budget.admit("b", "Tile", Cost(limits.FOLD_MAX_ELEMENTS, half.total, 0))
    with pytest.raises(Exception) as info:
        budget.admit("c", "Tile", Cost(1, 1, 0))
    assert str(info.value) == (
        f"Tile would bring the elements computed at import to {limits.FOLD_MAX_TOTAL_ELEMENTS + 1}; Fixpoint"
        f" computes at most {limits.FOLD_MAX_TOTAL_ELEMENTS} for one model - {ADVICE}"
    )
    assert budget.refused is info.value and budget.elements == limits.FOLD_MAX_TOTAL_ELEMENTS


def test_an_activation_no_microcontroller_holds_is_refused_before_onnxruntime_allocates_it() -> None:
    """A Pad of an activation is a layer, not a fold: onnxruntime would allocate its 6.4 GB output for
    every calibration sample."""
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], name="conv"),
        helper.make_node("Pad", ["c", "p"], ["d"], name="pad"),
        helper.make_node("GlobalAveragePool", ["d"], ["y"], name="gap"),
    ]
    inits = {"w": np.ones((1, 1, 1, 1), np.float32), "p": np.array([0, 0, 0, 0, 0, 0, 40000, 40000], I64)}
    raw = model(nodes, [value("x", [1, 1, 8, 8])], [value("y", None)], inits).SerializeToString()
    assert refusal(raw) == (
        "m.onnx: node 'pad': tensor 'd' of shape (1, 1, 40008, 40008) has 1600640064 elements; Fixpoint takes"
        f" activations of at most {ACTIVATION_MAX_ELEMENTS} (no microcontroller holds more) - check the"
        " model's shapes"
    )


def _aborting_model() -> bytes:
    """Expand to the shape [-1] then Slice: onnx's shape inference (libstdc++ assertions on) calls
    std::clamp(start, 0, dim - 1) with dim -1 and aborts the process (onnx issue 8481; found by fuzzing)."""
    nodes = [
        helper.make_node("Expand", ["c", "c"], ["e"], name="expand"),
        helper.make_node("Slice", ["e", "c", "c"], ["s"], name="slice"),
        helper.make_node("Cast", ["s"], ["sf"], name="cast", to=TensorProto.FLOAT),
    ]
    return _x_plus(nodes, "sf", {"c": np.array([-1], I64)})


ABORTED = (
    "reading this model was killed by SIGABRT (onnx's C++ code aborts on some malformed models, e.g. a"
    " negative dimension); check the model's shapes, or re-export it"
)


def test_a_model_that_aborts_onnx_is_a_message_not_the_end_of_the_process() -> None:
    assert refusal(_aborting_model()) == f"m.onnx: {ABORTED}"


def test_pipeline_load_model_survives_a_model_that_aborts_onnx(tmp_path: Path) -> None:
    path = tmp_path / "abort.onnx"
    path.write_bytes(_aborting_model())
    with deadline(60), pytest.raises(ModelError) as info:
        pipeline.load_model(path)
    assert str(info.value) == f"{path}: {ABORTED}"


def test_errors_and_results_cross_from_the_import_process_intact(tmp_path: Path) -> None:
    raw = model(
        [helper.make_node("Einsum", ["x"], ["y"], name="e", equation="ij->ij")],
        [value("x", [1, 4])],
        [value("y", [1, 4])],
    )
    with pytest.raises(UnsupportedError) as info:
        import_onnx(raw.SerializeToString(), name="m.onnx")
    assert (info.value.path, info.value.node, info.value.op_type) == ("m.onnx", "e", "Einsum")
    assert info.value.reason.startswith("CMSIS-NN has no einsum kernel")
    graph = import_onnx(_loop(3, _add_one()), name="m.onnx")
    assert graph.meta["source"] == "m.onnx" and [n.op for n in graph.nodes] == [Op.ADD]


# -- the same refusals wherever models are loaded -------------------------------------------------------


def test_pipeline_load_model_refuses_the_loop_before_onnxruntime_sees_it(tmp_path: Path) -> None:
    """`fixpoint check` and the language server load models through pipeline.load_model."""
    path = tmp_path / "loop.onnx"
    path.write_bytes(_loop(10**12, _add_one()))
    with deadline(20), pytest.raises(ModelError, match=r"node 'loop0': Loop runs 1000000000000 iterations"):
        pipeline.load_model(path)


def test_fixpoint_quantize_refuses_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "cos.onnx").write_bytes(
        _sum_of(
            helper.make_node("ConstantOfShape", ["s"], ["c"], name="cos"),
            {"s": np.array([1, 1, 40000, 40000], I64)},
        )
    )
    np.save(tmp_path / "calib.npy", np.ones((2, 1, 4), np.float32))
    command = [
        sys.executable,
        "-m",
        "quantcore.cli",
        "quantize",
        "cos.onnx",
        "--calib",
        "calib.npy",
        "-o",
        "p.json",
    ]
    run = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False)
    assert run.returncode != 0 and "Traceback" not in run.stderr and not (tmp_path / "p.json").exists()
    assert (
        f"cos.onnx: node 'cos': ConstantOfShape would compute 1600000000 elements at import; {PER_TENSOR}"
        in run.stderr
    )


# -- files ----------------------------------------------------------------------------------------------


def _gemm_with_external(location: str, **extra: int) -> onnx.ModelProto:
    w = numpy_helper.from_array(np.ones((2, 4), np.float32), "w")
    w.ClearField("raw_data")
    w.data_location = TensorProto.EXTERNAL
    for key, item in (("location", location), *((k, str(v)) for k, v in extra.items())):
        entry = w.external_data.add()
        entry.key, entry.value = key, item
    graph = helper.make_graph(
        [helper.make_node("Gemm", ["x", "w"], ["y"], name="fc", transB=1)],
        "g",
        [value("x", [1, 4])],
        [value("y", [1, 2])],
        [w],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _external_refusal(folder: Path, location: str, **extra: int) -> str:
    onnx.save(_gemm_with_external(location, **extra), folder / "model.onnx")
    with deadline(20), pytest.raises(ModelError) as info:
        import_onnx(folder / "model.onnx")
    return str(info.value).removeprefix(f"{folder / 'model.onnx'}: ")


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    inside = tmp_path / "model"
    inside.mkdir()
    np.ones((2, 4), np.float32).tofile(inside / "w.bin")
    np.ones((2, 4), np.float32).tofile(tmp_path / "outside.bin")
    return inside


KEEP = "Fixpoint reads external data only from files in the model's own folder"


def test_external_data_outside_the_folder_is_refused(folder: Path) -> None:
    assert _external_refusal(folder, "../outside.bin") == (
        f"tensor 'w': external data location '../outside.bin' leads outside the model's folder; {KEEP}"
    )
    absolute = str(folder.parent / "outside.bin")
    assert _external_refusal(folder, absolute) == (
        f"tensor 'w': external data location {absolute!r} is an absolute path; {KEEP}"
    )


def test_external_data_is_found_wherever_the_model_hides_a_tensor(folder: Path) -> None:
    """A function's default attribute is a tensor too; onnxruntime would read its data relative to the
    current folder when run from bytes."""
    hidden = numpy_helper.from_array(np.ones(4, np.float32), "hidden")
    hidden.ClearField("raw_data")
    hidden.data_location = TensorProto.EXTERNAL
    entry = hidden.external_data.add()
    entry.key, entry.value = "location", "../outside.bin"
    function = helper.make_function(
        "custom", "F", ["a"], ["b"], [helper.make_node("Identity", ["a"], ["b"])], []
    )
    function.attribute_proto.append(helper.make_attribute("bias", hidden))
    m = model([helper.make_node("Relu", ["x"], ["y"], name="r")], [value("x", [1, 4])], [value("y", [1, 4])])
    m.functions.append(function)
    onnx.save(m, folder / "model.onnx")
    with pytest.raises(ModelError) as info:
        import_onnx(folder / "model.onnx")
    assert str(info.value) == (
        f"{folder / 'model.onnx'}: tensor 'hidden': external data location '../outside.bin' leads outside the"
        f" model's folder; {KEEP}"
    )


def test_external_data_through_a_symlink_out_of_the_folder_is_refused(folder: Path) -> None:
    (folder / "link.bin").symlink_to("../outside.bin")
    (folder / "zero.bin").symlink_to("/dev/zero")
    for name in ("link.bin", "zero.bin"):
        assert _external_refusal(folder, name) == (
            f"tensor 'w': external data location {name!r} leads outside the model's folder through a symlink;"
            f" {KEEP}"
        )


def test_external_data_missing_or_special_or_short_is_refused(folder: Path) -> None:
    assert (
        _external_refusal(folder, "w2.bin")
        == "tensor 'w': external data file 'w2.bin' not found next to model.onnx"
    )
    os.mkfifo(folder / "pipe.bin")
    assert _external_refusal(folder, "pipe.bin") == (
        "tensor 'w': external data file 'pipe.bin' is a FIFO (named pipe), not a regular file; Fixpoint reads"
        " only regular files"
    )
    assert _external_refusal(folder, "w.bin", offset=16, length=32) == (
        "tensor 'w': external data bytes 16..48 are outside the 32 bytes of 'w.bin'"
    )


def test_external_data_is_read_once_and_onnxruntime_runs_the_checked_bytes(folder: Path) -> None:
    path = folder / "conv.onnx"
    w = np.arange(36, dtype=np.float32).reshape(4, 1, 3, 3) / 36
    conv = helper.make_node("Conv", ["x", "w"], ["y"], name="conv", pads=[1, 1, 1, 1])
    m = model([conv], [value("x", [1, 1, 8, 8])], [value("y", [1, 4, 8, 8])], {"w": w})
    inline = m.SerializeToString()  # onnx.save moves the weights out of `m`
    onnx.save(m, path, save_as_external_data=True, location="conv.bin", size_threshold=0)
    loaded = pipeline.load_model(path)
    (folder / "conv.bin").unlink()  # onnxruntime must not need it: it was read once, checked, inlined
    x = np.linspace(-1, 1, 64, dtype=np.float32).reshape(1, 1, 8, 8)
    (expected,) = run_ort(onnx.load_from_string(inline), {"x": x})
    np.testing.assert_array_equal(
        loaded.float_model.activations({"x": x})["y"], expected.transpose(0, 2, 3, 1)
    )


def test_the_model_path_is_read_only_if_it_is_a_regular_file(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe.onnx")
    cases = {
        tmp_path
        / "pipe.onnx": "is a FIFO (named pipe), not a regular file; Fixpoint reads only regular files",
        tmp_path: "is a directory, not a regular file; Fixpoint reads only regular files",
        Path("/dev/zero"): "is a character device, not a regular file; Fixpoint reads only regular files",
        tmp_path / "absent.onnx": "cannot read the model file: No such file or directory",
    }
    for path, problem in cases.items():
        with deadline(10), pytest.raises(ModelError) as info:
            import_onnx(path)
        assert str(info.value) == f"{path}: {problem}"


def test_a_model_larger_than_the_limit_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "big.onnx"
    path.write_bytes(b"\0" * 2048)
    monkeypatch.setattr(limits, "MODEL_MAX_BYTES", 1024)
    with pytest.raises(ModelError) as info:
        import_onnx(path)
    assert str(info.value) == f"{path}: is larger than Fixpoint reads (2048 bytes; the limit is 1024 bytes)"


def test_sparse_initializers_are_refused_before_anything_densifies_them() -> None:
    values = numpy_helper.from_array(np.ones(1, np.float32), "w")
    indices = numpy_helper.from_array(np.zeros(1, I64), "w_indices")
    sparse = helper.make_sparse_tensor(values, indices, [40000, 40000])
    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "x"], ["y"], name="add")],
        "g",
        [value("x", [1, 4])],
        [value("y", [1, 4])],
        sparse_initializer=[sparse],
    )
    raw = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()
    assert refusal(raw) == (
        "m.onnx: tensor 'w' is stored sparse; Fixpoint reads dense tensors only - save the model with dense"
        " initializers"
    )


# -- messages -------------------------------------------------------------------------------------------


def test_text_that_is_not_utf8_is_refused_where_the_file_is_read() -> None:
    """protobuf hands out such a name as bytes, which failed (UnicodeDecodeError) wherever it was used."""
    raw = model(
        [helper.make_node("Relu", ["x"], ["y"], name="QQQQ")], [value("x", [1, 4])], [value("y", [1, 4])]
    )
    corrupt = raw.SerializeToString().replace(b"QQQQ", b"\x80\x81QQ")
    assert (
        refusal(corrupt)
        == "m.onnx: holds text that is not UTF-8 (the name of a NodeProto); the file is corrupt"
    )


def test_hostile_names_are_shortened_and_kept_on_one_line() -> None:
    name = "evil\nfixpoint quantize: all good\x1b[2J" + "n" * 10_000
    node = helper.make_node("Einsum", ["x"], ["y"], name=name, equation="ij->ij")
    raw = model([node], [value("x", [1, 4])], [value("y", [1, 4])]).SerializeToString()
    with pytest.raises(UnsupportedError) as info:
        import_onnx(raw, name="m.onnx")
    message = str(info.value)
    assert "\n" not in message and "\x1b" not in message and len(message) < 600
    # shortened to 256 characters (127 first, "...", 126 last), then the two controls written out
    shown = "evil<U+000A>fixpoint quantize: all good<U+001B>[2J" + "n" * 91 + "..." + "n" * 126
    assert message.startswith(f"m.onnx: node {shown!r}: Einsum is not supported: ")


def test_a_model_of_two_inputs_and_outputs_is_refused_with_the_reason(tmp_path: Path) -> None:
    nodes = [
        helper.make_node("Relu", ["a"], ["y"], name="r1"),
        helper.make_node("Relu", ["b"], ["z"], name="r2"),
    ]
    path = tmp_path / "two.onnx"
    path.write_bytes(
        model(
            nodes, [value("a", [1, 4]), value("b", [1, 4])], [value("y", [1, 4]), value("z", [1, 4])]
        ).SerializeToString()
    )
    with pytest.raises(ModelError) as info:
        pipeline.load_model(path)
    assert str(info.value) == (
        f"{path}: The model has 2 inputs and 2 outputs. The generated firmware runs a network of one input"
        " and one output (its _input() and _output() each point at one tensor), and calibration data is one"
        " array: export the model with a single input and a single output (concatenate several outputs into"
        " one)."
    )


def test_a_kernel_constraint_says_what_the_node_has(tmp_path: Path) -> None:
    path = tmp_path / "relu.onnx"
    path.write_bytes(
        model(
            [helper.make_node("Relu", ["x"], ["y"], name="r")], [value("x", [1, 4])], [value("y", [1, 4])]
        ).SerializeToString()
    )
    with pytest.raises(UnsupportedError) as info:
        pipeline.load_model(path)
    assert str(info.value).startswith(
        f"{path}: node 'r': relu is not supported: Its input 'x' is the graph's input, not a layer's output."
        " A RELU or CLIP must be fused into the layer that produces its input"
    )


def test_naming_many_duplicate_nodes_takes_linear_time() -> None:
    nodes = [helper.make_node("Identity", [f"v{i}"], [f"v{i + 1}"], name="same") for i in range(50_000)]
    proto = helper.make_model(helper.make_graph(nodes, "g", [value("v0", [1])], [value("v50000", [1])]))
    with deadline(10):
        name_nodes(proto)
    names = [n.name for n in proto.graph.node]
    assert (
        names[:3] == ["same", "same_1", "same_2"] and names[-1] == "same_49999" and len(set(names)) == 50_000
    )


def test_a_checkpoint_that_is_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    needs.module("torch", "torch is an optional extra: pip install 'fixpoint[torch]'")
    from quantcore.importers import load_torch_checkpoint

    os.mkfifo(tmp_path / "weights.pt")
    with deadline(20), pytest.raises(ModelError) as info:
        load_torch_checkpoint(str(tmp_path / "weights.pt"))
    assert str(info.value) == (
        f"{tmp_path / 'weights.pt'}: is a FIFO (named pipe), not a regular file; Fixpoint reads only regular"
        " files"
    )
