"""Constant folding within a budget: ONNX's reference implementation runs a node only once its cost is
known to fit.

The importer computes every node whose inputs are all constants (quantcore/importers/_onnx_load.py).
A model is untrusted input, and a node can ask for any amount of work: a constant `Loop` of 10^12
iterations hangs, a `ConstantOfShape` of 40000 x 40000 floats exhausts memory. So every node that
onnx.reference runs - at the top level, and inside the subgraphs of Loop, Scan and If, iteration by
iteration - is first estimated from its concrete inputs (quantcore/importers/_fold_cost.py) and refused
when it would pass a limit of quantcore.limits:

- FOLD_MAX_ELEMENTS for one output, FOLD_MAX_TOTAL_ELEMENTS for everything folded in one model;
- FOLD_MAX_LOOP_ITERATIONS for the iterations of all Loops and Scans (a loop without a trip count
  cannot be bounded and is refused);
- limits.FOLD_MAX_OPERATIONS for the arithmetic, so that a MatMul or a pooling window cannot hang.

A refusal is final: the model is refused with a ModelError naming the node, never imported with the
node left in place (onnxruntime would run the same computation during calibration).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx

from quantcore import limits
from quantcore.display import shown
from quantcore.importers._fold_cost import ESTIMATORS, Call, Cost, Malformed, size
from quantcore.importers._walk import graphs_of

EVALUATION_OVERHEAD = 1 << 14
"""Operations charged for every node run, whatever its size: onnx.reference spends tens of
microseconds on each, so a loop body of many tiny nodes is bounded too."""

_DEFAULT_DOMAINS = ("", "ai.onnx")


class FoldRefused(Exception):
    """A node whose computation at import would pass a limit; `problem` says which, with the numbers."""

    def __init__(self, node: str, op_type: str, problem: str) -> None:
        self.node, self.op_type, self.problem = node, op_type, problem
        super().__init__(problem)


_ADVICE = "remove the computation from the model, or store its result in the model as an initializer"


@dataclass
class Budget:
    """What folding one model has spent so far; each check raises FoldRefused past a limit."""

    elements: int = 0
    operations: int = 0
    iterations: int = 0
    refused: FoldRefused | None = None
    """The first refusal, kept in case a caller inside onnx.reference swallows the exception."""

    def refuse(self, node: str, op_type: str, problem: str) -> FoldRefused:
        self.refused = self.refused or FoldRefused(node, op_type, problem)
        return self.refused

    def admit(self, node: str, op_type: str, cost: Cost) -> None:
        """Charge a node's estimated cost, or refuse it."""
        if cost.largest > limits.FOLD_MAX_ELEMENTS:
            raise self.refuse(
                node,
                op_type,
                f"{op_type} would compute {cost.largest} elements at import; Fixpoint computes at most "
                f"{limits.FOLD_MAX_ELEMENTS} per tensor - {_ADVICE}",
            )
        self.charge_elements(node, op_type, cost.total)
        operations = self.operations + cost.operations + EVALUATION_OVERHEAD
        if operations > limits.FOLD_MAX_OPERATIONS:
            raise self.refuse(
                node,
                op_type,
                f"{op_type} would bring the work of computing constants at import to {operations}"
                f" operations; Fixpoint spends at most {limits.FOLD_MAX_OPERATIONS} on one model - {_ADVICE}",
            )
        self.operations = operations

    def charge_elements(self, node: str, op_type: str, count: int) -> None:
        total = self.elements + count
        if total > limits.FOLD_MAX_TOTAL_ELEMENTS:
            raise self.refuse(
                node,
                op_type,
                f"{op_type} would bring the elements computed at import to {total}; Fixpoint computes at"
                f" most {limits.FOLD_MAX_TOTAL_ELEMENTS} for one model - {_ADVICE}",
            )
        self.elements = total

    def admit_iterations(self, node: str, op_type: str, count: int) -> None:
        total = self.iterations + count
        if total > limits.FOLD_MAX_LOOP_ITERATIONS:
            before = f" ({self.iterations} already run)" if self.iterations else ""
            raise self.refuse(
                node,
                op_type,
                f"{op_type} runs {count} iterations at import{before}; Fixpoint folds at most"
                f" {limits.FOLD_MAX_LOOP_ITERATIONS} - export the model with the loop unrolled, or with"
                " its result stored as a constant",
            )
        self.iterations = total


# -- iterations of Loop and Scan, known from their inputs -----------------------------------------------


