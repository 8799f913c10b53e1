"""The errors code generation raises; each message names the layer, tensor or file and what to do."""

from __future__ import annotations

from quantcore.errors import InputError


class CodegenError(InputError):
    """A graph or setting the C generator cannot turn into code (the message names the layer or setting)."""


class HandEditedError(CodegenError):
    """A generated file was edited by hand since Fixpoint wrote it; regenerating would lose the edits."""

    def __init__(self, paths: list[str], reason: str) -> None:
        self.paths = paths
        super().__init__(
            f"{', '.join(paths)}: {reason}; nothing was written. Move your changes into your own sources,"
            " or regenerate with --force (each replaced file is kept as <name>.bak)"
        )
