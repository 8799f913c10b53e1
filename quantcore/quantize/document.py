"""The quant-params document: a quantized graph written as the readable JSON of DOMAIN.md section 6, and
back. The JSON is the source of truth downstream (evaluation, code generation, the editor's checks): a
graph rebuilt from it takes every scale, zero point and kernel parameter from the file, and recomputes
only the integer weights and biases, from the model, with the file's scales.

The JSON holds no weights. Parameters made by quantization-aware training belong to fine-tuned float
weights, which live in a sidecar .npz next to the JSON (one array per IR constant, by tensor name); the
document's "finetuned" entry names that file and its SHA-256, and `finetuned_weights` reads and checks it.
"""

from __future__ import annotations

import hashlib
import io
import os
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from quantcore import __version__, display, limits, untrusted
from quantcore.errors import InputError
from quantcore.ir import Activation, DType, Graph, Node, Op, QuantParams, Tensor, io_layout
from quantcore.passes.equalize import equalize
from quantcore.quantize import lowering, recurrent
from quantcore.quantize.bias_correction import corrected_bias
from quantcore.quantize.params import WEIGHTED_KERNELS
from quantcore.quantize.params_json import FORMAT, VERSION
from quantcore.quantize.precision import S16_CAPABLE, assign_precision
from quantcore.quantize.recurrent import RECURRENT_KERNELS
from quantcore.scheme.arith import quantize_bias, quantize_weights, weight_floor

CMSIS_NN_API = "7.0.0"
_S16_OPS = {op.json_name for op in S16_CAPABLE}


class DocumentError(InputError):
    """A quant-params document that does not fit the model it is applied to (message names the JSON path)."""


