"""A model ONNX Runtime already quantized (QDQ) keeps its scales through fixpoint quantize."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx

from quantcore.cli import main
from quantcore.quantize import params_json
from tests import needs
from tests.onnx_models import small_cnn


class _Reader:
    def __init__(self, x: np.ndarray) -> None:
        self.items = iter([{"x": x[i : i + 1]} for i in range(len(x))])

    def get_next(self) -> dict[str, np.ndarray] | None:
        return next(self.items, None)


def test_qdq_model_keeps_onnxruntime_scales(tmp_path: Path) -> None:
    quantization = needs.module("onnxruntime.quantization", "onnxruntime.quantization is needed")
    float_path, qdq_path = tmp_path / "float.onnx", tmp_path / "qdq.onnx"
    onnx.save(small_cnn(batch=1), tmp_path / "raw.onnx")
    # As ONNX Runtime recommends: its pre-processing folds the BatchNorm into the conv first.
    quantization.quant_pre_process(str(tmp_path / "raw.onnx"), str(float_path))
    x = np.random.default_rng(3).uniform(0, 1, (32, 1, 16, 16)).astype(np.float32)
    quantization.quantize_static(
        str(float_path),
        str(qdq_path),
        _Reader(x),
        quant_format=quantization.QuantFormat.QDQ,
        per_channel=True,
        activation_type=quantization.QuantType.QInt8,
        weight_type=quantization.QuantType.QInt8,
    )
    np.savez(tmp_path / "calib.npz", x=x)
    out = tmp_path / "params.json"
    assert main(["quantize", str(qdq_path), "--calib", str(tmp_path / "calib.npz"), "-o", str(out)]) == 0
    doc = params_json.load(out)
    scales = {}
    for init in onnx.load(qdq_path).graph.initializer:
        if init.name.endswith("_scale"):
            scales[init.name[: -len("_scale")]] = onnx.numpy_helper.to_array(init)
    conv1_out = doc["layers"][0]["outputs"][0]
    assert doc["tensors"][conv1_out]["method"] == "imported"
    assert doc["tensors"][conv1_out]["scale"] == float(scales[conv1_out])
    weight = doc["tensors"][doc["layers"][0]["weights"]]
    w_scale = next(v for k, v in scales.items() if k.endswith("c1.w"))  # ConvBnFusion_W_c1.w after folding
    assert weight["scale"] == [float(s) for s in w_scale]
