"""Fuzzing the quant-params JSON reader (issue 17): whatever the text, `loads`/`load` return a document or
raise QuantParamsError - never another exception - and a document they accept, applied to its model, is
refused (if at all) with a QuantcoreError.

Inputs: (a) random JSON values, (b) the golden residual.params.json (what `fixpoint quantize` writes)
changed at random paths to random or near-miss values, (c) random text and bytes. The default example
counts keep each property to a few seconds; FIXPOINT_FUZZ_EXAMPLES=N runs N examples of each (a longer
pass for CI with a time budget).
"""

from __future__ import annotations

import contextlib
import copy
import functools
import json
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import onnx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from quantcore import pipeline
from quantcore.errors import QuantcoreError
from quantcore.ir import Graph
from quantcore.quantize import consistency, params_checks, params_json
from quantcore.quantize.document import from_document
from quantcore.quantize.params_json import QuantParamsError, load, loads, validate
from tests.fuzzing import fuzz
from tests.onnx_models import residual_cnn

GOLDEN = Path(__file__).resolve().parents[1] / "codegen" / "golden" / "residual" / "residual.params.json"


SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=12)
)
JSON_VALUES = st.recursive(
    SCALARS,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=16,
)


def _golden() -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(GOLDEN.read_text(encoding="utf-8"))
    return doc


GOLDEN_DOC = _golden()
NAMES = sorted(GOLDEN_DOC["tensors"]) + [layer["name"] for layer in GOLDEN_DOC["layers"]]
KERNELS = sorted(
    {k for kernels in consistency.KERNELS.values() for k in kernels if k} | {"arm_nonexistent_s8"}
)


def _near(value: Any) -> list[Any]:
    """Values a hand edit makes from `value`: off by one, scaled, sign flipped, another name or kernel."""
    if isinstance(value, bool):
        return [not value]
    if isinstance(value, int):  # mostly plausible edits (off by one), some past a range
        return [value + 1, value - 1, value + 1, value - 1, -value, 0, value * 2, 2**31, 128, -129]
    if isinstance(value, float):
        return [value * 1.0000001, value / 3, value * 2, value * 1.0000001, -value, 1e-300, 1e31]
    if isinstance(value, str):
        return [*NAMES, *KERNELS, "", value + "x", "../../../etc/passwd", "/abs.onnx"]
    if isinstance(value, list):
        return [[], value[:-1], [*value, *value[-1:]], value[::-1]]
    return [None, {}, [], "x", 0]


