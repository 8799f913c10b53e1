"""Empirical bias correction: remove the mean error quantization adds to each output channel of a layer.

Rounding weights to int8 shifts the mean of a layer's output - sum_k (W_q - W)[c, k] * E[x_k] is not
zero when the inputs have a non-zero mean, as they do after a ReLU - and clipped activation ranges shift
it too. The shifts add up through the network. For every conv / depthwise / fully connected layer, in
execution order, this module measures over calibration samples the mean per output channel of

    (the int8 layer's weights on its int8 input, in real units) - (the float weights on the float input)

and subtracts it from the layer's float bias before the bias is quantized (Nagel et al. 2019, section
4.2, the "empirical" variant). The int8 side reads what the int8 graph feeds the layer with every earlier
layer already corrected: measured all at once instead, each layer would also subtract the shift its
inputs carry, which the layers before it remove as well - on a depthwise-separable CNN that double
correction cost 10 dB of output SQNR.

Both means are cheap: a layer is linear before its activation, so the mean of its output over samples is
the layer applied to the mean of its inputs. The float side needs one pass that averages each layer's
input; the int8 side one run of the int8 graph over the samples, node by node, fixing each bias just
before its layer runs.

A run can keep some of its int8 tensors and its float means (a Prefix) for another run of a graph that
differs only after them: the int16-output trial (pipeline._choose_output) re-measures the output layer
alone, and started from the tensor that layer reads it runs only the tail of the graph - the same bits as
the whole run, since every node before that tensor is the same (checked, not assumed:
quantcore/runtime/tail.py).

The corrections are per-channel floats recorded in the quant-params JSON (7 significant digits: the
values applied here are the values a graph rebuilt from the file applies), so the integer biases stay a
function of the model and the file.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple, Protocol

import numpy as np
import numpy.typing as npt

from quantcore.ir import Activation, Graph, Node, Op
from quantcore.ir.io_layout import to_firmware
from quantcore.kernels.blas import single_threaded
from quantcore.kernels.requantize import Rounding
from quantcore.quantize.params import WEIGHTED_KERNELS
from quantcore.runtime import float_exec, int8_exec, tail
from quantcore.scheme.arith import dequantize, quantize_bias

Floats = npt.NDArray[np.float64]


class Samples(Protocol):
    @property
    def x(self) -> np.ndarray:
        """The samples in the model's own layout, batch first."""

    def __len__(self) -> int: ...


class Corrected(NamedTuple):
    qgraph: Graph
    """The quantized graph with corrected biases."""
    corrections: dict[str, Floats]
    """Each layer's correction (subtracted from its float bias)."""
    outputs: np.ndarray
    """The corrected graph's dequantized output on every sample, flattened per sample (N, -1): the run
    that measured the corrections computed it, so scoring the graph on the same samples needs no other."""
    prefix: Prefix
    """The tensors the run was asked to keep, and its float means, for a later run's `start`."""


class Prefix(NamedTuple):
    """What a correcting run saw: the int8 values of the tensors it was asked to keep (every sample) in
    the corrected graph, and the float input means of the layers it corrected."""

    qgraph: Graph
    float_graph: Graph
    data: Any
    tensors: dict[str, np.ndarray]
    float_means: dict[str, Floats]


class FloatModel(Protocol):
    def activations(self, feeds: dict[str, np.ndarray], layout: bool = True) -> dict[str, np.ndarray]: ...


