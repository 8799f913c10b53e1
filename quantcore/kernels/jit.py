"""Compiled twins of a few numpy passes (numba): the switch that picks them, and how they are built and
loaded.

The numpy kernels stay the readable reference. Where a batched evaluation spends its time in a dozen
numpy passes per element (finish_s8's requantization, the depthwise taps, the average pools, the
metrics' sums), a compiled loop computes the same integers (and the same float64 sums, in an order of
additions of its own) in one pass: `quantcore.kernels.compiled` and `quantcore.verify.compiled_sums`
call them, and only the code that runs them imports those (inside a function). The loops' source is in
`quantcore.kernels.numba_loops` and `quantcore.verify.numba_sums`, which import numba and are imported
only to build the loops or, where they cannot be built, to run them on numba's JIT: `fixpoint --help`,
`fixpoint check` and the language server never load numba (tests/test_cli_startup.py), and neither
does an evaluate whose loops are built.

The same switch and block select quantcore.kernels.int_gemm, the integer product of the convolutions
and fully connected layers on onnxruntime (no numba; exact int32 sums where a probe finds this
machine's MLAS exact).

The loops run only inside `compiled_loops()`, which `evaluate` opens around its batches when they are
large enough to repay loading them and int_gemm's session (COMPILED_LOOPS_FROM in verify/evaluate.py;
why only evaluate: see compiled_loops).
FIXPOINT_JIT=0 in the environment turns them off there too (every caller then takes its numpy path);
the equality tests use it to hold both paths to the same results, and FIXPOINT_JIT=all runs them
everywhere (the kernel and conformance suites through them). It is read at each call, so a test can
switch it. No fastmath anywhere: it would let LLVM reorder float sums as each machine's vector width
suits, and the figures would change from machine to machine.

The loops are built ahead of time, once per machine: `functions` compiles a module's loops (its
`Loops`: the functions and their argument types) into a Python extension module in Fixpoint's per-user
cache, $XDG_CACHE_HOME/fixpoint/loops/<key>, with numba's AOT compiler (numba.pycc, in a child process:
about 4 s a module, the first time). A later process imports that module in under a millisecond, without
numba: numba's import and the first load of its on-disk cache cost every process about 0.4 s, which was a
third of a whole `fixpoint evaluate` of the smallest benchmark net. The key hashes what the machine code
depends on - the loops' source, their types, numba's and Python's versions, and the CPU (the code is built
for this CPU's instruction set, as numba's JIT builds it) - so a change of any builds anew.
Where a module cannot be built (no C compiler, a numba without pycc), the failure is recorded beside it
and said once, and `functions` returns numba's JIT dispatchers instead, with numba's on-disk cache in
$XDG_CACHE_HOME/fixpoint/numba (numba reads NUMBA_CACHE_DIR when it is imported, so `numba()` sets it,
unless the user did, before the first import).

The built functions trust their arguments' types (a wrong dtype or a strided array where a contiguous one
is declared would read memory wrongly), so `functions` returns them behind a check of every argument
against its declared type: a caller's mistake is a TypeError, never a crash.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import platform
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import numpy as np

from quantcore.paths import cache_root

SWITCH = "FIXPOINT_JIT"
"""The environment variable: "0" selects the numpy paths everywhere, "all" the compiled loops everywhere
(to run the kernel and conformance suites through them); unset or "1", they run inside compiled_loops."""


_WANTED: ContextVar[bool] = ContextVar("fixpoint_compiled_loops", default=False)


@contextmanager
def compiled_loops() -> Iterator[None]:
    """Within this block (in this thread), the kernels and the figures take their compiled loops where
    `enabled` allows. Only `evaluate` asks: its thousands of samples repay loading the loops (and, the
    first time on a machine, building them: about 9 s), while `quantize` - whose calibration runs are
    small and whose wall time is a benchmark of its own - stays on numpy and never loads them."""
    token = _WANTED.set(True)
    try:
        yield
    finally:
        _WANTED.reset(token)


def enabled() -> bool:
    """Whether the compiled loops are to be used: asked for (compiled_loops), numba installed, and not
    switched off."""
    switch = os.environ.get(SWITCH, "1")
    return (switch == "all" or (_WANTED.get() and switch != "0")) and installed()


@functools.cache
def installed() -> bool:
    """Whether numba can be imported (a dependency; an install without it keeps the numpy paths)."""
    return importlib.util.find_spec("numba") is not None


def cache_folder() -> Path:
    """numba's cache folder: $XDG_CACHE_HOME/fixpoint/numba."""
    return cache_root() / "numba"