def _leaves(node: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    if isinstance(node, dict):
        return [leaf for key, value in node.items() for leaf in _leaves(value, (*path, key))]
    if isinstance(node, list) and node:
        return [leaf for index, value in enumerate(node) for leaf in _leaves(value, (*path, index))]
    return [path]


LEAVES = _leaves(GOLDEN_DOC)
"""Every scalar of the golden document: a hand edit mostly changes one number or name."""

Pick = Callable[[list[Any] | None], Any]
"""Chooses a new value: one of the list given (a near miss), or any JSON value for None."""


def mutate(rnd: random.Random, pick: Pick) -> dict[str, Any]:
    """The golden document with 1-3 changes: a near-miss value at a leaf (a hand edit, which often gets
    past the schema to the consistency checks), or any value, a deletion or an addition anywhere; the
    places picked uniformly by `rnd`."""
    doc = copy.deepcopy(GOLDEN_DOC)
    for _ in range(rnd.choice([1, 1, 1, 2, 3])):
        if rnd.random() < 0.6:
            *parents, key = rnd.choice(LEAVES)
            parent = _at(doc, parents)
            if parent is not None and key in (parent if isinstance(parent, dict) else range(len(parent))):
                parent[key] = pick(_near(parent[key]))
        else:
            _structural(rnd, pick, doc)
    return doc


@st.composite
def mutated(draw: st.DrawFn) -> dict[str, Any]:
    """`mutate` under hypothesis: it draws the seed of the places (it would favour the first keys if it
    drew them itself) and every new value."""
    rnd = random.Random(draw(st.integers(0, 2**64), label="seed"))
    return mutate(rnd, lambda near: draw(JSON_VALUES if near is None else st.sampled_from(near)))


def _at(doc: Any, path: list[Any]) -> Any:
    for part in path:  # an earlier change may have removed or replaced the way there
        if (isinstance(doc, dict) and part in doc) or (
            isinstance(doc, list) and isinstance(part, int) and part < len(doc)
        ):
            doc = doc[part]
        else:
            return None
    return doc if isinstance(doc, (dict, list)) else None


def _structural(rnd: random.Random, pick: Pick, doc: dict[str, Any]) -> None:
    parent: Any = None
    key: Any = None
    node: Any = doc
    for _depth in range(rnd.randint(1, 6)):
        if isinstance(node, dict) and node:
            choice = rnd.choice(sorted(node))
        elif isinstance(node, list) and node:
            choice = rnd.randrange(len(node))
        else:
            break
        parent, key, node = node, choice, node[choice]
    action = rnd.choice(["random", "delete", "add"])
    if action == "delete":
        del parent[key]
    elif action == "add" and isinstance(node, dict):
        node[rnd.choice(["overrides", "axis", "bias", "extra", "activation"])] = pick(None)
    else:
        parent[key] = pick(None)


def _loads_or_refuses(text: str) -> Any:
    try:
        return loads(text, "fuzz.params.json")
    except QuantParamsError as exc:
        assert str(exc).startswith("fuzz.params.json: ")
        return None


@fuzz(200)
@given(JSON_VALUES)
def test_any_json_value_is_a_document_or_a_quant_params_error(value: Any) -> None:
    problems = validate(value)
    assert all(isinstance(p, params_json.Problem) for p in problems)
    assert _loads_or_refuses(json.dumps(value)) is None  # no random value is a whole document


@pytest.fixture(scope="module")
def residual(tmp_path_factory: pytest.TempPathFactory) -> Graph:
    path = tmp_path_factory.mktemp("fuzz") / "residual.onnx"
    onnx.save(residual_cnn(), path)
    return pipeline.load_model(path).graph


@fuzz(40)
@given(mutated())
def test_a_mutated_document_is_read_or_refused_and_never_crashes_its_user(
    residual: Graph, doc: dict[str, Any]
) -> None:
    validate(doc)  # returns problems for Python values too (NaN, non-string keys)
    loaded = _loads_or_refuses(json.dumps(doc))
    if loaded is None:
        return
    with contextlib.suppress(QuantcoreError):  # what evaluate, generate, verify do with what load() accepts
        from_document(residual, loaded)


@fuzz(200)
@given(
    st.text(max_size=200)
    | st.builds(
        lambda head, tail: head + tail,
        st.sampled_from(['{"format":', "[", '{"a": 1e999', "-", '"\\ud800"', "9" * 5000]),
        st.text(max_size=40),
    )
)
def test_random_text_is_a_document_or_a_quant_params_error(text: str) -> None:
    assert _loads_or_refuses(text) is None


@fuzz(100)
@given(st.binary(max_size=300))
def test_random_bytes_on_disk_are_a_document_or_a_quant_params_error(
    tmp_path_factory: pytest.TempPathFactory, data: bytes
) -> None:
    path = tmp_path_factory.mktemp("bytes") / "p.params.json"
    path.write_bytes(data)
    with pytest.raises(QuantParamsError):
        load(path)


def _plain_pick(rnd: random.Random, near: list[Any] | None) -> Any:
    return rnd.choice(near if near is not None else [None, [], {}, "x", -1, 1.5])


def test_the_mutations_reach_every_stage() -> None:
    """The fuzzer is worth its time only if its documents get past the schema: a fixed sample of its
    mutations (seeds 0-59, without hypothesis, whose draws depend on what else is imported) must reach
    the consistency stage (and be refused there) and sometimes load."""
    stages: dict[str, int] = {}
    for seed in range(60):
        rnd = random.Random(seed)
        doc = mutate(rnd, functools.partial(_plain_pick, rnd))
        stage = params_checks.first_failing_stage(doc)[0] or "accepted"
        stages[stage] = stages.get(stage, 0) + 1
    assert {"schema", "semantic", "consistency", "accepted"} <= set(stages), stages
