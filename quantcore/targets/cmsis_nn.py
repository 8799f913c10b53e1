"""The user's CMSIS-NN checkout: finding it, installing one into the per-user cache, building it.

`build_library` builds libcmsis-nn.a for any Core (the host with gcc, Cortex-M with arm-none-eabi-gcc
through a CMake toolchain file rendered from templates/target/toolchain.cmake.j2); builds are cached per
(sources, core, rounding, optimisation level) under $XDG_CACHE_HOME/fixpoint/build and made under a lock.

Fixpoint never ships CMSIS-NN (Apache-2.0, Arm's repository); it works against a checkout the user
provides. `locate` looks, in order, at an explicit path (a setting), the FIXPOINT_CMSIS_NN environment
variable and the cache directory `$XDG_CACHE_HOME/fixpoint/cmsis-nn` that `install` fills. A directory
is a checkout when it holds Include/arm_nnfunctions.h. An explicit choice that is wrong is reported, never
silently replaced by the next place, so the user always knows which CMSIS-NN the results come from.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import re
import shutil
import tempfile
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from quantcore.cores import Core
from quantcore.errors import CmsisNnNotFound, InputError, QuantcoreError
from quantcore.kernels.requantize import Rounding
from quantcore.paths import cache_root
from quantcore.targets import process

ENV_VAR = "FIXPOINT_CMSIS_NN"
GIT_URL = "https://github.com/ARM-software/CMSIS-NN.git"
TARGET_VERSION = "v7.0.0"
"""The CMSIS-NN release the reference kernels follow (checked bit-exact on v7.0.0 plus 43 commits)."""
MARKER = Path("Include") / "arm_nnfunctions.h"
LIBRARY = "libcmsis-nn.a"
"""CMake's name for the `cmsis-nn` target's static library (note the dash)."""


GIT_QUERY_TIMEOUT_S = 30.0
"""A git query in a checkout (rev-parse, describe, config) that takes longer is treated as failed: a
config that includes a FIFO, or a checkout on a hung network share, must not hang Fixpoint."""
GIT_OUTPUT_MAX_BYTES = 1024 * 1024
"""What a git query may print; more is treated as a failed query."""
GIT_CLONE_TIMEOUT_S = 1800.0
BUILD_TIMEOUT_S = 1800.0
"""Configuring or building CMSIS-NN (minutes on a small machine; a hung CMake is stopped)."""
_GIT_SAFE_CONFIG = (
    ("core.fsmonitor", "false"),
    ("core.hooksPath", "/dev/null"),
    ("core.pager", "cat"),
    ("protocol.ext.allow", "never"),
    ("advice.detachedHead", "false"),
)
_GIT_REPOSITORY_VARIABLES = frozenset({
    "GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY", "GIT_COMMON_DIR",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_NAMESPACE", "GIT_EXTERNAL_DIFF", "GIT_CONFIG",
})  # fmt: skip
_REF = re.compile(r"[^\x00-\x20\x7f~^:?*\[\\]{1,200}")
"""A tag, branch or commit as --ref takes it: no option (leading '-'), no space or control character,
none of the characters git refuses in a ref name."""


class CmsisNnInstallError(QuantcoreError):
    """`install` could not clone, check out or place a CMSIS-NN checkout."""


class CmsisNnRefError(CmsisNnInstallError, InputError):
    """--ref is not something git can only read as a revision (an option, a character no ref has)."""


class CmsisNnBuildError(QuantcoreError):
    """Building CMSIS-NN (or a program against it) for the host failed."""


@dataclass(frozen=True)
class CmsisNn:
    """A CMSIS-NN checkout and where it was found."""

    path: Path
    """The checkout's root (it holds Include/arm_nnfunctions.h)."""
    source: str
    """Where it came from: "setting", "env" (FIXPOINT_CMSIS_NN) or "cache"."""
    version: str | None
    """The newest <release version> in ARM.CMSIS-NN.pdsc; git checkouts, tags included, say 0.0.0."""
    commit: str | None
    """HEAD's full commit hash when the checkout is a git work tree of its own, else None."""
    describe: str | None = None
    """`git describe --tags --dirty`, e.g. v7.0.0-43-g99f736a6: the readable form of `commit`."""

    @property
    def include_dir(self) -> Path:
        return self.path / "Include"

    @property
    def dirty(self) -> bool:
        return bool(self.describe and self.describe.endswith("-dirty"))


def cache_checkout() -> Path:
    """Where `install` puts the checkout and `locate` looks last."""
    return cache_root() / "cmsis-nn"


