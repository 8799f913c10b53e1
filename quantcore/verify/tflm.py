"""TensorFlow Lite Micro's own interpreter beside Fixpoint's int8 result: the check a team moving from TFLM
runs first (`fixpoint evaluate MODEL.tflite P --data D` reports tflm_mismatched_bytes).

TFLM's interpreter comes from the optional tflite-micro package (`pip install 'fixpoint[tflm]'`): its
reference kernels, which CMSIS-NN's kernels match by construction. It runs only on an int8 .tflite - a
float .tflite has no int8 counterpart in TFLM (its int8 version is Fixpoint's own calibration).

The data D is real values in the model's own input layout, as for every other command; both sides get
them quantized with the model's input scale and zero point (round half away from zero, clamp to int8),
as a TFLM application quantizes its input and as model.h documents it. An int8 vector a team already
has becomes D by D = (q - zero_point) * scale, which quantizes back to q exactly. A model whose input is
float (a QUANTIZE at its edge) gives TFLM the real values, so TFLM's own QUANTIZE makes its int8 input;
a uint8 input gets them quantized with the uint8 tensor's scale and zero point. The output compared is
always the int8 tensor: a float or uint8 output's DEQUANTIZE/QUANTIZE is looked behind.

TFLM's interpreter is C++ reading an untrusted file: it runs in a forked child (importers/_isolated.py),
so a crash in it is a message.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from quantcore import limits, untrusted
from quantcore.errors import ModelError
from quantcore.importers._isolated import isolated
from quantcore.ir import Graph
from quantcore.runtime import int8_exec
from quantcore.scheme.arith import quantize_activation

if TYPE_CHECKING:
    # The tflite reader (and the tflite package, 0.4 s to import) is needed only for a .tflite model:
    # `fixpoint evaluate` asks every model whether it is one.
    from quantcore.importers._tflite_read import TflModel

INSTALL = "pip install 'fixpoint[tflm]'"
NOT_INSTALLED = f"not run: the tflite-micro package (TFLM's interpreter) is not installed ({INSTALL})"
FLOAT_MODEL = (
    "not run: a float .tflite has no int8 counterpart in TFLM (its int8 version is Fixpoint's"
    " calibration); compare with TFLM on the int8 .tflite TensorFlow's converter writes"
)
PRESERVE_ARENA_EXTRA = 1 << 20
"""Arena bytes added to the package's default (10x the model's size) when every tensor is kept after
invoke: a small model's default arena has no room for them (TFLM: "Failed to allocate temp memory")."""


@dataclass(frozen=True)
class TflmComparison:
    """Fixpoint's int8 outputs against TFLM's on the same inputs, byte for byte."""

    mismatched_bytes: int
    """Int8 output bytes (every output, every sample) where the two differ."""
    compared_bytes: int
    samples: int

    def line(self) -> str:
        return (
            f"TFLM (tflite-micro, reference kernels): {self.mismatched_bytes} of {self.compared_bytes}"
            f" int8 output bytes differ on {self.samples} samples"
        )


def unavailable(graph: Graph) -> str | None:
    """Why TFLM cannot be compared with for this model (say so in one line), or None when it can.
    Only for a .tflite: an ONNX model has nothing to compare with and gets no line (callers check
    is_tflite_graph first)."""
    if not graph.meta.get("qdq"):
        return FLOAT_MODEL
    try:
        from tflite_micro.python.tflite_micro import runtime  # type: ignore[import-untyped]  # noqa: F401
    except ImportError:
        return NOT_INSTALLED
    return None


def is_tflite_graph(graph: Graph) -> bool:
    return graph.meta.get("format") == "tflite"


