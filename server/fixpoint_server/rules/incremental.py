"""Incremental checking: re-run only what a change invalidates, reuse the rest.

A rule module declares what it reads (READS, a context.Reads). A rule whose findings for a file depend
on that file's facts plus a few workspace-level inputs also splits its check into
- `prepare(ctx)`: those workspace-level inputs (built from small per-file facts, compared with == to the
  previous run's: when they differ every file is checked again),
- `check_file(ctx, path, shared)`: the findings that file's facts give (they may lie in another file),
- optionally `check_rest(ctx, shared)`: what only the whole workspace gives (run on every change), and
declares the kinds it splits over (PER_FILE). Its `check(ctx)` is `split_check` of those parts, so the
CLI's from-scratch run and the server's incremental run compute the same findings.

While `check_file` runs, the C workspace it sees records what of the other files it reads: a macro of
another file, the definitions of a name, another file's facts (Recorder). The Engine keeps, per rule
and per file, the last findings and those reads; a change re-runs a file's part when the file changed
or something it read did. A rule that is not split re-runs whole when an input it declares changed.
"""

from __future__ import annotations

import bisect
import copy
import logging
import time
import traceback
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, Generic, TypeVar

from fixpoint_server.findings import Finding
from fixpoint_server.parse.c_source import ArrayDef, CallSite, CFile, CWorkspace
from fixpoint_server.rules.context import CheckContext, FileKind, Reads

log = logging.getLogger(__name__)
T = TypeVar("T")
ALL = object()
"""A recorded read of every file (the part iterated over the whole workspace)."""
C_KINDS = frozenset({FileKind.C_SOURCE, FileKind.C_HEADER})


# ----------------------------------------------------------------------------------- split rules


def split_check(
    ctx: CheckContext,
    kinds: frozenset[FileKind],
    prepare: Callable[[CheckContext], Any],
    check_file: Callable[[CheckContext, Path, Any], list[Finding]],
    check_rest: Callable[[CheckContext, Any], list[Finding]] | None = None,
) -> list[Finding]:
    """A split rule's whole check, from scratch: its parts over every file of `kinds`, in path order."""
    shared = prepare(ctx)
    findings: list[Finding] = []
    for path in ctx.files_of(*sorted(kinds, key=lambda k: k.value)):
        findings.extend(check_file(ctx, path, shared))
    if check_rest is not None:
        findings.extend(check_rest(ctx, shared))
    return findings


# ------------------------------------------------------------------------------ recording reads


@dataclass
class Recorder:
    """What one file's part of a rule read of the workspace, as (what, key) pairs."""

    reads: set[tuple[str, Any]] = field(default_factory=set)


class _Recording(Mapping[Any, Any]):
    """A read-only view of a mapping that records every key asked for (iterating it reads them all)."""

    def __init__(self, data: Mapping[Any, Any], what: str, recorder: Recorder) -> None:
        self._data, self._what, self._reads = data, what, recorder.reads

    def __getitem__(self, key: Any) -> Any:
        self._reads.add((self._what, key))
        return self._data[key]

    def __contains__(self, key: object) -> bool:
        self._reads.add((self._what, key))
        return key in self._data

    def get(self, key: Any, default: Any = None) -> Any:
        self._reads.add((self._what, key))
        return self._data.get(key, default)

    def __iter__(self) -> Iterator[Any]:
        self._reads.add((self._what, ALL))
        return iter(self._data)

    def __len__(self) -> int:
        self._reads.add((self._what, ALL))
        return len(self._data)


class _RecordingOrder(Sequence[Path]):
    def __init__(self, order: list[Path], recorder: Recorder) -> None:
        self._order, self._reads = order, recorder.reads

    def __getitem__(self, index: Any) -> Any:
        self._reads.add(("files", ALL))
        return self._order[index]

    def __len__(self) -> int:
        self._reads.add(("files", ALL))
        return len(self._order)

    def __iter__(self) -> Iterator[Path]:
        self._reads.add(("files", ALL))
        return iter(self._order)


# -------------------------------------------------------------------------------- the live workspace


@dataclass
class Touched:
    """What an update of the live workspace changed: files, and the names whose merged facts differ."""

    paths: set[Path] = field(default_factory=set)
    defines: set[str] = field(default_factory=set)
    arrays: set[str] = field(default_factory=set)
    fields: set[str] = field(default_factory=set)

    def keys(self) -> Iterator[tuple[str, Any]]:
        yield from (("files", p) for p in self.paths)
        yield from (("defines", n) for n in self.defines)
        yield from (("arrays", n) for n in self.arrays)
        yield from (("fields", n) for n in self.fields)


