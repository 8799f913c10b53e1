"""Representative and labelled data sets: .npy / .npz arrays, a folder of images, or a Python iterable.

Arrays are taken as they are, in the model's own input layout and normalisation (an .npz holds `x` and,
for top-1, integer labels `y`). Images are decoded with Pillow, converted to the model's channel count,
resized to its input size and scaled to [0, 1], then laid out like the model input (NCHW for ONNX).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from quantcore.errors import QuantcoreError

IMAGE_SUFFIXES = {".png", ".jpg", ".jpeg", ".bmp", ".pgm", ".ppm", ".gif", ".tif", ".tiff"}


class DataError(QuantcoreError):
    """A data set that cannot be used: unreadable, empty, wrongly shaped or with non-finite values."""


@dataclass(frozen=True)
class DataSet:
    x: np.ndarray
    """float32 samples, (N, *model input shape without batch)."""
    y: np.ndarray | None = None
    """int64 labels (N,), when the source has them."""
    source: str = "<memory>"

    def __len__(self) -> int:
        return len(self.x)

    def batches(self, size: int) -> Iterator[np.ndarray]:
        for start in range(0, len(self.x), size):
            yield self.x[start : start + size]

    def head(self, n: int) -> DataSet:
        return DataSet(self.x[:n], None if self.y is None else self.y[:n], self.source)


def load(source: str | Path | Iterable[np.ndarray], input_shape: tuple[int, ...]) -> DataSet:
    """Load and check a data set for a model whose input (batch first) is `input_shape`."""
    if isinstance(source, (str, Path)):
        path = Path(source)
        if path.is_dir():
            data = _images(path, input_shape)
        elif path.suffix in (".npy", ".npz"):
            data = _arrays(path)
        else:
            raise DataError(f"{path}: not a .npy/.npz file or a folder of images")
    else:
        batches = [np.asarray(b, np.float32) for b in source]
        if not batches:
            raise DataError("<iterable>: the data set is empty")
        data = DataSet(np.concatenate([b.reshape(-1, *input_shape[1:]) for b in batches]))
    return _checked(data, input_shape)


def _arrays(path: Path) -> DataSet:
    try:
        if path.suffix == ".npy":
            return DataSet(np.load(path, allow_pickle=False), None, str(path))
        with np.load(path, allow_pickle=False) as npz:
            if "x" not in npz.files:
                raise DataError(f"{path}: no array 'x' (found {', '.join(npz.files) or 'none'})")
            y = npz["y"] if "y" in npz.files else None
            return DataSet(npz["x"], y, str(path))
    except (OSError, ValueError) as exc:
        raise DataError(f"{path}: cannot read ({exc})") from exc


def _images(folder: Path, input_shape: tuple[int, ...]) -> DataSet:
    from PIL import Image, UnidentifiedImageError

    files = sorted(p for p in folder.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES)
    if not files:
        raise DataError(f"{folder}: no images ({', '.join(sorted(IMAGE_SUFFIXES))})")
    if len(input_shape) != 4:
        raise DataError(f"{folder}: images need a 4-D model input, the model takes {input_shape}")
    _, channels, height, width = input_shape
    mode = {1: "L", 3: "RGB"}.get(channels)
    if mode is None:
        raise DataError(f"{folder}: images need a model with 1 or 3 input channels, not {channels}")
    samples = []
    for file in files:
        try:
            with Image.open(file) as image:
                pixels = np.asarray(image.convert(mode).resize((width, height)), np.float32) / 255.0
        except (OSError, UnidentifiedImageError) as exc:
            raise DataError(f"{file}: cannot decode the image ({exc})") from exc
        samples.append(pixels.reshape(height, width, channels).transpose(2, 0, 1))
    return DataSet(np.stack(samples), None, str(folder))


def _checked(data: DataSet, input_shape: tuple[int, ...]) -> DataSet:
    x = np.asarray(data.x)
    if x.size == 0 or len(x) == 0:
        raise DataError(f"{data.source}: the data set is empty")
    sample = tuple(input_shape[1:])
    if tuple(x.shape[1:]) != sample:
        if x.ndim >= 1 and int(np.prod(x.shape[1:])) == int(np.prod(sample)):
            x = x.reshape(len(x), *sample)
        else:
            raise DataError(
                f"{data.source}: samples have shape {tuple(x.shape[1:])}, the model input needs {sample}"
            )
    x = x.astype(np.float32)
    bad = int(np.count_nonzero(~np.isfinite(x)))
    if bad:
        raise DataError(f"{data.source}: {bad} non-finite values (NaN/Inf) in x")
    y = data.y
    if y is not None:
        y = np.asarray(y)
        if y.shape != (len(x),) or not np.issubdtype(y.dtype, np.integer):
            raise DataError(f"{data.source}: labels y must be {len(x)} integers, got {y.dtype} {y.shape}")
        y = y.astype(np.int64)
    return DataSet(x, y, data.source)
