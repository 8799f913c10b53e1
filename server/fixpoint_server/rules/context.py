"""What a rule sees: one consistent snapshot of the workspace, with parsed facts cached by content.

The server builds a CheckContext over its index (open documents shadow the disk); `fixpoint check`
builds one over a folder. Rules only read through it, so they never touch the disk or the editor
themselves, and both callers get the same findings. Parsed facts (C files, build files, quant-params
JSON, the quantized model) are cached by the text they came from, across snapshots, in a FactsCache.
"""

from __future__ import annotations

import enum
import functools
import os
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from fixpoint_server.parse.digest import digest
from quantcore import display, limits, untrusted
from quantcore.project import Project, read_roots

T = TypeVar("T")
_MESSAGE_MAX_CHARS = 1000
"""An error raised while loading a hostile model can quote megabytes of it; a finding shows this much."""

if TYPE_CHECKING:
    from fixpoint_server.parse.build_files import BuildFacts
    from fixpoint_server.parse.c_source import CFile
    from fixpoint_server.parse.params import ParamsFile, QuantizedModel


class FileKind(enum.Enum):
    C_SOURCE = "c"
    C_HEADER = "h"
    MAKEFILE = "makefile"
    CMAKE = "cmake"
    COMPILE_COMMANDS = "compile_commands"
    PLATFORMIO = "platformio"
    PARAMS_JSON = "params"
    MODEL = "model"
    PROJECT = "project"

    @property
    def is_c(self) -> bool:
        return self in (FileKind.C_SOURCE, FileKind.C_HEADER)

    @property
    def is_build(self) -> bool:
        return self in (FileKind.MAKEFILE, FileKind.CMAKE, FileKind.COMPILE_COMMANDS, FileKind.PLATFORMIO)


_BY_NAME = {
    "makefile": FileKind.MAKEFILE,
    "gnumakefile": FileKind.MAKEFILE,
    "cmakelists.txt": FileKind.CMAKE,
    "compile_commands.json": FileKind.COMPILE_COMMANDS,
    "platformio.ini": FileKind.PLATFORMIO,
    "fixpoint.toml": FileKind.PROJECT,
}
_BY_SUFFIX = {
    ".c": FileKind.C_SOURCE,
    ".cc": FileKind.C_SOURCE,
    ".cpp": FileKind.C_SOURCE,
    ".h": FileKind.C_HEADER,
    ".hpp": FileKind.C_HEADER,
    ".mk": FileKind.MAKEFILE,
    ".cmake": FileKind.CMAKE,
    ".onnx": FileKind.MODEL,
}


def classify(path: Path) -> FileKind | None:
    """The kind of file `path` is by its name, or None for files no rule reads."""
    name = path.name.lower()
    if name in _BY_NAME:
        return _BY_NAME[name]
    if name.endswith(".params.json") or name.endswith("_params.json") or name == "quant_params.json":
        return FileKind.PARAMS_JSON
    return _BY_SUFFIX.get(path.suffix.lower())


def _unusable(path: Path, roots: list[Path]) -> str | None:
    """Why a file the JSON names must not be loaded (outside the workspace and its repository; a FIFO
    or device: opening it could block), or None; a missing file is left to the loader's own message."""
    inside = _holding(path, roots)
    if inside is None:
        return f"is outside the workspace {roots[0]}"
    if not os.path.lexists(path):
        return None
    try:
        untrusted.regular_file(path, root=inside)
    except untrusted.UntrustedInputError as exc:
        return exc.problem
    return None


def _holding(path: Path, roots: list[Path]) -> Path | None:
    """The first of `roots` that `path` lies in, symlinks resolved; None when it leaves all of them."""
    return next((root for root in roots if untrusted.is_inside(path, root)), None)


def _stamp(path: Path) -> str:
    """mtime and size: changes whenever the file does (a stat never opens the file)."""
    stat = path.stat()
    return f"{stat.st_mtime_ns}:{stat.st_size}"


@dataclass(frozen=True)
class Reads:
    """What a rule's findings depend on, declared by the rule module as READS; the incremental checker
    re-runs a rule only when one of these changed (the project settings count for every rule)."""

    contents: frozenset[FileKind] = frozenset()
    """Kinds whose text or parsed facts the rule reads."""
    listing: frozenset[FileKind] = frozenset()
    """Kinds whose list of paths (not their text) the rule reads: it re-runs when one is added or removed."""
    outside: bool = False
    """It reads files by their bytes on disk outside the index's versions (a model, the sources a generated
    file hashed): it re-runs after any file-system event too."""
    problems: bool = False
    """It reads why files were not read (ctx.problem) or what the walk left out (ctx.notes)."""


