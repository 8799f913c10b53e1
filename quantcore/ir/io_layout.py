"""The layout the model file gives each graph input and output, against the firmware's (NHWC) one.

The firmware is NHWC throughout (CMSIS-NN's layout). A model's own 4-D inputs and outputs are either NCHW
(PyTorch, most ONNX files: the application transposes (n, c, h, w) -> (n, h, w, c)) or NHWC (models
converted from TensorFlow/Keras/TFLite: the application writes the model's own values unchanged). to_nhwc
records which in graph.meta[MODEL_LAYOUTS]; model.h states it, and `verify` prepares its test inputs
with these functions - the same conversion an application is told to make, done on the host.
"""

from __future__ import annotations

from typing import TypeVar

import numpy as np

from quantcore.ir import Graph, Layout

MODEL_LAYOUTS = "model_layouts"
"""graph.meta key: {graph input or output name: "NCHW" or "NHWC"}, the layout the model file gives it."""

NCHW_TO_NHWC = (0, 2, 3, 1)
NHWC_TO_NCHW = (0, 3, 1, 2)

Array = TypeVar("Array", bound=np.ndarray)


def model_layout(graph: Graph, name: str) -> Layout | None:
    """The layout of `name` in the model file; None for a tensor that is not 4-D.

    A graph prepared before this was recorded (every 4-D tensor taken as NCHW) reads as NCHW."""
    recorded = graph.meta.get(MODEL_LAYOUTS, {}).get(name)
    if recorded is not None:
        return Layout(recorded)
    tensor = graph.tensor(name)
    if len(tensor.shape) != 4:
        return None
    return Layout.NCHW if tensor.layout is Layout.NHWC else tensor.layout


def transposed(graph: Graph, name: str) -> bool:
    """Whether the model's values of `name` are NCHW while the firmware's are NHWC."""
    return graph.tensor(name).layout is Layout.NHWC and model_layout(graph, name) is Layout.NCHW


def model_shape(graph: Graph, name: str) -> tuple[int, ...]:
    """The shape of `name` as the model file gives it (batch first)."""
    shape = graph.tensor(name).shape
    return tuple(shape[i] for i in NHWC_TO_NCHW) if transposed(graph, name) else tuple(shape)


def to_firmware(graph: Graph, name: str, value: Array) -> Array:
    """Values of `name` in the model's layout -> the firmware's (what model.h tells an application)."""
    return value.transpose(NCHW_TO_NHWC) if transposed(graph, name) and value.ndim == 4 else value


def to_model(graph: Graph, name: str, value: Array) -> Array:
    """Values of `name` in the firmware's layout -> the model's."""
    return value.transpose(NHWC_TO_NCHW) if transposed(graph, name) and value.ndim == 4 else value
