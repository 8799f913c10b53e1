"""Fashion-MNIST for the quantization benchmark: the idx files, the cache folder and the data splits.

The data set is the Debian package `dataset-fashion-mnist` (gzip'd idx files). Everything the benchmark
makes (trained ONNX models, calibration and test arrays) goes to a cache folder outside the repository:
$XDG_CACHE_HOME/fixpoint/bench/fashion_mnist, ~/.cache/fixpoint/bench/fashion_mnist without it.

Splits, all seeded and reproducible:
- training: TRAIN_SAMPLES images of the train split (a subset, to keep CPU training to minutes);
- calibration: CALIB_MAX images of the train split, disjoint from the training subset (calib_100 is the
  first 100 of calib_1000), so calibration sees unseen but in-distribution images, as a user's would;
- test: the whole t10k split in test.npz; run.py evaluates its first --test-samples images.
Inputs are x / 255 in float32, NCHW (N, 1, 28, 28): the models' own normalisation.
"""

from __future__ import annotations

import gzip
import os
from pathlib import Path

import numpy as np

DATA_DIR = Path(os.environ.get("FASHION_MNIST_DIR", "/usr/share/datasets/fashion-mnist"))
SEED = 0
TRAIN_SAMPLES = 50_000
CALIB_SIZES = (100, 1000)
CALIB_MAX = max(CALIB_SIZES)
CLASSES = (
    "T-shirt/top",
    "Trouser",
    "Pullover",
    "Dress",
    "Coat",
    "Sandal",
    "Shirt",
    "Sneaker",
    "Bag",
    "Ankle boot",
)


def default_cache() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "fixpoint" / "bench" / "fashion_mnist"


def _idx(path: Path) -> np.ndarray:
    """Parse one gzip'd idx file: magic (0, 0, dtype code, ndim), ndim big-endian uint32 dims, data."""
    raw = gzip.decompress(path.read_bytes())
    if raw[:2] != b"\0\0" or raw[2] != 0x08:  # 0x08: unsigned byte, the only type these files use
        raise ValueError(f"{path}: not an unsigned-byte idx file")
    ndim = raw[3]
    dims = np.frombuffer(raw, ">u4", ndim, 4).astype(int)
    data = np.frombuffer(raw, np.uint8, offset=4 + 4 * ndim)
    if data.size != int(np.prod(dims)):
        raise ValueError(f"{path}: {data.size} bytes of data for shape {tuple(dims)}")
    return data.reshape(dims)


def load_split(split: str) -> tuple[np.ndarray, np.ndarray]:
    """(x float32 (N, 1, 28, 28) in [0, 1], y int64 (N,)) of split 'train' or 't10k'."""
    images = _idx(DATA_DIR / f"{split}-images-idx3-ubyte.gz")
    labels = _idx(DATA_DIR / f"{split}-labels-idx1-ubyte.gz")
    x = (images.astype(np.float32) / np.float32(255.0))[:, None, :, :]
    return x, labels.astype(np.int64)


def train_and_calib_indices(n_train_split: int) -> tuple[np.ndarray, np.ndarray]:
    """Disjoint index sets into the train split: the training subset and the calibration pool."""
    perm = np.random.default_rng(SEED).permutation(n_train_split)
    return perm[:TRAIN_SAMPLES], perm[-CALIB_MAX:]


def write_arrays(out: Path) -> dict[str, Path]:
    """Write calib_{100,1000}.npz and test.npz into `out` (when missing); return their paths."""
    out.mkdir(parents=True, exist_ok=True)
    paths = {f"calib_{n}": out / f"calib_{n}.npz" for n in CALIB_SIZES} | {"test": out / "test.npz"}
    if all(p.exists() for p in paths.values()):
        return paths
    x, _ = load_split("train")
    _, calib = train_and_calib_indices(len(x))
    for n in CALIB_SIZES:
        _save(paths[f"calib_{n}"], x=x[calib[:n]])
    tx, ty = load_split("t10k")
    _save(paths["test"], x=tx, y=ty)
    return paths


def _save(path: Path, **arrays: np.ndarray) -> None:
    tmp = path.with_name(path.stem + ".tmp.npz")
    np.savez(tmp, **arrays)
    os.replace(tmp, path)


def held_out() -> tuple[np.ndarray, np.ndarray]:
    """The train-split images neither in the training subset nor in the calibration pool (x, y): unseen,
    in-distribution data beside t10k, e.g. to decide a rule without tuning it on the test set."""
    x, y = load_split("train")
    perm = np.random.default_rng(SEED).permutation(len(x))
    rest = perm[TRAIN_SAMPLES:-CALIB_MAX]
    return x[rest], y[rest]


def byte_compile(tree: Path | None = None) -> None:
    """Byte-compile the quantcore and language-server sources of `tree` (None: the checkout this
    interpreter imports quantcore from), as an installed package has them, before its CLI is timed.

    With PYTHONDONTWRITEBYTECODE set (as on the benchmark machine) or a checkout it cannot write to, each
    process would compile every module changed since its last bytecode again: 0.1 s of a 0.7 s
    `fixpoint quantize` that an installed Fixpoint never pays, while the peers' site-packages are
    compiled at their install. compileall writes the bytecode whatever that variable says."""
    import compileall

    if tree is None:
        import quantcore

        tree = Path(quantcore.__file__).resolve().parent.parent
    for package in (tree / "quantcore", tree / "server" / "fixpoint_server"):
        if package.is_dir():
            compileall.compile_dir(str(package), quiet=1, workers=0)
