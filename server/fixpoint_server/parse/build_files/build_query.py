"""The build system's own answer, for trusted workspaces: what make and CMake really compile each source
with, to confirm or drop what the text readers found (they read every branch of an `ifeq`, do not
evaluate `$(filter-out ...)` and do not follow `include`).

make: `make -p -n -B -k -f <Makefile>` in the Makefile's folder. The dry run (-n, with -B so that every
object counts as out of date) prints each compile command with every variable, function, conditional,
included file and target-specific value evaluated; -p then prints make's database: each variable's
value and the file:line it was last set at, and MAKEFILE_LIST, the makefiles it read. Evaluating a
Makefile is running code: `$(shell ...)` runs while it is read and a recipe that remakes an included
makefile runs even under -n. So it runs only where the workspace is trusted (the caller decides: the
language server when the editor trusts the workspace, `fixpoint check --build-query`), with an argument
list (no shell), a clean environment (PATH, HOME and LC_ALL=C only: no MAKEFLAGS, MAKEFILES or CC from
the caller), the Makefile's folder as cwd, a deadline, an output cap, its process group killed at the end,
and `-o <file>` for the Makefile and each included makefile the text reader named, so that make does
not remake them (a recipe remaking a makefile make only learns the name of while reading still runs).

CMake: only a build tree's existing file-API reply is read (`<build>/.cmake/api/v1/reply/index-*.json`
-> codemodel -> each target's compileGroups: the compile flags and definitions of its sources, generator
expressions evaluated for the configuration built). CMake is never run and no query file is written: a
user who wants the reply creates `<build>/.cmake/api/v1/query/codemodel-v2` (an empty file) and
configures again. A reply older than a CMake file it describes is not used.

Results are cached by the build files' stamps (mtime and size) and, in the language server, computed in
a background thread when a build file changes; a check only stats the few build files and uses the
cached result, and only while the text it reads is the text the result was computed from (an unsaved
edit of a Makefile falls back to the text reader until it is saved).
"""

from __future__ import annotations

import os
import posixpath
import re
import shlex
import shutil
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fixpoint_server.parse.digest import digest
from quantcore import display, limits, untrusted

MAKE_TIMEOUT_S = 10.0
"""One `make -pn` of a Makefile (a real one takes tens of milliseconds; `$(shell ...)` may take longer)."""
MAKE_OUTPUT_MAX_BYTES = 16 * limits.MIB
"""What one run may print (the database of a large tree is a few MB); more and the run is not used."""
MAX_ENTRIES = 32
"""Makefiles queried and CMake build trees read per workspace (the first, by path)."""
REPLY_MAX_BYTES = 64 * limits.MIB
"""One file of a CMake reply."""
MAX_REPLY_TARGETS = 10_000
DISCOVERY_INTERVAL_S = 2.0
"""How often the folders that may hold a CMake build tree are listed again, at most."""
MAKEFILE_NAMES = ("GNUmakefile", "makefile", "Makefile")
_COMPILER = re.compile(
    r"(?:^|/)(?:[\w.+-]+-)?(?:gcc|g\+\+|cc|c\+\+|clang|clang\+\+|armclang|tiarmclang|icx|icc)(?:-[\d.]+)?(?:\.exe)?$"
)
_SOURCE = re.compile(r"\.(?:c|cc|cpp|cxx|c\+\+|s|S)$")
_NAMES_SOURCE = re.compile(r"\.(?:c|cc|cpp|cxx|c\+\+|s|S)\b")
_SEPARATORS = {";", "&&", "||", "|"}
_WRAPPERS = {"ccache", "distcc", "sccache", "env"}
_QUOTING = re.compile(r"['\"\\]")
_SEPARATOR = re.compile(r"&&|\|\||[;|]")
_DIRECTORY = re.compile(r"(?:# )?\S*make(?:\[\d+\])?: (Entering|Leaving) directory '(.*)'$")
_ORIGIN = re.compile(r"# makefile \(from '(.*)', line (\d+)\)$")
_ASSIGN = re.compile(
    r"(?:(?P<target>[^#=]*?\S)\s*: )?(?:(?:override|export|private) )*"
    r"(?P<name>[^\s:#=+?!]+) (?P<op>::=|:=|\+=|\?=|!=|=) ?(?P<value>.*)$"
)

