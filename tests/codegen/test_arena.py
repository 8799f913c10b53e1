"""The activation arena planner: buffers alive at the same time never share bytes, offsets are aligned,
aliases share their source's bytes, and the plan reaches the lower bound where one is reachable."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest

from quantcore.codegen.arena import Lifetime, alias_roots, lifetimes, place, plan_arena, tensor_bytes
from quantcore.conformance.cases import VectorCase
from quantcore.conformance.network_graph import network_graph
from quantcore.ir import Graph
from tests import needs
from tests.onnx_models import residual_cnn


def _assert_no_live_overlap(spans: list[Lifetime], offsets: dict[str, int], alignment: int) -> None:
    for a in spans:
        assert offsets[a.name] % alignment == 0, a
        for b in spans:
            if a.name < b.name and a.overlaps(b):
                a_lo, b_lo = offsets[a.name], offsets[b.name]
                assert a_lo + a.size <= b_lo or b_lo + b.size <= a_lo, (a, b, a_lo, b_lo)


def test_greedy_by_size_places_largest_first_at_the_lowest_free_offset() -> None:
    spans = [
        Lifetime("a", 100, 0, 1),  # a and b are alive together at step 1
        Lifetime("b", 40, 1, 2),
        Lifetime("c", 60, 2, 3),  # c outlives a: it may reuse a's bytes, not b's
        Lifetime("d", 10, 3, 3),
    ]
    offsets = place(spans, alignment=16)
    # a (largest) at 0; c (60) collides only with b: b is not placed yet, so c takes 0;
    # b (40) is alive with a (0..100) and c (0..60): first aligned gap is 112; d is alive with c only.
    assert offsets == {"a": 0, "c": 0, "b": 112, "d": 64}


def test_alignment_one_packs_tightly_and_a_bad_alignment_is_refused() -> None:
    spans = [Lifetime("a", 5, 0, 1), Lifetime("b", 3, 0, 1), Lifetime("c", 7, 2, 2)]
    assert place(spans, alignment=1) == {"a": 0, "b": 5, "c": 0}
    with pytest.raises(ValueError, match="alignment must be positive"):
        place(spans, alignment=0)


@pytest.mark.parametrize("alignment", [1, 4, 16, 32])
def test_random_lifetimes_never_overlap_in_time_and_space(alignment: int) -> None:
    rng = np.random.default_rng(20261203 + alignment)
    for trial in range(200):
        spans = []
        for i in range(int(rng.integers(1, 14))):
            first = int(rng.integers(0, 20))
            spans.append(
                Lifetime(f"t{trial}_{i}", int(rng.integers(1, 500)), first, first + int(rng.integers(0, 6)))
            )
        offsets = place(spans, alignment)
        _assert_no_live_overlap(spans, offsets, alignment)
        # No plan is smaller than the bytes alive at the busiest step.
        end = max(offsets[s.name] + s.size for s in spans)
        busiest = max(sum(s.size for s in spans if s.first <= k <= s.last) for k in range(26))
        assert end >= busiest


def _residual_graph(tmp_path: Path) -> Graph:
    from quantcore import pipeline
    from quantcore.data import DataSet
    from quantcore.quantize.document import from_document

    onnx.save(residual_cnn(), tmp_path / "residual.onnx")
    loaded = pipeline.load_model(tmp_path / "residual.onnx")
    x = np.random.default_rng(0).normal(size=(16, 1, 12, 12)).astype(np.float32)
    return from_document(loaded.graph, pipeline.quantize(loaded, DataSet(x)).document)


def test_a_residual_graph_keeps_the_skip_tensor_alive_and_aliases_the_flatten(tmp_path: Path) -> None:
    graph = _residual_graph(tmp_path)
    plan = plan_arena(graph, alignment=16)
    roots = alias_roots(graph)
    spans = lifetimes(graph, roots)
    _assert_no_live_overlap(spans, {s.name: plan.offsets[s.name] for s in spans}, 16)
    # The flatten is a reshape: its output is its input's bytes.
    flatten = graph.node("flatten")
    assert plan.aliases == {flatten.outputs[0]: flatten.inputs[0]}
    assert plan.offsets[flatten.outputs[0]] == plan.offsets[flatten.inputs[0]]
    # pool1's output feeds the residual add four layers later: it is alive over the whole block.
    skip = next(s for s in spans if s.name == graph.node("pool1").outputs[0])
    assert (skip.first, skip.last) == (1, 4)
    assert plan.tensor_bytes == sum(tensor_bytes(graph, t.name) for t in graph.activations())
    assert plan.lower_bound <= plan.peak_live_bytes <= plan.arena_bytes < plan.tensor_bytes
    assert plan.arena_bytes % 16 == 0


def test_ds_cnn_s_needs_no_more_than_its_largest_layer(vectors: Path) -> None:
    path = vectors / "arm_ds_cnn_s_s8" / "ds_cnn_s.json"
    if not path.is_file():
        needs.absent(f"{path.name} is not in the vector folder")
    graph = network_graph(VectorCase.load(path))
    plan = plan_arena(graph, alignment=16)
    # A straight chain: the arena is the largest layer's input + output, which no plan can beat.
    biggest = max(
        sum(tensor_bytes(graph, t) for t in (*n.inputs, *n.outputs) if not graph.tensor(t).is_constant)
        for n in graph.nodes
    )
    assert plan.lower_bound == biggest
    assert plan.arena_bytes == -(-biggest // 16) * 16
