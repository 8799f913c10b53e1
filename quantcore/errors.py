"""The one error tree of quantcore.

Every error a user can see derives from QuantcoreError and carries a message that names what is wrong
(argument, file, node or line) and what was expected, so the CLI and the language server can show it as is.
"""

from __future__ import annotations


class QuantcoreError(Exception):
    """Base of every error quantcore raises on purpose."""


class InputError(QuantcoreError):
    """The user's input cannot be used - an option, a setting, a file's content - as opposed to a failure
    while working on good input; the CLI exits with status 2 for these, 1 for the others."""


class CalibrationError(QuantcoreError):
    """Base of the calibration errors: a bad argument, setting or serialised observer."""


class KernelArgumentError(QuantcoreError):
    """A reference kernel was called with an argument CMSIS-NN would reject or mis-handle."""

    def __init__(self, kernel: str, argument: str, problem: str) -> None:
        self.kernel = kernel
        self.argument = argument
        self.problem = problem
        super().__init__(f"{kernel}: argument '{argument}' {problem}")


class VectorCaseError(InputError):
    """A test-vector case on disk is malformed (missing array or define, unreadable file)."""

    def __init__(self, path: str, problem: str) -> None:
        self.path = path
        super().__init__(f"{path}: {problem}")


class CmsisNnNotFound(InputError):
    """No usable CMSIS-NN checkout was found where the product looks for one."""


class ModelError(InputError):
    """A model file that cannot be read or imported: corrupt, truncated, dynamic shapes, NaN weights."""

    def __init__(self, path: str, problem: str, node: str | None = None) -> None:
        self.path = path
        self.node = node
        where = f"{path}: node {node!r}: " if node else f"{path}: "
        super().__init__(where + problem)


class UnsupportedError(ModelError):
    """An operator or attribute CMSIS-NN cannot run; the message names the node, its op type and why."""

    def __init__(self, path: str, node: str, op_type: str, reason: str) -> None:
        self.op_type = op_type
        self.reason = reason
        super().__init__(path, f"{op_type} is not supported: {reason}", node)


class OutputError(QuantcoreError):
    """An output cannot be written (a read-only folder, a full disk, a file where a folder must be);
    the message names the path, and says that nothing was changed when that is so."""


TORCH_MISSING = "PyTorch is not installed; install Fixpoint's torch extra: pip install 'fixpoint[torch]'"
"""What every command that needs torch says when it cannot be imported (qat, the torch importer)."""
