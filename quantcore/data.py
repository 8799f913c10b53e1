"""Representative and labelled data sets: .npy / .npz arrays, a folder of images, or a Python iterable.

Arrays are taken as they are, in the model's own input layout and normalisation (an .npz holds `x` and,
for top-1, integer labels `y`). Images are decoded with Pillow, converted to the model's channel count,
resized to its input size and scaled to [0, 1], then laid out like the model input (NCHW for ONNX).

A data file may be hostile: an .npy header can claim terabytes, a PNG can decompress to gigapixels, a
"file" can be a FIFO. Headers are read and checked against quantcore.limits before any data is, and only
regular files are opened; real numbers only (a complex array is refused, not silently cast).
"""

from __future__ import annotations

import zipfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import numpy as np

from quantcore import limits
from quantcore.errors import InputError

IMAGE_SUFFIXES = {".png", ".jpg", ".jpeg", ".bmp", ".pgm", ".ppm", ".gif", ".tif", ".tiff"}


class DataError(InputError):
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
    from quantcore.untrusted import UntrustedInputError, regular_file

    try:
        size = regular_file(path).st_size
        if path.suffix == ".npy":
            with open(path, "rb") as handle:
                return DataSet(_read_npy(handle, size, str(path)), None, str(path))
        return _read_npz(path)
    except UntrustedInputError as exc:
        raise DataError(str(exc)) from exc
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:
        raise DataError(f"{path}: cannot read ({exc}); is it an .npy/.npz file numpy wrote?") from exc


def _read_npz(path: Path) -> DataSet:
    with zipfile.ZipFile(path) as archive:
        members = {info.filename.removesuffix(".npy"): info for info in archive.infolist()}
        if "x" not in members:
            found = ", ".join(sorted(members)) or "none"
            raise DataError(f"{path}: no array 'x' (found {found})")
        arrays = {}
        for key in ("x", "y"):
            if key in members:
                with archive.open(members[key]) as handle:
                    arrays[key] = _read_npy(handle, members[key].file_size, f"{path}[{key}]")
    return DataSet(arrays["x"], arrays.get("y"), str(path))


def _read_npy(handle: IO[bytes], size: int, source: str) -> np.ndarray:
    """An array from an open .npy stream of `size` bytes, its header checked before its data is read."""
    fmt = np.lib.format
    version = fmt.read_magic(handle)
    read_header = fmt.read_array_header_1_0 if version == (1, 0) else fmt.read_array_header_2_0
    shape, fortran, dtype = read_header(handle)  # the header only: no data read yet
    if dtype.hasobject:
        raise DataError(f"{source}: holds Python objects (pickles), which Fixpoint does not load")
    claimed = int(np.prod(shape, dtype=np.float64)) * dtype.itemsize
    if claimed > limits.DATA_MAX_BYTES:
        raise DataError(
            f"{source}: its header claims {claimed:,} bytes, more than Fixpoint loads"
            f" ({limits.DATA_MAX_BYTES:,})"
        )
    remaining = size - handle.tell()
    if claimed > remaining:  # checked before read(), which would allocate `claimed` bytes first
        raise DataError(
            f"{source}: its header claims {claimed:,} bytes but the file has {remaining:,} after it;"
            " it is truncated"
        )
    data = handle.read(claimed)
    if len(data) != claimed:
        raise DataError(f"{source}: truncated ({len(data):,} of {claimed:,} bytes)")
    array = np.frombuffer(data, dtype=dtype).reshape(shape, order="F" if fortran else "C")
    return array


def _images(folder: Path, input_shape: tuple[int, ...]) -> DataSet:
    from quantcore.untrusted import UntrustedInputError, walk

    files = [p for p in walk(folder, lambda _dir: True).files if p.suffix.lower() in IMAGE_SUFFIXES]
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
            pixels = _decode(file, mode, (width, height))
        except UntrustedInputError as exc:
            raise DataError(str(exc)) from exc
        samples.append(pixels.reshape(height, width, channels).transpose(2, 0, 1))
    return DataSet(np.stack(samples), None, str(folder))


def _decode(file: Path, mode: str, size: tuple[int, int]) -> np.ndarray:
    """One image as float32 in [0, 1]: a regular file, its pixel count checked from the header first."""
    from PIL import Image, UnidentifiedImageError

    from quantcore.untrusted import regular_file

    regular_file(file)
    try:
        with Image.open(file) as image:  # reads the header only
            if image.size[0] * image.size[1] > limits.IMAGE_MAX_PIXELS:
                raise DataError(_too_many_pixels(file, image.size))
            decoded: Any = image.convert(mode).resize(size)
            return np.asarray(decoded, np.float32) / 255.0
    except Image.DecompressionBombError as exc:  # Pillow's own guard, at twice its default pixel limit
        raise DataError(_too_many_pixels(file, None)) from exc
    except (OSError, UnidentifiedImageError, ValueError) as exc:
        raise DataError(f"{file}: cannot decode the image ({exc})") from exc


def _too_many_pixels(file: Path, size: tuple[int, int] | None) -> str:
    shown = f"{size[0]} x {size[1]} pixels" if size else "too many pixels"
    return (
        f"{file}: {shown}, more than Fixpoint decodes ({limits.IMAGE_MAX_PIXELS:,}): a decompression bomb?"
        " Resize the image first"
    )


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
    if not (np.issubdtype(x.dtype, np.floating) or np.issubdtype(x.dtype, np.integer) or x.dtype == bool):
        raise DataError(f"{data.source}: x holds {x.dtype} values; give real numbers (float or integer)")
    finite = np.isfinite(x) if np.issubdtype(x.dtype, np.floating) else np.ones(x.shape, bool)
    bad = int(np.count_nonzero(~finite))
    if bad:
        raise DataError(f"{data.source}: {bad} non-finite values (NaN/Inf) in x")
    largest = float(np.max(np.abs(x)))  # in x's own dtype: float64 beyond float32's range is seen here
    if largest >= limits.DATA_MAX_ABS:
        raise DataError(
            f"{data.source}: x holds values up to {largest:.3g}; no int8 scale represents values of"
            f" {limits.DATA_MAX_ABS:g} or more - check the data's units and normalisation"
        )
    x = x.astype(np.float32)  # exact range checked above: no overflow
    y = data.y
    if y is not None:
        y = np.asarray(y)
        if y.shape != (len(x),) or not np.issubdtype(y.dtype, np.integer):
            raise DataError(f"{data.source}: labels y must be {len(x)} integers, got {y.dtype} {y.shape}")
        y = y.astype(np.int64)
    return DataSet(x, y, data.source)