def numba() -> ModuleType:
    """The numba module, imported with its cache folder set (see the module docstring)."""
    os.environ.setdefault("NUMBA_CACHE_DIR", str(cache_folder()))
    import numba as module

    return module


@functools.cache
def caching() -> bool:
    """Whether numba's cache folder can be written: numba refuses to define a cached function where it
    cannot (a read-only home); the loops are then compiled in each process instead."""
    folder = Path(os.environ.get("NUMBA_CACHE_DIR") or cache_folder())
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        return False
    return os.access(folder, os.W_OK)


@dataclass(frozen=True)
class Array:
    """An array argument of a built loop: its dtype (numpy's name, which numba's signatures share), its
    number of dimensions, C-contiguous (declared so, the loops vectorize) unless `contiguous` is False."""

    dtype: str
    ndim: int
    contiguous: bool = True

    def signature(self) -> str:
        axes = [":"] * self.ndim
        if self.contiguous:
            axes[-1] = "::1"
        return f"{self.dtype}[{', '.join(axes)}]"

    def admits(self, value: object) -> bool:
        return (
            isinstance(value, np.ndarray)
            and value.dtype == np.dtype(self.dtype)
            and value.ndim == self.ndim
            and (not self.contiguous or value.flags.c_contiguous)
        )


_SCALARS: dict[str, type] = {"int64": int, "float64": float, "boolean": bool}
"""A scalar argument's numba type, and the Python type its value is converted to."""


@dataclass(frozen=True)
class Export:
    """A loop built ahead of time under `name`: its arguments (an Array or a scalar type of _SCALARS), what
    it returns (a numba type), and the njit function of the loops' module it is (by default `name`; one
    function may be built for several types, under several names)."""

    name: str
    args: tuple[Array | str, ...]
    returns: str = "void"
    function: str = ""

    @property
    def source(self) -> str:
        return self.function or self.name

    def signature(self) -> str:
        args = (a if isinstance(a, str) else a.signature() for a in self.args)
        return f"{self.returns}({', '.join(args)})"


@dataclass(frozen=True)
class Loops:
    """The numba loops (njit functions) of one module, `module` (an import path; the module imports numba),
    and those built ahead of time (see the module docstring)."""

    module: str
    exports: tuple[Export, ...]


FAILED = "failed.txt"
"""Beside a module that could not be built: why (its builder's error), so that no later process tries."""
_BUILD_SECONDS = 600
_LOCK = threading.Lock()
_LOADED: dict[Loops, SimpleNamespace] = {}


def functions(loops: Loops) -> SimpleNamespace:
    """The loops by export name, each behind its argument check: built ahead of time and imported from
    the per-user cache (built there first where it is missing), else numba's JIT dispatchers."""
    with _LOCK:  # the summing thread and the kernels' may ask at once; one builds
        found = _LOADED.get(loops)
        if found is None:
            built = _ahead_of_time(loops)
            compiled = built or importlib.import_module(loops.module)
            # the built module has each export under its name, the loops' module under its function's
            found = _LOADED[loops] = SimpleNamespace(
                **{
                    e.name: _checked(e, getattr(compiled, e.name if built else e.source))
                    for e in loops.exports
                }
            )
        return found


def built_folder(loops: Loops) -> Path:
    """Where `loops` are built for this machine: $XDG_CACHE_HOME/fixpoint/loops/<key>."""
    return cache_root() / "loops" / _key(loops)


def extension_name(loops: Loops) -> str:
    """The built module's name (its file's stem): fixpoint_ and the loops' module's last name."""
    return "fixpoint_" + loops.module.rsplit(".", 1)[-1]


def _checked(export: Export, function: Callable[..., Any]) -> Callable[..., Any]:
    def call(*args: Any) -> Any:
        if len(args) != len(export.args):
            raise TypeError(f"{export.name}: {len(args)} arguments, declared {len(export.args)}")
        converted = []
        for i, (declared, value) in enumerate(zip(export.args, args, strict=True)):
            if isinstance(declared, str):
                value = _SCALARS[declared](value)
            elif not declared.admits(value):
                got = getattr(value, "dtype", type(value).__name__), getattr(value, "shape", None)
                raise TypeError(f"{export.name}: argument {i} is {got}, declared {declared.signature()}")
            converted.append(value)
        return function(*converted)

    call.__name__ = export.name
    return call