def how_to_provide() -> str:
    return (
        f"Provide one with `fixpoint cmsis-nn install {GIT_URL}` (or `fixpoint cmsis-nn install "
        f"<path to a CMSIS-NN git checkout>`), which clones it into {cache_checkout()}, or point "
        f"{ENV_VAR} at a checkout (a directory containing {MARKER})."
    )


def locate(setting: str | os.PathLike[str] | None = None) -> CmsisNn:
    """The checkout to use: `setting`, else $FIXPOINT_CMSIS_NN, else the cache; CmsisNnNotFound if none."""
    if setting:
        return _checkout(Path(setting), "setting", "the CMSIS-NN path setting")
    env = os.environ.get(ENV_VAR)
    if env:
        return _checkout(Path(env), "env", f"{ENV_VAR}={env}")
    cache = cache_checkout()
    if cache.exists():
        return _checkout(cache, "cache", "Fixpoint's cache")
    raise CmsisNnNotFound(
        f"no CMSIS-NN checkout found: no path setting, {ENV_VAR} is not set and {cache} does not exist. "
        + how_to_provide()
    )


def _checkout(path: Path, source: str, origin: str) -> CmsisNn:
    path = path.expanduser().resolve()
    if not (path / MARKER).is_file():
        raise CmsisNnNotFound(
            f"{path} (from {origin}) is not a CMSIS-NN checkout: {MARKER} is missing. " + how_to_provide()
        )
    return describe_checkout(path, source)


def describe_checkout(path: Path, source: str) -> CmsisNn:
    commit = describe = None
    if _is_git_root(path):
        commit = _git(path, "rev-parse", "HEAD")
        describe = _git(path, "describe", "--tags", "--always", "--dirty")
    return CmsisNn(path, source, pdsc_version(path), commit, describe)


def effective_version(nn: CmsisNn) -> str | None:
    """The checkout's release: the pdsc's, or (git checkouts say 0.0.0 there) the tag `git describe` names."""
    if nn.version and nn.version != "0.0.0":
        return nn.version
    match = re.match(r"v?(\d+\.\d+\.\d+)", nn.describe or "")
    return match.group(1) if match else None


def version_warning(nn: CmsisNn) -> str | None:
    """Why the checkout may not be the API the generated code and the reference target, or None."""
    version = effective_version(nn)
    target = TARGET_VERSION.lstrip("v")
    if version is None:
        return (
            f"cannot tell which CMSIS-NN release {nn.path} is (no release in its pdsc, no tag); Fixpoint"
            f" generates for the {target} API"
        )
    if _version_key(version)[:2] != _version_key(target)[:2]:
        return (
            f"CMSIS-NN at {nn.path} is {version}, but Fixpoint generates for the {target} API: kernel"
            f" signatures, buffer sizes or rounding may differ; use a {target.rsplit('.', 1)[0]}.x checkout"
            f" (fixpoint cmsis-nn install SOURCE --ref v{target})"
        )
    return None


def pdsc_version(path: Path) -> str | None:
    """The newest <release version="..."> of the checkout's ARM.CMSIS-NN.pdsc, or None if unreadable."""
    try:
        root = ET.parse(path / "ARM.CMSIS-NN.pdsc").getroot()
    except (OSError, ET.ParseError):
        return None
    versions = [r.get("version") or "" for r in root.iter() if _local_name(r.tag) == "release"]
    versions = [v for v in versions if v]
    return max(versions, key=_version_key) if versions else None


def _local_name(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(n) for n in re.findall(r"\d+", version))


def _git(path: Path, *args: str) -> str | None:
    """stdout of `git -C path args...` run hardened (`git_env`), or None when git is missing, fails,
    takes longer than GIT_QUERY_TIMEOUT_S or prints more than Fixpoint reads."""
    env = git_env(_filter_drivers(path)) if _wants_work_tree(args) else git_env()
    command = _git_command("-C", str(path), *args)
    try:
        done = process.run_capped(command, GIT_QUERY_TIMEOUT_S, env=env, keep=GIT_OUTPUT_MAX_BYTES)
    except OSError:
        return None
    if done.returncode != 0 or done.printed > GIT_OUTPUT_MAX_BYTES:
        return None
    return done.stdout.decode("utf-8", "replace").strip()


def _wants_work_tree(args: tuple[str, ...]) -> bool:
    """Whether a git command compares the work tree with the index (and so may run filters)."""
    return "--dirty" in args or args[:1] in (("status",), ("diff-index",), ("checkout",))


