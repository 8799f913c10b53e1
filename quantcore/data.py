"""Representative and labelled data sets: .npy / .npz arrays, a folder of images, or a Python iterable.

Arrays are taken in the model's own input layout and normalisation (an .npz holds `x` and, for top-1,
integer labels `y`). Images are decoded with Pillow, converted to the model's channel count, resized to
its input size and scaled to [0, 1], then laid out like the model input: as the model file lays it out
when the caller says (the commands do), else channels first (NCHW) unless the input's second axis is
not 1 or 3 and its last axis is.

The shape of a sample is checked against the model's input shape (batch first; `input_shape[1:]` per
sample). Accepted, because each has one reading and none moves an element:
- (N, *sample): as is;
- the same with axes of size 1 added or left out: (N, 28, 28) or (N, 28, 28, 1) for an input of
  (1, 1, 28, 28) (a size-1 axis holds no order, so grayscale NHWC and NCHW are the same values);
- one sample without its batch axis, (*sample) (size-1 axes as above), e.g. what an iterable yields
  sample by sample; it cannot be read as several samples, which would each be smaller than the input.
Everything else is refused, never reshaped: the message gives both shapes and the likely cause with the
numpy call that fixes it - a permutation (NHWC data for an NCHW model: x.transpose(0, 3, 1, 2)),
flattened samples (x.reshape(...), naming the order they must have been flattened in), a channel axis
missing or of another size, another input size.

A data file may be hostile: an .npy header can claim terabytes, a PNG can decompress to gigapixels, a
"file" can be a FIFO. Headers are read and checked against quantcore.limits before any data is, and only
regular files are opened; real numbers only (a complex array is refused, not silently cast).
"""

from __future__ import annotations

import math
import zipfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

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


def load(
    source: str | Path | Iterable[np.ndarray], input_shape: tuple[int, ...], layout: str | None = None
) -> DataSet:
    """Load and check a data set for a model whose input (batch first) is `input_shape`, laid out as
    `layout` ("NCHW" or "NHWC", the model file's own: quantcore.ir.io_layout.model_layout) when the
    caller knows it; without it a 4-D input's layout is told from its shape (_channels_first)."""
    first = layout == "NCHW" if layout in ("NCHW", "NHWC") else _channels_first(tuple(input_shape[1:]))
    if isinstance(source, (str, Path)):
        path = Path(source)
        if path.is_dir():
            data = _images(path, input_shape, first)
        elif path.suffix in (".npy", ".npz"):
            data = _arrays(path)
        else:
            raise DataError(f"{path}: not a .npy/.npz file or a folder of images")
    else:
        batches = [
            _fitted(np.asarray(b), input_shape, f"<iterable> item {i}", first) for i, b in enumerate(source)
        ]
        if not batches:
            raise DataError("<iterable>: the data set is empty")
        data = DataSet(np.concatenate(batches), None, "<iterable>")
    return _checked(data, input_shape, first)


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


def _images(folder: Path, input_shape: tuple[int, ...], first: bool) -> DataSet:
    from quantcore.untrusted import UntrustedInputError, walk

    files = [p for p in walk(folder, lambda _dir: True).files if p.suffix.lower() in IMAGE_SUFFIXES]
    if not files:
        raise DataError(f"{folder}: no images ({', '.join(sorted(IMAGE_SUFFIXES))})")
    if len(input_shape) != 4:
        raise DataError(f"{folder}: images need a 4-D model input, the model takes {input_shape}")
    channels, height, width = input_shape[1:] if first else (input_shape[3], *input_shape[1:3])
    mode = {1: "L", 3: "RGB"}.get(channels)
    if mode is None:
        raise DataError(
            f"{folder}: images need a model with 1 or 3 input channels; its input is {tuple(input_shape)}"
        )
    samples = []
    for file in files:
        try:
            pixels = _decode(file, mode, (width, height))
        except UntrustedInputError as exc:
            raise DataError(str(exc)) from exc
        image = pixels.reshape(height, width, channels)
        samples.append(image.transpose(2, 0, 1) if first else image)
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
            decoded = image.convert(mode).resize(size)
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


