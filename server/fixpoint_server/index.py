"""The workspace index: which files the rules read, their current text, and a cheap version of each.

Open documents shadow the disk (the editor's buffer is the truth while a file is open). Files on disk
are read lazily and kept by (mtime, size), so a re-check re-reads only what changed; a watchdog event
or an editor event invalidates one entry. Binary files read as None (the rules skip them), non-UTF-8
ones as Latin-1. Build output, VCS and virtualenv folders are never indexed, nor anything under the
project's [checks] exclude globs.

The tree may be hostile (a FIFO named `src/pipe.c`, a symlink `src/zero.c -> /dev/zero` committed to
git, 1,500 nested folders): every file is read through quantcore.untrusted (regular files inside the
workspace, at most SOURCE_MAX_BYTES, never a blocking open), the tree is walked iteratively within the
budgets of quantcore.limits, and what was not read is remembered with the reason (`skipped`, `notes`)
so the skipped-file rule can say so instead of staying silent.
"""

from __future__ import annotations

import fnmatch
import os
import stat
import threading
from dataclasses import dataclass
from pathlib import Path

from fixpoint_server.rules.context import Changes, CheckContext, FactsCache, FileKind, classify
from quantcore import limits, untrusted
from quantcore.project import Project

SKIPPED_DIRS = frozenset({
    ".git", ".hg", ".svn", ".venv", "venv", "node_modules", "__pycache__", ".pio", ".vscode", ".idea",
    "build", "cmake-build-debug", "cmake-build-release", "_build", "out",
})  # fmt: skip
BINARY_PROBE = 8192


@dataclass
class _Cached:
    mtime_ns: int
    size: int
    text: str | None


