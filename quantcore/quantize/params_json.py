"""The quant-params JSON file: written readable and diffable, read back only if valid.

The format (version 1) is defined by quantcore/schema/quant-params.schema.json, which editors use too.
A document is valid when it passes every stage of quantcore.quantize.params_checks (`validate`): JSON data,
the schema, the rules a schema cannot express, and last, consistency: every integer a kernel takes must
follow from the scales and zero points recorded. `write` refuses an invalid document, `load` an invalid
file; each Problem carries the JSON path of the value at fault (quantcore.quantize.params_problems).

The file may be hostile: it is read through quantcore.untrusted (a regular file under a size limit, never
a FIFO or a device), its nesting is measured before the parser recurses into it, names from it are
shortened and quoted in messages, and the model path it records must stay inside the folders the user
works in (`model_path`).
"""

from __future__ import annotations

import json
import os
import re
import secrets
import stat
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from quantcore import limits, untrusted
from quantcore.errors import InputError, OutputError
from quantcore.quantize import consistency, params_checks
from quantcore.quantize.params_checks import MAX_PROBLEMS
from quantcore.quantize.params_checks import validate as validate
from quantcore.quantize.params_problems import Doc
from quantcore.quantize.params_problems import Problem as Problem
from quantcore.quantize.params_problems import json_path as json_path
from quantcore.quantize.params_problems import quoted as quoted

FORMAT = "fixpoint-quant-params"
VERSION = 1

_LOAD_ADVICE = "fix the file, or regenerate it with the quantizer"
_WRITE_ADVICE = "nothing was written; the code that built the document must fix it"
_INDENT = "  "


class QuantParamsError(InputError):
    """A quant-params file that cannot be read, parsed, validated or written; `problems` lists all found."""

    def __init__(self, source: str, detail: str, problems: Sequence[Problem] = ()) -> None:
        self.source = source
        self.problems = tuple(problems)
        super().__init__(f"{source}: {detail}")

    @classmethod
    def invalid(
        cls, source: str, problems: Sequence[Problem], advice: str, lead: str = ""
    ) -> QuantParamsError:
        many = f"{len(problems)}+" if len(problems) >= MAX_PROBLEMS else str(len(problems))
        count = f"1 of {many} problems" if len(problems) > 1 else ""
        note = "; ".join(part for part in (count, advice) if part)
        return cls(source, f"{lead}{problems[0]}" + (f" ({note})" if note else ""), problems)


class QuantParamsWriteError(QuantParamsError, OutputError):
    """The document is fine but its file cannot be written (a failure, exit status 1, not bad input)."""


# -- writing -------------------------------------------------------------------------------------------


def dump(doc: Doc) -> str:
    """The document as text: indent 2, keys in the order given, lists of scalars on one line, floats as
    Python's repr (the shortest text that reads back to the same float), a final newline."""
    problems = params_checks.json_data_problems(doc)
    if problems:
        raise QuantParamsError.invalid("<document>", problems, "convert the value to plain JSON data")
    return _text(doc)


def _text(doc: Doc) -> str:
    return _encode(doc, 0) + "\n"


def _encode(value: Any, depth: int) -> str:
    inner = _INDENT * (depth + 1)
    if isinstance(value, dict) and value:
        items = [f"{inner}{_scalar(key)}: {_encode(item, depth + 1)}" for key, item in value.items()]
        return "{\n" + ",\n".join(items) + "\n" + _INDENT * depth + "}"
    if isinstance(value, list) and any(isinstance(item, (dict, list)) for item in value):
        items = [inner + _encode(item, depth + 1) for item in value]
        return "[\n" + ",\n".join(items) + "\n" + _INDENT * depth + "]"
    return _scalar(value)  # a scalar, or a list of scalars on one line: "[1, 2.5]" as json writes it


def _scalar(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, allow_nan=False)


def write(path: str | os.PathLike[str], doc: Doc) -> None:
    """Validate `doc` and write it atomically: the file is either the old one or the complete new one."""
    write_atomically(Path(path), encoded(path, doc))


