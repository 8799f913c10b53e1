"""The first step of every command: a model file read, imported and prepared in a child process.

onnx's checker and shape inference (and onnxruntime, which embeds them) are C++ that aborts on some
malformed models, so all of the import runs in a forked child (quantcore/importers/_isolated.py), the
child's own onnxruntime session included: a model that crashes it is a ModelError, not the end of the
process. The child works while its parent goes on: `start` forks it from this module, which imports
little of the engine (onnx and onnxruntime, which the child inherits instead of importing them again),
and a command imports the quantizer (quantcore.pipeline and what it needs) while the child reads;
pipeline.load_model(path, started=...) then takes the answer. MobileNetV2's `fixpoint quantize`: the
0.1 s of the child's import and the 0.1 s of the parent's imports overlap where a core is free.

The child's work itself imports what it needs (the passes, the support table) in the child.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from quantcore.errors import ModelError, UnsupportedError
from quantcore.importers import _source
from quantcore.importers._isolated import Pending
from quantcore.importers._isolated import start as start_child

if TYPE_CHECKING:
    from quantcore.importers._source import Source
    from quantcore.ir import Graph


@dataclass
class Loading:
    """A model's import under way in a child process (`start`)."""

    path: Path
    pending: Pending[tuple[Graph, bytes | None]]
    """The child's answer: the graph, and the bytes onnxruntime runs when they are not the file's."""
    data: bytes | None
    """The file's bytes for an ONNX model (None for a .tflite: the IR's float executor runs it)."""

    def result(self) -> tuple[Graph, bytes | None]:
        """The prepared graph and the bytes onnxruntime runs (None for a .tflite); the import's error
        raised here."""
        graph, inlined = self.pending.result()
        return graph, self.data if inlined is None else inlined

    def cancel(self) -> None:
        """Stop the child, whose answer is not wanted any more (the command failed before asking); a
        child whose answer was taken is gone already."""
        self.pending.cancel()

    def __enter__(self) -> Loading:
        return self

    def __exit__(self, *_: object) -> None:
        self.cancel()


def start(path: str | Path, batch: int = 1) -> Loading:
    """Read the file (once, within quantcore.limits) and fork the child that imports and prepares it."""
    path = Path(path)
    source = _source.read(path, str(path))
    if _is_tflite(path, source.data):
        return Loading(path, start_child(str(path), lambda: (_prepared_tflite(source, path), None)), None)
    _import_onnx_modules()
    return Loading(path, start_child(str(path), lambda: _prepared(source, batch, path)), source.data)


def _import_onnx_modules() -> None:
    """Import onnx and onnxruntime here, before the fork: the child inherits them instead of importing
    them itself, and this process needs both anyway (its own onnxruntime session runs the float model).
    Importing them runs none of their C++ on the model: only the child parses and checks its bytes.
    Imported in the child alone they cost the process ~1 s twice (onnx's import of ml_dtypes takes 0.8 s
    of that, registering its numpy casts)."""
    import onnxruntime  # noqa: F401

    import quantcore.importers.onnx  # noqa: F401 - imports onnx


def _prepared(source: Source, batch: int, path: Path) -> tuple[Graph, bytes | None]:
    """The prepared, checked graph after the onnxruntime sessions the parent may make were made here
    from the bytes onnxruntime runs (its C++ code must not meet them first in the parent process):
    quantize's, and evaluate's with the graph optimizations (OnnxFloat.for_evaluation), whose optimizers
    see the model first too - a few milliseconds more on the benchmark nets. Those bytes are returned
    too when they are not the file's (external data inlined), so that the parent is not sent a copy of
    what it holds."""
    from quantcore.importers.onnx import load_source
    from quantcore.passes import prepare
    from quantcore.runtime.onnx_float import OnnxFloat

    imported = load_source(source, batch=batch)
    graph = prepare(imported.graph)
    check_supported(graph, str(path))
    graph = graph.evolve(meta={**graph.meta, "source_name": path.name})
    OnnxFloat(imported.runnable, graph).load()
    evaluation = OnnxFloat(imported.runnable, graph)
    evaluation.for_evaluation()
    evaluation.load()
    return graph, None if imported.runnable == source.data else imported.runnable


def _is_tflite(path: Path, data: bytes) -> bool:
    """A name ending in .onnx is ONNX (its importer resolves external data beside it), one ending in
    .tflite is TFLite (a wrong identifier is then reported as not a TFLite model); any other name is
    decided by the content: TFLite's flatbuffer identifier "TFL3" at bytes 4..8, which an ONNX protobuf
    does not carry there."""
    suffix = path.suffix.lower()
    if suffix in (".onnx", ".tflite"):
        return suffix == ".tflite"  # the TFLite reader (0.2 s of imports) is not loaded for an .onnx
    from quantcore.importers.tflite import is_tflite

    return is_tflite(data)


def _prepared_tflite(source: Source, path: Path) -> Graph:
    from quantcore.importers.tflite import load_source
    from quantcore.passes import prepare

    graph = prepare(load_source(source))
    check_supported(graph, str(path))
    return graph.evolve(meta={**graph.meta, "source_name": path.name})


def check_supported(graph: Graph, source: str) -> None:
    """Raise ModelError when the graph as a whole cannot become firmware, UnsupportedError for the first
    node in CMSIS-NN form that no CMSIS-NN kernel can run; the message says what the node has and why."""
    from quantcore.display import shown
    from quantcore.support import GRAPH, KERNELS

    for rule in GRAPH:
        if not rule(graph):
            raise ModelError(source, rule.explain(graph))
    for node in graph.nodes:
        support = KERNELS[node.op]
        broken = support.violations(graph, node)
        if broken:
            reason = broken[0].explain((graph, node))
            raise UnsupportedError(source, shown(node.name), node.op.json_name, reason)
        if not support.kernels:
            raise UnsupportedError(source, shown(node.name), node.op.json_name, "no CMSIS-NN kernel runs it")
