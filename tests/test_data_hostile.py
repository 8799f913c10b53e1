"""Data files that lie or hurt: each is one DataError naming the file, before any large allocation."""

from __future__ import annotations

import io
import os
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from quantcore import data, limits
from quantcore.data import DataError

SHAPE = (1, 1, 4, 4)


def _npy_header(shape: tuple[int, ...], descr: str = "<f4") -> bytes:
    buffer = io.BytesIO()
    np.lib.format.write_array_header_1_0(buffer, {"descr": descr, "fortran_order": False, "shape": shape})
    return buffer.getvalue()


def _load(path: Path) -> data.DataSet:
    return data.load(path, SHAPE)


def test_a_good_npy_and_npz_load_exactly(tmp_path: Path) -> None:
    x = np.arange(32, dtype=np.float32).reshape(2, 1, 4, 4)
    np.save(tmp_path / "x.npy", x)
    np.savez(tmp_path / "xy.npz", x=x, y=np.array([3, 4]))
    np.savez_compressed(tmp_path / "c.npz", x=np.asfortranarray(x))
    assert np.array_equal(_load(tmp_path / "x.npy").x, x)
    loaded = _load(tmp_path / "xy.npz")
    assert np.array_equal(loaded.x, x) and loaded.y is not None and loaded.y.tolist() == [3, 4]
    assert np.array_equal(_load(tmp_path / "c.npz").x, x)


def test_a_header_claiming_terabytes_is_refused_before_reading(tmp_path: Path) -> None:
    path = tmp_path / "huge.npy"
    path.write_bytes(_npy_header((10**6, 10**6)) + b"\0" * 64)
    with pytest.raises(DataError) as error:
        _load(path)
    assert str(error.value) == (
        f"{path}: its header claims 4,000,000,000,000 bytes, more than Fixpoint loads"
        f" ({limits.DATA_MAX_BYTES:,})"
    )


def test_a_header_claiming_more_than_the_file_holds_is_truncation(tmp_path: Path) -> None:
    path = tmp_path / "short.npy"
    path.write_bytes(_npy_header((2, 1, 4, 4)) + b"\0" * 16)
    with pytest.raises(
        DataError,
        match=r"short.npy: its header claims 128 bytes but the file has 16 after it; it is truncated",
    ):
        _load(path)


def test_a_zip_header_followed_by_garbage_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "bad.npz"
    path.write_bytes(b"PK\x03\x04" + b"garbage" * 50)
    with pytest.raises(DataError) as error:
        _load(path)
    assert str(error.value) == (
        f"{path}: cannot read (File is not a zip file); is it an .npy/.npz file numpy wrote?"
    )


def test_complex_samples_are_refused_not_cast(tmp_path: Path) -> None:
    np.savez(tmp_path / "c.npz", x=np.ones((2, 1, 4, 4), np.complex64))
    with pytest.raises(DataError) as error:
        _load(tmp_path / "c.npz")
    assert (
        str(error.value)
        == f"{tmp_path / 'c.npz'}: x holds complex64 values; give real numbers (float or integer)"
    )


def test_values_near_float32_max_are_refused(tmp_path: Path) -> None:
    x = np.full((2, 1, 4, 4), 3e38, np.float32)
    np.save(tmp_path / "max.npy", x)
    with pytest.raises(DataError, match=r"max.npy: x holds values up to 3e\+38; no int8 scale represents"):
        _load(tmp_path / "max.npy")


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
def test_non_finite_values_are_counted_wherever_they_are(tmp_path: Path, dtype: type[np.floating]) -> None:
    x = np.zeros((3, 1, 4, 4), dtype)
    x[0, 0, 0, 0], x[1, 0, 2, 3], x[2, 0, 3, 3] = np.nan, np.inf, -np.inf
    np.save(tmp_path / "bad.npy", x)
    with pytest.raises(DataError, match=r"bad.npy: 3 non-finite values \(NaN/Inf\) in x$"):
        _load(tmp_path / "bad.npy")


def test_integer_samples_at_their_types_ends_load_exactly(tmp_path: Path) -> None:
    """The range check takes each end as a Python float: int8's -128 has no int8 magnitude to wrap."""
    x = np.full((2, 1, 4, 4), -128, np.int8)
    x[1] = 127
    np.save(tmp_path / "i8.npy", x)
    loaded = _load(tmp_path / "i8.npy").x
    assert loaded.dtype == np.float32 and loaded.min() == -128.0 and loaded.max() == 127.0


def test_float32_samples_are_read_only_and_not_copied_again(tmp_path: Path) -> None:
    x = np.arange(32, dtype=np.float32).reshape(2, 1, 4, 4)
    np.save(tmp_path / "x.npy", x)
    loaded = _load(tmp_path / "x.npy").x
    assert not loaded.flags.writeable and loaded.base is not None
    with pytest.raises(ValueError, match="read-only"):
        loaded[0, 0, 0, 0] = 1.0


def test_pickled_objects_are_refused(tmp_path: Path) -> None:
    np.save(tmp_path / "obj.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(DataError, match=r"obj.npy: holds Python objects \(pickles\)"):
        _load(tmp_path / "obj.npy")


def test_a_fifo_named_like_data_is_never_opened(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe.npy")
    with pytest.raises(DataError, match=r"pipe.npy: is a FIFO \(named pipe\), not a regular file"):
        _load(tmp_path / "pipe.npy")  # opening it for reading would block forever


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """An image folder holding one good 4x4 image."""
    images = tmp_path / "images"
    images.mkdir()
    Image.new("L", (4, 4)).save(images / "a.png")
    return images


def test_an_image_bigger_than_the_pixel_limit_is_refused_from_its_header(folder: Path) -> None:
    Image.new("1", (9000, 8000)).save(folder / "bomb.png")  # 72M pixels in a few kB
    assert (folder / "bomb.png").stat().st_size < 100_000
    with pytest.raises(DataError) as error:
        _load(folder)
    assert str(error.value) == (
        f"{folder / 'bomb.png'}: 9000 x 8000 pixels, more than Fixpoint decodes"
        f" ({limits.IMAGE_MAX_PIXELS:,}): a decompression bomb? Resize the image first"
    )


def test_an_image_past_pillows_own_bomb_guard_gets_the_same_message(folder: Path) -> None:
    Image.new("1", (20000, 20000)).save(folder / "bomb.png")
    with pytest.raises(DataError, match=r"bomb.png: too many pixels, more than Fixpoint decodes"):
        _load(folder)


def test_a_fifo_in_an_image_folder_is_never_opened(folder: Path) -> None:
    os.mkfifo(folder / "b.png")
    with pytest.raises(DataError, match=r"b.png: is a FIFO \(named pipe\), not a regular file"):
        _load(folder)
