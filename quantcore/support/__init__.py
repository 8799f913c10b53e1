"""Can CMSIS-NN run this? The operator support table, defined once and read everywhere.

- `ONNX_OPS`: the ONNX operators the importer maps, with the constraints visible on the ONNX node;
- `NO_COUNTERPART` / `unsupported_reason`: every other operator and why it cannot run;
- `KERNELS`: per IR op, the CMSIS-NN kernels and what they require of a node in CMSIS-NN form;
- `GRAPH`: what the whole graph must be (one input, one output);
- `supported_ops_markdown`: the same table as SUPPORTED_OPS.md.
Each constraint is a small predicate whose docstring is the user-facing rule; `Constraint.explain` puts
in front of it what the failing node has.
"""

from quantcore.support.kernels import GRAPH, KERNELS
from quantcore.support.markdown import supported_ops_markdown
from quantcore.support.onnx_ops import ONNX_OPS
from quantcore.support.table import Constraint, KernelSupport, OnnxNode, OpSupport
from quantcore.support.unsupported import NO_COUNTERPART, unsupported_reason

__all__ = [
    "GRAPH",
    "KERNELS",
    "NO_COUNTERPART",
    "ONNX_OPS",
    "Constraint",
    "KernelSupport",
    "OnnxNode",
    "OpSupport",
    "supported_ops_markdown",
    "unsupported_reason",
]
