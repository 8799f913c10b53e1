"""What the cases' setups share: the tiny model's workspace, JSON edits, special files, ports, a pty,
deep trees and JSON, and the tools a case needs (a case whose tool is missing is skipped, with why)."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import socket
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.hostile import models
from tests.hostile.runner import Case, Setup, Step
from tests.hostile.workspace import QUICK, Workspace

TINY = ("tiny.onnx", "tiny.params.json", "calib.npz")
MODEL_PARAMS = ("--model", "tiny.onnx", "--params", "tiny.params.json")
"""The tiny model and its quant-params JSON, as the options of verify, build and flash-verify."""


def quantize(model: str = "tiny.onnx", calib: str = "calib.npz", out: str = "o.json") -> tuple[str, ...]:
    return ("quantize", model, "--calib", calib, "-o", out, *QUICK)


def generate(params: str = "tiny.params.json", model: str = "tiny.onnx") -> tuple[str, ...]:
    return ("generate", "--params", params, "--model", model, "-o", "gen")


def evaluate(params: str = "tiny.params.json", model: str = "tiny.onnx") -> tuple[str, ...]:
    return ("evaluate", model, params, "--data", "calib.npz")


def reading(command: str, params: str, model: str = "tiny.onnx") -> tuple[str, ...]:
    """`generate` or `evaluate` (both rebuild the int8 graph from a params JSON) of `params`."""
    return (generate if command == "generate" else evaluate)(params, model)


GENERATE = generate()
EVALUATE = evaluate()
VERIFY = ("verify", "--target", "host", *MODEL_PARAMS, "--no-float-metrics")
FLASH_QEMU = ("flash-verify", "--target", "qemu-m4", *MODEL_PARAMS, "--no-float-metrics", "--cases", "1")
BOARD_FLASH = ("flash-verify", "--no-float-metrics", "--cases", "1", "--timeout", "20")
"""flash-verify on the board of fixpoint.toml (board_project)."""
BOARD_BUILD = Step(("build", "--cases", "1"), frozenset({0, 2}), names=("fixpoint.toml",), message=True)
"""build for a board with a hostile name: built (the name never code), or refused naming fixpoint.toml."""


def case(name: str, klass: str, setup: Setup, about: str, needs: tuple[str, ...] = ()) -> Case:
    return Case(f"{klass}/{name}", klass, setup, about, needs)


def tiny(w: Workspace, to: str = ".") -> None:
    w.copy("tiny", *TINY, to=to)


def edit_json(path: Path, edit: Callable[[Any], None]) -> Path:
    document = json.loads(path.read_text())
    edit(document)
    path.write_text(json.dumps(document, indent=1))
    return path


def edited_params(w: Workspace, edit: Callable[[Any], None], name: str = "edited.params.json") -> str:
    """The tiny model's quant-params JSON with `edit` applied, saved as `name` in the workspace."""
    tiny(w)
    shutil.copy(w.path("tiny.params.json"), w.path(name))
    edit_json(w.path(name), edit)
    return name


def layer(document: Any, kernel_prefix: str = "arm_convolve") -> Any:
    """The first layer whose CMSIS-NN kernel starts with `kernel_prefix`."""
    return next(lay for lay in document["layers"] if (lay.get("kernel") or "").startswith(kernel_prefix))


# -- special files --------------------------------------------------------------------------------------


def fifo(w: Workspace, relative: str) -> Path:
    path = w.path(relative)
    path.parent.mkdir(parents=True, exist_ok=True)
    os.mkfifo(path)
    return path


def symlink(w: Workspace, relative: str, target: str | Path) -> Path:
    path = w.path(relative)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.symlink_to(target)
    return path


