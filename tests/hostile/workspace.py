"""Where a case runs: the checkout under test, a fresh workspace folder, shared fixtures, snapshots.

A case gets <case>/ws (the workspace, the commands' working directory) and <case>/outside (a sibling
folder standing for everything else on the machine). Snapshots of `outside` and of <case>'s own listing
before and after tell whether anything was written outside the workspace; hashes of the workspace's files
tell whether a failing command changed pre-existing outputs.

Fixtures that cost a product run (the tiny model's quant-params JSON, its generated sources) are built
once per corpus run, by the checkout under test, and copied into the workspaces that use them.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import stat
import subprocess
import sys
import threading
import zipfile
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from tests.hostile import models, process

REPO = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Product:
    """A checkout of Fixpoint, run as child processes only (never imported here)."""

    source: Path = REPO
    python: str = sys.executable

    def env(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "COV_"))}
        env["PYTHONPATH"] = os.pathsep.join([str(self.source), str(self.source / "server")])
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        env.update(extra or {})
        return env

    def cli(self, argv: list[str]) -> list[str]:
        return [self.python, "-m", "quantcore.cli", *argv]

    def server(self) -> list[str]:
        return [self.python, "-m", "fixpoint_server"]


class FixtureError(RuntimeError):
    """A shared input could not be built (the product under test failed to make it)."""


class Fixtures:
    """Shared inputs, built on first use (thread-safe) in `folder`."""

    def __init__(self, folder: Path, product: Product) -> None:
        self.folder, self.product = folder, product
        self._locks: dict[str, threading.Lock] = {}
        self._lock = threading.Lock()
        self._built: dict[str, Path] = {}

    def get(self, name: str) -> Path:
        with self._lock:
            lock = self._locks.setdefault(name, threading.Lock())
        with lock:
            if name not in self._built:
                target = self.folder / name
                target.mkdir(parents=True, exist_ok=True)
                BUILDERS[name](self, target)
                self._built[name] = target
        return self._built[name]

    def cli(self, argv: list[str], cwd: Path) -> None:
        """Run the product to make a fixture; FixtureError with its stderr when it fails."""
        done = process.run(self.product.cli(argv), cwd, self.product.env(), 300, cwd / ".logs" / argv[0])
        shutil.rmtree(cwd / ".logs", ignore_errors=True)
        if done.returncode != 0 or done.killed:
            raise FixtureError(f"`fixpoint {' '.join(argv)}` failed: {done.stderr.strip()[-400:]}")


def _tiny(f: Fixtures, out: Path) -> None:
    """tiny.onnx, calib.npz, tiny.params.json and its generated sources in gen/."""
    models.save(models.tiny(), out / "tiny.onnx")
    models.save_npz(out / "calib.npz", x=models.calibration())
    f.cli(["quantize", "tiny.onnx", "--calib", "calib.npz", "-o", "tiny.params.json", *QUICK], out)
    f.cli(["generate", "--params", "tiny.params.json", "--model", "tiny.onnx", "-o", "gen"], out)


def _wide(f: Fixtures, out: Path) -> None:
    """wide.onnx with two parameter sets (a.params.json, b.params.json) from different calibration data,
    and gen/ generated from a."""
    models.save(models.wide(), out / "wide.onnx")
    for name, seed in (("a", 0), ("b", 1)):
        models.save_npz(out / f"calib_{name}.npz", x=models.calibration(8, seed) * (1 + seed))
        f.cli(
            ["quantize", "wide.onnx", "--calib", f"calib_{name}.npz", "-o", f"{name}.params.json", *QUICK],
            out,
        )
    f.cli(["generate", "--params", "a.params.json", "--model", "wide.onnx", "-o", "gen"], out)


def _tree(f: Fixtures, out: Path) -> None:
    """A firmware tree: fixpoint.toml, model/ (tiny model and its JSON), src/model (generated), src/main.c."""
    tiny = f.get("tiny")
    (out / "model").mkdir()
    for name in ("tiny.onnx", "tiny.params.json"):
        shutil.copy2(tiny / name, out / "model" / name)
    shutil.copytree(tiny / "gen", out / "src" / "model")  # generated from the same files (same names)
    (out / "fixpoint.toml").write_text(TREE_TOML)
    (out / "src" / "main.c").write_text('#include "model.h"\n\nint main(void) { return model_init(); }\n')


TREE_TOML = """\
model = "model/tiny.onnx"
params = "model/tiny.params.json"
generated = "src/model"
target = "host"
"""


def _zip_bomb(f: Fixtures, out: Path) -> None:
    """bomb.npz: `x` declares 3.5 GB of float32 zeros, deflated to a few MB (written in chunks, never
    held in memory)."""
    samples = 13_671_875  # x 256 B per 1x8x8 float32 sample = 3.5 GB
    header = np.lib.format.header_data_from_array_1_0(np.zeros((1, 1, 8, 8), np.float32))
    header["shape"] = (samples, 1, 8, 8)
    archive = zipfile.ZipFile(out / "bomb.npz", "w", zipfile.ZIP_DEFLATED, compresslevel=1)
    with archive, archive.open("x.npy", "w", force_zip64=True) as member:
        np.lib.format.write_array_header_1_0(member, header)
        chunk = bytes(1 << 20)
        left = samples * 256
        while left > 0:
            member.write(chunk[: min(left, len(chunk))])
            left -= len(chunk)


QUICK = ["--equalize", "off", "--bias-correction", "off"]
"""Quantize options that keep a corpus run fast (what they skip is not what the corpus is about)."""

BUILDERS: dict[str, Callable[[Fixtures, Path], None]] = {
    "tiny": _tiny,
    "wide": _wide,
    "tree": _tree,
    "zipbomb": _zip_bomb,
}


# -- the workspace of one case -------------------------------------------------------------------------


@dataclass
class Workspace:
    """A case's folders and what it set up; `cleanups` run when the case ends, whatever happened."""

    case_dir: Path
    fixtures: Fixtures
    cleanups: list[Callable[[], object]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.ws.mkdir(parents=True)
        self.outside.mkdir()
        (self.outside / "keep.txt").write_text("a file outside the workspace\n")

    @property
    def ws(self) -> Path:
        return self.case_dir / "ws"

    @property
    def outside(self) -> Path:
        return self.case_dir / "outside"

    @property
    def product(self) -> Product:
        return self.fixtures.product

    def path(self, relative: str) -> Path:
        return self.ws / relative

    def write(self, relative: str, content: str | bytes) -> Path:
        path = self.ws / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)
        return path

    def copy(self, fixture: str, *names: str, to: str = ".") -> None:
        """Files (or folders) of a fixture into the workspace folder `to`."""
        source = self.fixtures.get(fixture)
        dest = self.ws / to
        dest.mkdir(parents=True, exist_ok=True)
        for name in names:
            if (source / name).is_dir():
                shutil.copytree(source / name, dest / name)
            else:
                shutil.copy2(source / name, dest / name)

    def copy_all(self, fixture: str, to: str = ".") -> None:
        """Everything a fixture holds into the workspace folder `to`."""
        self.copy(fixture, *sorted(p.name for p in self.fixtures.get(fixture).iterdir()), to=to)

    def npz(self, relative: str, **arrays: np.ndarray) -> Path:
        path = self.ws / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        return models.save_npz(path, **arrays)

    def later(self, cleanup: Callable[[], object]) -> None:
        self.cleanups.append(cleanup)

    def close(self) -> None:
        for cleanup in reversed(self.cleanups):
            with contextlib.suppress(Exception):
                cleanup()