class WorkspaceIndex:
    def __init__(self, root: Path, project: Project | None = None) -> None:
        self.root = root.resolve()
        self.project = project or Project()
        self.files: dict[Path, FileKind] = {}
        self.open_docs: dict[Path, tuple[int, str]] = {}
        """path -> (editor version, text) of the documents open in the editor."""
        self.cache = FactsCache()
        self.skipped: dict[Path, str] = {}
        """Indexed files that are not read, and why (a FIFO, a symlink leaving the workspace, too large)."""
        self.notes: tuple[str, ...] = ()
        """What the last scan's budgets left out (folders nested too deep, too many entries)."""
        self._disk: dict[Path, _Cached] = {}
        self._lock = threading.Lock()
        self.generation = 0
        """Counts changes: every edit, file-system event, scan and problem found moves it on."""
        self.watching = False
        """Set when a file-system watcher reports changes on disk: only then can the change log below
        stand in for a stat of every file (changes_since)."""
        self._changed: dict[Path, int] = {}
        """path -> the generation of its last change."""
        self._last = {"scan": 0, "listing": 0, "problems": 0, "disk": 0}
        """What changed last at which generation: a scan (everything), the list of files, the reasons
        files were not read, anything on disk."""

    def _bump(self, *what: str, path: Path | None = None) -> None:
        """Note a change (called with the lock held)."""
        self.generation += 1
        for name in what:
            self._last[name] = self.generation
        if path is not None:
            self._changed[path] = self.generation

    def changes_since(self, generation: int | None) -> Changes | None:
        """What changed after `generation` (None: unknown - never checked, the tree was scanned again,
        or nothing watches the disk, so a file may have changed unseen)."""
        with self._lock:
            if generation is None or not self.watching or self._last["scan"] > generation:
                return None
            paths = frozenset(p for p, g in self._changed.items() if g > generation)
            if len(self._changed) > 4096:  # keep the log short: older entries are never asked for again
                self._changed = {p: g for p, g in self._changed.items() if g > generation}
            return Changes(
                paths, generation, self._last["listing"] > generation, self._last["problems"] > generation,
                self._last["disk"] > generation,
            )  # fmt: skip

    # -- discovery ----------------------------------------------------------------------------------

    def scan(self) -> int:
        """(Re)list every indexed file under the root; returns how many."""
        walked = untrusted.walk(self.root, self._skipped_dir)
        found: dict[Path, FileKind] = {}
        skipped: dict[Path, str] = {}
        for path in walked.files:
            kind = self.kind_of(path)
            if kind is None:
                continue
            found[path] = kind
            problem = None if _plain_file(path) else self._problem(path)
            if problem is not None:
                skipped[path] = problem
        with self._lock:
            self.files = found | {p: k for p, k in self.files.items() if p in self.open_docs}
            self.skipped = skipped
            self.notes = tuple(walked.notes(self.root))
            self._bump("scan", "listing", "problems", "disk")
        return len(self.files)

    def _problem(self, path: Path) -> str | None:
        """Why `path` cannot be read (special file, symlink out of the workspace, unreadable), from its
        stat alone; the size limit is found when the file is read."""
        try:
            untrusted.regular_file(path, root=self.root)
        except untrusted.UntrustedInputError as exc:
            return exc.problem
        return None

    def problem(self, path: Path) -> str | None:
        """Why the indexed file `path` was not read, or None (an open document is always read)."""
        with self._lock:
            return None if path in self.open_docs else self.skipped.get(path)

    def kind_of(self, path: Path) -> FileKind | None:
        """The kind of a path the index would keep (None: not indexed)."""
        if not self.contains(path) or self._excluded(path):
            return None
        return classify(path)

    def contains(self, path: Path) -> bool:
        try:
            relative = path.relative_to(self.root)
        except ValueError:
            return False
        return not any(part in SKIPPED_DIRS for part in relative.parts[:-1])

    def _skipped_dir(self, path: Path) -> bool:
        return path.name in SKIPPED_DIRS or self._excluded(path)

    def _excluded(self, path: Path) -> bool:
        relative = path.relative_to(self.root).as_posix()
        return any(fnmatch.fnmatch(relative, glob) for glob in self.project.checks.exclude)

    # -- updates ------------------------------------------------------------------------------------

    def changed_on_disk(self, path: Path) -> bool:
        """A file was created or modified; returns whether the index cares."""
        with self._lock:
            self._disk.pop(path, None)
            self._bump("disk")  # a file no rule reads may still be read from disk: a model's sidecar
        kind = self.kind_of(path)
        if kind is None or not os.path.lexists(path) or (path.is_dir() and not path.is_symlink()):
            return self.deleted(path)
        problem = self._problem(path)
        with self._lock:
            self._bump(*(("listing",) if self.files.get(path) is not kind else ()), path=path)
            self.files[path] = kind
            self._set_problem(path, problem)
        return True

    def _set_problem(self, path: Path, problem: str | None) -> None:
        """(Called with the lock held.)"""
        if self.skipped.get(path) == problem:
            return
        if problem is None:
            self.skipped.pop(path, None)
        else:
            self.skipped[path] = problem
        self._bump("problems", path=path)

    def deleted(self, path: Path) -> bool:
        with self._lock:
            self._disk.pop(path, None)
            if self.skipped.pop(path, None) is not None:
                self._bump("problems")
            known = self.files.pop(path, None) is not None and path not in self.open_docs
            if path in self.open_docs:
                self.files[path] = classify(path) or FileKind.C_SOURCE
            self._bump("disk", *(("listing",) if known else ()), path=path if known else None)
        self.cache.forget(path)
        return known

    def opened(self, path: Path, version: int, text: str) -> bool:
        kind = classify(path)
        with self._lock:
            self.open_docs[path] = (version, text)
            listed = path in self.files
            if kind is not None and self.contains(path):
                self.files[path] = kind
            self._bump(*(() if listed or path not in self.files else ("listing",)), path=path)
        return kind is not None

    def closed(self, path: Path) -> None:
        with self._lock:
            self.open_docs.pop(path, None)
            gone = not os.path.lexists(path) and self.files.pop(path, None) is not None
            self._bump(*(("listing",) if gone else ()), path=path)

    # -- reading ------------------------------------------------------------------------------------

    def read(self, path: Path) -> str | None:
        """The editor's buffer of an open document, else the file's text on disk (None: binary, or not
        read - then `problem(path)` says why)."""
        with self._lock:
            doc = self.open_docs.get(path)
        return doc[1] if doc is not None else self._read_disk(path)

    def _read_disk(self, path: Path) -> str | None:
        try:
            stat = path.stat()  # a stat never blocks, even on a FIFO; reading is untrusted.read_bytes's job
        except OSError:
            return None
        with self._lock:
            cached = self._disk.get(path)
        if cached is not None and (cached.mtime_ns, cached.size) == (stat.st_mtime_ns, stat.st_size):
            return cached.text
        problem = None
        try:
            text = _decode(untrusted.read_bytes(path, limit=limits.SOURCE_MAX_BYTES, root=self.root))
        except untrusted.UntrustedInputError as exc:
            text, problem = None, exc.problem
        except OSError as exc:  # an error while reading (EIO): read_bytes refuses the rest itself
            text, problem = None, f"cannot read: {exc.strerror or exc}"
        with self._lock:
            self._disk[path] = _Cached(stat.st_mtime_ns, stat.st_size, text)
            if path in self.files:
                self._set_problem(path, problem)
        return text

    def version(self, path: Path) -> str:
        """Changes whenever read(path) may: the editor's version of an open document, else mtime + size."""
        with self._lock:
            doc = self.open_docs.get(path)
        return _doc_version(doc) if doc is not None else self._disk_version(path)

    def _disk_version(self, path: Path) -> str:
        with self._lock:
            cached = self._disk.get(path)
        if cached is not None:
            return f"disk:{cached.mtime_ns}:{cached.size}"
        try:
            stat = path.stat()
        except OSError:
            return "missing"
        return f"disk:{stat.st_mtime_ns}:{stat.st_size}"

    def context(self) -> CheckContext:
        """A snapshot for a check: the files listed and the open documents' texts as of now, so an edit
        arriving while the check runs is not half seen (a document's text from before it, its version
        from after, would file old facts under the new version)."""
        with self._lock:
            files = dict(self.files)
            docs = dict(self.open_docs)
            listing = max(self._last["listing"], self._last["scan"])

        def read(path: Path) -> str | None:
            doc = docs.get(path)
            return doc[1] if doc is not None else self._read_disk(path)

        def version(path: Path) -> str:
            doc = docs.get(path)
            return _doc_version(doc) if doc is not None else self._disk_version(path)

        return CheckContext(
            self.root, self.project, files, read, self.cache, version,
            problem=self.problem, notes=self.notes, listing=listing,
        )  # fmt: skip


def _doc_version(doc: tuple[int, str]) -> str:
    return f"open:{doc[0]}:{len(doc[1])}"


def _plain_file(path: Path) -> bool:
    """Whether the walk's `path` is a regular file itself, not a symlink: then it is readable as far as a
    stat tells, and inside the workspace (the walk enters no symlinked folder), so _problem's realpaths
    are not needed - one lstat instead, for most of the tree."""
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def _decode(data: bytes) -> str | None:
    if b"\0" in data[:BINARY_PROBE]:
        return None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return data.decode("latin-1")  # legacy C sources: checkable, offsets still per character
