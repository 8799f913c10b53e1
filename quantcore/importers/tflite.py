"""TensorFlow Lite -> ir.Graph: float models, and int8 models (TensorFlow's full-integer converter) whose
scales, zero points, weights and biases are kept exactly.

    graph = import_tflite("model.tflite")     # or bytes

TFLite is NHWC with OHWI conv weights and (1, kh, kw, C*m) depthwise weights: the IR's layout after
quantcore/passes/to_nhwc.py, so the graph comes out NHWC (to_nhwc leaves it alone) and the model's own
input and output layout is NHWC (graph.meta[io_layout.MODEL_LAYOUTS]). The file is untrusted: it is
read through quantcore.untrusted within quantcore.limits.MODEL_MAX_BYTES and decoded in a forked child
(_isolated.py) by _tflite_read.py, which checks what the flatbuffer bindings would trust.

An int8 model's constants are stored as float64 values q * scale whose re-quantization with the same
scales (quantcore/scheme/arith.py) gives back TensorFlow's integers exactly; its activations carry
TensorFlow's scale and zero point (method "imported" in the params JSON), so it needs no calibration.
The translation of each operator is in _tflite_ops.py.
"""

from __future__ import annotations

import os
from pathlib import Path

from quantcore.importers import _source, _tflite_ops
from quantcore.importers._isolated import isolated
from quantcore.importers._source import Source
from quantcore.importers._tflite_read import is_tflite, read_model
from quantcore.ir import Graph

__all__ = ["TfliteSource", "import_tflite", "is_tflite", "load_source", "read_tflite"]


TfliteSource = Source
"""A .tflite file's bytes as read, and how messages name it (the importers' shared Source)."""


def import_tflite(path_or_bytes: str | os.PathLike[str] | bytes, *, name: str | None = None) -> Graph:
    """Import a .tflite file (or its bytes) as an NHWC IR graph; see the module docstring."""
    source = read_tflite(path_or_bytes, name=name)
    return isolated(source.path, lambda: load_source(source, name=name))


def read_tflite(path_or_bytes: str | os.PathLike[str] | bytes, *, name: str | None = None) -> TfliteSource:
    """The model's bytes, from a regular file of at most MODEL_MAX_BYTES (never a FIFO or a device)."""
    return _source.read(path_or_bytes, name or "<tflite bytes>")


def load_source(source: TfliteSource, *, name: str | None = None) -> Graph:
    """The import of bytes already read, in this process (callers isolate it: _isolated.py)."""
    model = read_model(source.data, source.path)
    graph = _tflite_ops.translate(model)
    return graph.evolve(name=name or Path(source.path).stem or graph.name).verify()
