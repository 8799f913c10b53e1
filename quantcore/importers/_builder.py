"""The IR graph under construction while ONNX nodes are translated, and the rules every handler shares.

Tensor names are ONNX's (after QDQ stripping, see _qdq). Tensors that an import has to invent (a
transposed Gemm input, the 2-D view of an old-style Softmax) are named "<node>:<role>" and listed in
Graph.meta["synthesized"], since they have no ONNX value to compare against. Constants whose data
the import changes (transposed weights, alpha-scaled weights, a broadcast bias) get "<initializer>:<role>".
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper

from quantcore import limits
from quantcore.display import quoted, shown
from quantcore.errors import ModelError
from quantcore.importers._onnx_load import Loaded, Shape
from quantcore.importers._qdq import Plan
from quantcore.ir import DType, Layout, Node, Op, QuantParams, Tensor
from quantcore.support import OnnxNode

FIX_SHAPES = (
    "export the model with static input shapes (torch.onnx.export without dynamic_axes/dynamic_shapes, "
    "or python -m onnxruntime.tools.make_dynamic_shape_fixed)"
)


class Builder:
    """Collects IR tensors and nodes; resolves ONNX value names, shapes and constants for the handlers."""

    def __init__(self, path: str, loaded: Loaded, plan: Plan) -> None:
        self.path = path
        self.opset = loaded.opset
        self.consts = loaded.consts
        self.types = loaded.types
        self.weight_quant = loaded.weight_quant
        self.plan = plan
        graph = loaded.model.graph
        self.readers: dict[str, list[onnx.NodeProto]] = {}
        for node in graph.node:
            for name in node.input:
                self.readers.setdefault(name, []).append(node)
        self.graph_outputs = {o.name for o in graph.output}
        self.skip: set[str] = set(plan.skip)
        self.tensors: dict[str, Tensor] = {}
        self.nodes: list[Node] = []
        self.synthesized: list[str] = []

    def error(self, problem: str, node: str | None = None) -> ModelError:
        """A ModelError about this model (and `node`, shown shortened and on one line)."""
        return ModelError(self.path, problem, shown(node) if node else None)

    # -- names and shapes -------------------------------------------------------------------------------

    def name(self, value: str) -> str:
        return self.plan.renames.get(value, value)

    def is_const(self, value: str) -> bool:
        return value in self.consts

    def shape(self, value: str, node: str | None = None) -> tuple[int, ...]:
        """The static shape of an ONNX value; an unknown dimension is a ModelError saying what to do."""
        if value in self.consts:
            return tuple(int(d) for d in self.consts[value].shape)
        _, shape = self.types.get(value, (0, None))
        if shape is None:
            raise self.error(
                f"the shape of tensor {quoted(value)} is unknown after shape inference; {FIX_SHAPES}", node
            )
        for axis, dim in enumerate(shape):
            if not isinstance(dim, int) or dim <= 0:
                what = quoted(dim) if isinstance(dim, str) else "unknown"
                raise self.error(
                    f"tensor {quoted(value)} has dimension {axis} {what} after shape inference (shape "
                    f"{_show(shape)}); {FIX_SHAPES}",
                    node,
                )
        return tuple(int(d) for d in shape if isinstance(d, int))

    def facts(self, node: onnx.NodeProto) -> OnnxNode:
        """What the support table's constraints look at (ONNX value names, before QDQ renaming)."""
        return OnnxNode(
            name=node.name,
            op_type=node.op_type,
            opset=self.opset,
            attrs={a.name: _attribute(a) for a in node.attribute},
            inputs=tuple(node.input),
            input_shapes=tuple(self._maybe_shape(i) for i in node.input),
            constants=tuple(self.consts.get(i) if i else None for i in node.input),
            outputs=tuple(node.output),
            outputs_used=tuple(
                bool(o) and (o in self.readers or o in self.graph_outputs) for o in node.output
            ),
        )

    def known_shape(self, value: str) -> tuple[int, ...] | None:
        """The static shape of an ONNX value, None when it is not known."""
        return self._maybe_shape(value)

    def _maybe_shape(self, value: str) -> tuple[int, ...] | None:
        if not value:
            return None
        if value in self.consts:
            return tuple(int(d) for d in self.consts[value].shape)
        _, shape = self.types.get(value, (0, None))
        if shape is None or not all(isinstance(d, int) and d > 0 for d in shape):
            return None
        return tuple(int(d) for d in shape if isinstance(d, int))

    # -- tensors ----------------------------------------------------------------------------------------

    def add_input(self, value: onnx.ValueInfoProto, first_reader: str | None) -> str:
        elem_type = value.type.tensor_type.elem_type
        if elem_type != onnx.TensorProto.FLOAT:
            raise self.error(
                f"graph input {quoted(value.name)} is {_type_name(elem_type)};"
                " Fixpoint imports float32 models"
            )
        self._activation(value.name, self.shape(value.name, first_reader), first_reader)
        return value.name

    def activation(self, value: str, node: str) -> str:
        """The IR name of an activation input (a graph input or an earlier node's output)."""
        name = self.name(value)
        if name not in self.tensors or self.tensors[name].is_constant:
            raise self.error(f"reads {quoted(value)}, which no earlier node produces", node)
        return name

    def output(self, value: str, node: str) -> str:
        """Register an ONNX node output as an IR activation (static float32 shape); returns its IR name."""
        elem_type, _ = self.types.get(value, (onnx.TensorProto.FLOAT, None))
        if elem_type != onnx.TensorProto.FLOAT:
            raise self.error(
                f"produces {quoted(value)} of type {_type_name(elem_type)}; Fixpoint imports float32 layers "
                "(integer tensors are only allowed where they can be computed at import)",
                node,
            )
        return self._activation(self.name(value), self.shape(value, node), node)

    def synthesize(self, node: str, role: str, shape: tuple[int, ...]) -> str:
        """A new activation with no ONNX counterpart (listed in Graph.meta["synthesized"])."""
        name = self._unique(f"{node}:{role}")
        self.synthesized.append(name)
        return self._activation(name, shape)

    def _activation(self, name: str, shape: tuple[int, ...], node: str | None = None) -> str:
        elements = math.prod(shape)
        if elements > limits.ACTIVATION_MAX_ELEMENTS:
            raise self.error(
                f"tensor {quoted(name)} of shape {shape} has {elements} elements; Fixpoint takes activations"
                f" of at most {limits.ACTIVATION_MAX_ELEMENTS} (no microcontroller holds more) - check the"
                " model's shapes",
                node,
            )
        layout = Layout.NCHW if len(shape) == 4 else None
        self.tensors[name] = Tensor(
            name, shape, DType.FLOAT32, layout=layout, quant=self.plan.quant.get(name)
        )
        return name

    def constant(self, value: str, node: str) -> str:
        """The IR name of a constant input, kept with its ONNX name and float32 data."""
        name = self.name(value)
        if name not in self.tensors:
            data = self.float_data(value, node)
            self.tensors[name] = Tensor(name, data.shape, data=data, quant=self.weight_quant.get(value))
        return name

    def operand(self, value: str, node: str) -> str:
        return self.constant(value, node) if self.is_const(value) else self.activation(value, node)

    def derived(self, source: str, role: str, data: np.ndarray, quant: QuantParams | None) -> str:
        """A constant computed from `source` (transposed, scaled, reshaped): "<source>:<role>"."""
        name = self._unique(f"{source}:{role}")
        data = np.ascontiguousarray(data, np.float32)
        self.tensors[name] = Tensor(name, data.shape, data=data, quant=quant)
        return name

    def float_data(self, value: str, node: str) -> np.ndarray:
        """A constant's value as float32, rejecting integer constants and NaN/Inf."""
        data = self.consts[value]
        if not np.issubdtype(data.dtype, np.floating):
            raise self.error(
                f"reads the {data.dtype} constant {quoted(value)} where a float32 tensor is expected", node
            )
        data = np.ascontiguousarray(data, np.float32)
        finite = np.isfinite(data)
        if not finite.all():
            bad = int(data.size - np.count_nonzero(finite))
            first = tuple(int(i) for i in np.unravel_index(int(np.argmin(finite)), data.shape))
            raise self.error(
                f"initializer {quoted(value)} holds {bad} NaN/Inf value(s) of {data.size} (the first at"
                f" index {first}); re-export from a model with finite weights",
                node,
            )
        return data

    def _unique(self, name: str) -> str:
        candidate, n = name, 1
        while candidate in self.tensors or candidate in self.types or candidate in self.consts:
            candidate, n = f"{name}_{n}", n + 1
        return candidate

    # -- nodes ------------------------------------------------------------------------------------------

    def emit(
        self,
        name: str,
        op: Op,
        inputs: Sequence[str],
        outputs: Sequence[str],
        attrs: Mapping[str, Any] | None = None,
    ) -> None:
        self.nodes.append(Node(name, op, tuple(inputs), tuple(outputs), dict(attrs or {})))


def _attribute(attr: onnx.AttributeProto) -> Any:
    if attr.type == onnx.AttributeProto.TENSOR:
        return numpy_helper.to_array(attr.t)
    value = helper.get_attribute_value(attr)
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, list) and value and isinstance(value[0], bytes):
        return [v.decode("utf-8", "replace") for v in value]
    return value


def _type_name(elem_type: int) -> str:
    return str(onnx.TensorProto.DataType.Name(elem_type)).lower() if elem_type else "of unknown type"


def _show(shape: Shape) -> str:
    return "(" + ", ".join("?" if d is None else shown(str(d)) for d in shape) + ")"
