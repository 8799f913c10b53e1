"""Renders the support table as SUPPORTED_OPS.md (the committed file is checked against this rendering)."""

from __future__ import annotations

from quantcore.support.kernels import GRAPH, KERNELS
from quantcore.support.onnx_ops import ONNX_OPS
from quantcore.support.unsupported import NO_COUNTERPART
from quantcore.targets.cmsis_nn import TARGET_VERSION

HEADER = f"""# Supported operators

<!-- Generated from quantcore/support by `python -m quantcore.support > SUPPORTED_OPS.md`; do not edit. -->

What Fixpoint can turn into int8 CMSIS-NN code (CMSIS-NN {TARGET_VERSION}), as defined once in
`quantcore/support`: the importer, code generation and the language server all read the same table, and
every reason below is the message a user sees.

Any ONNX node whose inputs are all constants is evaluated at import, whatever its type (Constant,
Shape-Gather-Concat chains feeding a Reshape, Cast), so it needs no kernel; so are the Shape of a tensor
whose shape is static and a CastLike of a constant to an activation's type (both written by
torch.onnx.export). Graphs must have static shapes (a dynamic batch dimension is fixed at import).
"""


def _graph_section() -> list[str]:
    lines = ["## The whole graph", ""]
    lines += [f"- `{c.name}`: {c.reason}" for c in GRAPH]
    return [*lines, ""]


def _onnx_section() -> list[str]:
    lines = ["## ONNX operators the importer maps", ""]
    for support in ONNX_OPS.values():
        ir = ", ".join(op.name for op in support.ir_ops) or "(constant)"
        lines.append(f"### {support.op_type} -> {ir}")
        lines.append("")
        if support.notes:
            lines += [support.notes, ""]
        lines += [f"- `{c.name}`: {c.reason}" for c in support.constraints]
        if support.constraints:
            lines.append("")
    return lines


def _unsupported_section() -> list[str]:
    lines = ["## ONNX operators with no CMSIS-NN counterpart", ""]
    lines += [f"- **{op}**: {reason}" for op, reason in sorted(NO_COUNTERPART.items())]
    lines += [
        "",
        "Any other operator, and any operator outside the default ONNX domain, is rejected too.",
        "",
    ]
    return lines


def _kernel_section() -> list[str]:
    lines = [
        "## IR operators in CMSIS-NN form",
        "",
        "After the passes (NHWC, activations fused) code generation checks these for each node.",
        "",
    ]
    for support in KERNELS.values():
        kernels = ", ".join(f"`{k}`" for k in support.kernels) or "no kernel"
        lines.append(f"### {support.op.json_name}: {kernels}")
        lines.append("")
        if support.notes:
            lines += [support.notes, ""]
        lines += [f"- `{c.name}`: {c.reason}" for c in support.constraints]
        if support.constraints:
            lines.append("")
    return lines


def supported_ops_markdown() -> str:
    """The text of SUPPORTED_OPS.md."""
    body = [HEADER, *_graph_section(), *_onnx_section(), *_unsupported_section(), *_kernel_section()]
    return "\n".join(body).rstrip("\n") + "\n"