def _git_command(*args: str) -> list[str]:
    """The command line of every git call (run in `git_env`)."""
    return ["git", "--no-pager", *args]


def git_env(filters: tuple[str, ...] = ()) -> dict[str, str]:
    """The environment every git call runs in: nothing the repository's own config names is executed.

    A checkout's .git/config is as untrusted as the files in it, and `git describe --dirty` refreshes
    the index: it runs `core.fsmonitor` and, for files whose stat data changed, the clean filter of
    every `filter.<driver>` that .gitattributes names. Both are switched off here, with command-line
    config (GIT_CONFIG_COUNT, which outranks the repository's and cannot be mis-split like `-c k=v`);
    so are hooks, the pager and ext:: URLs (which run a command). The variables that make git use
    another repository or index than the one at `-C` are removed, and git never prompts (no terminal
    to hang on). What git would run for network access (ssh, credential helpers) comes from the user's
    own configuration, never from a checkout's, so it is left alone.
    """
    env = {k: v for k, v in os.environ.items() if k not in _GIT_REPOSITORY_VARIABLES}
    settings = [*_GIT_SAFE_CONFIG, *(pair for name in filters for pair in _no_filter(name))]
    existing = env.get("GIT_CONFIG_COUNT", "")
    start = int(existing) if existing.isdigit() else 0  # the user's own command-line config comes first
    for index, (key, value) in enumerate(settings, start):
        env[f"GIT_CONFIG_KEY_{index}"] = key
        env[f"GIT_CONFIG_VALUE_{index}"] = value
    env["GIT_CONFIG_COUNT"] = str(start + len(settings))
    env.update(GIT_PAGER="cat", PAGER="cat", GIT_TERMINAL_PROMPT="0", GIT_OPTIONAL_LOCKS="0")
    return env


def _no_filter(name: str) -> list[tuple[str, str]]:
    # An empty command means "no filter"; required=false keeps a required driver from failing the run.
    return [(f"filter.{name}.{key}", "") for key in ("clean", "smudge", "process")] + [
        (f"filter.{name}.required", "false")
    ]


def _filter_drivers(path: Path) -> tuple[str, ...]:
    """The names of the filter drivers git's configuration for `path` defines (all scopes)."""
    listing = _git(path, "config", "-z", "--get-regexp", r"^filter\.")
    names = set()
    for entry in (listing or "").split("\0"):
        key = entry.split("\n", 1)[0]
        if key.startswith("filter.") and key.count(".") >= 2:
            names.add(key[len("filter.") : key.rindex(".")])
    return tuple(sorted(names))


def _is_git_root(path: Path) -> bool:
    # A copy of CMSIS-NN inside some other repository must not report that repository's commit.
    top = _git(path, "rev-parse", "--show-toplevel")
    return top is not None and Path(top).resolve() == path.resolve()


def _is_repository(path: Path) -> bool:
    """A work tree's root or a bare repository: something `git clone` accepts as a local source."""
    return _is_git_root(path) or _git(path, "rev-parse", "--is-bare-repository") == "true"


# ---------------------------------------------------------------------------------------------- install


def install(source: str, ref: str | None = None, force: bool = False) -> CmsisNn:
    """Clone `source` (git URL, local checkout or bare repository) into the cache, at `ref` if given.

    The clone is made in a temporary directory beside the cache entry and renamed into place, so the
    cache never holds a half-cloned checkout. An existing checkout at a different commit is kept
    unless `force`; reinstalling the same commit is a no-op.
    """
    if shutil.which("git") is None:
        raise CmsisNnInstallError("git is not installed; install git (e.g. `apt-get install git`) and retry")
    dest = cache_checkout()
    dest.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".cmsis-nn-install-", dir=dest.parent))
    try:
        new = staging / "cmsis-nn"
        _clone(source, new, ref)
        if dest.exists() or dest.is_symlink():
            old = describe_checkout(dest, "cache") if (dest / MARKER).is_file() else None
            fresh = describe_checkout(new, "cache")
            if old is not None and old.commit is not None and not old.dirty and old.commit == fresh.commit:
                return old
            if not force:
                raise CmsisNnInstallError(_refusal(dest, old, fresh))
            dest.rename(staging / "previous")
        new.rename(dest)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return describe_checkout(dest, "cache")