Stamp = tuple[int, int]
"""A file's mtime (ns) and size; (-1, -1) for a file that is not there."""


@dataclass(frozen=True)
class Evaluated:
    """What one build system evaluation says: the flags each source is compiled with, and (make) the
    final value of each variable."""

    tool: str
    """"make" or "cmake"."""
    entry: Path
    """The Makefile queried, or the CMake build tree read."""
    describes: frozenset[Path] = frozenset()
    """The build files (resolved paths) whose text facts this evaluation confirms or drops."""
    compiled: Mapping[str, tuple[tuple[str, ...], ...]] = field(default_factory=dict)
    """Root-relative source -> the flags of each command compiling it (a source may be compiled twice)."""
    variables: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """make: every value each variable has, global first, then target- and pattern-specific ones."""
    globals: Mapping[str, str] = field(default_factory=dict)
    """make: each global variable's value as the database prints it (recursive ones unexpanded)."""
    locations: Mapping[str, str] = field(default_factory=dict)
    """make: each global variable's file:line, where it was last set."""
    digests: Mapping[Path, str] = field(default_factory=dict)
    """The digest (parse.digest) of each described build file's text when it was evaluated."""
    problem: str | None = None
    """Why there is no evaluation (make is missing, failed, timed out; the reply is older than a
    CMake file): the text readers' facts stand."""
    seconds: float = 0.0

    @property
    def usable(self) -> bool:
        return self.problem is None

    def flag_lists(self, source: str) -> tuple[tuple[str, ...], ...]:
        return self.compiled.get(source, ())


def _decode(data: bytes) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return data.decode("latin-1")


def stamp(path: Path) -> Stamp:
    try:
        stat = path.stat()
    except OSError:
        return (-1, -1)
    return (stat.st_mtime_ns, stat.st_size)


def _file_digest(path: Path, root: Path) -> str | None:
    try:
        return digest(_decode(untrusted.read_bytes(path, limit=limits.SOURCE_MAX_BYTES, root=root)))
    except (untrusted.UntrustedInputError, OSError):
        return None


def _relative(path: str, cwd: str, root: Path) -> str | None:
    """`path` (as a command names it, relative to `cwd`) relative to the workspace root, or None."""
    joined = posixpath.normpath(posixpath.join(cwd, path))
    base = root.as_posix().rstrip("/") + "/"
    return joined[len(base) :] if joined.startswith(base) else None


# ------------------------------------------------------------------------------------------------ make


