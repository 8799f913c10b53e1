"""A model file's bytes, read once without trusting the file, for every importer (ONNX and TFLite).

Importing onnx or the tflite bindings is not needed to read bytes, so this module imports neither: the
pipeline reads a file here first and decides from its name or bytes which importer gets them.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

from quantcore import limits, untrusted
from quantcore.errors import ModelError


@dataclass(frozen=True)
class Source:
    """The model's bytes and how to name it in messages."""

    data: bytes
    path: str
    directory: Path | None
    """Where external data files are looked up (the model file's folder); None for bytes given."""

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.data).hexdigest()


def read(path_or_bytes: str | os.PathLike[str] | bytes, label: str) -> Source:
    """The model's bytes: from a regular file of at most MODEL_MAX_BYTES (never a FIFO or a device), or
    bytes given (named `label` in messages) within the same limit."""
    if isinstance(path_or_bytes, bytes | bytearray | memoryview):
        data = bytes(path_or_bytes)
        if len(data) > limits.MODEL_MAX_BYTES:
            raise ModelError(label, f"is larger than Fixpoint reads ({limits.MODEL_MAX_BYTES} bytes)")
        return Source(data, label, None)
    path = Path(path_or_bytes)
    try:
        untrusted.regular_file(path)  # a directory or a device named as the model: said so, never opened
        return Source(untrusted.read_bytes(path, limit=limits.MODEL_MAX_BYTES), str(path), path.parent)
    except untrusted.UntrustedInputError as e:
        cause = e.__cause__
        if isinstance(cause, OSError):
            raise ModelError(str(path), f"cannot read the model file: {cause.strerror or cause}") from None
        raise ModelError(str(path), e.problem) from None
    except OSError as e:  # an error while reading (EIO): read_bytes refuses the rest
        raise ModelError(str(path), f"cannot read the model file: {e.strerror or e}") from None
