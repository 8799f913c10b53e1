"""PyTorch -> ir.Graph, through ONNX: the module is exported in memory and imported by import_onnx.

The exporter is torch's default one, the torch.export-based ("dynamo") exporter with its default opset
and graph optimizations (BatchNorm folded into the convolution before it, shape arithmetic folded to
constants). It needs the onnxscript package and cannot export every module (data-dependent Python control
flow, for one); then the TorchScript exporter (`dynamo=False`, deprecated by torch but still working)
exports the module instead, and a one-line note says which exporter ran and why. Both exporters are
kept quiet: their progress lines, log records and warnings never reach the user's terminal.

torch is optional (`pip install 'fixpoint[torch]'`) and imported only when a module is exported.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import re
import sys
import warnings
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from quantcore import limits, untrusted
from quantcore.display import said, shown
from quantcore.errors import TORCH_MISSING, ModelError
from quantcore.importers import _onnx_load
from quantcore.importers._isolated import isolated
from quantcore.importers._source import Source
from quantcore.importers.onnx import _import
from quantcore.ir import Graph

OPSET = 17
"""The opset the TorchScript exporter is asked for (well inside the 11-21 range the importer is tested
on); the default exporter writes its own default (20 in torch 2.13)."""

Note = Callable[[str], None]
"""Where a note on the export goes (one line); by default stderr, as "fixpoint: note: ..." (the CLI's
form of a note)."""

_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _torch() -> Any:
    try:
        import torch
    except ImportError:
        raise ModelError("torch", TORCH_MISSING) from None
    return torch


def _stderr_note(line: str) -> None:
    print(f"fixpoint: note: {line}", file=sys.stderr)


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """No output from the exporters: the default one prints progress ("[torch.onnx] Obtain model
    graph...") and logs through torch's own handlers (bound to the real stderr), both warn, and the
    TorchScript one's C++ code writes its log ("Torch IR graph at exception: ...") to file descriptor 1."""
    previous = logging.root.manager.disable
    logging.disable(logging.CRITICAL)
    try:
        with (
            _descriptors_to_devnull(),
            contextlib.redirect_stdout(io.StringIO()),
            contextlib.redirect_stderr(io.StringIO()),
            warnings.catch_warnings(),
        ):
            warnings.simplefilter("ignore")
            yield
    finally:
        logging.disable(previous)


@contextlib.contextmanager
def _descriptors_to_devnull() -> Iterator[None]:
    """Standard output and error of the process (what C++ code writes to) sent to os.devnull."""
    for stream in (sys.__stdout__, sys.__stderr__):
        if stream is not None:
            stream.flush()
    saved: list[tuple[int, int]] = []
    with open(os.devnull, "wb") as sink:
        try:
            for fd in (1, 2):
                with contextlib.suppress(OSError):  # a closed descriptor (a daemon) stays closed
                    saved.append((fd, os.dup(fd)))
                    os.dup2(sink.fileno(), fd)
            yield
        finally:
            for fd, copy in saved:
                os.dup2(copy, fd)
                os.close(copy)


def _summary(error: BaseException) -> str:
    """One line on why an export failed: the exception torch.export raised, when the default exporter
    wraps it in its multi-page report ("## Exception summary"), else the first line of the message."""
    text = _ANSI.sub("", str(error))
    lines = [line.strip() for line in text.splitlines()]
    if "## Exception summary" in lines:
        rest = [line for line in lines[lines.index("## Exception summary") + 1 :] if line]
        if rest:
            return shown(rest[0], 2 * limits.NAME_MAX_CHARS)
    first = next((line for line in lines if line), type(error).__name__)
    return shown(first, 2 * limits.NAME_MAX_CHARS)


def export_onnx(module: Any, example_input: Any, *, dynamo: bool = True, note: Note | None = None) -> bytes:
    """The module (in eval mode, restored afterwards) exported to ONNX bytes with static shapes: by
    torch's default exporter, or by the TorchScript one when that is unavailable or fails (said to
    `note`), or by the TorchScript one alone (`dynamo=False`)."""
    torch = _torch()
    args = tuple(example_input) if isinstance(example_input, tuple | list) else (example_input,)
    label = f"torch:{type(module).__name__}"
    was_training = module.training
    module.eval()
    try:
        result = _run(torch, module, args, label)
        names = {
            "input_names": _names("input", len(args)),
            "output_names": _names("output", len(result) if isinstance(result, tuple | list) else 1),
        }
        why = ""
        if dynamo:
            try:
                return run_exporter(module, args, dynamo=True, **names)
            except Exception as e:
                # torch.export and the ONNX translation raise many types (unsupported aten ops, guards on
                # data), and ImportError without onnxscript.
                why = _default_failed(e)
        try:
            exported = run_exporter(module, args, dynamo=False, **names)
        except Exception as e:
            # torch raises many exception types here (unsupported aten ops, tracing errors, ...).
            failed = (
                f"{why}; the TorchScript exporter (dynamo=False) failed too"
                if why
                else "torch.onnx.export failed"
            )
            raise ModelError(label, f"{failed}: {_summary(e)}") from None
        if why:
            (note or _stderr_note)(f"{label}: {why}; exported with the TorchScript exporter (dynamo=False)")
        return exported
    finally:
        module.train(was_training)


def run_exporter(module: Any, args: tuple[Any, ...], *, dynamo: bool, **options: Any) -> bytes:
    """One exporter's ONNX bytes, quietly, the module as it is (export_onnx sets eval mode and falls back):
    torch's default exporter (its own opset) or the TorchScript one (OPSET, constants folded); `options`
    go to torch.onnx.export."""
    torch = _torch()
    with torch.no_grad(), _quiet():
        if dynamo:
            program = torch.onnx.export(module, args, dynamo=True, verbose=False, **options)
            return bytes(program.model_proto.SerializeToString())
        buffer = io.BytesIO()
        torch.onnx.export(
            module, args, buffer, dynamo=False, opset_version=OPSET, do_constant_folding=True, **options
        )
        return buffer.getvalue()


def _run(torch: Any, module: Any, args: tuple[Any, ...], label: str) -> Any:
    """The module's output on the example input (its count names the exported outputs)."""
    try:
        with torch.no_grad():
            return module(*args)
    except Exception as e:
        # A module can raise anything; the exporters would fail the same way.
        raise ModelError(label, f"the module fails on the example input: {_summary(e)}") from None


def _default_failed(error: Exception) -> str:
    """Why torch's default exporter did not export: a package it needs is missing, or it failed."""
    if not isinstance(error, ImportError):
        return f"torch's default ONNX exporter failed: {_summary(error)}"
    if error.name is None:
        return f"torch's default ONNX exporter cannot be imported: {_summary(error)}"
    missing = shown(error.name.partition(".")[0])
    return f"torch's default ONNX exporter needs {missing}, which is not installed (pip install {missing})"


def _names(stem: str, count: int) -> list[str]:
    return [stem] if count == 1 else [f"{stem}_{i}" for i in range(count)]


def import_torch(
    module: Any, example_input: Any, *, name: str | None = None, dynamo: bool = True, note: Note | None = None
) -> Graph:
    """Import a torch.nn.Module: export it with `example_input` (a tensor or a tuple of tensors) fixing
    every shape, then import the ONNX. meta["source"] is "torch:<class name>", meta["format"] "torch".

    The export is torch's default exporter's, or the TorchScript exporter's when that one is unavailable
    or fails (a one-line note to `note`, by default stderr); `dynamo=False` asks for the TorchScript one."""
    label = f"torch:{type(module).__name__}"
    source = Source(export_onnx(module, example_input, dynamo=dynamo, note=note), label, None)
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