def correct_biases(
    float_graph: Graph,
    float_model: FloatModel,
    qgraph: Graph,
    data: Samples,
    batch_size: int = 64,
    only: frozenset[str] | None = None,
    keep: frozenset[str] = frozenset(),
    start: Prefix | None = None,
) -> Corrected:
    """The quantized graph with corrected biases, each layer's correction, and the graph's output.

    `float_graph` is the graph `qgraph` was quantized from and `float_model` what computes its
    activations (onnxruntime for an ONNX model: 5x faster than the IR's float executor); `data` the
    calibration samples to average over (all of them are run through the int8 graph at once).
    `only`: correct these layers alone (the others as `qgraph` has them, corrected already or not).
    `keep`: tensors whose int8 values the result's prefix holds. `start`: an earlier run's prefix on the
    same float graph and samples; the nodes its tensors make unnecessary are not run (bit-identical)."""
    layers = {n.name: n for n in corrected_layers(float_graph, qgraph) if only is None or n.name in only}
    known = start.float_means if start is not None and _same_inputs(start, float_graph, data) else {}
    float_means = {name: known[name] for name in layers if name in known}
    missing = [name for name in layers if name not in float_means]
    float_means.update(_float_input_means(float_graph, missing, data, batch_size, float_model))
    rounding = Rounding(qgraph.meta.get("rounding", "double"))
    env, skipped = _start(qgraph, data, start, set(layers))
    last_use = _last_uses(qgraph)
    corrections: dict[str, Floats] = {}
    kept: dict[str, np.ndarray] = {name: env[name] for name in keep if name in env}
    with single_threaded():  # the kernels' many small products (quantcore/kernels/blas.py)
        for index, node in enumerate(qgraph.nodes):
            if node.name in skipped:
                continue
            if node.name in layers:
                quantized_mean = _dequantized(qgraph, node.inputs[0], env[node.inputs[0]]).mean(
                    axis=0, keepdims=True
                )
                error = _mean_output(qgraph, node, quantized_mean, True) - _mean_output(
                    float_graph, float_graph.node(node.name), float_means[node.name], False
                )
                corrections[node.name] = rounded(error)
                qgraph = with_corrections(float_graph, qgraph, {node.name: corrections[node.name]})
                node = qgraph.node(node.name)
            env[node.outputs[0]] = int8_exec.run_node(qgraph, node, env, rounding)
            if node.outputs[0] in keep:
                kept[node.outputs[0]] = env[node.outputs[0]]
            for name in [n for n in env if last_use.get(n, len(qgraph.nodes)) <= index]:
                del env[name]  # every sample is held at once: keep only the tensors still to be read
    out = qgraph.outputs[0]
    outputs = int8_exec.dequantize_tensor(qgraph, out, env[out]).reshape(len(data), -1)
    return Corrected(qgraph, corrections, outputs, Prefix(qgraph, float_graph, data, kept, float_means))


def _same_inputs(start: Prefix, float_graph: Graph, data: Samples) -> bool:
    return start.float_graph is float_graph and start.data is data


def _start(
    qgraph: Graph, data: Samples, start: Prefix | None, layers: set[str]
) -> tuple[dict[str, np.ndarray], set[str]]:
    """The int8 tensors a run starts from and the nodes it need not run: the graph input quantized and
    none, or - when `start` holds tensors made by the same nodes as in `qgraph` (same ops, parameters,
    weights and biases) and nothing still to run needs the input or a layer to correct comes before them
    - those tensors and the nodes only they fed."""
    cut = {}
    if start is not None and start.data is data:
        same = tail.shared(start.qgraph, qgraph)
        cut = {name: v for name, v in start.tensors.items() if name in same}
    needed = tail.needed(qgraph, set(cut))
    if cut and qgraph.inputs[0] not in needed.inputs and layers <= needed.names:
        return dict(cut), {n.name for n in qgraph.nodes} - needed.names
    x = to_firmware(qgraph, qgraph.inputs[0], data.x)
    return int8_exec.quantize_inputs(qgraph, {qgraph.inputs[0]: x}), set()


def rounded(values: Any) -> Floats:
    """What the JSON keeps of a correction (7 significant digits); both directions use these values."""
    return np.array([float(f"{v:.7g}") for v in np.asarray(values, np.float64).reshape(-1)])


def corrected_bias(bias: np.ndarray, correction: Any) -> Floats:
    return np.asarray(bias, np.float64) - np.asarray(correction, np.float64)