def _clone(source: str, dest: Path, ref: str | None) -> None:
    local = Path(source).expanduser()
    where = str(local.resolve()) if local.exists() else source
    if local.is_dir() and not _is_repository(local):
        raise CmsisNnInstallError(
            f"{source} is not a git repository, so it cannot be cloned; "
            f"set {ENV_VAR}={where} to use it where it is"
        )
    if ref is not None:
        check_ref(ref)
    _git_or_fail(["clone", "--quiet", "--", where, str(dest)], f"cloning {source}")
    if ref:
        commit = _resolve_ref(dest, ref)
        if commit is None:
            raise CmsisNnInstallError(f"--ref {ref!r} is not a tag, branch or commit of {source}")
        # The ref resolved to a commit hash first: checkout is given no text from the command line.
        _git_or_fail(
            ["-C", str(dest), "checkout", "--quiet", "--detach", commit, "--"],
            f"checking out {ref!r} ({commit[:12]}) in the clone of {source}",
        )
    if not (dest / MARKER).is_file():
        at = f" at {ref}" if ref else ""
        raise CmsisNnInstallError(f"{source}{at} is not CMSIS-NN: the clone has no {MARKER}")


def check_ref(ref: str) -> str:
    """`ref` when git can only read it as a revision; a leading '-' (an option to git) and characters
    no ref name holds are refused."""
    if ref.startswith("-") or not _REF.fullmatch(ref) or ".." in ref or ref.endswith((".", "/", ".lock")):
        raise CmsisNnRefError(
            f"--ref {ref!r} is not a tag, branch or commit name (it must not start with '-' nor hold "
            "spaces, control characters, '..' or any of ~^:?*[\\)"
        )
    return ref