def _loop_iterations(call: Call) -> int | None:
    """Iterations of a Loop (None: driven by its condition alone, no bound)."""
    trip, cond = call.input(0), call.input(1)
    if cond is not None and np.size(cond) == 1 and not bool(np.asarray(cond).reshape(-1)[0]):
        return 0
    if trip is None:
        return None
    if np.size(trip) != 1 or np.asarray(trip).dtype.kind not in "iu":
        raise Malformed("its trip count M is not an integer scalar")
    return max(int(np.asarray(trip).reshape(-1)[0]), 0)


def _scan_iterations(call: Call) -> int:
    """Iterations of a Scan: the length of its scan inputs along the scan axis (opset 8: batch x time)."""
    count = _scan_inputs(call.attrs, len(call.inputs))
    scanned = [v for v in call.inputs[len(call.inputs) - count :] if v is not None]
    if not scanned:
        raise Malformed("it has no scan input")
    shape = np.shape(scanned[0])
    if call.opset < 9:
        return int(np.prod(shape[:2])) if len(shape) >= 2 else 0
    axes = list(call.attrs.get("scan_input_axes", ())) or [0]
    axis = int(axes[0])
    if not -len(shape) <= axis < len(shape):
        raise Malformed(f"its scan axis {axis} is outside a {len(shape)}-D input")
    return int(shape[axis])


def _scan_inputs(attrs: Mapping[str, Any], inputs: int) -> int:
    """A Scan's num_scan_inputs, checked against its inputs (onnx.reference loops over the number given
    when it builds the node, before anything runs)."""
    count = int(attrs.get("num_scan_inputs", 0))
    if not 1 <= count <= inputs:
        raise Malformed(f"its num_scan_inputs {count} is not between 1 and its {inputs} inputs")
    return count


def _iterations(budget: Budget, name: str, call: Call) -> None:
    if call.op_type == "Loop":
        count = _loop_iterations(call)
        if count is None:
            raise budget.refuse(
                name,
                "Loop",
                "Loop has no trip count (it runs until its condition turns false), so its cost at import"
                f" cannot be bounded; Fixpoint folds loops of at most {limits.FOLD_MAX_LOOP_ITERATIONS}"
                " iterations - export the model with the loop unrolled, or with its result stored as a"
                " constant",
            )
        budget.admit_iterations(name, "Loop", count)
    elif call.op_type == "Scan":
        budget.admit_iterations(name, "Scan", _scan_iterations(call))


# -- the guarded evaluator ------------------------------------------------------------------------------


def _attributes(node: onnx.NodeProto) -> dict[str, Any]:
    subgraphs = (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS)
    return {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute if a.type not in subgraphs}


def check(budget: Budget, node: onnx.NodeProto, inputs: Sequence[Any], opset: int) -> None:
    """Charge `node` run on `inputs` to the budget, or raise FoldRefused (also for an unknown operator)."""
    estimator = ESTIMATORS.get(node.op_type) if node.domain in _DEFAULT_DOMAINS else None
    kind = _kind(node)
    if estimator is None:
        raise budget.refuse(node.name, kind, _unbounded(kind))
    call = Call(node.op_type, _attributes(node), list(inputs), len(node.output), opset)
    try:
        _iterations(budget, node.name, call)
        cost = estimator(call)
    except (Malformed, ValueError, TypeError, OverflowError) as e:
        why = shown(str(e), 4 * limits.NAME_MAX_CHARS)  # it may quote long lists of the model's numbers
        raise budget.refuse(node.name, kind, f"{kind} cannot be computed at import: {why}") from None
    budget.admit(node.name, kind, cost)


def screen(budget: Budget, node: onnx.NodeProto) -> None:
    """Refuse `node` before onnx.reference even builds it when it, or a node of its subgraphs, is an
    operator with no estimator, or one whose attributes make building it costly (a Scan's
    num_scan_inputs)."""
    for inner in (node, *(n for graph in graphs_of(node) for n in graph.node)):
        kind = _kind(inner)
        if inner.domain not in _DEFAULT_DOMAINS or inner.op_type not in ESTIMATORS:
            raise budget.refuse(inner.name, kind, _unbounded(kind))
        if inner.op_type == "Scan":
            try:
                _scan_inputs(_attributes(inner), len(inner.input))
            except Malformed as e:
                raise budget.refuse(inner.name, kind, f"{kind} cannot be computed at import: {e}") from None


def _kind(node: onnx.NodeProto) -> str:
    return shown(node.op_type if node.domain in _DEFAULT_DOMAINS else f"{node.domain}.{node.op_type}")


