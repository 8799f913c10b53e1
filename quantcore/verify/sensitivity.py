"""Layer sensitivity: where a network's quantization error comes from.

For each layer L, the network is run in float except L, which runs as the int8 graph runs it - its inputs
quantized to their int8 (or int16) parameters, the real CMSIS-NN kernel of the reference executor, its
output dequantized - and the output SQNR against the float network (and the top-1 drop, with labels) is
measured. A layer whose lone quantization costs the most output SQNR is where int16 activations or a
better calibration pay off first; `pipeline` picks int16 layers from this ranking.

Next to it, the ranking the user's articles describe: the mean magnitude of the loss's gradient with
respect to each layer's output (cross-entropy on the labels, or on the float model's own predictions
without labels), computed in torch on the float graph. A large gradient says errors at that layer move
the loss directly. The gradient alone ignores how much error a layer actually makes; the product of the
two, |dL/dy| times the layer's quantization step over sqrt(12) (the RMS of rounding noise), is reported as
the first-order estimate of the loss change (Taylor), and needs no extra runs.

Cost: one float run of the whole graph per batch, then per layer only the nodes downstream of it.

Top-1 drops and the gradient ranking are for classifiers only (the rule: quantcore/verify/metrics.py):
for another model (an autoencoder) the arg-max of its output names no class, so neither the top-1 it
moves nor a cross-entropy loss on it means anything. Its layers are ranked by output SQNR alone, and the
table says why the other columns are missing.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from quantcore.data import DataSet
from quantcore.ir import Graph, Node, Op
from quantcore.ir.io_layout import to_firmware
from quantcore.kernels.requantize import Rounding
from quantcore.runtime import float_exec, int8_exec
from quantcore.verify.evaluate import is_classifier
from quantcore.verify.metrics import NOT_CLASS_SCORES, ClassificationAccumulator, output_sqnr_db
from quantcore.verify.report import format_db, json_db, json_text, write_atomically

REPORT_VERSION = 1
NOT_A_CLASSIFIER = f"not a classifier ({NOT_CLASS_SCORES}): no top-1 drop, no gradient ranking"


@dataclass(frozen=True)
class LayerSensitivity:
    name: str
    op: str
    output_sqnr_db: float
    """Output SQNR (dB) with only this layer quantized; lower = more sensitive."""
    top1_drop_points: float | None = None
    """Top-1 points lost with only this layer quantized (None without labels)."""
    gradient: float | None = None
    """Mean |d loss / d output| over the layer's output elements and the samples (None: not computed)."""
    gradient_noise: float | None = None
    """gradient * output step / sqrt(12): the first-order estimate of what the layer's rounding moves."""
    int16_capable: bool = False
    """CMSIS-NN has an s16 kernel for it (it can run with int16 activations)."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "op": self.op,
            "output_sqnr_db": json_db(self.output_sqnr_db),
            "top1_drop_points": self.top1_drop_points,
            "gradient": self.gradient,
            "gradient_noise": self.gradient_noise,
            "int16_capable": self.int16_capable,
        }


@dataclass(frozen=True)
class SensitivityReport:
    model: str
    params_file: str
    samples: int
    output_sqnr_db: float
    """Output SQNR with every layer quantized, on the same samples."""
    layers: list[LayerSensitivity] = field(default_factory=list)
    classifier: bool = True
    """Whether the model is a classifier: without, no top-1 drops nor gradient ranking (module docstring)."""

    def ranking(self, by: str = "sqnr") -> list[LayerSensitivity]:
        """Most sensitive first: by the lone-layer output SQNR (lowest first) or by gradient (largest).

        Ties keep graph order (the sort is stable): layers exact alone (+inf dB: a max pool, a reshape)
        come last in the order they run; a layer without a gradient counts as 0."""
        if by == "sqnr":
            return sorted(self.layers, key=lambda layer: layer.output_sqnr_db)
        if by in ("gradient", "gradient_noise"):
            return sorted(self.layers, key=lambda layer: -(getattr(layer, by) or 0.0))
        raise ValueError(f"unknown ranking {by!r}: sqnr, gradient or gradient_noise")

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": REPORT_VERSION,
            "model": self.model,
            "params_file": self.params_file,
            "samples": self.samples,
            "classifier": self.classifier,
            "output_sqnr_db": json_db(self.output_sqnr_db),
            "ranking": {
                by: [layer.name for layer in self.ranking(by)]
                for by in ("sqnr", "gradient", "gradient_noise")
                if by == "sqnr" or any(getattr(layer, by) is not None for layer in self.layers)
            },
            "layers": [layer.to_dict() for layer in self.layers],
        }

    def write_json(self, path: str | os.PathLike[str]) -> None:
        write_atomically(Path(path), json_text(self.to_dict()))

    def format_table(self) -> str:
        """One row per layer, most sensitive first (`ranking()`: lowest SQNR alone first, ties in graph
        order), then the summary. The JSON keeps `layers` in graph order beside its `ranking` lists."""
        gradients = any(layer.gradient is not None for layer in self.layers)
        labels = any(layer.top1_drop_points is not None for layer in self.layers)
        ranked = self.ranking()
        grad_rank = {layer.name: i + 1 for i, layer in enumerate(self.ranking("gradient"))}
        header = ["rank", "layer", "op", "SQNR alone dB"]
        header += ["top-1 drop"] if labels else []
        header += ["|grad|", "grad rank", "|grad|*noise"] if gradients else []
        header += ["s16"]
        rows = [header]
        for rank, layer in enumerate(ranked, 1):
            row = [str(rank), layer.name, layer.op, format_db(layer.output_sqnr_db)]
            if labels:
                row.append("-" if layer.top1_drop_points is None else f"{layer.top1_drop_points:+.2f}")
            if gradients:
                row += [_sci(layer.gradient), str(grad_rank[layer.name]), _sci(layer.gradient_noise)]
            row.append("yes" if layer.int16_capable else "")
            rows.append(row)
        widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
        lines = ["  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip() for r in rows]
        lines.insert(1, "  ".join("-" * w for w in widths))
        worst = ranked[0] if ranked else None
        summary = (
            f"{self.samples} samples; every layer quantized: output SQNR {format_db(self.output_sqnr_db)} dB"
        )
        if worst is not None:
            summary += f"; most sensitive alone: {worst.name} ({format_db(worst.output_sqnr_db)} dB)"
        if not self.classifier:
            summary += "\n" + NOT_A_CLASSIFIER
        return "\n".join([*lines, "", summary])


def layer_sensitivity(
    float_graph: Graph,
    qgraph: Graph,
    data: DataSet,
    *,
    batch_size: int = 64,
    gradients: Mapping[str, float] | None = None,
    model: str = "",
    params_file: str = "",
) -> SensitivityReport:
    """Quantize each layer alone (see the module docstring). `float_graph` is the float graph the
    quantized graph's parameters belong to (`document.float_graph_for`); `gradients`, when given, is the
    mean |d loss / d output| per layer (`gradient_magnitudes`)."""
    from quantcore.quantize.precision import S16_CAPABLE

    floats = {n.name for n in float_graph.nodes}
    layers = [n for n in qgraph.nodes if n.op.computes and n.op is not Op.REQUANTIZE and n.name in floats]
    sources = {n.outputs[0]: n.inputs[0] for n in qgraph.nodes if n.op is Op.REQUANTIZE}
    rounding = Rounding(qgraph.meta.get("rounding", "double"))
    out_name = float_graph.outputs[0]
    reference: list[np.ndarray] = []
    alone: dict[str, list[np.ndarray]] = {n.name: [] for n in layers}
    classes = {n.name: ClassificationAccumulator() for n in layers}
    classifier = is_classifier(float_graph)
    full: list[np.ndarray] = []
    input_name = float_graph.inputs[0]
    for start in range(0, len(data), batch_size):
        x = to_firmware(float_graph, input_name, data.x[start : start + batch_size])
        y = None if data.y is None else data.y[start : start + batch_size]
        env = float_exec.run(float_graph, {input_name: x})
        f_out = env[out_name].reshape(len(x), -1)
        reference.append(f_out)
        for node in layers:
            q_out = _with_one_layer_quantized(float_graph, qgraph, node, env, sources, rounding)
            q_out = q_out.reshape(len(x), -1)
            alone[node.name].append(q_out)
            if classifier:
                classes[node.name].update(f_out, q_out, y)
        q_env = int8_exec.run(qgraph, int8_exec.quantize_inputs(qgraph, {input_name: x}))
        full.append(int8_exec.dequantize_tensor(qgraph, out_name, q_env[out_name]).reshape(len(x), -1))
    ref = [np.concatenate(reference)]
    results = []
    for node in layers:
        step = _step(qgraph, node)
        gradient = None if gradients is None else gradients.get(node.name)
        results.append(
            LayerSensitivity(
                name=node.name,
                op=node.op.json_name,
                output_sqnr_db=output_sqnr_db(ref, [np.concatenate(alone[node.name])]),
                top1_drop_points=_drop_points(classes[node.name]) if classifier else None,
                gradient=gradient,
                gradient_noise=None if gradient is None else gradient * step / math.sqrt(12.0),
                int16_capable=node.op in S16_CAPABLE,
            )
        )
    return SensitivityReport(
        model, params_file, len(data), output_sqnr_db(ref, [np.concatenate(full)]), results, classifier
    )


def _drop_points(counts: ClassificationAccumulator) -> float | None:
    """Top-1 lost with the layer quantized alone, in percentage points; None when a rate is unknown."""
    top1_float, top1_int8 = counts.top1_float, counts.top1_int8
    return None if top1_float is None or top1_int8 is None else 100.0 * (top1_float - top1_int8)


def _with_one_layer_quantized(
    float_graph: Graph,
    qgraph: Graph,
    layer: Node,
    env: Mapping[str, np.ndarray],
    sources: Mapping[str, str],
    rounding: Rounding,
) -> np.ndarray:
    """The float network's output with `layer` run by the int8 reference on quantized float inputs."""
    q_env: dict[str, np.ndarray] = {}
    for name in layer.inputs:
        if name and not qgraph.tensor(name).is_constant:
            q_env[name] = int8_exec.quantize_to(qgraph, name, env[sources.get(name, name)])
    out = layer.outputs[0]
    changed = {
        out: int8_exec.dequantize_tensor(qgraph, out, int8_exec.run_node(qgraph, layer, q_env, rounding))
    }
    nodes = float_graph.nodes
    after = next(i for i, n in enumerate(nodes) if n.name == layer.name) + 1
    for node in nodes[after:]:
        if any(i in changed for i in node.inputs):
            args = [changed.get(i, env[i]) if i else None for i in node.inputs]
            changed[node.outputs[0]] = float_exec.evaluate(float_graph, node, args)
    return changed.get(float_graph.outputs[0], env[float_graph.outputs[0]])