@dataclass(frozen=True)
class Changes:
    """What changed since the incremental checker's previous snapshot (CheckContext.changes)."""

    paths: frozenset[Path]
    """Files whose text may differ (edited, changed on disk, opened, closed, created, deleted)."""
    since: int
    """The index generation the previous snapshot was taken at."""
    listing: bool
    """Files were added or removed."""
    problems: bool
    """Why-not-read reasons or the walk's notes changed."""
    disk: bool
    """A file-system event arrived (a model or hashed source outside the index may differ)."""


@dataclass
class FactsCache:
    """Parsed facts by (parser, path, content digest); old entries of a path are dropped on update."""

    entries: dict[tuple[str, Path], tuple[str, Any]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    states: dict[str, Any] = field(default_factory=dict)
    """Long-lived state of the incremental checker (the live C workspace), by name."""

    def state(self, name: str, create: Callable[[], T]) -> T:
        with self.lock:
            if name not in self.states:
                self.states[name] = create()
            result: T = self.states[name]
            return result

    def get(self, kind: str, path: Path, key: str, compute: Callable[[], Any]) -> Any:
        with self.lock:
            hit = self.entries.get((kind, path))
        if hit is not None and hit[0] == key:
            return hit[1]
        value = compute()
        with self.lock:
            self.entries[(kind, path)] = (key, value)
        return value

    def forget(self, path: Path) -> None:
        with self.lock:
            for entry in [k for k in self.entries if k[1] == path]:
                del self.entries[entry]


@dataclass
class CheckContext:
    root: Path
    """The project root (where fixpoint.toml is, or the workspace folder)."""
    project: Project
    files: Mapping[Path, FileKind]
    """Every indexed file (absolute paths) and its kind."""
    read: Callable[[Path], str | None]
    """The text of a file: the editor's buffer when open, else the disk; None if unreadable or binary."""
    cache: FactsCache = field(default_factory=FactsCache)
    version: Callable[[Path], str] | None = None
    """A cheap key that changes whenever the file's text does (the editor's version, or mtime and size);
    None: parsed facts are keyed by a digest of the text."""
    problem: Callable[[Path], str | None] | None = None
    """Why an indexed file was not read (a FIFO, a symlink out of the workspace, too large), or None;
    asked after the file was read (see the skipped-file rule)."""
    notes: tuple[str, ...] = ()
    """What the walk of the tree left out (folders nested too deep, too many entries)."""
    changes: Changes | None = None
    """Set by the incremental checker: what changed since its previous snapshot (None: from scratch)."""
    listing: int | None = None
    """Changes whenever `files` does (the index's listing generation); None: not known."""
    incremental: bool = False
    """A snapshot of the incremental checker: the C rules use its long-lived C workspace."""
    recorder: Any = None
    """Set by the incremental checker while one file's part of a rule runs: what of the other files it
    reads (rules/incremental.py)."""
    _memo: dict[Any, Any] = field(default_factory=dict, repr=False)
    """What this snapshot has already computed: texts, sorted file lists, the C workspace."""

    def memo(self, key: Any, compute: Callable[[], T]) -> T:
        """`compute()` once per snapshot (the rules share what one of them built)."""
        if key not in self._memo:
            self._memo[key] = compute()
        result: T = self._memo[key]
        return result

    def text(self, path: Path) -> str | None:
        return self.memo(("text", path), lambda: self.read(path))

    @property
    def read_roots(self) -> list[Path]:
        """Where a model or sidecar a JSON names may be read from: the workspace, and the git work tree
        holding it (a subfolder of a repository opened alone still reads `../model.onnx`)."""
        return self.memo(
            "read_roots", lambda: [self.root, *(r for r in read_roots(self.root) if r != self.root)]
        )

    def files_of(self, *kinds: FileKind) -> list[Path]:
        return self.memo(("files", kinds), lambda: self._listed(kinds, lambda k: k in kinds))

    def c_files(self) -> list[Path]:
        return self.files_of(FileKind.C_SOURCE, FileKind.C_HEADER)

    def build_files(self) -> list[Path]:
        return self.memo("build-files", lambda: self._listed("build", lambda k: k.is_build))

    def _listed(self, key: Any, wanted: Callable[[FileKind], bool]) -> list[Path]:
        """The sorted paths of the kinds `wanted` takes: kept across snapshots of one listing (sorting
        2,000 paths is milliseconds a keystroke should not pay)."""
        if self.listing is None:
            return sorted((p for p, k in self.files.items() if wanted(k)), key=str)
        kept: dict[Any, list[Path]] = self.cache.state("listings", dict)
        found = kept.get((self.listing, key))
        if found is None:
            if any(old[0] != self.listing for old in kept):
                kept.clear()
            found = kept[(self.listing, key)] = sorted(
                (p for p, k in self.files.items() if wanted(k)), key=str
            )
        return found

    def relative(self, path: Path) -> str:
        try:
            return str(path.relative_to(self.root))
        except ValueError:
            return str(path)

    def _parsed(self, kind: str, path: Path, parse: Callable[[str], Any]) -> Any:
        def compute() -> Any:
            text = self.text(path)
            if text is None:
                return None
            key = self.version(path) if self.version is not None else digest(text)
            return self.cache.get(kind, path, key, lambda: parse(text))

        return self.memo((kind, path), compute)

    def derived(self, kind: str, path: Path, compute: Callable[[str], T]) -> T | None:
        """`compute(text)` of a file, cached across snapshots until the file changes (for what a rule
        derives from a whole text: a hash of 20 MB should not be redone on every keystroke elsewhere)."""
        result: T | None = self._parsed(kind, path, compute)
        return result

    def c_file(self, path: Path) -> CFile | None:
        from fixpoint_server.parse.c_source import scan_c

        result: CFile | None = self._parsed("c", path, scan_c)
        return result

    def build_file(self, path: Path) -> BuildFacts | None:
        from fixpoint_server.parse.build_files import parse_build_file

        kind = self.files.get(path)
        if kind is None or not kind.is_build:
            return None
        result: BuildFacts | None = self._parsed("build", path, lambda text: parse_build_file(path, text))
        return result

    def params_files(self) -> list[ParamsFile]:
        """Every quant-params JSON of the workspace, parsed with positions (broken ones too)."""
        from fixpoint_server.parse.params import read_params

        found: list[ParamsFile] = []
        for path in self.files_of(FileKind.PARAMS_JSON):
            parsed = self._parsed("params", path, functools.partial(read_params, path))
            if parsed is not None:
                found.append(parsed)
        return found

    def file_sha256(self, path: Path) -> str | None:
        """SHA-256 of the file's bytes on disk (what `fixpoint generate` hashed), cached by mtime and size;
        None for what cannot be read (a FIFO or device, a path out of `read_roots`, a vanished file).
        The boundary is the one the model is loaded within: fixpoint.toml may name a model or JSON in
        the repository above the workspace, and its hash is compared all the same."""
        try:
            stat = path.stat()
        except OSError:
            return None
        key = f"{stat.st_mtime_ns}:{stat.st_size}"

        def compute() -> str | None:
            root = _holding(path, self.read_roots)
            if root is None:
                return None
            try:
                return untrusted.sha256(path, limit=limits.MODEL_MAX_BYTES, root=root)
            except (untrusted.UntrustedInputError, OSError):  # OSError: an error while reading (EIO)
                return None

        result: str | None = self.cache.get("sha256", path, key, compute)
        return result

    def quantized(self, params: ParamsFile) -> QuantizedModel | None:
        """The int8 graph the JSON and its model define (None when the model is missing; a model that
        cannot be used - outside the workspace, broken, past the import limits - has `error` set)."""
        model = params.model_path(self)
        if params.document is None or model is None:
            return None
        sidecar = params.finetuned_path()
        try:
            key = f"{params.digest}:{_stamp(model)}"
            if sidecar is not None:  # a replaced sidecar must be re-read (and fail its checksum)
                key += f":{_stamp(sidecar) if sidecar.is_file() else 'missing'}"
        except OSError:
            return None  # vanished since model_path looked
        result: QuantizedModel | None = self.cache.get(
            "quantized", params.path, key, lambda: self._quantize(params, model, sidecar)
        )
        return result

    def _quantize(self, params: ParamsFile, model: Path, sidecar: Path | None) -> QuantizedModel:
        from fixpoint_server.parse.params import QuantizedModel, quantize_from

        refused = functools.partial(QuantizedModel.failed, model)
        for what, path in (("the model", model), ("its fine-tuned weights", sidecar)):
            problem = None if path is None else _unusable(path, self.read_roots)
            if problem is not None:
                return refused(f"{what} {display.quoted(path)} {problem}")
        try:
            return quantize_from(params, model)
        except Exception as exc:  # a hostile model can make onnx or numpy raise anything: a finding, no crash
            return refused(display.shorten(f"{type(exc).__name__}: {exc}", _MESSAGE_MAX_CHARS))


def kernel_globs(ctx: CheckContext) -> Iterable[str]:
    """Globs of the sources the optimisation policy applies to: CMSIS-NN's and the generated folder."""
    yield from ctx.project.checks.kernel_sources
    try:
        generated = ctx.project.generated.resolve().relative_to(ctx.root.resolve())
    except ValueError:
        return
    yield f"{generated.as_posix()}/**"