def compare(path: str, graph: Graph, qgraph: Graph, x: np.ndarray) -> TflmComparison:
    """Fixpoint's int8 result (int8_exec on the inputs quantized as model.h says) against TFLM's
    interpreter on the same samples `x` (real values, the model's layout, batch first)."""
    data = untrusted.read_bytes(path, limit=limits.MODEL_MAX_BYTES)
    name = qgraph.inputs[0]
    # One invoke takes the input's first axis of rows: 1 (a batch of one), or a time-major recurrent
    # input's time steps; the samples are rows, as the executors stack them.
    rows = qgraph.tensor(name).shape[0]
    if len(x) % rows:
        raise ModelError(
            path,
            f"its input {list(qgraph.tensor(name).shape)} takes {rows} samples per inference; the data has"
            f" {len(x)}, give a multiple of {rows}",
        )
    q = int8_exec.quantize_inputs(qgraph, {name: x})[name]
    theirs = isolated(path, lambda: _run_tflm(data, path, graph.meta.get("sha256"), x, q, rows))
    env = int8_exec.run(qgraph, {name: q})
    ours = [env[out].reshape(len(x) // rows, -1) for out in qgraph.outputs]
    if len(theirs) != len(ours):
        raise ModelError(path, f"TFLM gives {len(theirs)} outputs, Fixpoint's graph {len(ours)}")
    mismatched = sum(
        int(np.count_nonzero(a != b.reshape(a.shape))) for a, b in zip(ours, theirs, strict=True)
    )
    return TflmComparison(mismatched, sum(a.size for a in ours), len(x) // rows)


def _run_tflm(
    data: bytes, path: str, recorded: str | None, x: np.ndarray, q: np.ndarray, rows: int = 1
) -> list[np.ndarray]:
    """TFLM's int8 output tensors, (invokes, elements) each, one invoke per `rows` samples (the input's
    first axis: 1 for a batch of one), for the model `data` - the one imported when its sha256 is
    `recorded`."""
    from tflite_micro.python.tflite_micro import runtime

    from quantcore.importers._tflite_read import read_model

    model = read_model(data, path)  # hashes the bytes once
    if recorded and model.sha256 != recorded:
        raise ModelError(path, "changed while it was being evaluated; run fixpoint evaluate again")
    inner = inner_outputs(model)
    config, arena = runtime.InterpreterConfig.kAllocationRecording, None  # None: the package's own size
    if inner != list(model.outputs):  # an edge conversion: the int8 tensor behind it is read after invoke
        config, arena = runtime.InterpreterConfig.kPreserveAllTensors, len(data) * 10 + PRESERVE_ARENA_EXTRA
    try:
        interpreter = runtime.Interpreter.from_bytes(data, arena_size=arena, intrepreter_config=config)
        fed = _tflm_input(model, x, q)
        outputs: list[list[np.ndarray]] = [[] for _ in inner]
        for sample in fed.reshape(-1, rows, *fed.shape[1:]):
            interpreter.set_input(sample, 0)
            interpreter.invoke()
            for k, index in enumerate(inner):
                value = (
                    interpreter.get_output(k)
                    if index == model.outputs[k]
                    else interpreter.GetTensor(index, 0)["tensor_data"]
                )
                outputs[k].append(np.asarray(value, _INTEGER[model.tensors[index].dtype]).reshape(-1))
    except (RuntimeError, ValueError) as exc:
        raise ModelError(path, f"TFLM's interpreter could not run it: {exc}") from exc
    return [np.stack(rows) for rows in outputs]


def _tflm_input(model: TflModel, x: np.ndarray, q: np.ndarray) -> np.ndarray:
    """What a TFLM application writes into the model's input tensor for the samples `x`."""
    tensor = model.tensors[model.inputs[0]]
    if tensor.dtype == "FLOAT32":
        return np.ascontiguousarray(x, np.float32)
    if tensor.dtype == "UINT8" and tensor.quant is not None:
        scale, zero_point = (
            float(tensor.quant.scale.reshape(-1)[0]),
            int(tensor.quant.zero_point.reshape(-1)[0]),
        )
        return quantize_activation(x, scale, zero_point, 0, 255).astype(np.uint8)
    return np.ascontiguousarray(q, _INTEGER[tensor.dtype]).reshape((len(x), *tensor.shape[1:]))


_INTEGER: dict[str, type[np.signedinteger[Any]]] = {"INT8": np.int8, "INT16": np.int16}
"""The integer tensors compared: int8, and the int16 edges of an int8 model (an int16 input requantized,
an int16 softmax output)."""


def inner_outputs(model: TflModel) -> list[int]:
    """Each model output's int8 tensor: itself, or the input of the DEQUANTIZE/QUANTIZE writing it."""
    producers = {op.outputs[0]: op for op in model.operators if op.outputs}
    inner = []
    for index in model.outputs:
        op: Any = producers.get(index)
        edge = (
            model.tensors[index].dtype not in _INTEGER
            and op is not None
            and op.op in ("DEQUANTIZE", "QUANTIZE")
        )
        inner.append(op.inputs[0] if edge else index)
    return inner