def with_corrections(float_graph: Graph, qgraph: Graph, corrections: Mapping[str, Floats]) -> Graph:
    """Re-quantize the bias of each corrected layer from its float bias minus the correction."""
    updated = []
    for name, delta in corrections.items():
        bias = qgraph.tensor(qgraph.node(name).inputs[2])
        assert bias.quant is not None and bias.data is not None
        scales = np.broadcast_to(np.asarray(bias.quant.scale, np.float64), delta.shape)
        b = corrected_bias(_float_bias(float_graph.node(name), float_graph, len(delta)), delta)
        updated.append(bias.evolve(data=quantize_bias(b, 1.0, scales, wide=bias.data.dtype == np.int64)))
    return qgraph.with_tensors(*updated)


def corrected_layers(float_graph: Graph, qgraph: Graph) -> list[Node]:
    """The layers bias correction applies to: weighted kernels that are the same op in the float graph
    (an average pool the quantizer runs as a depthwise conv has no float weights to compare with)."""
    names = {n.name: n for n in float_graph.nodes}
    return [
        n
        for n in qgraph.nodes
        if n.attr("kernel") in WEIGHTED_KERNELS and n.name in names and names[n.name].op is n.op
    ]


def _float_input_means(
    float_graph: Graph, layers: list[str], data: Samples, batch_size: int, float_model: FloatModel
) -> dict[str, Floats]:
    """Per layer, the float input averaged over the samples (one (1, ...) array in the IR's layout)."""
    if not layers:
        return {}
    inputs = {name: float_graph.node(name).inputs[0] for name in layers}
    sums: dict[str, Floats] = {}
    input_name = float_graph.inputs[0]
    for start in range(0, len(data), batch_size):
        batch = data.x[start : start + batch_size]
        env = float_model.activations({input_name: batch})
        for layer, tensor in inputs.items():
            part = env[tensor].sum(axis=0, keepdims=True)
            sums[layer] = sums[layer] + part if layer in sums else part
    return {layer: total / len(data) for layer, total in sums.items()}


def _mean_output(graph: Graph, node: Node, mean_input: Floats, quantized: bool) -> Floats:
    """The mean per output channel of the layer's weights applied to its input (no bias, no activation:
    the layer is linear up to there, so this is the layer applied to the mean input) - float weights, or
    the int8 graph's dequantized. The bias stays out on both sides: the int32 bias is re-rounded from
    the corrected float bias, so its old rounding must not be corrected as well."""
    w_name = node.inputs[1]
    channels = graph.constant(w_name).shape[3 if node.op is Op.DEPTHWISE_CONV2D else 0]
    if quantized:
        quant = graph.tensor(w_name).quant
        assert quant is not None
        w = _dequantized_weights(graph.constant(w_name), quant.scale, quant.axis)
    else:
        w = graph.constant(w_name).astype(np.float64)
    bare = node.with_attrs(activation=Activation.NONE, clip=None)
    y = float_exec.evaluate(graph, bare, [mean_input, w, None])
    return np.asarray(y.reshape(-1, channels).mean(axis=0), np.float64)


def _float_bias(node: Node, float_graph: Graph, channels: int) -> np.ndarray:
    if len(node.inputs) > 2 and node.inputs[2]:
        return float_graph.constant(node.inputs[2])
    return np.zeros(channels, np.float32)


def _dequantized(graph: Graph, name: str, q: np.ndarray) -> Floats:
    quant = graph.tensor(name).quant
    assert quant is not None
    return dequantize(q, int8_exec.activation_scale(quant), int(quant.zero_point))


def _dequantized_weights(q: np.ndarray, scale: Any, axis: int | None) -> Floats:
    s = np.asarray(scale, np.float64)
    if axis is None or s.ndim == 0:
        return q.astype(np.float64) * s
    shape = [1] * q.ndim
    shape[axis] = -1
    return q.astype(np.float64) * s.reshape(shape)


def _last_uses(graph: Graph) -> dict[str, int]:
    """The index of the last node reading each tensor (graph outputs: never released)."""
    last: dict[str, int] = {}
    for index, node in enumerate(graph.nodes):
        for name in node.inputs:
            if name:
                last[name] = index
    for name in graph.outputs:
        last[name] = len(graph.nodes)
    return last
