"""Names from converted models are long: the C identifiers made from them stay short, unique and
deterministic, and the full name is in the comment beside each definition."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from quantcore import pipeline
from quantcore.codegen.errors import CodegenError
from quantcore.codegen.generate import generate
from quantcore.codegen.lower import lower
from quantcore.data import DataSet
from quantcore.ir import Graph
from quantcore.templating import c_comment
from tests import needs

# TensorFlow joins the names of fused ops with ';': 279 characters, as in the converted models.
STEM = "StatefulPartitionedCall/sequential/block_1/conv2d/BiasAdd;StatefulPartitionedCall/sequential/"
LONG = [(STEM + f"block_1/conv2d_{i}/Conv2D;" + "x" * 300)[:279] for i in range(3)]


def _model() -> onnx.ModelProto:
    rng = np.random.default_rng(0)
    inits, nodes, x = [], [], "input"
    for i, name in enumerate(LONG):
        w = numpy_helper.from_array(
            rng.normal(0, 0.3, (4, 4 if i else 2, 3, 3)).astype(np.float32), f"{name}/w"
        )
        b = numpy_helper.from_array(rng.normal(0, 0.1, 4).astype(np.float32), f"{name}/b")
        inits += [w, b]
        y = f"{name}:0" if i < len(LONG) - 1 else "output"
        nodes.append(helper.make_node("Conv", [x, w.name, b.name], [y], name=name, pads=[1, 1, 1, 1]))
        x = y
    graph = helper.make_graph(
        nodes,
        "long",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 2, 5, 5])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 4, 5, 5])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model


@pytest.fixture(scope="module")
def qgraph(tmp_path_factory: pytest.TempPathFactory) -> Graph:
    path = tmp_path_factory.mktemp("long") / "long.onnx"
    onnx.save(_model(), path)
    loaded = pipeline.load_model(path)
    x = np.random.default_rng(1).normal(size=(8, 2, 5, 5)).astype(np.float32)
    options = pipeline.QuantizeOptions(equalize=False, bias_correction=False, int16_output=False)
    return pipeline.quantize(loaded, DataSet(x), options).qgraph


def _code_only(text: str) -> str:
    """The C without comments and string literals."""
    return re.sub(r'/\*.*?\*/|//[^\n]*|"(?:\\.|[^"\\])*"', " ", text, flags=re.DOTALL)


def test_identifiers_stay_within_63_characters_and_are_unique(qgraph: Graph, tmp_path: Path) -> None:
    generate(qgraph, tmp_path)
    texts = {p.name: p.read_text() for p in tmp_path.iterdir() if p.suffix in (".c", ".h")}
    tokens = {t for text in texts.values() for t in re.findall(r"[A-Za-z_]\w*", _code_only(text))}
    assert max(len(t) for t in tokens) <= 63
    plan = lower(qgraph)
    layer_symbols = [layer.symbol for layer in plan.layers]
    assert layer_symbols == [
        "l0_StatefulPartitionedCall_sequenti",
        "l1_StatefulPartitionedCall_sequenti",
        "l2_StatefulPartitionedCall_sequenti",
    ]
    tensor_symbols = [t.symbol for t in plan.tensors]
    assert tensor_symbols == [  # the two long names agree in their first 32 characters: a suffix
        "t_input", "t_StatefulPartitionedCall_sequen", "t_StatefulPartitionedCall_sequen_2", "t_output"
    ]  # fmt: skip
    constant_symbols = [c.symbol for c in plan.constants]
    assert len(set(constant_symbols)) == len(constant_symbols)
    assert "model_l0_StatefulPartitionedCall_sequenti_multiplier" in constant_symbols


def test_the_full_name_is_in_the_comment_beside_the_definition(qgraph: Graph, tmp_path: Path) -> None:
    generate(qgraph, tmp_path)
    model_c = (tmp_path / "model.c").read_text()
    for i, name in enumerate(LONG):
        assert f'/* Layer {i} "{c_comment(name)}": ' in model_c
        # shown as quantcore.display shortens names (NAME_MAX_CHARS), the distinguishing part kept
        assert f"block_1/conv2d_{i}/Conv2D;" in c_comment(name) and len(c_comment(name)) == 256
    data_c = (tmp_path / "model_data.c").read_text()
    assert f"/* {c_comment(LONG[1])} weights (4, 3, 3, 4) OHWI int8" in data_c


def test_the_symbols_are_deterministic(qgraph: Graph, tmp_path: Path) -> None:
    generate(qgraph, tmp_path / "a")
    generate(qgraph, tmp_path / "b")
    for name in ("model.h", "model.c", "model_data.c"):
        assert (tmp_path / "a" / name).read_text() == (tmp_path / "b" / name).read_text()


@needs.tool("gcc")
def test_the_sources_compile_with_63_significant_characters(qgraph: Graph, tmp_path: Path) -> None:
    from quantcore.targets import cmsis_nn

    try:
        include = cmsis_nn.locate().include_dir
    except Exception as exc:  # CmsisNnNotFound: say why and skip
        needs.absent(f"no CMSIS-NN checkout: {exc}")
    generate(qgraph, tmp_path)
    for source in ("model.c", "model_data.c"):
        done = subprocess.run(
            ["gcc", "-std=c99", "-pedantic", "-Wall", "-Werror", "-fsyntax-only", f"-I{include}", source],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == 0, done.stderr


def test_a_prefix_too_long_for_63_characters_is_refused(qgraph: Graph) -> None:
    with pytest.raises(CodegenError) as caught:
        lower(qgraph, prefix="p" * 25)
    assert str(caught.value) == (
        f"prefix {'p' * 25!r} has 25 characters; give at most 24 (it starts every generated identifier,"
        " which must stay within 63 characters)"
    )
