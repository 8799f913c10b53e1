"""The shapes of the support table: what a constraint looks at, a constraint, one operator's entry.

A constraint is a small predicate whose docstring is the rule shown to the user when it fails (in the
importer's UnsupportedError, the server's diagnostics, codegen's errors and SUPPORTED_OPS.md), so the
wording lives in exactly one place. Predicates return True when the node is fine. A predicate may carry,
through `@about`, a sentence on what the failing node has (`its input is 3-D`); a message about one node
(`Constraint.explain`) starts with that sentence, then gives the rule.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import numpy as np

from quantcore.ir import Graph, Node, Op


@dataclass(frozen=True)
class OnnxNode:
    """One ONNX node as the importer sees it: decoded attributes, static shapes, constant inputs."""

    name: str
    op_type: str
    opset: int
    """The model's default-domain opset (the version whose semantics apply to this node)."""
    attrs: Mapping[str, Any]
    """Attribute values as Python objects (ints, floats, str, lists, numpy arrays for tensors)."""
    inputs: tuple[str, ...]
    input_shapes: tuple[tuple[int, ...] | None, ...]
    """Static shape of each input; None for an absent optional input or a shape that is not known."""
    constants: tuple[np.ndarray | None, ...]
    """The value of each input that is a constant (initializer, Constant node, folded subgraph), else None."""
    outputs: tuple[str, ...] = ()
    outputs_used: tuple[bool, ...] = ()
    """For each output: does a later node or the graph output read it."""

    def attr(self, key: str, default: Any = None) -> Any:
        return self.attrs.get(key, default)

    def has_input(self, index: int) -> bool:
        return index < len(self.inputs) and self.inputs[index] != ""

    def const(self, index: int) -> np.ndarray | None:
        return self.constants[index] if index < len(self.constants) else None

    def is_const(self, index: int) -> bool:
        return self.const(index) is not None

    def rank(self, index: int) -> int | None:
        shape = self.input_shapes[index] if index < len(self.input_shapes) else None
        return None if shape is None else len(shape)


T = TypeVar("T")
P = TypeVar("P", bound=Callable[..., bool])


def about(describe: Callable[[Any], str]) -> Callable[[P], P]:
    """Attach to a predicate the sentence on what a failing node has, e.g. "its input is 3-D"."""

    def attach(check: P) -> P:
        # A function takes attributes at run time but has no `about` in its type; explain() reads it back.
        check.about = describe  # type: ignore[attr-defined]
        return check

    return attach


@dataclass(frozen=True)
class Constraint(Generic[T]):
    """A predicate over a node (an OnnxNode, or an IR (graph, node) pair) whose docstring is its reason."""

    check: Callable[[T], bool]

    @property
    def name(self) -> str:
        return self.check.__name__

    @property
    def reason(self) -> str:
        """The rule, the same for every node (SUPPORTED_OPS.md lists it)."""
        return " ".join(inspect.cleandoc(self.check.__doc__ or self.name).split())

    def explain(self, subject: T) -> str:
        """The message for one node that fails the constraint: what it has, then the rule."""
        describe: Callable[[T], str] | None = getattr(self.check, "about", None)
        if describe is None:
            return self.reason
        fact = describe(subject)
        return f"{fact[:1].upper()}{fact[1:]}. {self.reason}"

    def __call__(self, subject: T) -> bool:
        return self.check(subject)


OnnxConstraint = Constraint[OnnxNode]
KernelConstraint = Constraint[tuple[Graph, Node]]


@dataclass(frozen=True)
class OpSupport:
    """One ONNX operator the importer maps: what it becomes, where it ends up, and its constraints."""

    op_type: str
    ir_ops: tuple[Op, ...]
    """The IR op(s) an import produces for it (empty: removed at import, e.g. Constant)."""
    constraints: tuple[OnnxConstraint, ...] = ()
    notes: str = ""
    """How the import maps it (attribute handling, folding), one or two sentences for SUPPORTED_OPS.md."""

    def violations(self, node: OnnxNode) -> list[OnnxConstraint]:
        return [c for c in self.constraints if not c(node)]


@dataclass(frozen=True)
class KernelSupport:
    """One IR op in CMSIS-NN form (after the passes): the kernels that run it and what they require."""

    op: Op
    kernels: tuple[str, ...]
    """CMSIS-NN functions that implement it (empty: no kernel, the passes must remove it)."""
    constraints: tuple[KernelConstraint, ...] = field(default=())
    notes: str = ""

    def violations(self, graph: Graph, node: Node) -> list[KernelConstraint]:
        return [c for c in self.constraints if not c((graph, node))]
