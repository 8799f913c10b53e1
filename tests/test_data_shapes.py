"""Data checked against the model's input (issue 18): a per-sample shape that differs is refused with
both shapes and the likely cause, never reshaped; the forms quantcore.data accepts move no element."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from hypothesis import given
from hypothesis import strategies as st
from onnx import helper
from PIL import Image

from quantcore import data, pipeline
from quantcore.cli import main
from quantcore.data import DataError
from tests.fuzzing import fuzz
from tests.importers.models import model, value

NCHW = (1, 3, 8, 6)
NHWC = (1, 8, 6, 3)


def _npy(folder: Path, x: np.ndarray, name: str = "x.npy") -> Path:
    path = folder / name
    np.save(path, x)
    return path


def _values(*shape: int) -> np.ndarray:
    return np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape) / 1000


def _refused(path: Path, shape: tuple[int, ...]) -> str:
    with pytest.raises(DataError) as error:
        data.load(path, shape)
    return str(error.value)


# -- accepted: each form has one reading and moves no element --------------------------------------


@pytest.mark.parametrize(
    ("given", "model_input"),
    [
        ((5, 1, 8, 6), (1, 1, 8, 6)),  # as is
        ((5, 8, 6), (1, 1, 8, 6)),  # (N, H, W) for a one-channel NCHW model
        ((5, 8, 6, 1), (1, 1, 8, 6)),  # grayscale NHWC: the same values as NCHW
        ((5, 8, 6), (1, 8, 6, 1)),  # (N, H, W) for a one-channel NHWC model
        ((5, 1, 8, 6), (1, 8, 6, 1)),
        ((5, 10), (1, 10, 1, 1)),  # a size-1 axis holds no order
    ],
)
def test_size_one_axes_may_be_added_or_left_out(
    tmp_path: Path, given: tuple[int, ...], model_input: tuple[int, ...]
) -> None:
    x = _values(*given)
    loaded = data.load(_npy(tmp_path, x), model_input)
    assert loaded.x.shape == (5, *model_input[1:])
    assert np.array_equal(loaded.x.ravel(), x.ravel())  # the same values in the same order


@pytest.mark.parametrize(
    ("given", "model_input"),
    [((3, 8, 6), NCHW), ((8, 6), (1, 1, 8, 6)), ((8, 6, 1), (1, 1, 8, 6)), ((10,), (1, 10)), ((), (1, 1))],
)
def test_one_sample_may_come_without_its_batch_axis(
    tmp_path: Path, given: tuple[int, ...], model_input: tuple[int, ...]
) -> None:
    x = _values(*given) + 1
    loaded = data.load(_npy(tmp_path, x), model_input)
    assert loaded.x.shape == model_input and np.array_equal(loaded.x.ravel(), x.ravel())


def test_an_iterable_of_single_samples_and_batches_is_one_data_set() -> None:
    samples = [_values(3, 8, 6), _values(2, 3, 8, 6) + 1, _values(3, 8, 6) + 2]
    loaded = data.load(iter(samples), NCHW)
    assert loaded.source == "<iterable>" and loaded.x.shape == (4, 3, 8, 6)
    assert np.array_equal(loaded.x, np.concatenate([samples[0][None], samples[1], samples[2][None]]))


# -- refused: both shapes, the likely cause and the call that fixes it -------------------------------

NHWC_FOR_NCHW = (
    "samples have shape (8, 6, 3), the model input needs (3, 8, 6) (input (1, 3, 8, 6), batch first);"
    " this looks like NHWC data for an NCHW model: transpose it with x.transpose(0, 3, 1, 2)"
)


@pytest.mark.parametrize(
    ("given", "model_input", "message"),
    [
        ((4, 8, 6, 3), NCHW, NHWC_FOR_NCHW),
        (
            (4, 3, 8, 6),
            NHWC,
            "samples have shape (3, 8, 6), the model input needs (8, 6, 3) (input (1, 8, 6, 3), batch first);"
            " this looks like NCHW data for an NHWC model: transpose it with x.transpose(0, 2, 3, 1)",
        ),
        (
            (4, 8, 8, 3),  # square images: axes of equal size keep their order
            (1, 3, 8, 8),
            "samples have shape (8, 8, 3), the model input needs (3, 8, 8) (input (1, 3, 8, 8), batch first);"
            " this looks like NHWC data for an NCHW model: transpose it with x.transpose(0, 3, 1, 2)",
        ),
        (
            (4, 8, 3, 6),
            NCHW,
            "samples have shape (8, 3, 6), the model input needs (3, 8, 6) (input (1, 3, 8, 6), batch first);"
            " its axes look permuted: transpose it with x.transpose(0, 2, 1, 3)",
        ),
        (
            (4, 144),
            NCHW,
            "samples have shape (144,), the model input needs (3, 8, 6) (input (1, 3, 8, 6), batch first);"
            " each sample is flattened to 144 values: x.reshape(-1, 3, 8, 6) if they were flattened from"
            " (3, 8, 6), x.reshape(-1, 8, 6, 3).transpose(0, 3, 1, 2) if from NHWC images (8, 6, 3)",
        ),
        (
            (4, 144),
            NHWC,
            "samples have shape (144,), the model input needs (8, 6, 3) (input (1, 8, 6, 3), batch first);"
            " each sample is flattened to 144 values: x.reshape(-1, 8, 6, 3) if they were flattened from"
            " (8, 6, 3), x.reshape(-1, 3, 8, 6).transpose(0, 2, 3, 1) if from NCHW data (3, 8, 6)",
        ),
        (
            (4, 48),  # one channel: a single flattening order
            (1, 1, 8, 6),
            "samples have shape (48,), the model input needs (1, 8, 6) (input (1, 1, 8, 6), batch first);"
            " each sample is flattened to 48 values: x.reshape(-1, 1, 8, 6) restores them",
        ),
        (
            (4, 8, 6),  # an MLP's flat input given images
            (1, 48),
            "samples have shape (8, 6), the model input needs (48,) (input (1, 48), batch first);"
            " the same 48 values per sample in another shape: if they are in the model's order,"
            " x.reshape(-1, 48) fits them",
        ),
        (
            (4, 8, 6),  # grayscale for an RGB model
            NCHW,
            "samples have shape (8, 6), the model input needs (3, 8, 6) (input (1, 3, 8, 6), batch first);"
            " the samples have no channel axis and the model takes 3 channels: give 3-channel data",
        ),
        (
            (4, 3, 8, 6),  # RGB for a grayscale model
            (1, 1, 8, 6),
            "samples have shape (3, 8, 6), the model input needs (1, 8, 6) (input (1, 1, 8, 6), batch first);"
            " the model takes 1 channel, the data has 3: convert it (or give a folder of images, converted"
            " for you)",
        ),
        (
            (4, 3, 10, 10),
            NCHW,
            "samples have shape (3, 10, 10), the model input needs (3, 8, 6) (input (1, 3, 8, 6), batch"
            " first); the model takes 8 x 6 samples, the data has 10 x 10: resize it (or give a folder of"
            " images, resized for you)",
        ),
        (
            (4, 10, 10, 3),
            NCHW,
            "samples have shape (10, 10, 3), the model input needs (3, 8, 6) (input (1, 3, 8, 6), batch"
            " first); the model takes 8 x 6 samples, the data has 10 x 10 in NHWC: transpose it with"
            " x.transpose(0, 3, 1, 2) and resize it (or give a folder of images, resized for you)",
        ),
        (
            (2, 4, 3, 8, 6),
            NCHW,
            "samples have shape (4, 3, 8, 6), the model input needs (3, 8, 6) (input (1, 3, 8, 6), batch"
            " first); the samples are grouped in batches of 4: x.reshape(-1, 3, 8, 6) joins them",
        ),
        (
            (8, 6, 3),
            NCHW,
            "the array has shape (8, 6, 3), the model input needs (3, 8, 6) (input (1, 3, 8, 6), batch"
            " first); one sample without its batch axis? this looks like NHWC data for an NCHW model:"
            " transpose it with x[None].transpose(0, 3, 1, 2)",
        ),
        (
            (48,),
            (1, 1, 8, 6),
            "the array has shape (48,), the model input needs (1, 8, 6) (input (1, 1, 8, 6), batch first);"
            " one sample without its batch axis? each sample is flattened to 48 values:"
            " x[None].reshape(-1, 1, 8, 6) restores them",
        ),
        (
            (4, 11),
            (1, 10),
            "samples have shape (11,), the model input needs (10,) (input (1, 10), batch first);"
            " is it data for another model or input size?",
        ),
    ],
)
def test_other_shapes_are_refused_with_the_cause_and_the_fix(
    tmp_path: Path, given: tuple[int, ...], model_input: tuple[int, ...], message: str
) -> None:
    path = _npy(tmp_path, _values(*given))
    assert _refused(path, model_input) == f"{path}: {message}"


def test_the_advised_call_makes_the_data_fit(tmp_path: Path) -> None:
    """The transpose the message names gives exactly the NCHW array the NHWC one was made from."""
    nchw = _values(4, 3, 8, 6)
    nhwc = nchw.transpose(0, 2, 3, 1)
    assert _refused(_npy(tmp_path, nhwc), NCHW).endswith("x.transpose(0, 3, 1, 2)")
    assert np.array_equal(data.load(_npy(tmp_path, nhwc.transpose(0, 3, 1, 2)), NCHW).x, nchw)


def test_an_npz_and_an_iterable_item_are_named() -> None:
    with pytest.raises(DataError) as error:
        data.load([_values(2, 3, 8, 6), _values(2, 8, 6, 3)], NCHW)
    assert str(error.value) == f"<iterable> item 1: {NHWC_FOR_NCHW}"


def test_labels_stay_with_their_samples(tmp_path: Path) -> None:
    path = tmp_path / "xy.npz"
    np.savez(path, x=_values(3, 8, 6), y=np.array([2, 0, 1]))  # (N, H, W) for a one-channel model
    loaded = data.load(path, (1, 1, 8, 6))
    assert loaded.x.shape == (3, 1, 8, 6) and loaded.y is not None and loaded.y.tolist() == [2, 0, 1]


@fuzz(60)
@given(
    sample=st.lists(st.integers(2, 5), min_size=1, max_size=4, unique=True),
    order=st.randoms(use_true_random=False),
    ones=st.lists(st.integers(0, 4), max_size=3),
    batch=st.integers(1, 3),
)
def test_a_shape_is_accepted_only_when_no_element_moves(
    sample: list[int], order: Any, ones: list[int], batch: int
) -> None:
    """Any permutation of distinct axis sizes other than the identity is refused; size-1 axes inserted
    anywhere are accepted and give the model's shape with every value where it was."""
    x = _values(batch, *sample)
    padded = list(x.shape[1:])
    for place in ones:
        padded.insert(min(place, len(padded)), 1)
    loaded = data.load([x.reshape(batch, *padded)], (1, *sample))
    assert np.array_equal(loaded.x, x)
    permuted = list(range(len(sample)))
    order.shuffle(permuted)
    if permuted != sorted(permuted):
        with pytest.raises(DataError, match=r"(NHWC|NCHW) data for an|its axes look permuted"):
            data.load([x.transpose(0, *(a + 1 for a in permuted))], (1, *sample))