def _resolve_ref(dest: Path, ref: str) -> str | None:
    """The commit `ref` names in the clone: a tag, a commit, or a branch of the origin."""
    for name in (ref, f"refs/remotes/origin/{ref}"):
        commit = _git(dest, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{name}^{{commit}}")
        if commit and re.fullmatch(r"[0-9a-f]{40}|[0-9a-f]{64}", commit):
            return commit
    return None


def _git_or_fail(args: list[str], doing: str) -> None:
    command = _git_command(*args)
    done = process.run_tool(command, GIT_CLONE_TIMEOUT_S, doing, CmsisNnInstallError, env=git_env())
    if done.returncode != 0:
        output = (done.stderr or done.stdout).decode("utf-8", "replace")
        raise CmsisNnInstallError(f"{doing} failed: {process.last_lines(output)}")


def _refusal(dest: Path, old: CmsisNn | None, fresh: CmsisNn) -> str:
    what = (
        f"CMSIS-NN {old.describe or old.commit or 'without git history'}"
        if old
        else "a non-CMSIS-NN directory"
    )
    return (
        f"{dest} already holds {what}, not {fresh.describe} ({fresh.commit}); "
        f"rerun with --force to replace it, or set {ENV_VAR} to use the other checkout without replacing it"
    )


# ---------------------------------------------------------------------------------------------- build


def source_key(checkout: CmsisNn) -> str:
    """What identifies the sources of a build: the commit of a clean git checkout, else a content hash."""
    if checkout.commit and not checkout.dirty:
        return checkout.commit[:12]
    digest = hashlib.sha256()
    for file in sorted(
        p for d in ("Include", "Source") for p in (checkout.path / d).rglob("*") if p.is_file()
    ):
        digest.update(str(file.relative_to(checkout.path)).encode() + b"\0" + file.read_bytes())
    if (checkout.path / "CMakeLists.txt").is_file():
        digest.update((checkout.path / "CMakeLists.txt").read_bytes())
    return "tree-" + digest.hexdigest()[:12]


def host_build_dir(checkout: CmsisNn, rounding: Rounding) -> Path:
    return cache_root() / "build" / f"host-{source_key(checkout)}-{rounding.value}"


def build_host_library(checkout: CmsisNn, rounding: Rounding = Rounding.DOUBLE) -> Path:
    """Build libcmsis-nn.a for this machine (CMake, Release) and return its path; reuses a finished build.

    The build directory is keyed by the sources and the rounding, because CMSIS_NN_USE_SINGLE_ROUNDING
    changes results and the reference must be compared with the library built the same way.
    """
    build = host_build_dir(checkout, rounding)
    library = build / LIBRARY
    if library.is_file():
        return library
    if shutil.which("cmake") is None:
        raise CmsisNnBuildError("cmake is not installed; install cmake (and gcc, g++, make) and retry")
    build.parent.mkdir(parents=True, exist_ok=True)
    with _locked(build.parent / f"{build.name}.lock"):
        if not library.is_file():
            _cmake_build(checkout.path, build, rounding)
    if not library.is_file():
        raise CmsisNnBuildError(f"CMake finished but {library} is missing; see {build}")
    return library


def _cmake_build(nn: Path, build: Path, rounding: Rounding) -> None:
    configure = ["cmake", "-S", str(nn), "-B", str(build), "-DCMAKE_BUILD_TYPE=Release"]
    if rounding.define:
        configure.append(f"-DCMAKE_C_FLAGS=-D{rounding.define}")
    run_checked(configure, "configuring CMSIS-NN")
    jobs = str(os.cpu_count() or 1)
    run_checked(["cmake", "--build", str(build), "--target", "cmsis-nn", "-j", jobs], "building CMSIS-NN")


def library_build_dir(checkout: CmsisNn, core: Core, rounding: Rounding, opt: str) -> Path:
    """The cache directory of one configuration; the optimisation flag is part of the key."""
    level = re.sub(r"[^A-Za-z0-9]+", "", opt) or "default"
    return cache_root() / "build" / f"{core.label}-{source_key(checkout)}-{rounding.value}-{level}"


def build_library(
    checkout: CmsisNn, core: Core = Core.HOST, rounding: Rounding = Rounding.DOUBLE, opt: str = "-O2"
) -> Path:
    """libcmsis-nn.a for `core` with `rounding` at optimisation `opt`; reuses a finished build.

    The core's -mcpu flags select CMSIS-NN's code path (pure C, DSP or MVE), so each core has its own
    build; the rounding define changes results, so it is part of the key as well.
    """
    from quantcore.targets.toolchain import require_tool, require_toolchain

    build = library_build_dir(checkout, core, rounding, opt)
    library = build / LIBRARY
    if library.is_file():
        return library
    require_tool("cmake", "cmake")
    chain = require_toolchain(core)
    if chain.cross:
        require_tool(chain.cxx, "gcc-arm-none-eabi")  # CMSIS-NN's project() enables CXX too
    build.parent.mkdir(parents=True, exist_ok=True)
    with _locked(build.parent / f"{build.name}.lock"):
        if not library.is_file():
            _cross_build(checkout.path, build, core, rounding, opt)
    if not library.is_file():
        raise CmsisNnBuildError(f"CMake finished but {library} is missing; see {build}")
    return library


def _cross_build(nn: Path, build: Path, core: Core, rounding: Rounding, opt: str) -> None:
    from quantcore.targets.render import render, write_text
    from quantcore.targets.toolchain import toolchain_for

    chain = toolchain_for(core)
    cflags = [*core.cflags, *([f"-D{rounding.define}"] if rounding.define else [])]
    # The toolchain file lives beside (not inside) the build dir: a failed configure is wiped whole.
    toolchain = write_text(
        build.parent / f"{build.name}.toolchain.cmake",
        render(
            "toolchain.cmake",
            core=core.label,
            cross=chain.cross,
            prefix=chain.prefix,
            cflags=" ".join(cflags),
        ),
    )
    shutil.rmtree(build, ignore_errors=True)
    configure = ["cmake", "-S", str(nn), "-B", str(build), f"-DCMAKE_TOOLCHAIN_FILE={toolchain}"]
    run_checked([*configure, f"-DCMSIS_OPTIMIZATION_LEVEL={opt}"], f"configuring CMSIS-NN for {core.label}")
    jobs = str(os.cpu_count() or 1)
    run_checked(
        ["cmake", "--build", str(build), "--target", "cmsis-nn", "-j", jobs],
        f"building CMSIS-NN for {core.label}",
    )


def run_checked(args: list[str], doing: str) -> None:
    """Run a build command; on failure raise CmsisNnBuildError with the command and its output's tail.

    The output is read as it comes and only its tail kept; a build that hangs is stopped after
    BUILD_TIMEOUT_S (a checkout's CMakeLists.txt is code the user chose to run, but never a hang).
    """
    done = process.run_tool(args, BUILD_TIMEOUT_S, doing, CmsisNnBuildError)
    if done.returncode != 0:
        tail = process.last_lines(done.output(), 25)
        raise CmsisNnBuildError(f"{doing} failed (exit {done.returncode}): {' '.join(args)}\n{tail}")


@contextlib.contextmanager
def _locked(lock_path: Path) -> Iterator[None]:
    # Two test processes building the same configuration must not run CMake in one directory at once.
    with open(lock_path, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