def _step(qgraph: Graph, node: Node) -> float:
    quant = qgraph.tensor(node.outputs[0]).quant
    return 0.0 if quant is None else float(np.max(quant.scale))  # per-channel scales: the coarsest


def gradient_magnitudes(float_graph: Graph, data: DataSet, batch_size: int = 64) -> dict[str, float]:
    """Mean |d loss / d output| of every computing layer, in torch on the float graph (needs torch).

    The loss is the cross-entropy of the graph's output against the labels, or against the float
    model's own arg-max without labels - the answers a perfect int8 network would reproduce. A graph that
    ends in a softmax gives probabilities: the loss then takes their logarithm. Empty for a model that is
    not a classifier (the module docstring says why)."""
    if not is_classifier(float_graph):
        return {}
    import torch

    from quantcore.runtime.torch_ops import OPS

    constants = {
        name: torch.tensor(np.asarray(t.data, np.float32))
        for name, t in float_graph.tensors.items()
        if t.data is not None
    }
    layers = {n.outputs[0]: n.name for n in float_graph.nodes if n.op.computes}
    sums = dict.fromkeys(layers.values(), 0.0)
    counts = dict.fromkeys(layers.values(), 0)
    input_name, out_name = float_graph.inputs[0], float_graph.outputs[0]
    ends_in_softmax = float_graph.nodes[-1].op is Op.SOFTMAX
    for start in range(0, len(data), batch_size):
        x = to_firmware(float_graph, input_name, data.x[start : start + batch_size])
        # The input asks for gradients so that every layer's output is part of the autograd graph.
        # torch.tensor copies: a data set's samples are read-only (quantcore.data), which torch warns of.
        inputs = torch.tensor(np.asarray(x, np.float32)).requires_grad_(True)
        env: dict[str, torch.Tensor] = {**constants, input_name: inputs}
        for node in float_graph.nodes:
            env[node.outputs[0]] = OPS[node.op](
                float_graph, node, [env[i] if i else None for i in node.inputs]
            )
        scores = env[out_name].reshape(len(x), -1)
        if data.y is not None:
            target = torch.as_tensor(np.asarray(data.y[start : start + batch_size], np.int64))
        else:
            target = scores.detach().argmax(dim=1)
        if ends_in_softmax:
            loss = torch.nn.functional.nll_loss(torch.log(scores.clamp_min(1e-12)), target, reduction="sum")
        else:
            loss = torch.nn.functional.cross_entropy(scores, target, reduction="sum")
        grads = torch.autograd.grad(loss, [env[t] for t in layers], allow_unused=True)
        for tensor, grad in zip(layers, grads, strict=True):
            if grad is not None:
                sums[layers[tensor]] += float(grad.abs().sum())
                counts[layers[tensor]] += grad.numel()
    return {layer: sums[layer] / counts[layer] for layer in sums if counts[layer]}


def _sci(value: float | None) -> str:
    return "-" if value is None else f"{value:.3g}"
