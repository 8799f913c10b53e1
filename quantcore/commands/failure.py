"""An error that reached the top, as the CLI shows it: an exit status (2 for bad usage or input, 1 for a
failure) and one line of text. Here, below quantcore.cli, because a command that reports its own errors
(a firmware command's JSON verdict) words them the same way.
"""

from __future__ import annotations

import errno

from quantcore.display import shown
from quantcore.errors import InputError, OutputError, QuantcoreError

EXIT_FAIL, EXIT_USAGE = 1, 2
MESSAGE_CHARS = 1000
"""A message is cut to this many characters (a hostile name in it could otherwise be megabytes)."""


def describe(exc: BaseException) -> tuple[int, str]:
    """The exit status and message for an error that reached the top."""
    if isinstance(exc, QuantcoreError):
        bad_input = isinstance(exc, InputError) and not isinstance(exc, OutputError)
        return (EXIT_USAGE if bad_input else EXIT_FAIL), str(exc)
    if isinstance(exc, OSError):
        return EXIT_FAIL, _os_error(exc)
    if isinstance(exc, MemoryError):
        return EXIT_FAIL, "ran out of memory: the input is too large for this machine"
    if isinstance(exc, RecursionError):
        return EXIT_USAGE, "an input is nested too deeply to process"
    foreign = _foreign_input_error(exc)
    if foreign is not None:
        return EXIT_USAGE, foreign
    return EXIT_FAIL, (
        f"internal error ({type(exc).__name__}: {exc}); this is a Fixpoint bug - rerun with --debug and"
        " report the traceback"
    )


_ERRNO_ADVICE = {
    errno.EACCES: "check its permissions",
    errno.EPERM: "check its permissions",
    errno.EROFS: "the filesystem is read-only; choose another folder",
    errno.ENOSPC: "the disk is full; free some space",
    errno.EDQUOT: "the disk quota is exhausted; free some space",
    errno.ENOENT: "check the path",
    errno.ENOTDIR: "a part of the path is a file, not a folder",
    errno.EISDIR: "it is a folder; give a file",
    errno.EEXIST: "it already exists",
    errno.EFBIG: "the file is too large for this system's limits",
}


def _os_error(exc: OSError) -> str:
    where = exc.filename if exc.filename is not None else "a file"
    advice = _ERRNO_ADVICE.get(exc.errno or 0, "")
    return f"{where}: {exc.strerror or exc}" + (f"; {advice}" if advice else "")


def _foreign_input_error(exc: BaseException) -> str | None:
    """Errors of the libraries that read user files (zip, Pillow, protobuf, onnx), as input problems."""
    import zipfile

    module = type(exc).__module__.split(".")[0]
    if isinstance(exc, zipfile.BadZipFile):
        return f"not a valid .npz (zip) file: {exc}"
    if module in ("PIL", "google", "onnx", "onnxruntime"):
        return f"an input file could not be read ({type(exc).__name__}: {exc})"
    return None


def one_line_message(message: str) -> str:
    """`message` on one line of printable text, cut to MESSAGE_CHARS."""
    return shown(" ".join(message.split()), MESSAGE_CHARS)