def nested_dirs(w: Workspace, relative: str, depth: int, leaf: str = "deep.c") -> None:
    """`depth` nested folders under `relative` (created through directory descriptors: no long paths)."""
    base = w.path(relative)
    base.mkdir(parents=True, exist_ok=True)
    fd = os.open(base, os.O_RDONLY)
    try:
        for _ in range(depth):
            os.mkdir("d", dir_fd=fd)
            inner = os.open("d", os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = inner
        leaf_fd = os.open(leaf, os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
        os.write(leaf_fd, b"int deep;\n")
        os.close(leaf_fd)
    finally:
        os.close(fd)


def deep_json(depth: int = 200_000, kind: str = "[]") -> str:
    """A JSON document nested `depth` deep: arrays, or objects {"a": ...}."""
    if kind == "[]":
        return "[" * depth + "]" * depth
    return '{"a":' * depth + "0" + "}" * depth


def immutable(w: Workspace, relative: str) -> None:
    """Make a file or folder immutable (chattr +i, root only); undone when the case ends."""
    path = w.path(relative)
    if os.geteuid() != 0 or shutil.which("chattr") is None:
        raise RuntimeError(f"cannot make {relative} immutable here (needs chattr as root)")
    if subprocess.run(["chattr", "+i", str(path)], capture_output=True, check=False).returncode != 0:
        raise RuntimeError(f"chattr +i failed on {relative}")
    w.later(lambda: subprocess.run(["chattr", "-i", str(path)], capture_output=True, check=False))


def read_only(w: Workspace, relative: str) -> None:
    """Make a folder unwritable, also for root (chattr +i); undone when the case ends."""
    if os.geteuid() == 0:
        immutable(w, relative)
        return
    path = w.path(relative)
    path.chmod(0o555)
    w.later(lambda: path.chmod(0o755))


def tree_model(w: Workspace, kind: str) -> None:
    """In the firmware tree (fixture "tree"): no fixpoint.toml, and its params JSON names a model with a
    constant that folding cannot finish (models.constant)."""
    w.path("fixpoint.toml").unlink()
    path = models.save(models.constant(kind), w.path(f"model/{kind}.onnx"))
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    edit_json(w.path("model/tiny.params.json"), lambda d: d["model"].update(path=path.name, sha256=digest))


# -- ports and serial lines -----------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def listening_port(w: Workspace) -> int:
    """A loopback port held (listening) by the runner until the case ends: a port another program has."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(1)
    w.later(sock.close)
    return int(sock.getsockname()[1])


def pty(w: Workspace, locked: bool) -> str:
    """A pseudo-terminal's device path (a serial port without hardware: its master end stays open until the
    case ends). `locked`: the device itself is also held, with an exclusive flock, as a terminal program
    that opened it exclusively holds it; else nobody has the device open."""
    master, slave = os.openpty()
    path = os.ttyname(slave)
    if locked:
        fcntl.flock(slave, fcntl.LOCK_EX | fcntl.LOCK_NB)
    else:
        os.close(slave)
    held = (slave, master) if locked else (master,)

    def close() -> None:
        for fd in held:
            with contextlib.suppress(OSError):
                os.close(fd)

    w.later(close)
    return path


BAD_TOML = """\
model = 42
params = ["a", "b"]
alignment = 0
rounding = "sideways"
colour = "blue"

[board]
core = "cortex-m99"
flash_size = "lots"

[flash]
backend = "telepathy"
baud = -1
"""
"""fixpoint.toml with nine bad values."""


def _toml_string(text: str) -> str:
    """A TOML basic string: JSON's escapes are TOML's, as long as non-ASCII stays as UTF-8."""
    return json.dumps(text, ensure_ascii=False)


def board_project(w: Workspace, serial: str, gdb_remote: str, name: str = "board") -> None:
    """fixpoint.toml for a real board (QEMU mps2-an386's memory map and UART) flashed through a GDB
    server and read on `serial`."""
    w.write(
        "fixpoint.toml",
        f'model = "tiny.onnx"\nparams = "tiny.params.json"\ntarget = {_toml_string(name)}\n\n'
        f"[board]\nname = {_toml_string(name)}\n"
        'core = "cortex-m4"\nflash_origin = 0x00000000\nflash_size = "4M"\n'
        'ram_origin = 0x20000000\nram_size = "4M"\nuart_base = 0x40004000\n\n'
        f'[flash]\nbackend = "gdb"\nserial = "{serial}"\ngdb_remote = "{gdb_remote}"\n',
    )


# -- what a case needs ------------------------------------------------------------------------------------


def cmsis_nn_dir() -> Path:
    """The CMSIS-NN checkout the product finds without a setting: FIXPOINT_CMSIS_NN, else the cache."""
    configured = os.environ.get("FIXPOINT_CMSIS_NN")
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "fixpoint" / "cmsis-nn"
    return Path(configured) if configured else cache


def cmsis_nn_present() -> bool:
    return cmsis_nn_dir().joinpath("Include", "arm_nnfunctions.h").is_file()


def can_make_read_only() -> bool:
    """A folder can be made unwritable for the product: by mode bits, or (root ignores them) chattr +i."""
    return os.geteuid() != 0 or shutil.which("chattr") is not None


NEEDS: dict[str, Callable[[], bool]] = {
    "cmsis-nn": cmsis_nn_present,
    "cmsis-nn-git": lambda: cmsis_nn_present() and (cmsis_nn_dir() / ".git").exists(),
    "read-only": can_make_read_only,
    "immutable": lambda: os.geteuid() == 0 and shutil.which("chattr") is not None,
    "arm": lambda: all(shutil.which(t) for t in ("arm-none-eabi-gcc", "qemu-system-arm", "gdb-multiarch")),
    "git": lambda: shutil.which("git") is not None,
    "gcc": lambda: shutil.which("gcc") is not None,
}


def missing(needs: tuple[str, ...]) -> list[str]:
    return [need for need in needs if not NEEDS[need]()]