class LiveWorkspace(CWorkspace):
    """A CWorkspace kept across snapshots: an update merges only the files that changed (the same
    facts CWorkspace's constructor merges, in the same path order: the first file defining a macro
    wins, a name's definitions are listed in path order)."""

    def __init__(self) -> None:
        super().__init__({})
        self._keys: list[str] = []
        self._flat: tuple[list[tuple[Path, CallSite]], list[tuple[Path, ArrayDef]]] | None = None
        self._flat_keys: tuple[list[str], list[str]] = ([], [])
        """The path key of each entry of `_flat`'s lists (sorted, as `_keys`): where a file's part is."""
        self.updates = 0
        """How many updates changed a file; `log` holds the files each of the last ones changed."""
        self.log: list[tuple[int, frozenset[Path]]] = []
        self._by_name: dict[str, dict[str, dict[str, list[Any]]]] = {
            "defines": {},
            "arrays": {},
            "fields": {},
        }
        self.synced: int | None = None
        """The index generation this workspace reflects (None: never filled)."""

    def update(self, facts: Mapping[Path, CFile | None]) -> Touched:
        """Take the facts of the files in `facts` (None: the file is gone, or unreadable)."""
        touched = Touched()
        for path, cfile in facts.items():
            old = self.files.get(path)
            if old is cfile:
                continue
            touched.paths.add(path)
            key = str(path)
            if old is not None:
                self._forget(key, old, touched)
            if cfile is None:
                del self.files[path]
                at = bisect.bisect_left(self._keys, key)
                del self._keys[at], self.order[at]
                continue
            if old is None:
                at = bisect.bisect_left(self._keys, key)
                self._keys.insert(at, key)
                self.order.insert(at, path)
            self.files[path] = cfile
            self._learn(key, path, cfile, touched)
        if touched.paths:
            self._reflatten(touched.paths)
            self.updates += 1
            self.log = [*self.log[-63:], (self.updates, frozenset(touched.paths))]
            if list(self.files) != self.order:  # a file added: keep `files` in path order, as CWorkspace's
                self.files = {path: self.files[path] for path in self.order}
        for name in touched.defines:
            self._merge_define(name)
        for name in touched.arrays:
            self._merge("arrays", name, self._arrays)
        for name in touched.fields:
            self._merge("fields", name, self._fields)
        return touched

    def changed_since(self, update: int, known: Iterable[Path]) -> list[frozenset[Path]]:
        """The files each update after `update` changed (every file, and the `known` ones, when the
        log no longer reaches back that far)."""
        since = [paths for at, paths in self.log if at > update]
        if update != self.updates and (not self.log or self.log[0][0] > update + 1):
            since = [frozenset(self.files) | frozenset(known)]  # too far behind the log: every file
        return since

    def calls(self) -> Iterator[tuple[Path, CallSite]]:
        return iter(self._flattened()[0])

    def arrays(self) -> Iterator[tuple[Path, ArrayDef]]:
        return iter(self._flattened()[1])

    def _flattened(self) -> tuple[list[tuple[Path, CallSite]], list[tuple[Path, ArrayDef]]]:
        """Every file's calls and arrays in path order (three rules walk them on every check), listed
        once and then updated where the files that changed have theirs."""
        len(self.order)  # in a recording view: a read of every file
        if self._flat is None:
            files = self.files
            calls = [(path, call) for path in self.order for call in files[path].calls]
            arrays = [(path, array) for path in self.order for array in files[path].arrays]
            self._flat = (calls, arrays)
            self._flat_keys = ([str(p) for p, _ in calls], [str(p) for p, _ in arrays])
        return self._flat

    def _reflatten(self, paths: Iterable[Path]) -> None:
        """Replace the changed files' parts of the flat lists (a slice each: no pass over every file)."""
        if self._flat is None:
            return
        calls, arrays = self._flat
        for path in paths:
            cfile = self.files.get(path)
            _replace_part(calls, self._flat_keys[0], path, cfile.calls if cfile is not None else [])
            _replace_part(arrays, self._flat_keys[1], path, cfile.arrays if cfile is not None else [])

    def _forget(self, key: str, cfile: CFile, touched: Touched) -> None:
        for what, names, into in self._contributions(cfile, touched):
            for name in names:
                self._by_name[what].get(name, {}).pop(key, None)
                into.add(name)

    def _learn(self, key: str, path: Path, cfile: CFile, touched: Touched) -> None:
        defines, arrays, fields = self._by_name["defines"], self._by_name["arrays"], self._by_name["fields"]
        for name, define in cfile.defines.items():
            defines.setdefault(name, {})[key] = [define]
            touched.defines.add(name)
        for array in cfile.arrays:
            arrays.setdefault(array.name, {}).setdefault(key, []).append((path, array))
            touched.arrays.add(array.name)
        for assignment in cfile.fields:
            fields.setdefault(assignment.var, {}).setdefault(key, []).append((path, assignment))
            touched.fields.add(assignment.var)

    @staticmethod
    def _contributions(cfile: CFile, touched: Touched) -> Iterator[tuple[str, Iterable[str], set[str]]]:
        yield "defines", list(cfile.defines), touched.defines
        yield "arrays", {a.name for a in cfile.arrays}, touched.arrays
        yield "fields", {f.var for f in cfile.fields}, touched.fields

    def _merge_define(self, name: str) -> None:
        by_file = self._by_name["defines"].get(name)
        if by_file:
            self.defines[name] = by_file[min(by_file)][0]
        else:
            self.defines.pop(name, None)
            self._by_name["defines"].pop(name, None)

    def _merge(self, what: str, name: str, into: dict[str, list[Any]]) -> None:
        by_file = self._by_name[what].get(name)
        if by_file:
            into[name] = [entry for key in sorted(by_file) for entry in by_file[key]]
        else:
            into.pop(name, None)
            self._by_name[what].pop(name, None)

    def view(self, recorder: Recorder) -> CWorkspace:
        """This workspace as one file's part of a rule sees it: every read of another file recorded."""
        seen = copy.copy(self)
        seen.files = _Recording(self.files, "files", recorder)  # type: ignore[assignment]
        seen.defines = _Recording(self.defines, "defines", recorder)  # type: ignore[assignment]
        seen._arrays = _Recording(self._arrays, "arrays", recorder)  # type: ignore[assignment]
        seen._fields = _Recording(self._fields, "fields", recorder)  # type: ignore[assignment]
        seen.order = _RecordingOrder(self.order, recorder)  # type: ignore[assignment]
        return seen