def _checked(data: DataSet, input_shape: tuple[int, ...], first: bool) -> DataSet:
    x = np.asarray(data.x)
    if x.size == 0:
        raise DataError(f"{data.source}: the data set is empty")
    x = _fitted(x, input_shape, data.source, first)
    if not (np.issubdtype(x.dtype, np.floating) or np.issubdtype(x.dtype, np.integer) or x.dtype == bool):
        raise DataError(f"{data.source}: x holds {x.dtype} values; give real numbers (float or integer)")
    # Two passes that copy nothing (NaN reaches both ends); the values are looked at one by one only to
    # count the bad ones for the message. 10,000 Fashion-MNIST images: 0.053 -> 0.006 s.
    lo, hi = (float(end) for end in (x.min(), x.max()))  # float(): no int8 -128 that abs() would wrap
    if not (math.isfinite(lo) and math.isfinite(hi)):
        bad = int(np.count_nonzero(~np.isfinite(x)))
        raise DataError(f"{data.source}: {bad} non-finite values (NaN/Inf) in x")
    largest = max(-lo, hi)  # in x's own dtype: float64 beyond float32's range is seen here
    if largest >= limits.DATA_MAX_ABS:
        raise DataError(
            f"{data.source}: x holds values up to {largest:.3g}; no int8 scale represents values of"
            f" {limits.DATA_MAX_ABS:g} or more - check the data's units and normalisation"
        )
    # Exact: the range is checked above. Not copied when it is float32 already: a file's samples then stay
    # the read-only array over its bytes, which nothing writes.
    x = x.astype(np.float32, copy=False)
    y = data.y
    if y is not None:
        y = np.asarray(y)
        if y.shape != (len(x),) or not np.issubdtype(y.dtype, np.integer):
            raise DataError(f"{data.source}: labels y must be {len(x)} integers, got {y.dtype} {y.shape}")
        y = y.astype(np.int64)
    return DataSet(x, y, data.source)


def _fitted(x: np.ndarray, input_shape: tuple[int, ...], source: str, first: bool) -> np.ndarray:
    """`x` as (N, *sample) when its shape is one the module docstring accepts, else a DataError with
    both shapes, the likely cause and what fixes it."""
    sample = tuple(input_shape[1:])
    if x.ndim >= 1 and x.shape[1:] == sample:
        return x
    if x.ndim >= 1 and _squeezed(x.shape[1:]) == _squeezed(sample):
        return x.reshape(len(x), *sample)
    if _squeezed(x.shape) == _squeezed(sample):  # one sample without its batch axis
        return x.reshape(1, *sample)
    got, shape = tuple(x.shape[1:]), f"samples have shape {tuple(x.shape[1:])}"
    cause = _cause(got, sample, "x", first)
    if cause is None and x.ndim == len(sample) + 2 and x.shape[2:] == sample:
        cause = (
            f"the samples are grouped in batches of {x.shape[1]}: x.reshape(-1, {_dims(sample)}) joins them"
        )
    if cause is None and x.size == int(np.prod(sample)):
        cause = _cause(tuple(x.shape), sample, "x[None]", first)
        if cause is not None:
            shape, cause = f"the array has shape {x.shape}", f"one sample without its batch axis? {cause}"
    raise DataError(
        f"{source}: {shape}, the model input needs {sample} (input {tuple(input_shape)}, batch first);"
        f" {cause or _OTHER}"
    )


_OTHER = "is it data for another model or input size?"