def query_make(
    makefile: Path, root: Path, keep_old: Iterable[str] = (), timeout: float = MAKE_TIMEOUT_S
) -> Evaluated:
    """Run `make -pnBk` on `makefile` (inside `root`) and read what it printed; never raises."""
    started = time.monotonic()
    if not untrusted.is_inside(makefile, root) or not makefile.is_file():
        return Evaluated("make", makefile, problem="is not a file inside the workspace")
    program = shutil.which("make")
    if program is None:
        return Evaluated("make", makefile, problem="make is not installed (not on PATH)")
    from quantcore.targets.process import Ending, run_capped

    # -B counts every file out of date, the makefiles too: a rule remaking one (`Makefile: Makefile.in`,
    # a generated .d) would run its recipe even under -n. Those make knows by name are kept old.
    names = dict.fromkeys([makefile.name, *keep_old])
    old = [f"--assume-old={name}" for name in names if name and "$" not in name]
    command = [program, "-p", "-n", "-B", "-k", "-f", makefile.name, *old]
    env = {"PATH": os.environ.get("PATH", os.defpath), "HOME": str(Path.home()), "LC_ALL": "C"}
    try:
        done = run_capped(command, timeout, keep=MAKE_OUTPUT_MAX_BYTES, cwd=makefile.parent, env=env)
    except OSError as exc:
        return Evaluated("make", makefile, problem=f"cannot start make: {exc.strerror or exc}")
    seconds = time.monotonic() - started
    if done.ending is Ending.TIMEOUT:
        return Evaluated(
            "make", makefile, problem=f"make -pn did not finish within {timeout:g} s", seconds=seconds
        )
    if done.printed > len(done.stdout) + len(done.stderr):
        return Evaluated(
            "make",
            makefile,
            problem=f"make -pn printed more than {MAKE_OUTPUT_MAX_BYTES} bytes",
            seconds=seconds,
        )
    errors = _decode(done.stderr).strip().splitlines()
    stopped = [line for line in errors if line.rstrip().endswith("Stop.")]  # $(error ...), a syntax error
    parsed = (
        None
        if stopped
        else parse_make_output(_decode(done.stdout), makefile.parent.resolve(), root.resolve())
    )
    if parsed is None:  # (the database make prints after it stopped has only what it read before)
        said = display.shown((stopped or errors or [f"exit status {done.returncode}"])[-1])
        return Evaluated("make", makefile, problem=f"make -pn failed: {said}", seconds=seconds)
    compiled, variables, globals_, locations = parsed
    describes = {makefile.resolve()}
    for name in globals_.get("MAKEFILE_LIST", "").split():
        path = Path(os.path.normpath(makefile.parent.resolve() / name))
        if untrusted.is_inside(path, root):
            describes.add(path.resolve())
    digests = {p: d for p in describes if (d := _file_digest(p, root)) is not None}
    return Evaluated(
        "make",
        makefile,
        frozenset(describes),
        compiled,
        variables,
        globals_,
        locations,
        digests,
        None,
        seconds,
    )


_Parsed = tuple[
    dict[str, tuple[tuple[str, ...], ...]], dict[str, tuple[str, ...]], dict[str, str], dict[str, str]
]


def parse_make_output(text: str, cwd: Path, root: Path) -> _Parsed | None:
    """(compiled, variables, globals, locations) from `make -pn`'s output; None without a database.

    The dry run's commands are the lines outside the databases (a sub-make prints its own database
    before the top-level one, which comes last); sub-makes' `Entering directory` lines say where their
    commands run."""
    compiled: dict[str, list[tuple[str, ...]]] = {}
    blocks: list[list[str]] = []
    block: list[str] | None = None
    folders = [cwd.as_posix()]
    for line in text.split("\n"):
        if block is None and line.startswith(("# GNU Make ", "# Make data base, printed on")):
            block = []
        if block is not None:
            block.append(line)
            if line.startswith("# Finished Make data base"):
                blocks.append(block)
                block = None
            continue
        moved = _DIRECTORY.match(line)
        if moved:
            if moved[1] == "Entering":
                folders.append(moved[2])
            elif len(folders) > 1:
                folders.pop()
            continue
        for source, flags in compile_commands(line, folders[-1], root):
            compiled.setdefault(source, []).append(flags)
    if not blocks:
        return None
    variables, globals_, locations = _database(blocks[-1])
    return {k: tuple(v) for k, v in compiled.items()}, variables, globals_, locations


def compile_commands(line: str, cwd: str, root: Path) -> list[tuple[str, tuple[str, ...]]]:
    """(root-relative source, flags) of each compiler call on one shell line that names a source."""
    if _NAMES_SOURCE.search(line) is None:
        return []  # most lines of a dry run (mkdir, ar, echo, the link): no shell parsing for them
    words = _shell_words(line)
    found = []
    command: list[str] = []
    for word in [*words, ";"]:
        if word not in _SEPARATORS:
            command.append(word)
            continue
        at = _compiler_at(command)
        if at is not None:  # `-c`, or compiled and linked in one (`$(CC) $(CFLAGS) $^ -o app.elf`)
            found.extend(_compiled(command[at + 1 :], cwd, root))
        command = []
    return found


def _shell_words(line: str) -> list[str]:
    """The words of a shell line, with `;`, `&&`, `||` and `|` as words of their own."""
    if _QUOTING.search(line) is None:  # shlex is 50x slower than a split: only for a line that quotes
        return _SEPARATOR.sub(lambda m: f" {m[0]} ", line).split()
    lexer = shlex.shlex(line, posix=True, punctuation_chars=";&|")
    lexer.whitespace_split = True
    try:
        return list(lexer)
    except ValueError:  # an unbalanced quote
        return line.split()


