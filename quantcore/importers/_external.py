"""ONNX external data, read only from regular files inside the model's folder.

A model saved with `save_as_external_data` keeps tensors in other files, named by a `location` in the
model. That location is untrusted: `../../etc/passwd`, an absolute path, a symlink to /dev/zero or to a
file outside the folder, a FIFO that never ends. Each tensor's data is read here through
quantcore.untrusted (regular files only, symlinks only within the model's folder, a size limit) and put
into the tensor, so that nothing later - onnx's checker, shape inference, onnxruntime - opens a file
the model names. Sparse tensors are refused: onnxruntime would expand a few bytes into a dense tensor of
any size.
"""

from __future__ import annotations

import os
from pathlib import Path

import onnx

from quantcore import limits, untrusted
from quantcore.display import quoted
from quantcore.errors import ModelError
from quantcore.importers._walk import sparse_tensors, tensors


def refuse_sparse(model: onnx.ModelProto, path: str) -> None:
    """Refuse sparse initializers and sparse constants (a few bytes that densify to any size)."""
    for tensor in sparse_tensors(model):
        raise ModelError(path, _sparse(tensor.values.name))


def _sparse(name: str) -> str:
    return (
        f"tensor {quoted(name)} is stored sparse; Fixpoint reads dense tensors only - save the model with"
        " dense initializers"
    )


def uses_external_data(model: onnx.ModelProto) -> bool:
    return any(t.data_location == onnx.TensorProto.EXTERNAL for t in tensors(model))


class _Files:
    """The external data files read so far (each once), within one byte budget."""

    def __init__(self, folder: Path, model_path: str, budget: int) -> None:
        self.folder, self.model_path, self.budget = folder, model_path, budget
        self.read: dict[Path, bytes] = {}

    def content(self, tensor: str, location: str) -> bytes:
        path = self._resolve(tensor, location)
        if path not in self.read:
            try:
                if untrusted.regular_file(path, root=self.folder).st_size > self.budget:
                    raise ModelError(self.model_path, self._too_large(tensor, location))
                data = untrusted.read_bytes(path, limit=self.budget, root=self.folder)
            except untrusted.UntrustedInputError as e:
                where = f"tensor {quoted(tensor)}: external data file {quoted(location)}"
                raise ModelError(self.model_path, f"{where} {e.problem}") from None
            self.budget -= len(data)
            self.read[path] = data
        return self.read[path]

    def _resolve(self, tensor: str, location: str) -> Path:
        where = f"tensor {quoted(tensor)}: external data location {quoted(location)}"
        if not location or "\0" in location:
            raise ModelError(self.model_path, f"{where} is not a file name")
        if os.path.isabs(location) or Path(location).drive:
            raise ModelError(self.model_path, f"{where} is an absolute path; {_KEEP}")
        path = self.folder / location
        if not untrusted.is_inside(path, self.folder):
            link = " through a symlink" if os.path.normpath(location).split(os.sep)[0] != ".." else ""
            raise ModelError(self.model_path, f"{where} leads outside the model's folder{link}; {_KEEP}")
        if not os.path.lexists(path):
            name = Path(self.model_path).name
            raise ModelError(
                self.model_path,
                f"tensor {quoted(tensor)}: external data file {quoted(location)} not found next to {name}",
            )
        return path

    def _too_large(self, tensor: str, location: str) -> str:
        return (
            f"tensor {quoted(tensor)}: external data file {quoted(location)} would bring the model past"
            f" {limits.MODEL_MAX_BYTES // limits.MIB} MiB, the most Fixpoint reads (model file and external"
            " data together)"
        )


_KEEP = "Fixpoint reads external data only from files in the model's own folder"


def inline(model: onnx.ModelProto, folder: Path | None, model_path: str, model_bytes: int) -> None:
    """Put every tensor's external data into the tensor, from files in `folder` (ModelError otherwise);
    the model file and its data together stay within quantcore.limits.MODEL_MAX_BYTES."""
    files = _Files(folder, model_path, limits.MODEL_MAX_BYTES - model_bytes) if folder else None
    for tensor in tensors(model):
        if tensor.data_location != onnx.TensorProto.EXTERNAL:
            continue
        info = {entry.key: entry.value for entry in tensor.external_data}
        location = info.get("location", "")
        if files is None:
            raise ModelError(
                model_path,
                f"tensor {quoted(tensor.name)} keeps its data in the external file {quoted(location)};"
                " import the model from its file, next to that data",
            )
        data = files.content(tensor.name, location)
        start, length = _span(info, len(data), tensor.name, location, model_path)
        tensor.raw_data = data[start : start + length]
        tensor.data_location = onnx.TensorProto.DEFAULT
        del tensor.external_data[:]


def _span(info: dict[str, str], available: int, tensor: str, location: str, path: str) -> tuple[int, int]:
    """(offset, length) of a tensor's bytes in its file, checked against the file's size."""
    try:
        start = int(info.get("offset", "0"))
        length = int(info["length"]) if "length" in info else available - start
    except ValueError:
        problem = f"tensor {quoted(tensor)}: external data offset/length are not numbers"
        raise ModelError(path, problem) from None
    if start < 0 or length < 0 or start + length > available:
        raise ModelError(
            path,
            f"tensor {quoted(tensor)}: external data bytes {start}..{start + length} are outside the"
            f" {available} bytes of {quoted(location)}",
        )
    return start, length