def _unbounded(kind: str) -> str:
    return (
        f"{kind} on constant inputs is not computed at import: Fixpoint cannot bound its cost before it"
        " runs - store its result in the model as an initializer"
    )


def _guard(runner: Any, budget: Budget, opset: int) -> None:
    """Make `runner` (an onnx.reference OpRun) check its cost with the budget before every run."""
    node: onnx.NodeProto = runner.onnx_node
    run: Callable[..., Any] = runner.run

    def guarded(*args: Any, **kwargs: Any) -> Any:
        check(budget, node, args, opset)
        outputs = run(*args, **kwargs)
        produced = sum(size(o) for o in outputs) if isinstance(outputs, tuple | list) else size(outputs)
        # Constants and control flow are charged for what they actually made (their subgraph nodes were
        # charged as they ran); an estimate is an upper bound, so nothing else adds here.
        if node.op_type in ("Constant", "Loop", "Scan", "If"):
            budget.charge_elements(node.name, node.op_type, produced)
        return outputs

    runner.run = guarded


def _dense_constant(node: onnx.NodeProto) -> bool:
    """A Constant whose one attribute is `value`, a numeric tensor stored in the node (not external)."""
    if node.op_type != "Constant" or node.domain not in _DEFAULT_DOMAINS or len(node.attribute) != 1:
        return False
    attribute = node.attribute[0]
    tensor = attribute.t
    return (
        attribute.name == "value"
        and attribute.type == onnx.AttributeProto.TENSOR
        and tensor.data_location != onnx.TensorProto.EXTERNAL
        and not tensor.external_data
        and tensor.data_type not in (onnx.TensorProto.STRING, onnx.TensorProto.UNDEFINED)
    )


def _evaluator_class(budget: Budget, opset: int) -> type[Any]:
    """A ReferenceEvaluator whose every node (in subgraphs and functions too: onnx.reference builds
    those with the same class) checks the budget before it runs."""
    from onnx.reference import ReferenceEvaluator

    class Guarded(ReferenceEvaluator):
        def _init(self) -> None:
            super()._init()
            for runner in self.rt_nodes_:
                _guard(runner, budget, opset)

    return Guarded


class Folder:
    """Runs constant nodes of one model with onnx.reference, all within one Budget."""

    def __init__(self, opset: int) -> None:
        self.opset = opset
        self.budget = Budget()
        self._evaluator: type[Any] | None = None
        """Made at the first node to fold: importing onnx.reference takes ~0.2 s, and most models (every
        Fashion-MNIST benchmark net) have nothing for it to run."""

    def run(self, node: onnx.NodeProto, feeds: Mapping[str, Any]) -> list[np.ndarray] | None:
        """The outputs of `node` on the constant `feeds` (its inputs and the outer values its subgraphs
        read); None when onnx.reference cannot run it; FoldRefused when it would pass a limit."""
        screen(self.budget, node)
        if _dense_constant(node):
            return self._constant(node)
        if self._evaluator is None:
            self._evaluator = _evaluator_class(self.budget, self.opset)
        try:
            evaluator = self._evaluator(node, opsets={"": self.opset})
            results: Any = evaluator.run(None, dict(feeds))
        except FoldRefused:
            raise
        except Exception:
            # onnx.reference failing (an operator it lacks, inputs it rejects) only means "not folded":
            # the node stays, and the importer maps it or refuses it with the support table's reason.
            results = None
        if self.budget.refused is not None:  # refused inside, and the refusal swallowed on its way out
            raise self.budget.refused
        return None if results is None else [np.asarray(r) for r in results]

    def _constant(self, node: onnx.NodeProto) -> list[np.ndarray] | None:
        """A Constant holding one dense numeric tensor, done as the guarded evaluator does it without
        importing onnx.reference for it: the tensor read as its Constant reads it (numpy_helper.to_array,
        when the node is built: a tensor it cannot read is not folded), then checked and charged."""
        try:
            value = np.asarray(onnx.numpy_helper.to_array(node.attribute[0].t))
        except Exception:
            return None
        check(self.budget, node, (), self.opset)
        self.budget.charge_elements(node.name, node.op_type, size(value))
        return [value]

    def admit(self, node: onnx.NodeProto, inputs: Sequence[Any]) -> None:
        """Charge a node the importer computes itself (a DequantizeLinear, also com.microsoft's) to the
        same budget, as the default-domain operator it is."""
        plain = onnx.NodeProto()
        plain.CopyFrom(node)
        plain.domain = ""
        check(self.budget, plain, inputs, self.opset)