def _replace_part(entries: list[tuple[Path, T]], keys: list[str], path: Path, facts: Sequence[T]) -> None:
    """Put `facts` of `path` where its entries are in the path-sorted `entries` (with their `keys`)."""
    key = str(path)
    at, end = bisect.bisect_left(keys, key), bisect.bisect_right(keys, key)
    entries[at:end] = [(path, fact) for fact in facts]
    keys[at:end] = [key] * len(facts)


def live_workspace(ctx: CheckContext) -> CWorkspace:
    """The C workspace of an incremental snapshot: the long-lived one, updated with the files that
    changed since the previous snapshot (every C file's facts compared when that is not known)."""
    live = ctx.cache.state("live-c-workspace", LiveWorkspace)
    changes = ctx.changes
    if changes is not None and live.synced == changes.since:
        paths: Iterable[Path] = [p for p in changes.paths if p in live.files or ctx.files.get(p) in C_KINDS]
    else:
        paths = [*live.files, *ctx.c_files()]
    facts = {p: (ctx.c_file(p) if ctx.files.get(p) in C_KINDS else None) for p in paths}
    ctx.memo("c-workspace-touched", lambda: live.update(facts))
    live.synced = None  # the engine sets it once the whole run succeeded
    return live


def c_workspace(ctx: CheckContext) -> CWorkspace:
    """Every C file's facts, merged (built once per snapshot and shared by the C rules; in the server,
    kept across snapshots and updated with the files that changed). Inside one file's part of a rule,
    a view that records what of the other files the part reads."""
    if ctx.incremental:
        live = ctx.memo("c-workspace", lambda: live_workspace(ctx))
        return live.view(ctx.recorder) if ctx.recorder is not None else live  # type: ignore[attr-defined]

    def build() -> CWorkspace:
        files = {}
        for path in ctx.c_files():
            cfile = ctx.c_file(path)
            if cfile is not None:
                files[path] = cfile
        return CWorkspace(files)

    return ctx.memo("c-workspace", build)