# -- image folders: laid out like the model's input, whichever layout it has --------------------------


def _image_folder(folder: Path, count: int = 3) -> Path:
    rng = np.random.default_rng(7)
    folder.mkdir()
    for i in range(count):
        Image.fromarray(rng.integers(0, 256, (8, 6, 3), np.uint8), "RGB").save(folder / f"{i}.png")
    return folder


def test_an_image_folder_follows_the_model_layout(tmp_path: Path) -> None:
    folder = _image_folder(tmp_path / "images")
    nchw = data.load(folder, NCHW).x
    nhwc = data.load(folder, NHWC).x
    assert nchw.shape == (3, 3, 8, 6) and nhwc.shape == (3, 8, 6, 3)
    assert np.array_equal(nchw.transpose(0, 2, 3, 1), nhwc)
    pixels = sorted(np.asarray(Image.open(p), np.float32).tobytes() for p in folder.iterdir())
    assert sorted((sample * 255).round().astype(np.float32).tobytes() for sample in nhwc) == pixels
    gray = data.load(folder, (1, 8, 6, 1)).x
    assert gray.shape == (3, 8, 6, 1)
    assert _refused(folder, (1, 5, 8, 6)) == (
        f"{folder}: images need a model with 1 or 3 input channels; its input is (1, 5, 8, 6)"
    )


