"""Activation histograms for the report: what each activation's float values look like on the
calibration set, beside the range the quantizer chose for it (its clipping thresholds).

The quant-params JSON records, per activation, the observed min/max and the chosen range; the values
themselves are not kept, so they are recomputed: the float model (onnxruntime, the same one calibration
ran, equalized when the parameters are) over the calibration samples, one pass. The bins span the
observed values and the chosen range together, so a clip and the tail it cuts are both visible; values
outside the chosen range are counted as clipped (below and above). Each entry:

    {"tensor", "layer" (its producer, or "input"), "dtype", "method", "scale", "zero_point",
     "observed": {"min", "max"} or null, "range": {"min", "max"},
     "histogram": {"edges": [bins + 1], "counts": [bins], "values": N, "clipped_low": n, "clipped_high": n}}

Not every activation has a calibrated range: an op that fixes its output's scale and zero point (softmax:
1/256 and -128; method "fixed") and an imported int8 model's scales (method "imported") record none, and
an imported one no observed range either. Their "range" is then the one the scale and zero point represent,
scale * (qmin - zero_point) .. scale * (qmax - zero_point) - which is what clips - and "observed" is null
when the document has none.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from quantcore.report.charts import extent
from quantcore.scheme.qparams import Dtype, representable_range

if TYPE_CHECKING:  # an annotation only: the pipeline is imported where it runs
    from quantcore.pipeline import LoadedModel

DEFAULT_BINS = 64
BATCH = 64


def activation_entries(document: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The activations of a quant-params document, in graph order (inputs, then layer outputs)."""
    tensors = document["tensors"]
    producers: dict[str, str] = {}
    order = [i["name"] for i in document["model"]["inputs"]]
    for layer in document["layers"]:
        for out in layer["outputs"]:
            producers.setdefault(out, layer["name"])
            order.append(out)
    entries = []
    for name in dict.fromkeys(order):
        tensor = tensors.get(name)
        if tensor is None or tensor.get("kind") != "activation":
            continue
        entries.append({
            "tensor": name,
            "layer": producers.get(name, "input"),
            "dtype": tensor.get("dtype", "int8"),
            "method": tensor.get("method"),
            "scale": coarsest(tensor["scale"]),
            "zero_point": int(tensor["zero_point"]),
            "observed": _range(tensor["observed"]) if "observed" in tensor else None,
            "range": _range(tensor["range"]) if "range" in tensor else represented(tensor),
            "histogram": None,
        })  # fmt: skip
    return entries


def represented(tensor: Mapping[str, Any]) -> dict[str, float]:
    """The real range an activation's scale and zero point represent (its dtype's integer range)."""
    dtype: Dtype = "int16" if tensor.get("dtype") == "int16" else "int8"  # the schema's only two
    lo, hi = representable_range(coarsest(tensor["scale"]), int(tensor["zero_point"]), dtype)
    return {"min": lo, "max": hi}


def coarsest(scale: float | list[float]) -> float:
    """An activation's scale, or the largest of its per-channel scales (a depthwise layer's input,
    transforms.dw_channel_scales): the one that represents the tensor's whole range."""
    return float(max(scale)) if isinstance(scale, list) else float(scale)


def _range(recorded: Mapping[str, Any]) -> dict[str, float]:
    return {k: float(v) for k, v in recorded.items()}


def _converted_copies(document: Mapping[str, Any]) -> dict[str, str]:
    """{copy: its source} for the int8 <-> int16 conversions (mixed precision): the float model has no
    tensor of the copy's name, and the copy holds the source's real values (quantcore/quantize/
    precision.py)."""
    return {
        layer["outputs"][0]: layer["inputs"][0] for layer in document["layers"] if layer["op"] == "requantize"
    }


def compute(
    loaded: LoadedModel, document: Mapping[str, Any], data: Any, bins: int = DEFAULT_BINS, batch: int = BATCH
) -> list[dict[str, Any]]:
    """The entries with their histograms over `data` (a quantcore.data.DataSet) through `loaded`'s
    float model (a quantcore.pipeline.LoadedModel the document was made from)."""
    from quantcore import pipeline

    entries = activation_entries(document)
    source = _converted_copies(document)
    float_model = pipeline.float_model_for(loaded, document)
    input_name = loaded.graph.inputs[0]
    state: dict[str, dict[str, Any]] = {}
    for entry in entries:
        lo, hi = extent(entry)
        if not hi > lo:
            hi = lo + max(abs(lo), 1.0) * 1e-6
        state[entry["tensor"]] = {"edges": np.linspace(lo, hi, bins + 1), "counts": np.zeros(bins, np.int64)}
        state[entry["tensor"]].update(values=0, low=0, high=0)
    for x in data.batches(batch):
        values = float_model.activations({input_name: x}, layout=False)
        for entry in entries:
            v = np.asarray(values[source.get(entry["tensor"], entry["tensor"])], np.float64).ravel()
            s = state[entry["tensor"]]
            s["counts"] += np.histogram(v, bins=s["edges"])[0]
            s["values"] += v.size
            s["low"] += int(np.count_nonzero(v < entry["range"]["min"]))
            s["high"] += int(np.count_nonzero(v > entry["range"]["max"]))
    for entry in entries:
        s = state[entry["tensor"]]
        entry["histogram"] = {
            "edges": [float(e) for e in s["edges"]],
            "counts": [int(c) for c in s["counts"]],
            "values": int(s["values"]),
            "clipped_low": int(s["low"]),
            "clipped_high": int(s["high"]),
        }
    return entries
