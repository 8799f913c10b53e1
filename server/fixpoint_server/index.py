"""The workspace index: which files the rules read, their current text, and a cheap version of each.

Open documents shadow the disk (the editor's buffer is the truth while a file is open). Files on disk
are read lazily and kept by (mtime, size), so a re-check re-reads only what changed; a watchdog event
or an editor event invalidates one entry. Binary and non-UTF-8 files read as None (the rules skip
them); files above MAX_BYTES are not read at all. Build output, VCS and virtualenv folders are never
indexed, nor anything under the project's [checks] exclude globs.
"""

from __future__ import annotations

import fnmatch
import os
import threading
from dataclasses import dataclass
from pathlib import Path

from fixpoint_server.rules.context import CheckContext, FactsCache, FileKind, classify
from quantcore.project import Project

SKIPPED_DIRS = frozenset({
    ".git", ".hg", ".svn", ".venv", "venv", "node_modules", "__pycache__", ".pio", ".vscode", ".idea",
    "build", "cmake-build-debug", "cmake-build-release", "_build", "out",
})  # fmt: skip
MAX_BYTES = 64 * 1024 * 1024
"""Larger files are not read (a generated weights file of a big model is tens of MB; this is far above)."""
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
        self._disk: dict[Path, _Cached] = {}
        self._lock = threading.Lock()

    # -- discovery ----------------------------------------------------------------------------------

    def scan(self) -> int:
        """(Re)list every indexed file under the root; returns how many."""
        found: dict[Path, FileKind] = {}
        for folder, dirs, names in os.walk(self.root):
            dirs[:] = sorted(d for d in dirs if not self._skipped_dir(Path(folder) / d))
            for name in names:
                path = Path(folder) / name
                kind = self.kind_of(path)
                if kind is not None:
                    found[path] = kind
        with self._lock:
            self.files = found | {p: k for p, k in self.files.items() if p in self.open_docs}
        return len(self.files)

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
        kind = self.kind_of(path)
        if kind is None or not path.is_file():
            return self.deleted(path)
        with self._lock:
            self.files[path] = kind
        return True

    def deleted(self, path: Path) -> bool:
        with self._lock:
            self._disk.pop(path, None)
            known = self.files.pop(path, None) is not None and path not in self.open_docs
            if path in self.open_docs:
                self.files[path] = classify(path) or FileKind.C_SOURCE
        self.cache.forget(path)
        return known

    def opened(self, path: Path, version: int, text: str) -> bool:
        kind = classify(path)
        with self._lock:
            self.open_docs[path] = (version, text)
            if kind is not None and self.contains(path):
                self.files[path] = kind
        return kind is not None

    def closed(self, path: Path) -> None:
        with self._lock:
            self.open_docs.pop(path, None)
            if not path.is_file():
                self.files.pop(path, None)

    # -- reading ------------------------------------------------------------------------------------

    def read(self, path: Path) -> str | None:
        with self._lock:
            doc = self.open_docs.get(path)
        if doc is not None:
            return doc[1]
        try:
            stat = path.stat()
        except OSError:
            return None
        with self._lock:
            cached = self._disk.get(path)
        if cached is not None and (cached.mtime_ns, cached.size) == (stat.st_mtime_ns, stat.st_size):
            return cached.text
        text = _read_text(path, stat.st_size)
        with self._lock:
            self._disk[path] = _Cached(stat.st_mtime_ns, stat.st_size, text)
        return text

    def version(self, path: Path) -> str:
        """Changes whenever read(path) may: the editor's version of an open document, else mtime + size."""
        with self._lock:
            doc = self.open_docs.get(path)
            cached = self._disk.get(path)
        if doc is not None:
            return f"open:{doc[0]}:{len(doc[1])}"
        if cached is not None:
            return f"disk:{cached.mtime_ns}:{cached.size}"
        try:
            stat = path.stat()
        except OSError:
            return "missing"
        return f"disk:{stat.st_mtime_ns}:{stat.st_size}"

    def context(self) -> CheckContext:
        with self._lock:
            files = dict(self.files)
        return CheckContext(self.root, self.project, files, self.read, self.cache, self.version)


def _read_text(path: Path, size: int) -> str | None:
    if size > MAX_BYTES:
        return None
    try:
        data = path.read_bytes()
    except OSError:
        return None
    if b"\0" in data[:BINARY_PROBE]:
        return None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return data.decode("latin-1")  # legacy C sources: checkable, offsets still per character