def remove_tree(path: Path) -> None:
    """Remove a case's folder, whatever it holds (shutil.rmtree recurses: 1,500 nested folders break it)."""
    subprocess.run(["rm", "-rf", "--", str(path)], check=False, capture_output=True)


# -- snapshots -----------------------------------------------------------------------------------------


def walk(root: Path, max_depth: int = 32, max_entries: int = 20_000) -> Iterator[tuple[Path, os.stat_result]]:
    """(path, lstat) of everything under `root`, iteratively (1,500 nested folders are a test input),
    never following symlinks, within a depth and entry budget."""
    todo = [(root, 0)]
    seen = 0
    while todo and seen < max_entries:
        folder, depth = todo.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            seen += 1
            try:
                info = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            yield Path(entry.path), info
            if stat.S_ISDIR(info.st_mode) and depth < max_depth:
                todo.append((Path(entry.path), depth + 1))


def surroundings(case_dir: Path) -> dict[str, tuple[int, int, int]]:
    """What lies outside the workspace: <case>'s listing and everything under outside/, with size and
    mtime, so a file created, changed or removed there shows."""
    state: dict[str, tuple[int, int, int]] = {}
    for entry in os.scandir(case_dir):
        info = entry.stat(follow_symlinks=False)
        state[entry.name] = (info.st_mode, 0, 0)
    for path, info in walk(case_dir / "outside"):
        state[str(path.relative_to(case_dir))] = (info.st_mode, info.st_size, info.st_mtime_ns)
    return state


def changed(before: Mapping[str, tuple[int, ...]], after: Mapping[str, tuple[int, ...]]) -> list[str]:
    """Paths created, removed or changed between two snapshots, sorted."""
    return sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))


def file_hashes(root: Path, limit: int = 64 * 1024**2) -> dict[str, str]:
    """SHA-256 of the regular files under `root` (not through symlinks, none larger than `limit`)."""
    hashes = {}
    for path, info in walk(root, max_depth=12, max_entries=5000):
        if stat.S_ISREG(info.st_mode) and info.st_size <= limit:
            digest = hashlib.sha256()
            with open(path, "rb") as handle:
                for block in iter(lambda: handle.read(1 << 20), b""):
                    digest.update(block)
            hashes[str(path.relative_to(root))] = digest.hexdigest()
    return hashes
