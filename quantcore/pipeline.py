"""The engine's driver: a float model in, a quant-params document and an evaluation report out.

graph = load_model(path)                    import (ONNX / PyTorch) and prepare (fold, fuse, NHWC)
calibration = calibrate(graph, data, ...)   observe every activation, pick ranges
qgraph = quantize_graph(graph, calibration) the int8 scheme: scales, int weights, kernel parameters
document = to_document(qgraph, ...)         the quant-params JSON
report = evaluate(model, document, data)    float (onnxruntime) vs int8 (reference), layer by layer
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from quantcore.calibrate.collect import CalibrationPlan, calibrate
from quantcore.calibrate.method import RangeMethod
from quantcore.data import DataSet
from quantcore.errors import UnsupportedError
from quantcore.ir import Graph
from quantcore.kernels.requantize import Rounding
from quantcore.passes import prepare
from quantcore.quantize.document import DocumentError, from_document, to_document
from quantcore.quantize.graph import QuantConfig, quantize_graph
from quantcore.runtime.onnx_float import OnnxFloat
from quantcore.verify.evaluate import evaluate_graphs
from quantcore.verify.report import EvaluationReport


@dataclass(frozen=True)
class QuantizeOptions:
    method: RangeMethod = field(default_factory=RangeMethod)
    """The calibration method for every activation not named in `per_layer`."""
    per_layer: Mapping[str, RangeMethod] = field(default_factory=dict)
    """Calibration method by layer (node) name or tensor name."""
    per_channel: bool = True
    rounding: Rounding = Rounding.DOUBLE
    int16_layers: frozenset[str] = frozenset()
    """Layers to run with int16 activations (CMSIS-NN's s16 kernels)."""
    batch_size: int = 64
    progress: bool = False


@dataclass(frozen=True)
class LoadedModel:
    path: Path
    graph: Graph
    """The prepared float graph (NHWC, BN folded, activations fused)."""
    float_model: OnnxFloat


@dataclass(frozen=True)
class QuantizeResult:
    model: LoadedModel
    qgraph: Graph
    document: dict[str, Any]


def load_model(path: str | Path, batch: int = 1) -> LoadedModel:
    from quantcore.importers.onnx import import_onnx

    path = Path(path)
    graph = prepare(import_onnx(path, batch=batch))
    check_supported(graph, str(path))
    graph = graph.evolve(meta={**graph.meta, "source_name": path.name})
    return LoadedModel(path, graph, OnnxFloat(path, graph))


def check_supported(graph: Graph, source: str) -> None:
    """Raise UnsupportedError for the first node in CMSIS-NN form that no CMSIS-NN kernel can run."""
    from quantcore.support import KERNELS

    for node in graph.nodes:
        support = KERNELS[node.op]
        broken = support.violations(graph, node)
        if broken:
            reason = " ".join((broken[0].__doc__ or broken[0].__name__).split())
            raise UnsupportedError(source, node.name, node.op.json_name, reason)
        if not support.kernels:
            raise UnsupportedError(source, node.name, node.op.json_name, "no CMSIS-NN kernel runs it")


def quantize(
    model: LoadedModel, data: DataSet, options: QuantizeOptions = QuantizeOptions()
) -> QuantizeResult:
    plan = CalibrationPlan(options.method, dict(options.per_layer), options.batch_size, options.progress)
    calibration, summary = calibrate(model.graph, model.float_model, data, plan)
    qgraph = quantize_graph(
        model.graph, calibration, QuantConfig(options.per_channel, options.rounding, options.int16_layers)
    )
    return QuantizeResult(model, qgraph, to_document(qgraph, summary))


def evaluate(
    model: LoadedModel,
    document: Mapping[str, Any],
    data: DataSet,
    params_file: str = "",
    batch_size: int = 64,
    progress: bool = False,
) -> EvaluationReport:
    check_same_model(model, document, params_file)
    qgraph = from_document(model.graph, document)
    return evaluate_graphs(
        model.float_model,
        qgraph,
        data,
        model=model.path.name,
        params_file=params_file,
        batch_size=batch_size,
        progress=progress,
    )


def check_same_model(model: LoadedModel, document: Mapping[str, Any], params_file: str) -> None:
    """Refuse parameters computed for another model (or another version of this one)."""
    recorded, actual = document["model"]["sha256"], model.graph.meta.get("sha256")
    if actual and recorded != actual:
        raise DocumentError(
            f"{params_file or 'the parameters'}: made from a model with sha256 {recorded[:12]}..., but"
            f" {model.path.name} has sha256 {actual[:12]}...; re-run fixpoint quantize for this model"
        )


def first_input_shape(model: LoadedModel) -> tuple[int, ...]:
    """The model's input shape in its own layout (as data sets are given), batch first."""
    name = model.graph.inputs[0]
    shape = model.graph.tensor(name).shape
    return tuple(shape[i] for i in (0, 3, 1, 2)) if len(shape) == 4 else tuple(shape)