# ------------------------------------------------------------------------------------- the engine


@dataclass
class _RuleState:
    findings: list[Finding] = field(default_factory=list)
    """A whole rule's last findings (a rule that is not split)."""
    shared: Any = None
    by_file: dict[Path, list[Finding]] = field(default_factory=dict)
    reads: dict[Path, set[tuple[str, Any]]] = field(default_factory=dict)
    readers: dict[tuple[str, Any], set[Path]] = field(default_factory=dict)
    """(what, key) -> the files whose part read it."""
    rest: list[Finding] = field(default_factory=list)

    def forget(self, path: Path) -> None:
        self.by_file.pop(path, None)
        for key in self.reads.pop(path, ()):
            readers = self.readers.get(key)
            if readers is not None:
                readers.discard(path)
                if not readers:
                    del self.readers[key]

    def remember(self, path: Path, findings: list[Finding], reads: set[tuple[str, Any]]) -> None:
        self.forget(path)
        self.by_file[path] = findings
        self.reads[path] = reads
        for key in reads:
            self.readers.setdefault(key, set()).add(path)


class Engine:
    """Each rule's findings, kept between checks and recomputed where a change invalidates them."""

    def __init__(self, modules: Sequence[ModuleType]) -> None:
        self.modules = list(modules)
        self.states: dict[str, _RuleState] = {}
        self.project: Any = None
        self.spent: dict[str, float] = {}
        """Seconds each rule took in the last run (and the C workspace's update: parsing what changed)."""
        self.reran: dict[str, int] = {}
        """Per rule, how many of its parts the last run computed (file parts, or 1 for a whole rule)."""

    def reset(self) -> None:
        self.states.clear()
        self.project = None

    def run(self, ctx: CheckContext, until: int | None) -> dict[str, list[Finding]]:
        """Every rule's findings for `ctx` (ctx.changes None: everything from scratch); `until` is the
        index generation of the snapshot (the live workspace's new sync point)."""
        fresh = ctx.changes is None or ctx.project is not self.project
        if fresh:
            self.states.clear()
            ctx.changes = None
        ctx.incremental = True
        self.project = ctx.project
        self.reran = {}
        results: dict[str, list[Finding]] = {}
        try:
            started = time.perf_counter()
            c_workspace(ctx)  # brought up to date whether or not a C rule runs: its sync point moves
            self.spent = {"c-workspace": time.perf_counter() - started}
            for module in self.modules:
                began = time.perf_counter()
                try:
                    results[module.__name__] = self._rule(ctx, module, fresh)
                except Exception as exc:  # a rule's bug must not silence the other rules
                    log.error("%s", crash_report(module))
                    self.states.pop(module.__name__, None)
                    results[module.__name__] = [crashed(ctx, module, exc)]
                self.spent[module.__name__] = time.perf_counter() - began
        except BaseException:
            self.reset()
            raise
        live = ctx.cache.states.get("live-c-workspace")
        if live is not None:
            live.synced = until
        return results

    def _rule(self, ctx: CheckContext, module: ModuleType, fresh: bool) -> list[Finding]:
        name = module.__name__
        state = self.states.get(name)
        if state is None:
            state = self.states[name] = _RuleState()
            fresh = True
        if hasattr(module, "check_file"):
            return self._split(ctx, module, state, fresh)
        reads = _reads(module)
        if fresh or _affected(reads, ctx, reads.contents):
            state.findings = list(module.check(ctx))
            self.reran[name] = 1
        return state.findings

    def _split(self, ctx: CheckContext, module: ModuleType, state: _RuleState, fresh: bool) -> list[Finding]:
        kinds: frozenset[FileKind] = module.PER_FILE
        reads = _reads(module)
        shared = module.prepare(ctx)
        whole = fresh or shared != state.shared or _affected(reads, ctx, reads.contents - kinds)
        state.shared = shared
        paths = ctx.files_of(*sorted(kinds, key=lambda k: k.value))
        if whole:
            todo: Iterable[Path] = paths
            for path in list(state.by_file):
                state.forget(path)
        else:
            todo = self._invalidated(ctx, state, kinds)
        done = 0
        for path in todo:
            recorder = Recorder()
            ctx.recorder = recorder
            try:
                found = list(module.check_file(ctx, path, shared))
            finally:
                ctx.recorder = None
            state.remember(path, found, recorder.reads)
            done += 1
        check_rest = getattr(module, "check_rest", None)
        state.rest = list(check_rest(ctx, shared)) if check_rest is not None else []
        self.reran[module.__name__] = done
        return [f for path in paths for f in state.by_file.get(path, ())] + state.rest

    def _invalidated(self, ctx: CheckContext, state: _RuleState, kinds: frozenset[FileKind]) -> list[Path]:
        assert ctx.changes is not None
        stale: set[Path] = set()
        for path in ctx.changes.paths:
            if ctx.files.get(path) in kinds:
                stale.add(path)
            else:
                state.forget(path)  # gone, or no longer of these kinds
        touched = ctx.memo("c-workspace-touched", Touched)
        keys = [*touched.keys(), ("files", ALL)] if touched.paths else []
        if touched.defines or touched.arrays or touched.fields:
            keys += [("defines", ALL), ("arrays", ALL), ("fields", ALL)]
        for key in keys:
            stale.update(state.readers.get(key, ()))
        return sorted((p for p in stale if ctx.files.get(p) in kinds), key=str)


