"""Graph rewrites, each a function Graph -> Graph that preserves the float function of the model.

`prepare` runs them in the order the rest of the engine expects and verifies the graph after each one.
"""

from __future__ import annotations

from collections.abc import Callable

from quantcore.ir import Graph
from quantcore.passes.const_fold import fold_constants
from quantcore.passes.fold_bn import fold_batch_norm
from quantcore.passes.fuse_activation import fuse_activations
from quantcore.passes.noops import remove_noops
from quantcore.passes.to_nhwc import to_nhwc

Pass = Callable[[Graph], Graph]

PIPELINE: tuple[Pass, ...] = (
    fold_constants,
    remove_noops,
    fold_batch_norm,
    fuse_activations,
    to_nhwc,
    remove_noops,
)


def prepare(graph: Graph, passes: tuple[Pass, ...] = PIPELINE) -> Graph:
    graph.verify()
    for step in passes:
        graph = step(graph).verify()
    return graph