def _squeezed(shape: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(n for n in shape if n != 1)


def _cause(got: tuple[int, ...], want: tuple[int, ...], x: str, first: bool) -> str | None:
    """Why samples of shape `got` were likely given for a model taking `want`, with the numpy call on
    the array (named `x`, batch first) that fixes it; None when nothing specific fits."""
    size = int(np.prod(want))
    if sorted(got) == sorted(want):
        return _permuted(got, want, x)
    if len(_squeezed(got)) == 1 and int(np.prod(got)) == size:
        return _flattened(want, size, x, first)
    if int(np.prod(got)) == size:
        return (
            f"the same {size} values per sample in another shape: if they are in the model's order,"
            f" {x}.reshape(-1, {_dims(want)}) fits them"
        )
    if len(want) == 3:
        return _image_cause(got, want, first)
    return None


def _permuted(got: tuple[int, ...], want: tuple[int, ...], x: str) -> str:
    """The axes of `got` are those of `want` in another order: the transpose that puts them right (axes
    of equal size keep their order, so (28, 28, 3) for (3, 28, 28) is transpose(0, 3, 1, 2))."""
    unused = list(range(len(got)))
    order = []
    for n in want:
        axis = next(a for a in unused if got[a] == n)
        unused.remove(axis)
        order.append(axis + 1)
    call = f"{x}.transpose(0, {_dims(order)})"
    if order == [3, 1, 2]:
        return f"this looks like NHWC data for an NCHW model: transpose it with {call}"
    if order == [2, 3, 1]:
        return f"this looks like NCHW data for an NHWC model: transpose it with {call}"
    return f"its axes look permuted: transpose it with {call}"


def _flattened(want: tuple[int, ...], size: int, x: str, first: bool) -> str:
    """Samples flattened to `size` values. Which reshape restores them depends on the order they were
    flattened in, which the array does not say: for an image input with channels, both are named."""
    restore = f"each sample is flattened to {size} values: {x}.reshape(-1, {_dims(want)})"
    if len(want) != 3 or min(want[0], want[2]) == 1:  # no channels, or one: a single order
        return restore + " restores them"
    if first:
        c, h, w = want
        other = f"{x}.reshape(-1, {h}, {w}, {c}).transpose(0, 3, 1, 2)"
        return f"{restore} if they were flattened from {want}, {other} if from NHWC images ({h}, {w}, {c})"
    h, w, c = want
    other = f"{x}.reshape(-1, {c}, {h}, {w}).transpose(0, 2, 3, 1)"
    return f"{restore} if they were flattened from {want}, {other} if from NCHW data ({c}, {h}, {w})"


def _image_cause(got: tuple[int, ...], want: tuple[int, ...], first: bool) -> str | None:
    """Image-like samples that differ from an image input in their channels or their size."""
    c, hw = (want[0], want[1:]) if first else (want[2], want[:2])
    if got == hw:
        return f"the samples have no channel axis and the model takes {c} channels: give {c}-channel data"
    if len(got) != 3:
        return None
    got_c, got_hw = (got[0], got[1:]) if first else (got[2], got[:2])
    if got_hw == hw:
        return (
            f"the model takes {_channels(c)}, the data has {got_c}: convert it (or give a folder of"
            " images, converted for you)"
        )
    if got_c == c:
        return _resize(hw, got_hw, "")
    other_c, other_hw = (got[2], got[:2]) if first else (got[0], got[1:])
    if other_c == c:  # the other layout, and another size
        layout, order = ("NHWC", "0, 3, 1, 2") if first else ("NCHW", "0, 2, 3, 1")
        return _resize(hw, other_hw, f" in {layout}", f"transpose it with x.transpose({order}) and ")
    return None


def _resize(want: tuple[int, ...], got: tuple[int, ...], layout: str, transpose: str = "") -> str:
    return (
        f"the model takes {want[0]} x {want[1]} samples, the data has {got[0]} x {got[1]}{layout}:"
        f" {transpose}resize it (or give a folder of images, resized for you)"
    )


def _channels_first(sample: tuple[int, ...]) -> bool:
    """Without the model's layout: an image input (C, H, W or H, W, C per sample) takes its channels
    first unless its first axis is not 1 or 3 and its last one is (an ONNX model is NCHW unless
    converted from TensorFlow)."""
    return len(sample) != 3 or sample[0] in (1, 3) or sample[2] not in (1, 3)


def _channels(count: int) -> str:
    return "1 channel" if count == 1 else f"{count} channels"


def _dims(values: Iterable[int]) -> str:
    return ", ".join(str(v) for v in values)
