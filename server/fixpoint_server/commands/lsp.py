"""`fixpoint lsp`: start the language server on stdio (what editors do) or TCP."""

from __future__ import annotations

import argparse
import logging
from collections.abc import Sequence
from typing import Any


def register(sub: Any) -> None:
    p = sub.add_parser("lsp", help="start the language server (stdio by default)")
    _arguments(p)
    p.set_defaults(func=run)


def _arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--stdio", action="store_true", help="talk LSP over stdin/stdout (the default)")
    p.add_argument("--tcp", action="store_true", help="listen on TCP instead")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=2087)
    p.add_argument("--log-file", help="write the server's log here (stderr by default)")
    p.add_argument("-v", "--verbose", action="store_true")


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(
        filename=args.log_file,
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(name)s %(levelname)s %(message)s",
    )
    # pygls logs every message it sends and receives at INFO, whole documents included: a 20 MB
    # weights file would go to the log on every keystroke.
    logging.getLogger("pygls").setLevel(logging.DEBUG if args.verbose else logging.WARNING)
    from fixpoint_server.app import server

    if args.tcp:
        server.start_tcp(args.host, args.port)
    else:
        server.start_io()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="fixpoint-lsp", description="the Fixpoint language server")
    _arguments(parser)
    return run(parser.parse_args(argv))
