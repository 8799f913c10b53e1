"""PyTorch -> ir.Graph, through ONNX: the module is exported in memory and imported by import_onnx.

The exporter is torch's TorchScript-based one (`dynamo=False`): it runs offline with nothing but torch,
while the torch.export-based exporter (torch's default since 2.9) needs the onnxscript package, which is
not a dependency of Fixpoint. In eval mode it folds each BatchNorm into the convolution before it, so a
Conv2d-BatchNorm2d pair arrives as one CONV2D. torch is optional: `pip install 'fixpoint[torch]'`.
"""

from __future__ import annotations

import io
import os
import warnings
from collections.abc import Mapping
from typing import Any

from quantcore import limits, untrusted
from quantcore.display import said
from quantcore.errors import ModelError
from quantcore.importers import _onnx_load
from quantcore.importers._isolated import isolated
from quantcore.importers.onnx import _import
from quantcore.ir import Graph

OPSET = 17
"""The opset the export asks for (well inside the 11-21 range the importer is tested on)."""


def _torch() -> Any:
    try:
        import torch
    except ImportError:
        raise ModelError(
            "torch", "PyTorch is not installed; install Fixpoint's torch extra: pip install 'fixpoint[torch]'"
        ) from None
    return torch


def export_onnx(module: Any, example_input: Any) -> bytes:
    """The module (in eval mode, restored afterwards) exported to ONNX bytes with static shapes."""
    torch = _torch()
    args = tuple(example_input) if isinstance(example_input, tuple | list) else (example_input,)
    buffer = io.BytesIO()
    was_training = module.training
    module.eval()
    try:
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the TorchScript exporter's deprecation notice
            result = module(*args)
            torch.onnx.export(
                module,
                args,
                buffer,
                dynamo=False,
                opset_version=OPSET,
                input_names=_names("input", len(args)),
                output_names=_names("output", len(result) if isinstance(result, tuple | list) else 1),
                do_constant_folding=True,
            )
    except Exception as e:
        # torch raises many exception types here (unsupported aten ops, tracing errors, ...).
        raise ModelError(f"torch:{type(module).__name__}", f"torch.onnx.export failed: {e}") from None
    finally:
        module.train(was_training)
    return buffer.getvalue()


def _names(stem: str, count: int) -> list[str]:
    return [stem] if count == 1 else [f"{stem}_{i}" for i in range(count)]


def import_torch(module: Any, example_input: Any, *, name: str | None = None) -> Graph:
    """Import a torch.nn.Module: export it with `example_input` (a tensor or a tuple of tensors) fixing
    every shape, then import the ONNX. meta["source"] is "torch:<class name>", meta["format"] "torch"."""
    label = f"torch:{type(module).__name__}"
    source = _onnx_load.Source(export_onnx(module, example_input), label, None)
    first = example_input[0] if isinstance(example_input, tuple | list) else example_input
    batch = int(first.shape[0]) if getattr(first, "ndim", 0) else 1
    label_name = name or type(module).__name__
    return isolated(
        label, lambda: _import(source, _onnx_load.load(source, batch), name=label_name, fmt="torch")
    )


def load_torch_checkpoint(path: str) -> Mapping[str, Any]:
    """A checkpoint's state dict, read with torch.load(weights_only=True): tensors and plain containers
    only, never arbitrary pickled objects (a checkpoint from elsewhere cannot run code)."""
    torch = _torch()
    if not os.path.lexists(path):
        raise ModelError(path, "no such checkpoint file")
    try:  # a regular file within the model size limit, never a FIFO or a device
        data = untrusted.read_bytes(path, limit=limits.MODEL_MAX_BYTES)
    except untrusted.UntrustedInputError as e:
        raise ModelError(path, e.problem) from None
    try:
        state = torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
    except Exception as e:
        # Unpickling errors come in many types (UnpicklingError, RuntimeError for a bad zip, ...).
        raise ModelError(path, f"cannot read the checkpoint with weights_only=True: {said(e)}") from None
    if isinstance(state, Mapping) and "state_dict" in state and isinstance(state["state_dict"], Mapping):
        state = state["state_dict"]
    if not isinstance(state, Mapping):
        raise ModelError(path, f"holds a {type(state).__name__}, not a state dict (name -> tensor)")
    return state
