"""The graph IR every stage reads and writes: tensors, nodes, ops. Imports nothing else of quantcore."""

from quantcore.ir.dtypes import DType
from quantcore.ir.graph import Graph, GraphError, Node, QuantParams, Tensor
from quantcore.ir.ops import Activation, Layout, Op

__all__ = ["Activation", "DType", "Graph", "GraphError", "Layout", "Node", "Op", "QuantParams", "Tensor"]
