"""Importers: ONNX files and PyTorch modules -> float ir.Graph in ONNX layout (NCHW).

`import_onnx` needs onnx; `import_torch` and `load_torch_checkpoint` need the optional torch extra
(`pip install 'fixpoint[torch]'`). Both are imported only when a function is called, so importing this
package (e.g. from the language server) stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import os
    from collections.abc import Callable

    from quantcore.ir import Graph

__all__ = ["import_onnx", "import_torch", "load_torch_checkpoint"]


def import_onnx(
    path_or_bytes: str | os.PathLike[str] | bytes, *, batch: int = 1, name: str | None = None
) -> Graph:
    """See quantcore.importers.onnx.import_onnx (imported on first use: onnx is slow to import)."""
    from quantcore.importers.onnx import import_onnx as _import_onnx

    return _import_onnx(path_or_bytes, batch=batch, name=name)


def import_torch(
    module: Any,
    example_input: Any,
    *,
    name: str | None = None,
    dynamo: bool = True,
    note: Callable[[str], None] | None = None,
) -> Graph:
    """See quantcore.importers.torch.import_torch (imported lazily: torch is optional)."""
    from quantcore.importers.torch import import_torch as _import_torch

    return _import_torch(module, example_input, name=name, dynamo=dynamo, note=note)


def load_torch_checkpoint(path: str) -> Any:
    """See quantcore.importers.torch.load_torch_checkpoint."""
    from quantcore.importers.torch import load_torch_checkpoint as _load

    return _load(path)
