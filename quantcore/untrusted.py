"""Reading files and text that may be hostile, within the limits of quantcore.limits.

What can go wrong with a path the user (or a file the user was sent) names, and what this module does:
- a FIFO, device, socket or directory where a file is expected (`src/pipe.c`, a symlink to /dev/zero):
  never opened for reading - they would hang or never end; refused with what the path really is;
- a symlink leading out of the workspace: refused when a root is given;
- a file too large to read whole: refused with its size and the limit;
- a JSON document nested deeper than Python's parser can recurse: refused with the line;
- a folder tree deeper than Python's recursion (1,500 nested folders): walked iteratively, with a depth
  and entry budget, and what was left out reported.

Every refusal is an UntrustedInputError naming the path (or source) and what to do.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from quantcore import limits
from quantcore.display import shorten
from quantcore.errors import InputError

_READ_CHUNK = 1024 * 1024


class UntrustedInputError(InputError):
    """A file or text past a limit, or of a kind Fixpoint does not read; the message says which and why."""

    def __init__(self, source: str | os.PathLike[str], problem: str) -> None:
        self.source = str(source)
        self.problem = problem
        super().__init__(f"{source}: {problem}")


# -- what a path is ------------------------------------------------------------------------------------


def kind_of(mode: int) -> str:
    """What a stat mode describes, in words for a message."""
    kinds = (
        (stat.S_ISREG, "a regular file"),
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    )
    return next((word for test, word in kinds if test(mode)), "a special file")


def is_inside(path: str | os.PathLike[str], root: str | os.PathLike[str]) -> bool:
    """Whether `path`, every symlink resolved, lies in (or is) the folder `root`, also resolved."""
    real = Path(os.path.realpath(path))
    base = Path(os.path.realpath(root))
    return real == base or base in real.parents


def require_inside(path: str | os.PathLike[str], root: str | os.PathLike[str], what: str) -> Path:
    """`path` resolved; an error naming `what` (e.g. "fixpoint.toml:4: generated") if it leaves `root`."""
    if not is_inside(path, root):
        raise UntrustedInputError(
            what, f"{os.fspath(path)}{_via_link(path)} is outside {os.path.realpath(root)}"
        )
    return Path(os.path.realpath(path))


def _via_link(path: str | os.PathLike[str]) -> str:
    real = os.path.realpath(path)
    return f" (a symlink to {real})" if os.path.abspath(path) != real else ""


def _check_root(path: str | os.PathLike[str], root: str | os.PathLike[str] | None) -> None:
    if root is not None and not is_inside(path, root):
        raise UntrustedInputError(
            path,
            f"leads outside {os.path.realpath(root)}{_via_link(path)}; Fixpoint follows symlinks only"
            " within the workspace",
        )


def regular_file(
    path: str | os.PathLike[str], *, root: str | os.PathLike[str] | None = None
) -> os.stat_result:
    """stat() of `path` when it is (or links to) a regular file inside `root`; UntrustedInputError else.

    Nothing is opened, so a FIFO cannot block and a device cannot stream.
    """
    _check_root(path, root)
    try:
        info = os.stat(path)
    except OSError as exc:
        raise UntrustedInputError(path, f"cannot read: {exc.strerror or exc}") from exc
    if not stat.S_ISREG(info.st_mode):
        raise _not_regular(path, info.st_mode, " (a symlink to it)" if os.path.islink(path) else "")
    return info


def _not_regular(path: str | os.PathLike[str], mode: int, link: str = "") -> UntrustedInputError:
    problem = f"is {kind_of(mode)}{link}, not a regular file; Fixpoint reads only regular files"
    return UntrustedInputError(path, problem)


def read_bytes(
    path: str | os.PathLike[str], *, limit: int, root: str | os.PathLike[str] | None = None
) -> bytes:
    """The whole content of a regular file of at most `limit` bytes (inside `root`, when given).

    The file is opened non-blocking and checked on the open descriptor, so a path swapped for a FIFO
    or a device between the check and the open still cannot block or stream; a file that grows past
    `limit` while it is read is refused too.
    """
    with _open_regular(path, limit, root) as handle:
        return b"".join(_chunks(handle, path, limit))


def sha256(path: str | os.PathLike[str], *, limit: int, root: str | os.PathLike[str] | None = None) -> str:
    """The SHA-256 of a file read_bytes would read, computed chunk by chunk (a 2 GiB model is hashed
    without holding it in memory)."""
    digest = hashlib.sha256()
    with _open_regular(path, limit, root) as handle:
        for chunk in _chunks(handle, path, limit):
            digest.update(chunk)
    return digest.hexdigest()


def _open_regular(path: str | os.PathLike[str], limit: int, root: str | os.PathLike[str] | None) -> Any:
    _check_root(path, root)
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        raise UntrustedInputError(path, f"cannot read: {exc.strerror or exc}") from exc
    try:
        info = os.fstat(fd)  # before fdopen, which refuses a directory with its own error
        if not stat.S_ISREG(info.st_mode):
            raise _not_regular(path, info.st_mode)
        if info.st_size > limit:
            raise UntrustedInputError(path, _too_large(info.st_size, limit))
        return os.fdopen(fd, "rb", buffering=0)
    except BaseException:
        os.close(fd)
        raise


def _chunks(handle: Any, path: str | os.PathLike[str], limit: int) -> Iterator[bytes]:
    total = 0
    while chunk := handle.read(min(_READ_CHUNK, limit + 1 - total)):
        total += len(chunk)
        if total > limit:  # it grew while being read
            raise UntrustedInputError(path, _too_large(limit, limit, grew=True))
        yield chunk


def _too_large(size: int, limit: int, grew: bool = False) -> str:
    more = "more than " if grew else ""
    return f"is larger than Fixpoint reads ({more}{_size(size)}; the limit is {_size(limit)})"


def _size(count: int) -> str:
    return f"{count / limits.MIB:.1f} MiB" if count >= limits.MIB else f"{count} bytes"


def read_text(path: str | os.PathLike[str], *, limit: int, root: str | os.PathLike[str] | None = None) -> str:
    """read_bytes decoded as UTF-8 (a BOM tolerated); an error names the byte offset of bad UTF-8."""
    raw = read_bytes(path, limit=limit, root=root)
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        problem = f"is not UTF-8 text (byte offset {exc.start}); save it as UTF-8"
        raise UntrustedInputError(path, problem) from exc


# -- JSON ----------------------------------------------------------------------------------------------

_JSON_STRING = re.compile(r'"(?:[^"\\\n]|\\.)*"')
"""A JSON string on one line (raw line breaks are not allowed in one; stopping there keeps line numbers)."""
_STEP_TABLE = bytes(1 if b in b"[{" else 0xFF if b in b"]}" else 0 for b in range(256))
"""bytes.translate table: a byte -> its step of the nesting depth read as int8 (+1, -1 or 0)."""


def json_depth_problem(text: str, max_depth: int = limits.JSON_MAX_DEPTH) -> str | None:
    """None when no array/object of `text` nests deeper than `max_depth`, else the problem with its line.

    Python's json parser recurses once per level and fails with RecursionError (a crash, not a
    message) a few hundred thousand levels down, and every walk over the parsed value recurses again;
    the depth is therefore measured on the text first: strings replaced by "" (one regex pass in C),
    then the brackets' running sum in numpy over the UTF-8 bytes (a bracket is one byte there).
    """
    if text.count("[") + text.count("{") <= max_depth:
        return None
    import numpy as np  # only for texts with many brackets: module import stays light for the CLI

    stripped = _JSON_STRING.sub('""', text).encode("utf-8", "surrogatepass")
    steps = stripped.translate(_STEP_TABLE)
    depth = np.cumsum(np.frombuffer(steps, np.int8), dtype=np.int32)
    deep = np.flatnonzero(depth > max_depth)
    if deep.size == 0:
        return None
    line = stripped.count(b"\n", 0, int(deep[0])) + 1
    return f"line {line}: arrays/objects nest deeper than {max_depth} levels, the most Fixpoint reads"


def loads_json(text: str, source: str, max_depth: int = limits.JSON_MAX_DEPTH, **options: Any) -> Any:
    """json.loads after the depth check; UntrustedInputError for too deep, json.JSONDecodeError as usual."""
    problem = json_depth_problem(text, max_depth)
    if problem is not None:
        raise UntrustedInputError(source, problem)
    return json.loads(text, **options)


# -- folder trees --------------------------------------------------------------------------------------


@dataclass
class Walk:
    """The files under a root, found without recursion; what the budget left out is listed."""

    files: list[Path] = field(default_factory=list)
    too_deep: list[Path] = field(default_factory=list)
    """Folders at the depth limit whose contents were not listed."""
    truncated: bool = False
    """The entry budget ran out: files beyond it were not listed."""

    def notes(self, root: Path) -> list[str]:
        """One sentence per limit that left something out."""
        out = []
        if self.too_deep:
            first = self.too_deep[0]
            shown = shorten(str(first.relative_to(root) if first.is_relative_to(root) else first), 80)
            out.append(
                f"{len(self.too_deep)} folder(s) nested more than {limits.WALK_MAX_DEPTH} levels below"
                f" {root} were not indexed (first: {shown})"
            )
        if self.truncated:
            out.append(f"{root} has more than {limits.WALK_MAX_FILES:,} entries; the rest were not indexed")
        return out


def walk(
    root: Path,
    skip_dir: Callable[[Path], bool] = lambda _path: False,
    *,
    max_depth: int = limits.WALK_MAX_DEPTH,
    max_entries: int = limits.WALK_MAX_FILES,
) -> Walk:
    """Every non-directory entry under `root` in sorted order, without following symlinked folders.

    Iterative (an explicit stack), so 1,500 nested folders cost no recursion; folders for which
    `skip_dir` is true are not entered. Special files are listed like files: readers refuse them.
    Entries are visited in a fixed order (sorted names, depth first), so a truncated walk is repeatable.
    """
    result = Walk()
    seen = 0
    stack: list[tuple[Path, int]] = [(root, 0)]
    while stack:
        folder, depth = stack.pop()
        for entry in _entries(folder):
            seen += 1
            if seen > max_entries:
                result.truncated = True
                stack.clear()
                break
            path = Path(entry.path)
            if not _is_dir(entry):
                result.files.append(path)
            elif skip_dir(path):
                continue
            elif depth + 1 > max_depth:
                result.too_deep.append(path)
            else:
                stack.append((path, depth + 1))
    result.files.sort()
    return result


def _entries(folder: Path) -> list[os.DirEntry[str]]:
    try:
        with os.scandir(folder) as it:
            return sorted(it, key=lambda entry: entry.name)
    except OSError:
        return []  # unreadable or vanished folder: nothing under it to index


def _is_dir(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir(follow_symlinks=False)
    except OSError:
        return False