# -- through the commands: the shape each caller passes is the model's own ----------------------------


def _rgb_model(path: Path, nhwc: bool = False) -> Path:
    """Conv 3->4 and ReLU on an 8 x 6 RGB input; with nhwc, the input is NHWC and a Transpose makes it
    NCHW (what converters from TensorFlow write)."""
    w = np.random.default_rng(3).normal(0, 0.3, (4, 3, 3, 3)).astype(np.float32)
    nodes = [helper.make_node("Conv", ["xc", "w"], ["c"], name="conv", pads=[1, 1, 1, 1])]
    nodes.append(helper.make_node("Relu", ["c"], ["y"], name="relu"))
    if nhwc:
        nodes.insert(0, helper.make_node("Transpose", ["x"], ["xc"], name="to_nchw", perm=[0, 3, 1, 2]))
    else:
        nodes[0].input[0] = "x"
    onnx.save(
        model(nodes, [value("x", NHWC if nhwc else NCHW)], [value("y", [1, 4, 8, 6])], {"w": w}, 13), path
    )
    return path


def test_the_model_layout_decides_where_an_ambiguous_image_input_takes_its_channels(tmp_path: Path) -> None:
    """(3, 6, 3) per sample reads as C, H, W or H, W, C; the shape alone guesses channels first. An NHWC
    model says which (pipeline.load_data passes the layout its file gives the input)."""
    ambiguous = (1, 3, 6, 3)
    w = np.random.default_rng(3).normal(0, 0.3, (4, 3, 3, 3)).astype(np.float32)
    nodes = [
        helper.make_node("Transpose", ["x"], ["xc"], name="to_nchw", perm=[0, 3, 1, 2]),
        helper.make_node("Conv", ["xc", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["y"], name="relu"),
    ]
    path = tmp_path / "nhwc.onnx"
    onnx.save(model(nodes, [value("x", ambiguous)], [value("y", [1, 4, 3, 6])], {"w": w}, 13), path)
    folder = tmp_path / "images"
    folder.mkdir()
    pixels = np.random.default_rng(7).integers(0, 256, (3, 6, 3), np.uint8)
    Image.fromarray(pixels, "RGB").save(folder / "0.png")
    x = pipeline.load_data(folder, pipeline.load_model(path).graph).x
    assert np.array_equal((x[0] * 255).round(), pixels.astype(np.float32))  # H, W, C as the file
    guessed = data.load(folder, ambiguous).x  # by shape alone: 3 channels of a 6 x 3 image (resized)
    assert guessed.shape == x.shape and not np.array_equal(guessed, x)


def test_quantize_and_evaluate_refuse_nhwc_data_for_an_nchw_model(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    onnx_path = _rgb_model(tmp_path / "rgb.onnx")
    good = tmp_path / "good.npz"
    bad = tmp_path / "nhwc.npz"
    x = np.random.default_rng(0).uniform(0, 1, (16, 3, 8, 6)).astype(np.float32)
    np.savez(good, x=x)
    np.savez(bad, x=x.transpose(0, 2, 3, 1))
    params = tmp_path / "p.json"
    assert main(["quantize", str(onnx_path), "--calib", str(bad), "-o", str(params)]) == 2
    assert capsys.readouterr().err == f"fixpoint quantize: {bad}: {NHWC_FOR_NCHW}\n"
    assert not params.exists()
    assert main(["quantize", str(onnx_path), "--calib", str(good), "-o", str(params)]) == 0
    capsys.readouterr()
    for command in (["evaluate"], ["sensitivity", "--no-gradient"]):
        assert main([*command, str(onnx_path), str(params), "--data", str(bad)]) == 2
        assert capsys.readouterr().err == f"fixpoint {command[0]}: {bad}: {NHWC_FOR_NCHW}\n"


def test_an_nhwc_model_takes_its_own_layout(tmp_path: Path) -> None:
    """The shape the commands pass (pipeline.first_input_shape) is the model's own: NHWC for an NHWC
    model, so its NHWC data loads as it is and its NCHW data is refused."""
    loaded = pipeline.load_model(_rgb_model(tmp_path / "nhwc.onnx", nhwc=True))
    shape = pipeline.first_input_shape(loaded)
    assert shape == NHWC
    x = np.random.default_rng(0).uniform(0, 1, (4, 8, 6, 3)).astype(np.float32)
    assert np.array_equal(data.load([x], shape).x, x)
    with pytest.raises(
        DataError, match=r"NCHW data for an NHWC model: transpose it with x.transpose\(0, 2, 3, 1\)"
    ):
        data.load([x.transpose(0, 3, 1, 2)], shape)
    folder = _image_folder(tmp_path / "images")
    images = data.load(folder, shape)
    assert images.x.shape == (3, 8, 6, 3)
    loaded.float_model.activations({loaded.graph.inputs[0]: images.x})  # onnxruntime takes them as they are