def _affected(reads: Reads, ctx: CheckContext, contents: frozenset[FileKind]) -> bool:
    """Whether a change of this snapshot touches what `reads` declares (`contents`: the kinds whose
    text counts here)."""
    changes = ctx.changes
    if changes is None:
        return True
    if (reads.outside and changes.disk) or (reads.problems and changes.problems):
        return True
    if changes.listing and (reads.listing or reads.contents):
        return True
    return any(ctx.files.get(p) in contents or p not in ctx.files for p in changes.paths) and bool(contents)


def _reads(module: ModuleType) -> Reads:
    """A rule's declared inputs; one that declares none reads everything."""
    declared: Reads | None = getattr(module, "READS", None)
    return declared or Reads(frozenset(FileKind), frozenset(FileKind), outside=True, problems=True)


def crash_report(module: ModuleType) -> str:
    return f"rule {module.__name__} failed:\n{traceback.format_exc()}"


def crashed(ctx: CheckContext, module: ModuleType, exc: Exception) -> Finding:
    from fixpoint_server.rules import crashed_finding

    return crashed_finding(ctx, module, module.CODES[0], exc)


def file_summaries(ctx: CheckContext, name: str, compute: Callable[[CFile], T]) -> dict[Path, T]:
    """`compute(facts)` of every C file of the workspace (file_summaries_by_path without the path)."""
    return file_summaries_by_path(ctx, name, lambda _path, cfile: compute(cfile))


def file_summaries_by_path(
    ctx: CheckContext, name: str, compute: Callable[[Path, CFile], T]
) -> dict[Path, T]:
    """`compute(facts)` of every C file of the workspace, by path: in the server kept across snapshots
    and recomputed only for the files whose facts changed (a whole-workspace set of names then costs a
    dict look-up per file, not a pass over 2,000 files' facts)."""
    if ctx.recorder is not None:
        ctx.recorder.reads.add(("files", ALL))
    return ctx.memo(("file-summaries", name), lambda: _summaries(ctx, name, compute))


def whole_workspace(ctx: CheckContext) -> CWorkspace:
    """The C workspace itself, not a file's recording view: for what is kept per file across checks
    (the caller records that it reads every file)."""
    recorder, ctx.recorder = ctx.recorder, None
    try:
        return c_workspace(ctx)
    finally:
        ctx.recorder = recorder


def _summaries(ctx: CheckContext, name: str, compute: Callable[[Path, CFile], T]) -> dict[Path, T]:
    ws = whole_workspace(ctx)
    if not isinstance(ws, LiveWorkspace):
        return {path: compute(path, cfile) for path, cfile in ws.files.items()}
    kept: _Kept[T] = ctx.cache.state(f"summary-{name}", _Kept)
    for paths in ws.changed_since(kept.at, kept.values):
        for path in paths:
            cfile = ws.files.get(path)
            if cfile is None:
                kept.values.pop(path, None)
            else:
                kept.values[path] = compute(path, cfile)
    kept.at = ws.updates
    return kept.values


@dataclass
class _Kept(Generic[T]):
    """A per-file summary kept across snapshots, as of the live workspace's update `at`."""

    at: int = -1
    values: dict[Path, T] = field(default_factory=dict)