def encoded(path: str | os.PathLike[str], doc: Doc) -> bytes:
    """What `write` writes to `path`: `doc` validated (QuantParamsError naming `path` if it is not valid)
    and dumped, for a caller writing it along with other files."""
    problems = validate(doc)
    if problems:
        raise QuantParamsError.invalid(str(path), problems, _WRITE_ADVICE, "not written: ")
    return _text(doc).encode("utf-8")  # validate checked what dump checks too


def write_atomically(target: Path, data: bytes) -> None:
    """Replace `target` with `data` in one rename: readers see the old file or the whole new one."""
    # A temp file in the same folder, so os.replace is a rename within one filesystem (atomic).
    temp = target.with_name(f".{target.name}.{secrets.token_hex(8)}.tmp")
    try:
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    except OSError as exc:
        raise _write_error(target, exc) from exc
    try:
        with os.fdopen(fd, "wb") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())  # the data is on disk before the rename makes it the file
        if target.exists():
            os.chmod(temp, stat.S_IMODE(target.stat().st_mode))  # keep the old file's permissions
        os.replace(temp, target)
    except BaseException as exc:
        temp.unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise _write_error(target, exc) from exc
        raise


def _write_error(target: Path, exc: OSError) -> QuantParamsError:
    return QuantParamsWriteError(
        str(target), f"cannot write: {exc.strerror or exc}; check that the folder exists and is writable"
    )


# -- reading -------------------------------------------------------------------------------------------


def load(
    path: str | os.PathLike[str],
    *,
    roots: Sequence[str | os.PathLike[str]] | None = None,
    warn: Callable[[str], None] | None = None,
) -> Doc:
    """Read, parse and validate a quant-params file; any problem raises one QuantParamsError.

    The model path the file records must lead inside one of `roots` (default: the current directory and
    the JSON's own folder; see `model_path`). Parameters a layer lists in "overrides" are not checked
    against the scales; `warn` (default: a line on stderr) is told about them in one line.
    """
    source = str(path)
    doc = loads(_read(path), source)
    model_path(doc, path, default_roots(path) if roots is None else roots)
    hand = _overrides_note(doc)
    if hand:
        (warn or _stderr)(f"{source}: warning: {hand}")
    return doc


def loads(text: str, source: str = "<string>") -> Doc:
    """Parse and validate a document held in memory (an editor buffer); `source` names it in messages."""
    doc = _parse(text, source)
    stage, problems = params_checks.first_failing_stage(doc)
    if problems:
        advice = "" if stage == "consistency" else _LOAD_ADVICE  # each consistency problem says what to do
        raise QuantParamsError.invalid(source, problems, advice)
    result: Doc = doc
    return result


def _read(path: str | os.PathLike[str]) -> str:
    """The file's text: a regular file within JSON_MAX_BYTES (never a FIFO or device), UTF-8."""
    try:
        raw = untrusted.read_bytes(path, limit=limits.JSON_MAX_BYTES)
    except untrusted.UntrustedInputError as exc:
        raise QuantParamsError(str(path), exc.problem) from exc
    except OSError as exc:  # e.g. a directory, which opens but cannot be read
        raise QuantParamsError(str(path), f"cannot read: {exc.strerror or exc}") from exc
    try:
        return raw.decode("utf-8-sig")  # tolerate the BOM some Windows editors add
    except UnicodeDecodeError as exc:
        raise QuantParamsError(
            str(path), f"not UTF-8 text (at byte offset {exc.start}); save it as UTF-8"
        ) from exc


def _stderr(line: str) -> None:
    print(line, file=sys.stderr)