def to_document(
    qgraph: Graph,
    calibration: Mapping[str, Any],
    transforms: Mapping[str, Any] | None = None,
    finetuned: Mapping[str, Any] | None = None,
    mixed_precision: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    meta = qgraph.meta
    document = {
        "format": FORMAT,
        "version": VERSION,
        "generator": f"fixpoint {__version__}",
        "model": {
            "path": str(meta.get("source_name", meta.get("source", qgraph.name))),
            "sha256": str(meta.get("sha256", "")),
            "inputs": [_io(qgraph, n) for n in qgraph.inputs],
            "outputs": [_io(qgraph, n) for n in qgraph.outputs],
        },
        "scheme": {
            "cmsis_nn": CMSIS_NN_API,
            "rounding": meta.get("rounding", "double"),
            "weights": meta.get("weights", "per-channel"),
            "activations": "int8",
        },
        "calibration": dict(calibration),
        "tensors": _tensors(qgraph),
        "layers": [_layer(qgraph, n) for n in qgraph.nodes],
    }
    if transforms:
        document["transforms"] = dict(transforms)
    if finetuned:
        document["finetuned"] = dict(finetuned)
    if mixed_precision:
        document["mixed_precision"] = dict(mixed_precision)
    return _ordered(document)


def _ordered(document: dict[str, Any]) -> dict[str, Any]:
    """Keys in the order a reader meets them: transforms and fine-tuning right after calibration."""
    order = ["format", "version", "generator", "model", "scheme", "calibration", "transforms"]
    order += ["finetuned", "mixed_precision"]
    return {k: document[k] for k in [*order, *document] if k in document}


def equalization_applied(doc: Mapping[str, Any]) -> bool:
    """Whether the document's parameters were computed on the cross-layer-equalized model."""
    entry = doc.get("transforms", {}).get("cross_layer_equalization", {})
    return bool(entry.get("applied", False))


def _io(graph: Graph, name: str) -> dict[str, Any]:
    tensor = graph.tensor(name)
    entry: dict[str, Any] = {"name": name, "shape": list(tensor.shape)}
    if tensor.layout is not None:
        entry["layout"] = tensor.layout.value
    model_layout = io_layout.model_layout(graph, name)  # what an application is told to convert from
    if model_layout is not None:
        entry["model_layout"] = model_layout.value
    return entry


def _tensors(graph: Graph) -> dict[str, Any]:
    entries: dict[str, Any] = {}
    for tensor in graph.activations():
        entries[tensor.name] = _activation_entry(tensor)
    for node in graph.nodes:
        if node.attr("kernel") in WEIGHTED_KERNELS:
            entries[node.inputs[1]] = _constant_entry(graph.tensor(node.inputs[1]), "weight")
            entries[node.inputs[2]] = _constant_entry(graph.tensor(node.inputs[2]), "bias")
    return entries


def _activation_entry(tensor: Tensor) -> dict[str, Any]:
    q = tensor.quant
    assert q is not None, tensor.name
    entry: dict[str, Any] = {
        "kind": "activation",
        "dtype": q.dtype.label,
        "scale": _floats(q.scale),
        "zero_point": int(q.zero_point),
    }
    if q.axis is not None:  # per-channel scales into depthwise layers (transforms.dw_channel_scales)
        entry["axis"] = q.axis
    entry["shape"] = list(tensor.shape)
    if q.observed is not None:
        entry["observed"] = {"min": float(q.observed[0]), "max": float(q.observed[1])}
    if q.clip is not None:
        entry["range"] = {"min": float(q.clip[0]), "max": float(q.clip[1])}
    if q.method is not None:
        entry["method"] = q.method
    return entry


def _constant_entry(tensor: Tensor, kind: str) -> dict[str, Any]:
    q = tensor.quant
    assert q is not None, tensor.name
    entry: dict[str, Any] = {
        "kind": kind,
        "dtype": q.dtype.label,
        "scale": _floats(q.scale),
        "zero_point": 0 if kind == "bias" else _ints(q.zero_point),
    }
    if kind == "weight" and q.axis is not None:
        entry["axis"] = q.axis
    entry["shape"] = list(tensor.shape)
    if kind == "weight" and q.observed is not None:
        entry["observed"] = {"min": q.observed[0], "max": q.observed[1]}
    return entry


def _floats(values: np.ndarray) -> float | list[float]:
    return float(values) if np.ndim(values) == 0 else [float(v) for v in values]


def _ints(values: np.ndarray) -> int | list[int]:
    return int(values) if np.ndim(values) == 0 else [int(v) for v in values]


def _layer(graph: Graph, node: Node) -> dict[str, Any]:
    kernel = node.attr("kernel")
    weighted = kernel in WEIGHTED_KERNELS
    # A recurrent layer's other inputs are the model's own integer constants, recomputed from the model.
    data_inputs = (
        list(node.inputs[:1]) if weighted or kernel in RECURRENT_KERNELS else [i for i in node.inputs if i]
    )
    entry: dict[str, Any] = {"name": node.name, "op": node.op.json_name, "kernel": kernel}
    entry["inputs"] = data_inputs
    entry["outputs"] = list(node.outputs)
    if weighted:
        entry["weights"], entry["bias"] = node.inputs[1], node.inputs[2]
    activation = node.attr("activation", Activation.NONE)
    if activation is not Activation.NONE:
        entry["activation"] = activation.value
    entry["params"] = dict(node.attr("params", {}))
    return entry


# -- back: document + prepared float graph -> quantized graph -------------------------------------


def from_document(
    graph: Graph, doc: Mapping[str, Any], finetuned: Mapping[str, np.ndarray] | None = None
) -> Graph:
    """Apply a (validated) document to the prepared float graph of the same model.

    A document with a "finetuned" entry needs those weights (`finetuned_weights(doc, params_path)`).
    """
    graph = float_graph_for(graph, doc, finetuned)
    tensors = doc["tensors"]
    wide = [
        layer["name"]
        for layer in doc["layers"]
        if layer["op"] in _S16_OPS and tensors.get(layer["outputs"][0], {}).get("dtype") == "int16"
    ]
    graph, _ = assign_precision(graph, wide)
    updated = []
    for tensor in graph.activations():
        entry = tensors.get(tensor.name)
        if entry is None:
            raise DocumentError(f'$.tensors["{tensor.name}"]: missing; the model has this activation tensor')
        updated.append(tensor.evolve(dtype=_dtype(entry["dtype"]), quant=_activation_quant(entry)))
    graph = graph.with_tensors(*updated)
    layers = {layer["name"]: (i, layer) for i, layer in enumerate(doc["layers"])}
    corrections = bias_corrections(doc)
    nodes = []
    for node in graph.nodes:
        if node.name not in layers:
            raise DocumentError(
                f"$.layers: no layer named {node.name!r}; regenerate the parameters for this model"
            )
        index, layer = layers[node.name]
        node, constants = _apply_layer(graph, node, layer, tensors, index, corrections.get(node.name))
        graph = graph.with_tensors(*constants)
        nodes.append(node)
    scheme = doc["scheme"]
    return graph.evolve(
        nodes=nodes, meta={**graph.meta, "rounding": scheme["rounding"], "weights": scheme["weights"]}
    )


def float_graph_for(
    graph: Graph, doc: Mapping[str, Any], finetuned: Mapping[str, np.ndarray] | None = None
) -> Graph:
    """The float graph the document's parameters were computed on: the prepared graph, equalized when
    the document says so, with its fine-tuned constants, and with the average pools the quantizer
    lowered to depthwise convolutions lowered again."""
    if equalization_applied(doc):
        graph = equalize(graph).graph  # deterministic: the same weights the quantizer calibrated
    graph = _with_finetuned(graph, doc, finetuned)
    pools = {n.name for n in graph.nodes if n.op is Op.AVG_POOL}
    lowered = [layer["name"] for layer in doc["layers"] if layer["op"] == "depthwise_conv2d"]
    lowered = [name for name in lowered if name in pools]
    recorded = lowering.substituted_in(doc)
    if "pool_as_depthwise" in doc.get("transforms", {}):
        _check_substitutions(recorded, lowered)
    return lowering.substitute(graph, {name: recorded.get(name, "") for name in lowered})


def _check_substitutions(recorded: Mapping[str, str], lowered: list[str]) -> None:
    """The pools the layers run as depthwise convolutions are those transforms.pool_as_depthwise names."""
    for name in recorded:
        if name not in lowered:
            raise DocumentError(
                f"$.transforms.pool_as_depthwise.layers[{display.quoted(name)}]: substituted, but no"
                " depthwise_conv2d layer of that name replaces an average pool of the model;"
                " re-run fixpoint quantize for this model"
            )
    for name in lowered:
        if name not in recorded:
            raise DocumentError(
                f"$.layers: {display.quoted(name)} runs the model's average pool as depthwise_conv2d,"
                " but $.transforms.pool_as_depthwise does not record it; re-run fixpoint quantize"
            )


def write_finetuned(
    params_path: str | os.PathLike[str], document: Mapping[str, Any], weights: Mapping[str, np.ndarray]
) -> dict[str, Any]:
    """Write the fine-tuned constants next to the JSON at `params_path` (as <stem>.finetuned.npz), then
    the JSON with its "finetuned" entry naming that file and its SHA-256; both writes are atomic, the
    weights first, so a JSON on disk always names weights that exist. Returns the document written."""
    from quantcore.quantize import params_json

    params = Path(params_path)
    sidecar = params.with_name(f"{params.stem}.finetuned.npz")
    buffer = io.BytesIO()
    arrays: dict[str, Any] = {name: np.asarray(values, np.float32) for name, values in weights.items()}
    np.savez(buffer, **arrays)
    raw = buffer.getvalue()
    entry = {
        **document.get("finetuned", {}),
        "weights": sidecar.name,
        "sha256": hashlib.sha256(raw).hexdigest(),
    }
    written = _ordered({**document, "finetuned": {"method": "qat", **entry}})
    try:
        text = params_json.encoded(params, written)  # validated before either file is touched
    except params_json.QuantParamsError as exc:
        raise DocumentError(f"{params}: not written: {exc.problems[0]}") from exc
    params_json.write_atomically(sidecar, raw)
    params_json.write_atomically(params, text)
    return written


def finetuned_weights(
    doc: Mapping[str, Any], params_path: str | os.PathLike[str]
) -> dict[str, np.ndarray] | None:
    """The fine-tuned constants of a document (None when it has none), read from the sidecar file its
    "finetuned" entry names, in the folder of the JSON at `params_path`, and checked against the SHA-256
    the entry records."""
    entry = doc.get("finetuned")
    if entry is None:
        return None
    params = Path(params_path)
    path = params.parent / entry["weights"]
    try:
        # A regular file inside the JSON's folder, within the size of a model: never a FIFO that would
        # block, a symlink to /dev/zero or to a file outside the project.
        raw = untrusted.read_bytes(path, limit=limits.MODEL_MAX_BYTES, root=params.parent)
    except untrusted.UntrustedInputError as exc:
        raise DocumentError(
            f"{path}: cannot read the fine-tuned weights {params.name} was made with"
            f" ({exc.problem}); keep {path.name} next to {params.name}, or re-run fixpoint qat"
        ) from exc
    digest = hashlib.sha256(raw).hexdigest()
    if digest != entry["sha256"]:
        raise DocumentError(
            f"{path}: sha256 {digest[:12]}..., but {params.name} records {entry['sha256'][:12]}... for it:"
            " the fine-tuned weights changed after fixpoint qat wrote them; restore the file written"
            " with the JSON, or re-run fixpoint qat to write both again"
        )
    return _npz_arrays(path, raw)


def _npz_arrays(path: Path, raw: bytes) -> dict[str, np.ndarray]:
    """The arrays of an .npz, refused (not decompressed) when its members would expand past the size a
    model's weights can have: a zip bomb is a message, not a MemoryError."""
    try:
        with zipfile.ZipFile(io.BytesIO(raw)) as archive:
            expanded = sum(info.file_size for info in archive.infolist())
        if expanded > limits.MODEL_MAX_BYTES:
            raise DocumentError(
                f"{path}: its arrays would expand to {expanded} bytes, more than a model's weights"
                f" ({limits.MODEL_MAX_BYTES}); re-run fixpoint qat"
            )
        with np.load(io.BytesIO(raw), allow_pickle=False) as npz:
            return {name: npz[name] for name in npz.files}
    except (OSError, ValueError, EOFError, KeyError, zipfile.BadZipFile) as exc:
        problem = display.shorten(str(exc))
        raise DocumentError(
            f"{path}: not a readable .npz of weights ({problem}); re-run fixpoint qat"
        ) from exc


def _with_finetuned(
    graph: Graph, doc: Mapping[str, Any], finetuned: Mapping[str, np.ndarray] | None
) -> Graph:
    entry = doc.get("finetuned")
    if entry is None:
        return graph
    if finetuned is None:
        raise DocumentError(
            f"$.finetuned: the parameters belong to the fine-tuned weights in {entry['weights']!r}, which"
            " were not loaded; read them with finetuned_weights(document, params_path)"
        )
    tensors = []
    for name, values in finetuned.items():
        tensor = graph.tensors.get(name)
        if tensor is None or not tensor.is_constant:
            raise DocumentError(
                f"{entry['weights']}: {name!r} is not a constant of the model; the weights were"
                " fine-tuned for another model: re-run fixpoint qat for this one"
            )
        if tuple(values.shape) != tuple(tensor.shape):
            raise DocumentError(
                f"{entry['weights']}: {name!r} has shape {list(values.shape)}, the model's has"
                f" {list(tensor.shape)}: re-run fixpoint qat for this model"
            )
        tensors.append(tensor.evolve(data=np.asarray(values, np.float32)))
    return graph.with_tensors(*tensors)


def _dtype(label: str) -> DType:
    return {d.label: d for d in DType}[label]


def _activation_quant(entry: Mapping[str, Any]) -> QuantParams:
    observed = (entry["observed"]["min"], entry["observed"]["max"]) if "observed" in entry else None
    clip = (entry["range"]["min"], entry["range"]["max"]) if "range" in entry else None
    return QuantParams(
        _dtype(entry["dtype"]),
        np.array(entry["scale"], np.float64),
        np.array(entry["zero_point"]),
        axis=entry.get("axis"),
        observed=observed,
        clip=clip,
        method=entry.get("method"),
    )


def bias_corrections(doc: Mapping[str, Any]) -> dict[str, list[float]]:
    """Per layer, what empirical bias correction subtracted from the float bias ({} when not applied)."""
    entry = doc.get("transforms", {}).get("bias_correction", {})
    return dict(entry.get("layers", {})) if entry.get("applied", False) else {}


def _apply_layer(
    graph: Graph,
    node: Node,
    layer: Mapping[str, Any],
    tensors: Mapping[str, Any],
    index: int,
    correction: list[float] | None = None,
) -> tuple[Node, list[Tensor]]:
    path = f"$.layers[{index}]"
    if layer["op"] != node.op.json_name:
        raise DocumentError(
            f"{path}.op: {layer['op']!r}, but the model's node {node.name!r} is {node.op.json_name!r}"
        )
    attrs = {"kernel": layer.get("kernel"), "params": dict(layer.get("params", {}))}
    if layer.get("kernel") in RECURRENT_KERNELS:  # the model's integers; the file's parameters
        quantized, constants = recurrent.quantize(graph, node.with_attrs(**attrs))
        return quantized.with_attrs(**attrs), constants
    if layer.get("kernel") not in WEIGHTED_KERNELS:
        return node.with_attrs(**attrs), []
    w_entry, b_entry = tensors[layer["weights"]], tensors[layer["bias"]]
    w = graph.constant(node.inputs[1])
    axis = w_entry.get("axis")
    w_scale = np.asarray(w_entry["scale"], np.float64)
    if list(w.shape) != list(w_entry["shape"]):
        raise DocumentError(
            f'$.tensors["{layer["weights"]}"].shape: {w_entry["shape"]}, but the model has {list(w.shape)}'
        )
    q_w = quantize_weights(w, w_scale, axis, weight_floor(graph.tensor(node.inputs[1]).quant))
    channels = w.shape[3 if node.op is Op.DEPTHWISE_CONV2D else 0]  # per-tensor weights have no axis
    b = graph.constant(node.inputs[2]) if node.inputs[2] else np.zeros(channels, np.float32)
    if correction is not None:
        if len(correction) != channels:
            raise DocumentError(
                f"$.transforms.bias_correction.layers[{node.name!r}]: {len(correction)} values, but the layer"
                f" has {channels} output channels; re-run fixpoint quantize for this model"
            )
        b = corrected_bias(b, correction)
    b_scale = np.broadcast_to(np.asarray(b_entry["scale"], np.float64), (channels,))
    q_b = quantize_bias(b, 1.0, b_scale, wide=b_entry["dtype"] == "int64")
    wq = Tensor(
        layer["weights"],
        q_w.shape,
        DType.INT8,
        q_w,
        quant=QuantParams(DType.INT8, w_scale, np.zeros(w_scale.shape, np.int64), axis=axis),
    )
    b_dtype = _dtype(b_entry["dtype"])
    bq = Tensor(
        layer["bias"],
        q_b.shape,
        b_dtype,
        q_b,
        quant=QuantParams(b_dtype, np.array(b_scale), np.zeros(channels, np.int64), axis=0),
    )
    return node.evolve(inputs=(node.inputs[0], wq.name, bq.name)).with_attrs(**attrs), [wq, bq]
