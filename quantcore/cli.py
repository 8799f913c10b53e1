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

The process ends without tearing the interpreter down (`run`), as mypy's CLI does: freeing every module
and object at exit is work nobody waits for, and it was a tenth of a `fixpoint quantize` process
(MobileNetV2, 100 samples: best of 8, 0.96 -> 0.85 s).
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import importlib
import os
import sys
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, NoReturn

from quantcore.commands import COMMANDS
from quantcore.commands.failure import EXIT_USAGE, describe, one_line_message

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint


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


def run() -> NoReturn:
    """The `fixpoint` console script (and `python -m quantcore.cli`): main(), then the process ends at once
    - the exit handlers run and the output is flushed, but no module is torn down. While a thread other
    than a daemon's still runs, the interpreter's own exit waits for it instead."""
    code = main()
    if any(t.is_alive() and not t.daemon for t in threading.enumerate() if t is not threading.main_thread()):
        sys.exit(code)
    close_process()
    os._exit(code & 0xFF)


def close_process() -> None:
    """What the interpreter's exit does that an os._exit after it must not skip: the exit handlers
    (multiprocessing's, weakref finalizers such as a leftover temporary folder's) and flushing stdout and
    stderr. Nothing raised here stops the exit (a reader may have closed the pipe)."""
    with contextlib.suppress(Exception):
        atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()


if __name__ == "__main__":
    run()