def _compiler_at(command: list[str]) -> int | None:
    """Where the compiler is when it is the command run (after `VAR=value` words and ccache/distcc),
    or None: `echo cc a.c` compiles nothing."""
    for i, word in enumerate(command):
        if ("=" in word and not word.startswith("-")) or word in _WRAPPERS:
            continue
        return i if _COMPILER.search(word) else None
    return None


def _compiled(args: list[str], cwd: str, root: Path) -> list[tuple[str, tuple[str, ...]]]:
    flags = tuple(a for a in args if a.startswith("-") and a not in ("-c", "-o"))
    sources = [
        a
        for i, a in enumerate(args)
        if _SOURCE.search(a) and not a.startswith("-") and (i == 0 or args[i - 1] != "-o")
    ]
    return [(rel, flags) for s in sources if (rel := _relative(s, cwd, root)) is not None]


def _database(lines: list[str]) -> tuple[dict[str, tuple[str, ...]], dict[str, str], dict[str, str]]:
    """Variables of one printed database: each assignment follows its `# makefile (from ...)` line
    (`NAME = value`, `# NAME := value` for a pattern-specific one, `target: NAME += value`)."""
    variables: dict[str, list[str]] = {}
    globals_: dict[str, str] = {}
    locations: dict[str, str] = {}
    for i, line in enumerate(lines[:-1]):
        origin = _ORIGIN.match(line)
        if origin is None:
            continue
        following = lines[i + 1]
        pattern_specific = following.startswith("# ")
        assign = _ASSIGN.match(following.removeprefix("# "))
        if assign is None:
            continue
        name, value = assign["name"], assign["value"]
        if assign["target"] is None and not pattern_specific and name not in globals_:
            globals_[name] = value
            locations[name] = f"{origin[1]}:{origin[2]}"
            variables.setdefault(name, []).insert(0, value)
        else:
            variables.setdefault(name, []).append(value)
    return {k: tuple(v) for k, v in variables.items()}, globals_, locations


# ----------------------------------------------------------------------------------------------- CMake


def reply_folder(build: Path) -> Path:
    return build / ".cmake" / "api" / "v1" / "reply"