def _parse(text: str, source: str) -> Any:
    deep = untrusted.json_depth_problem(text)
    if deep is not None:
        # Python's parser would recurse once per level and crash with RecursionError far down.
        raise QuantParamsError(source, f"{deep}; a quant-params file nests 5 levels deep: this is not one")
    duplicates: list[str] = []

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        obj: dict[str, Any] = {}
        for key, value in items:
            if key in obj:
                duplicates.append(key)
            obj[key] = value
        return obj

    try:
        doc = json.loads(text, object_pairs_hook=pairs)
    except json.JSONDecodeError as exc:
        where = f"line {exc.lineno}, column {exc.colno}"
        raise QuantParamsError(source, f"{where}: invalid JSON: {exc.msg}; fix the syntax there") from exc
    except ValueError as exc:  # an integer of more digits than Python converts (sys.int_info)
        raise QuantParamsError(
            source, f"invalid JSON: {exc}; no quant-params value has that many digits"
        ) from exc
    if duplicates:
        # json keeps the last of two equal keys: a merge that duplicated a tensor would silently lose one.
        raise QuantParamsError(
            source,
            f"duplicate key {quoted(duplicates[0])}: JSON keeps only the last; merge or rename them",
        )
    return doc


# -- the model the document records --------------------------------------------------------------------


def default_roots(params_file: str | os.PathLike[str]) -> tuple[Path, Path]:
    """Where a recorded model may be, on the command line: the current directory or the JSON's folder."""
    return Path.cwd(), Path(params_file).parent


def model_path(
    doc: Any, params_file: str | os.PathLike[str], roots: Sequence[str | os.PathLike[str]]
) -> Path:
    """The model file the document records ($.model.path), relative to the JSON's folder, resolved.

    Refused (QuantParamsError at $.model.path) when absolute, or when it leads - through "..", or a
    symlink - outside every folder of `roots`: a params file someone sent must not make Fixpoint read
    /etc/passwd as a model. Projects keep the model next to the JSON, or one level up (`../model.onnx`
    from build/), both inside the project the user works in. The file need not exist.
    """
    source = str(params_file)
    model = doc.get("model") if isinstance(doc, dict) else None
    recorded = model.get("path") if isinstance(model, dict) else None
    if not isinstance(recorded, str):
        raise QuantParamsError(source, "$.model.path: missing; it names the model the parameters belong to")
    at = f"$.model.path: {quoted(recorded)}"
    if "\0" in recorded or not recorded:
        raise QuantParamsError(
            source, f"{at} is not a file name; record the model's path relative to the JSON"
        )
    if os.path.isabs(recorded) or re.match(r"[A-Za-z]:|[\\/]", recorded):
        raise QuantParamsError(
            source,
            f"{at} is absolute; record the model's path relative to the JSON's folder (e.g. \"model.onnx\")",
        )
    candidate = Path(params_file).parent / recorded
    if not any(untrusted.is_inside(candidate, root) for root in roots):
        folders = " or ".join(quoted(root) for root in dict.fromkeys(os.path.realpath(r) for r in roots))
        raise QuantParamsError(
            source,
            f"{at} leads to {quoted(os.path.realpath(candidate))}, outside {folders}; keep the model in the"
            " project and record its path relative to the JSON",
        )
    return Path(os.path.realpath(candidate))


def recorded_model(
    params_file: str | os.PathLike[str],
    roots: Sequence[str | os.PathLike[str]] | None = None,
    document: Any = None,
) -> Path | None:
    """The model file a params JSON records, when it exists (`fixpoint generate`'s default --model).

    `document` is the file's content when the caller has it (what `load` returned): the file is not read
    again. Else the file is read within the same limits as `load` (without validating the rest: that is
    load's job). None when the document records no usable path or the model is not there;
    QuantParamsError for an unreadable or hostile file or a path leading outside `roots` (default: the
    current directory and the JSON's folder).
    """
    doc = _parse(_read(params_file), str(params_file)) if document is None else document
    model = doc.get("model") if isinstance(doc, dict) else None
    if not isinstance(model, dict) or not isinstance(model.get("path"), str):
        return None
    path = model_path(doc, params_file, default_roots(params_file) if roots is None else roots)
    return path if path.is_file() else None


def _overrides_note(doc: Doc) -> str:
    hand = consistency.overrides(doc)
    if not hand:
        return ""
    listed = "; ".join(f"{json_path(path)} ({quoted(reason)})" for path, reason in hand[:3])
    more = f"; and {len(hand) - 3} more" if len(hand) > 3 else ""
    noun = "value was" if len(hand) == 1 else "values were"
    return f"{len(hand)} {noun} set by hand and not checked against the scales: {listed}{more}"
