"""skipped-file: what the checks could not look at, said on the spot instead of silence.

A hostile or odd tree holds files that are never read (quantcore.untrusted): a FIFO named `src/pipe.c`
(reading it would hang), a symlink `src/zero.c -> /dev/zero` or to anything else outside the workspace,
a file larger than quantcore.limits.SOURCE_MAX_BYTES, one that cannot be opened. Their own checks cannot
run, and a file that is silently skipped looks like a file that passed, so each gets this finding. The
same goes for folders the walk's budget left out (nested too deep, too many entries), and for a model
that a quant-params JSON names but that could not be loaded (outside the workspace, broken, past the
import limits): the checks comparing C code with the model do not run for that JSON.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from fixpoint_server.findings import Code, Finding, Span
from fixpoint_server.rules.context import CheckContext, FileKind, Reads
from fixpoint_server.rules.incremental import split_check

CODES = (Code.SKIPPED_FILE,)
READS = Reads()
"""A file's finding is its own (why it was not read); the rest (the walk's notes, unusable models) is
gathered again on every check."""
PER_FILE = frozenset(FileKind)
_TEXT_KINDS = frozenset(k for k in FileKind if k.is_c or k.is_build or k is FileKind.PARAMS_JSON)
"""Kinds the rules read as text: reading them (once per snapshot, shared) finds the size limit too."""
SILENCE = "list it under [checks] exclude in fixpoint.toml to silence this"


def check(ctx: CheckContext) -> list[Finding]:
    return split_check(ctx, PER_FILE, prepare, check_file, check_rest)


def prepare(ctx: CheckContext) -> None:
    return None


def check_file(ctx: CheckContext, path: Path, shared: None) -> list[Finding]:
    if ctx.problem is None:
        return []
    if ctx.files[path] in _TEXT_KINDS:
        ctx.text(path)
    problem = ctx.problem(path)
    if problem is None:
        return []
    return [
        Finding(Code.SKIPPED_FILE, f"skipped: {problem}; its checks do not run ({SILENCE})", path, Span.at(0))
    ]


def check_rest(ctx: CheckContext, shared: None) -> list[Finding]:
    return [*_notes(ctx), *_models(ctx)]


def _notes(ctx: CheckContext) -> Iterator[Finding]:
    where = ctx.project.path or ctx.root
    for note in ctx.notes:
        yield Finding(
            Code.SKIPPED_FILE,
            f"{note}; their files are not checked (exclude those folders under [checks] exclude in"
            " fixpoint.toml, or open a folder further down)",
            where,
            Span.at(0),
        )


def _models(ctx: CheckContext) -> Iterator[Finding]:
    for params in ctx.params_files():
        model = ctx.quantized(params) if params.document is not None else None
        if model is None or model.error is None:
            continue
        yield Finding(
            Code.SKIPPED_FILE,
            f"model not used: {model.error}; the checks that compare C code with this JSON's layers do"
            " not run",
            params.path,
            params.span(("model", "path")),
        )
