"""Walking an ONNX model without recursion: every message it holds, whatever the nesting.

A hostile model nests subgraphs (If in Loop in If...) and hides tensors wherever the format allows one
(a function's default attributes, a training graph), so the walks here visit every message of the
protobuf with an explicit stack instead of listing the places a tensor or a graph usually is.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import onnx


def messages(root: Any) -> Iterator[Any]:
    """`root` and every protobuf message inside it, depth first, without recursion."""
    stack = [root]
    while stack:
        message = stack.pop()
        yield message
        for descriptor, value in message.ListFields():
            if descriptor.type != descriptor.TYPE_MESSAGE:
                continue  # numbers, text and raw bytes (float_data may be millions long)
            if descriptor.is_repeated:
                stack.extend(value)
            else:
                stack.append(value)


def graphs_of(node: onnx.NodeProto) -> Iterator[onnx.GraphProto]:
    """The subgraphs of one node (a Loop's body, an If's branches) and theirs."""
    return (m for m in messages(node) if isinstance(m, onnx.GraphProto))


def tensors(model: onnx.ModelProto) -> Iterator[onnx.TensorProto]:
    """Every dense tensor the model stores, wherever it is."""
    return (m for m in messages(model) if isinstance(m, onnx.TensorProto))


def sparse_tensors(model: onnx.ModelProto) -> Iterator[onnx.SparseTensorProto]:
    return (m for m in messages(model) if isinstance(m, onnx.SparseTensorProto))
