"""The errors code generation raises; each message names the layer, tensor or file and what to do."""

from __future__ import annotations

from quantcore.errors import QuantcoreError


class CodegenError(QuantcoreError):
    """A graph or setting the C generator cannot turn into code (the message names the layer or setting)."""


class HandEditedError(CodegenError):
    """A generated file was edited by hand since Fixpoint wrote it; regenerating would lose the edits."""

    def __init__(self, path: str, reason: str) -> None:
        self.path = path
        super().__init__(
            f"{path}: {reason}; refusing to overwrite it. Move your changes elsewhere, or regenerate with"
            " --force (the current file is kept as a .bak backup)"
        )
