"""ONNX -> ir.Graph: float models (opset 7 and newer; 11-21 tested) and QDQ models, with static shapes.

    graph = import_onnx("model.onnx")          # or bytes; batch=1 fixes a dynamic batch dimension

The model is untrusted input. The file is read through quantcore.untrusted (a regular file within
quantcore.limits.MODEL_MAX_BYTES); everything after runs in a child process, so that onnx's C++ code
aborting on a malformed model is a message too (_isolated.py). The steps, each failing with a ModelError
that names the file (and node or tensor, shortened and on one line):
  1. decode the protobuf, read external data from the model's folder only, check it (corrupt or
     truncated files are caught here);
  2. fix a dynamic batch dimension, fold everything computable at import (Constant, shape arithmetic,
     DequantizeLinear of weights) within the budget of _fold.py, infer static shapes (strict);
  3. pair up the activation QuantizeLinear/DequantizeLinear nodes of a QDQ model (their scales stay on
     the tensors, the nodes go);
  4. translate node by node: the support table decides what is accepted (UnsupportedError with its
     reason otherwise), a handler per operator builds the IR nodes.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import onnx

from quantcore.display import quoted, shown
from quantcore.errors import ModelError, UnsupportedError
from quantcore.importers import _onnx_load, _qdq
from quantcore.importers._builder import Builder
from quantcore.importers._handlers import HANDLERS
from quantcore.importers._isolated import isolated
from quantcore.importers._source import Source as OnnxSource
from quantcore.ir import Graph
from quantcore.support import ONNX_OPS, unsupported_reason

__all__ = ["OnnxImport", "OnnxSource", "import_onnx", "load_source", "read_onnx"]


@dataclass(frozen=True)
class OnnxImport:
    """An imported model: the IR graph, and the model onnxruntime may run for its float activations."""

    graph: Graph
    runnable: bytes
    """The model's bytes as read and checked (external data inlined), unchanged otherwise; running them
    never opens the file, or any file the model names, again."""


def import_onnx(
    path_or_bytes: str | os.PathLike[str] | bytes, *, batch: int = 1, name: str | None = None
) -> Graph:
    """Import an ONNX model file (or its bytes) as a float IR graph in ONNX layout (NCHW).

    `batch` replaces a dynamic (or missing) first dimension of the graph inputs. `name` names the graph
    (default: the ONNX graph's name, else the file's stem) and, for bytes, the model in messages.
    """
    source = read_onnx(path_or_bytes, name=name)
    return isolated(source.path, lambda: load_source(source, batch=batch, name=name).graph)


def read_onnx(path_or_bytes: str | os.PathLike[str] | bytes, *, name: str | None = None) -> OnnxSource:
    """The model's bytes, read within quantcore.limits (a regular file, never a FIFO or a device)."""
    return _onnx_load.read(path_or_bytes, name)


def load_source(source: OnnxSource, *, batch: int = 1, name: str | None = None) -> OnnxImport:
    """The import of bytes already read, with the bytes onnxruntime should run
    (quantcore.runtime.onnx_float), in this process (callers isolate it: _isolated.py)."""
    loaded = _onnx_load.load(source, batch)
    return OnnxImport(_import(source, loaded, name=name, fmt="onnx"), loaded.runnable)


def _import(source: OnnxSource, loaded: _onnx_load.Loaded, *, name: str | None, fmt: str) -> Graph:
    graph = loaded.model.graph
    plan = _qdq.plan(graph, loaded.consts, loaded.types, source.path)
    builder = Builder(source.path, loaded, plan)
    initializers = set(loaded.consts)
    inputs = [
        builder.add_input(value, _first_reader(builder, value.name))
        for value in graph.input
        if value.name not in initializers
    ]
    for node in graph.node:
        if node.name not in builder.skip:
            _translate(builder, node)
    outputs = [_graph_output(builder, value.name) for value in graph.output]
    meta = {
        "source": source.path,
        "sha256": source.sha256,
        "opset": loaded.opset,
        "format": fmt,
        "qdq": bool(plan.quant or loaded.weight_quant),
        "synthesized": tuple(builder.synthesized),
    }
    graph_name = name or graph.name or Path(source.path).stem
    return Graph(
        graph_name, builder.tensors, tuple(builder.nodes), tuple(inputs), tuple(outputs), meta
    ).verify()


def _translate(builder: Builder, node: onnx.NodeProto) -> None:
    support = ONNX_OPS.get(node.op_type) if node.domain in ("", "ai.onnx") else None
    if support is None:
        reason = unsupported_reason(node.op_type, node.domain)
        raise UnsupportedError(builder.path, shown(node.name), shown(node.op_type), reason)
    facts = builder.facts(node)
    violations = support.violations(facts)
    if violations:
        raise UnsupportedError(builder.path, shown(node.name), node.op_type, violations[0].explain(facts))
    HANDLERS[node.op_type](builder, facts)


def _first_reader(builder: Builder, value: str) -> str | None:
    readers = builder.readers.get(value)
    return readers[0].name if readers else None


def _graph_output(builder: Builder, value: str) -> str:
    name = builder.name(value)
    tensor = builder.tensors.get(name)
    if tensor is None or tensor.is_constant:
        raise ModelError(
            builder.path,
            f"graph output {quoted(value)} is a constant (computable without any input); nothing to run",
        )
    return name