def _ahead_of_time(loops: Loops) -> ModuleType | None:
    """The loops' built module, built first if it is missing; None where it cannot be built."""
    folder = built_folder(loops)
    name = extension_name(loops)
    built = _extension_in(folder, name)
    if built is None and not (folder / FAILED).exists():
        built = _build(loops, folder, name)
    if built is None:
        return None
    spec = importlib.util.spec_from_file_location(name, built)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _extension_in(folder: Path, name: str) -> Path | None:
    path = folder / (name + str(sysconfig.get_config_var("EXT_SUFFIX")))
    return path if path.is_file() else None


def _build(loops: Loops, folder: Path, name: str) -> Path | None:
    """Build the module in a child process (numba.pycc and the C compiler; nothing of theirs stays in this
    one) into a scratch folder, then move it into `folder`: a concurrent builder's copy, or a stopped
    build, never leaves a half-written module. None, with the failure recorded, where it fails."""
    exports = json.dumps([[e.name, e.source, e.signature()] for e in loops.exports])
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [_ROOT, os.environ.get("PYTHONPATH")])))
    try:
        folder.mkdir(parents=True, exist_ok=True)
        scratch = Path(tempfile.mkdtemp(prefix="build-", dir=folder))
    except OSError as error:  # a cache that cannot be written: nothing to record the failure in either
        return _failed(folder, str(error))
    command = [sys.executable, "-m", "quantcore.kernels.build_loops", loops.module, name, str(scratch)]
    try:
        run = subprocess.run(
            command, input=exports, env=env, capture_output=True, text=True, timeout=_BUILD_SECONDS
        )
        made = _extension_in(scratch, name)
        if run.returncode != 0 or made is None:
            reason = (run.stderr.strip().splitlines() or [f"exit status {run.returncode}"])[-1]
            return _failed(folder, reason)
        target = folder / made.name
        os.replace(made, target)
        return target
    except (OSError, subprocess.TimeoutExpired) as error:
        return _failed(folder, str(error))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _failed(folder: Path, reason: str) -> Path | None:
    with contextlib.suppress(OSError):  # where it can be recorded, no later process tries again
        (folder / FAILED).write_text(reason + "\n")
    print(
        f"fixpoint: the compiled loops could not be built for this machine ({reason}); numba compiles them"
        f" in each process instead (about 0.4 s). To try again, delete {folder}.",
        file=sys.stderr,
    )
    return None


_ROOT = str(Path(__file__).resolve().parents[2])
"""The folder holding the quantcore package: the builder child imports this same quantcore."""


def _key(loops: Loops) -> str:
    """A hash of everything the built machine code depends on (the module docstring)."""
    spec = importlib.util.find_spec(loops.module)
    assert spec is not None and spec.origin is not None
    builder = importlib.util.find_spec("quantcore.kernels.build_loops")
    assert builder is not None and builder.origin is not None
    digest = hashlib.sha256()
    for part in (
        Path(spec.origin).read_bytes(),
        Path(builder.origin).read_bytes(),
        repr(loops).encode(),
        importlib.metadata.version("numba").encode(),
        sys.version.encode(),
        platform.machine().encode(),
        _cpu().encode(),
    ):
        digest.update(hashlib.sha256(part).digest())
    return digest.hexdigest()[:24]


@functools.cache
def _cpu() -> str:
    """This CPU's model and instruction set extensions as the system names them (Linux: the first
    processor's lines of /proc/cpuinfo that name them; elsewhere platform.processor())."""
    try:
        text = Path("/proc/cpuinfo").read_text(errors="replace")
    except OSError:
        return platform.processor()
    first = text.split("\n\n", 1)[0]
    x86 = ("vendor_id", "cpu family", "model", "model name", "flags")
    wanted = (*x86, "Features", "CPU implementer", "CPU architecture", "CPU part")  # and Arm's
    return "\n".join(line for line in first.splitlines() if line.split(":", 1)[0].strip() in wanted)
