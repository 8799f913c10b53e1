"""The `fixpoint` command line; each subcommand lives in quantcore.commands.<name>.

Packages that build on quantcore add subcommands through the entry-point group "fixpoint.commands"
(the language server adds `check` and `lsp`), so quantcore never imports them. An entry point is named
after the command it adds.

Start-up is part of every command (the editor spawns this CLI for each of its commands), so building the
parser imports no numpy, onnx, jinja2 or torch: a command module imports what its command needs inside
its `func`. The entry points are scanned (importlib.metadata reads every installed package's metadata)
only when the command line may ask for a plugin's command: --help, no command, a name that is not one of
quantcore's own; then only the plugin asked for is loaded, or all of them to list them.

Every error ends here as one line on stderr, `fixpoint <command>: <what and where>: <what to do>`, and an
exit status: 2 for bad usage or input (an option, a file's content), 1 for a failure (a build, a write,
a mismatch). A traceback is shown only with --debug (or FIXPOINT_DEBUG=1), for reporting a bug.
"""

from __future__ import annotations

import argparse
import errno
import importlib
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, NoReturn

from quantcore.commands import COMMANDS
from quantcore.display import shown
from quantcore.errors import InputError, OutputError, QuantcoreError

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint

EXIT_FAIL, EXIT_USAGE = 1, 2
MESSAGE_CHARS = 1000
"""A message is cut to this many characters (a hostile name in it could otherwise be megabytes)."""


class _OneLineParser(argparse.ArgumentParser):
    """argparse with its errors as one line naming the command and option (and --debug on every command)."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: {one_line_message(message)} (see {self.prog} --help)\n")


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser of every quantcore command, and of the plugins' commands: only the plugin adding
    `command` when one does and `command` is not quantcore's own, all of them when `command` is None."""
    parser = _OneLineParser(prog="fixpoint", description="Float networks to verified int8 CMSIS-NN firmware.")
    parser.add_argument(
        "--debug", action="store_true", help="show the traceback of an error (for a bug report)"
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=_OneLineParser)
    for name in COMMANDS:
        importlib.import_module(f"quantcore.commands.{name}").register(sub)
    if command not in sub.choices:
        for entry in _plugins(command):
            entry.load().register(sub)
    for subparser in sub.choices.values():
        subparser.add_argument(
            "--debug", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS
        )
    return parser


def _plugins(command: str | None) -> list[EntryPoint]:
    """The entry points of group "fixpoint.commands": the one named `command`, else all (to list them
    in --help or in the message for a command that does not exist)."""
    from importlib.metadata import entry_points  # here: it costs more than the rest of building the parser

    found = sorted(entry_points(group="fixpoint.commands"), key=lambda e: e.name)
    return [e for e in found if e.name == command] or found


def asked_command(argv: Sequence[str]) -> str | None:
    """The command `argv` names, when only --debug comes before it; None when an option such as --help
    comes first (the top-level parser acts on it) or there is no command."""
    for token in argv:
        if token != "--debug":
            return None if token.startswith("-") else token
    return None


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        args = build_parser(asked_command(argv)).parse_args(argv)
    except SystemExit as exit_:  # --help, or a usage error already printed: its status, as a return value
        return exit_.code if isinstance(exit_.code, int) else EXIT_USAGE
    try:
        return int(args.func(args))
    except KeyboardInterrupt:
        print(f"fixpoint {args.command}: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # the one place every error becomes a message
        if args.debug or os.environ.get("FIXPOINT_DEBUG"):
            raise
        code, message = describe(exc)
        print(f"fixpoint {args.command}: {one_line_message(message)}", file=sys.stderr)
        return code


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


if __name__ == "__main__":
    sys.exit(main())