def read_cmake_reply(build: Path, root: Path, cmake_files: Sequence[Path]) -> Evaluated:
    """The compile flags of every source of the codemodel in `build`'s newest reply; never raises.

    `cmake_files`: the workspace's CMake files; those under the reply's source folder (and not in the
    build tree) are the ones it describes."""
    started = time.monotonic()
    root = root.resolve()
    reply = reply_folder(build)
    try:
        indexes = sorted(p.name for p in reply.glob("index-*.json"))
        if not indexes:
            return Evaluated("cmake", build, problem="the build tree has no file-API reply")
        index = _reply_json(reply, indexes[-1], root)
        model_file = next(
            o["jsonFile"]
            for o in index.get("objects", [])
            if isinstance(o, dict) and o.get("kind") == "codemodel"
        )
        model = _reply_json(reply, model_file, root)
        source_dir = Path(str(model["paths"]["source"]))
        if not untrusted.is_inside(source_dir, root):
            return Evaluated("cmake", build, problem="the reply's source folder is outside the workspace")
        compiled = _reply_sources(reply, model, source_dir, root)
    except StopIteration:
        return Evaluated("cmake", build, problem="the reply has no codemodel (query codemodel-v2)")
    except (untrusted.UntrustedInputError, OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        return Evaluated("cmake", build, problem=f"cannot read the file-API reply: {display.said(exc)}")
    configured = stamp(reply / indexes[-1])[0]
    source_real, build_real = source_dir.resolve(), build.resolve()
    describes = frozenset(
        p.resolve()
        for p in cmake_files
        if untrusted.is_inside(p, source_real) and not untrusted.is_inside(p, build_real)
    )
    newer = sorted(p for p in describes if stamp(p)[0] > configured)
    if newer:
        return Evaluated(
            "cmake",
            build,
            describes,
            problem=f"the build tree was configured before {display.quoted(newer[0].name)} changed:"
            " configure it again to refresh its file-API reply",
        )
    digests = {p: d for p in describes if (d := _file_digest(p, root)) is not None}
    seconds = time.monotonic() - started
    return Evaluated("cmake", build, describes, compiled, digests=digests, seconds=seconds)


def _reply_json(reply: Path, name: object, root: Path) -> dict[str, Any]:
    if not isinstance(name, str) or Path(name).name != name:
        raise ValueError(f"the reply names {display.quoted(name)}, not a file of its folder")
    text = untrusted.read_text(reply / name, limit=REPLY_MAX_BYTES, root=root)
    value = untrusted.loads_json(text, str(reply / name))
    if not isinstance(value, dict):
        raise ValueError(f"{name} is not a JSON object")
    return value


def _reply_sources(
    reply: Path, model: dict[str, Any], source_dir: Path, root: Path
) -> dict[str, tuple[tuple[str, ...], ...]]:
    compiled: dict[str, list[tuple[str, ...]]] = {}
    targets = [t for c in model.get("configurations", []) for t in c.get("targets", [])][:MAX_REPLY_TARGETS]
    for ref in targets:
        target = _reply_json(reply, ref["jsonFile"], root)
        sources = target.get("sources", [])
        for group in target.get("compileGroups", []):
            flags: list[str] = []
            for fragment in group.get("compileCommandFragments", []):
                flags.extend(shlex.split(str(fragment.get("fragment", ""))))
            flags.extend("-D" + str(d.get("define", "")) for d in group.get("defines", []))
            for i in group.get("sourceIndexes", []):
                rel = _relative(str(sources[i]["path"]), source_dir.as_posix(), root)
                if rel is not None:
                    compiled.setdefault(rel, []).append(tuple(flags))
    return {k: tuple(v) for k, v in compiled.items()}


def build_trees(folders: Iterable[Path], root: Path) -> list[Path]:
    """The build trees with a file-API reply among the immediate subfolders of `folders` (the workspace
    root and each CMakeLists.txt's folder: build/, cmake-build-debug/, out/...), inside the workspace."""
    found: list[Path] = []
    for folder in dict.fromkeys(folders):
        try:
            children = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError:
            continue
        for child in children:
            path = Path(child.path)
            if (
                child.is_dir(follow_symlinks=False)
                and reply_folder(path).is_dir()
                and untrusted.is_inside(path, root)
            ):
                found.append(path)
    return found


# ------------------------------------------------------------------------------------ cached, off-path


@dataclass
class _Entry:
    result: Evaluated
    stamps: dict[Path, Stamp]


class BuildQuery:
    """The evaluations of one workspace's build files, kept by the files' stamps.

    `evaluated(build_files)` returns the cached results at once and, for a Makefile or build tree whose
    files changed since (or never asked), asks again: in a background thread that calls `on_update`
    with the build files the new answers describe when it has nothing left to do (the language server
    re-checks then), or right away when `background` is False (the CLI).
    """

    def __init__(
        self,
        root: Path,
        *,
        background: bool = True,
        on_update: Callable[[list[Path]], None] | None = None,
        timeout: float = MAKE_TIMEOUT_S,
    ) -> None:
        self.root = root.resolve()
        self.background = background
        self.on_update = on_update
        self.timeout = timeout
        self.runs = 0
        """Evaluations made (make runs and replies read), for tests and benchmarks."""
        self._entries: dict[Path, _Entry] = {}
        self._pending: dict[Path, tuple[str, tuple[str, ...]]] = {}
        self._lock = threading.Lock()
        self._idle = threading.Event()
        self._idle.set()
        self._worker: threading.Thread | None = None
        self._trees: tuple[tuple[Path, ...], float, list[Path]] = ((), -1e9, [])

    def evaluated(
        self, build_files: Sequence[Path], includes: Mapping[Path, Sequence[str]] | None = None
    ) -> list[Evaluated]:
        """The current evaluations for `build_files` (the workspace's build files, absolute); `includes`:
        the file names each Makefile includes (from the text reader), kept old by make."""
        wanted = self._wanted(build_files, includes or {})
        stale = {entry: job for entry, job in wanted.items() if self._stale(entry)}
        if stale:
            self._ask(stale)
        with self._lock:
            return [e.result for p in wanted if (e := self._entries.get(p)) is not None]

    def wait(self, timeout: float) -> bool:
        """Wait until no evaluation is pending (tests, the CLI); False if `timeout` passed first."""
        return self._idle.wait(timeout)

    def _wanted(
        self, build_files: Sequence[Path], includes: Mapping[Path, Sequence[str]]
    ) -> dict[Path, tuple[str, tuple[str, ...]]]:
        makefiles = [p for p in build_files if p.name in MAKEFILE_NAMES][:MAX_ENTRIES]
        wanted: dict[Path, tuple[str, tuple[str, ...]]] = {
            p: ("make", tuple(includes.get(p, ()))) for p in makefiles
        }
        cmake = tuple(p for p in build_files if p.name == "CMakeLists.txt" or p.suffix == ".cmake")
        for tree in self._build_trees(cmake)[:MAX_ENTRIES]:
            wanted[tree] = ("cmake", tuple(str(p) for p in cmake))
        return wanted

    def _build_trees(self, cmake: tuple[Path, ...]) -> list[Path]:
        if not cmake:
            return []
        known, when, trees = self._trees
        if known == cmake and time.monotonic() - when < DISCOVERY_INTERVAL_S:
            return trees
        folders = [self.root, *(p.parent for p in cmake if p.name == "CMakeLists.txt")]
        trees = build_trees(folders, self.root)
        self._trees = (cmake, time.monotonic(), trees)
        return trees

    def _stale(self, entry: Path) -> bool:
        with self._lock:
            known = self._entries.get(entry)
            pending = entry in self._pending
        if pending:
            return False
        return known is None or any(stamp(p) != s for p, s in known.stamps.items())

    def _ask(self, jobs: dict[Path, tuple[str, tuple[str, ...]]]) -> None:
        if not self.background:
            for entry, job in jobs.items():
                self._evaluate(entry, job)
            return
        with self._lock:
            self._pending.update(jobs)
            self._idle.clear()
            if self._worker is None or not self._worker.is_alive():
                self._worker = threading.Thread(target=self._work, name="fixpoint-build-query", daemon=True)
                self._worker.start()

    def _work(self) -> None:
        described: set[Path] = set()
        while True:
            with self._lock:
                if not self._pending:
                    self._idle.set()
                    self._worker = None
                    break
                entry = next(iter(self._pending))
                job = self._pending[entry]
            described |= self._evaluate(entry, job).describes
            with self._lock:
                self._pending.pop(entry, None)
                done = not self._pending
            if done and self.on_update is not None:
                self.on_update(sorted(described))
                described = set()

    def _evaluate(self, entry: Path, job: tuple[str, tuple[str, ...]]) -> Evaluated:
        try:
            result, before = self._run(entry, job)
        except Exception as exc:  # a bug here must cost this evaluation (text facts stand), not the worker
            result, before = (
                Evaluated(job[0], entry, problem=f"{type(exc).__name__}: {exc}"),
                {entry: stamp(entry)},
            )
        stamps = before | {p: s for p in result.describes if p not in before for s in [stamp(p)]}
        with self._lock:
            self._entries[entry] = _Entry(result, stamps)
            self.runs += 1
        return result

    def _run(self, entry: Path, job: tuple[str, tuple[str, ...]]) -> tuple[Evaluated, dict[Path, Stamp]]:
        tool, extra = job
        if tool == "make":
            before = {entry: stamp(entry)}
            result = query_make(entry, self.root, extra, self.timeout)
        else:
            cmake = [Path(p) for p in extra]
            reply = reply_folder(entry)
            before = {reply: stamp(reply), **{p: stamp(p) for p in cmake}}
            result = read_cmake_reply(entry, self.root, cmake)
        return result, before
