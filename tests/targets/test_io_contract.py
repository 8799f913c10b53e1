"""The firmware's input/output contract, as an application writer meets it: model.h and nothing else.

tests/targets/c/app.c includes only model.h. It is given real-valued inputs in the layout model.h
documents (this test converts the model's own data as model.h says: x.transpose(0, 2, 3, 1) when
<PREFIX>_INPUT_MODEL_NCHW is 1, unchanged when 0), quantizes them in C with the header's scale and zero
point, runs the model and prints the bytes it wrote and read. Checked, for an NCHW model and a model
written the way tf2onnx converts a Keras one (NHWC input and output): the bytes it wrote are the
header's quantization of the data; its outputs equal the int8 reference executor's on those bytes,
byte for byte; and its dequantized outputs match onnxruntime's float outputs for the model's own data.
"""

from __future__ import annotations

import json
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from quantcore import cli, pipeline
from quantcore.codegen.generate import generate
from quantcore.data import DataSet
from quantcore.ir import Graph
from quantcore.quantize import params_json
from quantcore.runtime import int8_exec
from quantcore.targets import cmsis_nn
from quantcore.targets.build import BuildRequest, build_firmware
from quantcore.targets.run import qemu_semihosting_command
from quantcore.targets.target import get_target
from tests.targets.nhwc_models import nchw_model, nhwc_model, samples

APP = Path(__file__).resolve().parent / "c" / "app.c"
CASES = 4
SQNR_FLOOR_DB = 35.0
"""Int8 noise of this two-convolution net: 37.95 (NCHW) and 38.89 dB (NHWC) measured on the firmware's
output, 39.20 and 40.72 dB on verify's last layer (input, two layers' outputs and per-channel weights each
quantized to 8 bits, about 6 dB per bit less the ranges' headroom); the floor is 3 dB under the worst.
Any permutation of height, width and channels of the input or output makes the output another image's,
below 5 dB (the negative control below measures it)."""


@dataclass(frozen=True)
class Built:
    qgraph: Graph
    onnx_path: Path
    src: Path
    header: dict[str, str]
    params: Path


def _kind(built: Built) -> str:
    return "nhwc" if "nhwc" in built.onnx_path.name else "nchw"


def _header_macros(path: Path) -> dict[str, str]:
    return dict(re.findall(r"^#define (MODEL_\w+) (.+)$", path.read_text(), re.MULTILINE))


def _own_data(kind: str) -> np.ndarray:
    """The model's own inputs: NHWC images, transposed to NCHW for the NCHW model."""
    x = samples(CASES, seed=3)
    return np.ascontiguousarray(x if kind == "nhwc" else x.transpose(0, 3, 1, 2))


@pytest.fixture(scope="module", params=["nchw", "nhwc"])
def built(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Built:
    kind = str(request.param)
    folder = tmp_path_factory.mktemp(kind)
    path = folder / f"{kind}.onnx"
    onnx.save(nchw_model() if kind == "nchw" else nhwc_model(), path)
    loaded = pipeline.load_model(path)
    calib = samples(64, seed=1)
    calib = calib if kind == "nhwc" else calib.transpose(0, 3, 1, 2)
    # The NCHW model with its output at int8 (switched off), the NHWC one as the quantizer picks by default:
    # an int16 output (its conv on arm_convolve_s16; test_the_header_states_the_layouts checks the type).
    int16_output = None if kind == "nhwc" else False
    options = pipeline.QuantizeOptions(equalize=False, bias_correction=False, int16_output=int16_output)
    result = pipeline.quantize(loaded, DataSet(np.ascontiguousarray(calib)), options)
    params_json.write(folder / "params.json", result.document)
    generate(result.qgraph, folder / "src", force=True)
    header = _header_macros(folder / "src" / "model.h")
    return Built(result.qgraph, path, folder / "src", header, folder / "params.json")


def _documented_layout(built: Built, x_model: np.ndarray) -> np.ndarray:
    """What model.h tells an application to do with the model's own input."""
    return x_model.transpose(0, 2, 3, 1) if built.header["MODEL_INPUT_MODEL_NCHW"] == "1" else x_model


def _write_inputs(path: Path, x_nhwc: np.ndarray) -> Path:
    rows = ",\n".join(
        "    {" + ", ".join(f"{v!r}f" for v in case.astype(np.float32).ravel().tolist()) + "}"
        for case in x_nhwc
    )
    path.write_text(
        '#include "model.h"\n'
        f"const unsigned app_case_count = {len(x_nhwc)};\n"
        f"const float app_inputs[][MODEL_INPUT_ELEMENTS] = {{\n{rows}\n}};\n"
    )
    return path


def _run_app(
    built: Built, target_name: str, checkout: cmsis_nn.CmsisNn, folder: Path
) -> dict[str, list[bytes]]:
    x_nhwc = _documented_layout(built, _own_data(_kind(built)))
    inputs = _write_inputs(folder / "app_inputs.c", x_nhwc)
    target = get_target(target_name)
    request = BuildRequest(target, built.src, folder, (), checkout, application=(APP, inputs))
    firmware = build_firmware(request)
    command = [str(firmware.path)] if not target.cross else qemu_semihosting_command(firmware)
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0 and done.stdout.endswith("DONE\n"), done.stdout[-500:] + done.stderr[-500:]
    lines: dict[str, list[bytes]] = {"IN": [], "OUT": []}
    for line in done.stdout.splitlines():
        tag, _, rest = line.partition(" ")
        if tag in lines:
            lines[tag].append(bytes.fromhex(rest.split(" ")[1]))
    return lines


def _quantized_per_header(built: Built, x_nhwc: np.ndarray) -> np.ndarray:
    """model.h's recipe in float32, as the C computes it: round half away from zero, then clamp."""
    scale = np.float32(float(built.header["MODEL_INPUT_SCALE"].rstrip("f")))
    q = np.trunc(np.abs(x_nhwc.astype(np.float32) / scale) + np.float32(0.5)) * np.sign(x_nhwc)
    return np.clip(q + int(built.header["MODEL_INPUT_ZERO_POINT"]), -128, 127).astype(np.int8)


def _float_reference(built: Built) -> np.ndarray:
    """onnxruntime's float output for the model's own data, put in the firmware's layout as model.h says."""
    session = ort.InferenceSession(str(built.onnx_path), providers=["CPUExecutionProvider"])
    x = _own_data(_kind(built))
    y = np.concatenate([session.run(None, {"input": x[i : i + 1]})[0] for i in range(len(x))])
    return y.transpose(0, 2, 3, 1) if built.header["MODEL_OUTPUT_MODEL_NCHW"] == "1" else y


def _sqnr_db(reference: np.ndarray, actual: np.ndarray) -> float:
    noise = np.sum((reference - actual) ** 2)
    return float(10 * np.log10(np.sum(reference**2) / noise))


def _output_dtype(built: Built) -> type[np.signedinteger]:
    """The output's element type as model.h states it (MODEL_OUTPUT_TYPE), little-endian on targets."""
    return {"int8_t": np.int8, "int16_t": np.int16}[built.header["MODEL_OUTPUT_TYPE"]]


def _dequantized(built: Built, outputs: list[bytes]) -> np.ndarray:
    q = np.stack([np.frombuffer(b, _output_dtype(built)) for b in outputs]).astype(np.float64)
    scale = float(built.header["MODEL_OUTPUT_SCALE"].rstrip("f"))
    y = (q - int(built.header["MODEL_OUTPUT_ZERO_POINT"])) * scale
    return y.reshape(len(outputs), *built.qgraph.tensor(built.qgraph.outputs[0]).shape[1:])


def _check(built: Built, lines: dict[str, list[bytes]]) -> None:
    x_nhwc = _documented_layout(built, _own_data(_kind(built)))
    assert len(lines["IN"]) == len(lines["OUT"]) == CASES
    written = np.stack([np.frombuffer(b, np.int8) for b in lines["IN"]])
    np.testing.assert_array_equal(written, _quantized_per_header(built, x_nhwc).reshape(CASES, -1))
    graph_input = built.qgraph.inputs[0]
    shape = built.qgraph.tensor(graph_input).shape
    env = int8_exec.run(built.qgraph, {graph_input: written.reshape(CASES, *shape[1:])})
    expected = env[built.qgraph.outputs[0]].reshape(CASES, -1)
    outputs = np.stack([np.frombuffer(b, _output_dtype(built)) for b in lines["OUT"]])
    np.testing.assert_array_equal(outputs, expected)
    assert _sqnr_db(_float_reference(built), _dequantized(built, lines["OUT"])) > SQNR_FLOOR_DB


def test_the_header_states_the_layouts(built: Built) -> None:
    nhwc = _kind(built) == "nhwc"
    h = built.header
    assert (h["MODEL_INPUT_MODEL_NCHW"], h["MODEL_OUTPUT_MODEL_NCHW"]) == (("0", "0") if nhwc else ("1", "1"))
    dims = [h[f"MODEL_INPUT_{d}"] for d in ("BATCH", "HEIGHT", "WIDTH", "CHANNELS")]
    assert dims == ["1", "6", "10", "3"] and h["MODEL_INPUT_SHAPE"] == "{1, 6, 10, 3}"
    assert [h[f"MODEL_OUTPUT_{d}"] for d in ("HEIGHT", "WIDTH", "CHANNELS")] == ["3", "5", "5"]
    assert h["MODEL_OUTPUT_TYPE"] == ("int16_t" if nhwc else "int8_t")
    assert h["MODEL_OUTPUT_ZERO_POINT"] == "0" or not nhwc  # int16 is symmetric
    text = (built.src / "model.h").read_text()
    if nhwc:
        assert "the model file takes this input as NHWC too: write the model's own values unchanged." in text
    else:
        assert (
            " * Model: the model file gives this input as NCHW, 1 x 3 x 6 x 10: element (n, c, h, w) of the\n"
            " *        model's input is the NHWC element (n, h, w, c) above, so transpose the model's input"
            " before writing it\n *        (numpy: x.transpose(0, 2, 3, 1)).\n"
        ) in text


def test_an_application_that_knows_only_model_h_computes_the_model_on_the_host(
    built: Built, checkout: cmsis_nn.CmsisNn, tmp_path: Path
) -> None:
    assert re.findall(r'#include "([^"]+)"', APP.read_text()) == ["model.h"]
    _check(built, _run_app(built, "host", checkout, tmp_path))


def test_an_application_that_knows_only_model_h_computes_the_model_on_qemu_m4(
    built: Built, cross: cmsis_nn.CmsisNn, tmp_path: Path
) -> None:
    _check(built, _run_app(built, "qemu-m4", cross, tmp_path))


def test_the_old_hidden_permutation_would_fail_the_float_check(built: Built) -> None:
    """Negative control: the NHWC model's own input taken as NCHW and permuted again (what the firmware
    expected before) gives another image's output, far below the floor."""
    if _kind(built) != "nhwc":
        pytest.skip("the NHWC-origin model's control")
    x = _own_data("nhwc")
    permuted = _quantized_per_header(built, x.transpose(0, 2, 3, 1).reshape(x.shape))
    env = int8_exec.run(built.qgraph, {built.qgraph.inputs[0]: permuted})
    q = env[built.qgraph.outputs[0]]
    outputs = [case.tobytes() for case in q]
    assert _sqnr_db(_float_reference(built), _dequantized(built, outputs)) < 5.0


def _vector_bytes(vectors_c: Path) -> np.ndarray:
    """The test inputs the harness copies to model_input(), as vectors.c embeds them."""
    cases = re.findall(r"\{ /\* case \d+ \*/\n(.*?)\n    \}", vectors_c.read_text(), re.DOTALL)
    return np.array([[int(v) for v in re.findall(r"-?\d+", case)] for case in cases], np.int8)


def test_verify_writes_the_data_as_model_h_tells_an_application(
    built: Built, checkout: cmsis_nn.CmsisNn, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`verify --data` embeds exactly the bytes model.h's recipe makes of the model's own samples (no
    permutation in the harness, which copies them unchanged), and the firmware matches the reference."""
    x = _own_data(_kind(built))
    np.savez(tmp_path / "data.npz", x=x)
    argv = ["verify", "--target", "host", "--model", str(built.onnx_path), "--params", str(built.params)]
    argv += ["--data", str(tmp_path / "data.npz"), "--build-dir", str(tmp_path / "b"), "--json"]
    code = cli.main(argv)
    report = json.loads(capsys.readouterr().out)
    assert (code, report["verdict"], report["mismatched_bytes_total"]) == (0, "pass", 0)
    # the float figures run the model on its own data: the output layer's SQNR is the int8 noise
    assert report["layers"][-1]["float_sqnr_db"] > SQNR_FLOOR_DB
    expected = _quantized_per_header(built, _documented_layout(built, x)).reshape(CASES, -1)
    np.testing.assert_array_equal(_vector_bytes(tmp_path / "b" / "harness" / "vectors.c"), expected)
    harness = (tmp_path / "b" / "harness" / "harness.c").read_text()
    assert "memcpy(model_input(), fixpoint_cases[c], MODEL_INPUT_BYTES);" in harness


def test_verify_refuses_data_in_the_other_layout_naming_the_header(built: Built) -> None:
    from quantcore.targets.build import read_contract
    from quantcore.targets.errors import TargetError
    from quantcore.targets.verify import documented_cases

    contract = read_contract(built.src)
    wrong = _own_data(_kind(built)).transpose(0, 2, 3, 1) if _kind(built) == "nchw" else _own_data("nchw")
    with pytest.raises(TargetError) as caught:
        documented_cases(contract, wrong, "d.npz")
    after = " after the transposition it asks for" if _kind(built) == "nchw" else ""
    got = list(wrong.shape[1:]) if _kind(built) == "nhwc" else [10, 3, 6]
    assert str(caught.value) == (
        f"{built.src / 'model.h'} takes inputs of shape [6, 10, 3] per sample, but the samples of d.npz give"
        f" {got}{after}; give data in the model's own input layout"
    )


def test_the_contract_is_read_from_the_header(built: Built) -> None:
    from quantcore.targets.build import read_contract

    contract = read_contract(built.src)
    assert contract.shape == (1, 6, 10, 3) and contract.model_nchw is (_kind(built) == "nchw")
    assert contract.scale == float(built.header["MODEL_INPUT_SCALE"].rstrip("f"))
    assert not contract.wide


def test_sources_that_state_no_contract_are_refused_with_what_to_do(tmp_path: Path) -> None:
    from quantcore.targets.build import read_contract
    from quantcore.targets.errors import FirmwareBuildError

    (tmp_path / "model.h").write_text("#define MODEL_INPUT_BYTES 32\n#define MODEL_INPUT_SCALE 0.5f\n")
    with pytest.raises(FirmwareBuildError) as caught:
        read_contract(tmp_path)
    assert str(caught.value) == (
        f"{tmp_path / 'model.h'}: no MODEL_INPUT_ZERO_POINT, MODEL_INPUT_MODEL_NCHW, MODEL_INPUT_SHAPE,"
        " MODEL_INPUT_TYPE: it does not state how to write the input;"
        " regenerate the model (`fixpoint generate`)"
    )


def test_the_default_timeout_scales_with_the_image_and_the_cases() -> None:
    from quantcore.targets.verify import default_timeout

    # 60 s + 10 s per case per 250 KB: the 250 KB model with 10 cases that needed up to 52 s gets 160 s.
    assert default_timeout(250_000, 10) == 160.0
    assert default_timeout(20_000, 4) == 63.2
    assert default_timeout(None, 4) == 60.0


def test_a_timeout_names_the_option_that_gives_more_time(tmp_path: Path) -> None:
    from quantcore.targets.errors import FirmwareTimeout
    from quantcore.targets.run import run_process

    with pytest.raises(FirmwareTimeout) as caught:
        run_process(["sleep", "5"], "sleeper", 0.5, None)
    assert str(caught.value) == (
        "sleeper: the firmware timed out after 0.5 s (a hang, or a model too slow for the timeout: give it"
        " longer with --timeout SECONDS); last output: (none)"
    )


def _tiny_flash_project(folder: Path, flash: str) -> Path:
    (folder / "fixpoint.toml").write_text(
        f'[board]\ncore = "cortex-m4"\nflash_size = "{flash}"\nram_size = "256K"\n'
    )
    return folder / "fixpoint.toml"


def test_test_inputs_that_overflow_flash_are_named_with_the_cases_that_fit(
    cross: cmsis_nn.CmsisNn,
    maxpool_files: tuple[Path, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A board whose 64 KB flash holds the fixture firmware (~30 KB) but not 2,000 inputs of 32 bytes: the
    message says the inputs overflowed and which --cases fits; without --cases the fitting number is used."""
    from tests.targets.models import MAXPOOL_SRC

    model, params = maxpool_files
    project = _tiny_flash_project(tmp_path, "64K")
    np.save(tmp_path / "x.npy", np.random.default_rng(0).normal(size=(2000, 2, 4, 4)).astype(np.float32))
    argv = ["build", "--project", str(project), "--target", "board", "--model", str(model), "--params"]
    argv += [str(params), "--src", str(MAXPOOL_SRC), "--data", str(tmp_path / "x.npy"), "--build-dir"]
    code = cli.main([*argv, str(tmp_path / "b1"), "--cases", "2000"])
    err = capsys.readouterr().err
    found = re.fullmatch(
        r"fixpoint build: building the firmware for board: its 2000 test inputs \(2000 x 32 bytes,"
        r" embedded in flash\) overflow the target's flash by (\d+) bytes; (\d+) fit:"
        r" give --cases (\d+) \(or fewer\)\n",
        err,
    )
    assert code == 1 and found, err
    over, fit = int(found.group(1)), int(found.group(2))
    assert found.group(3) == str(fit) and fit == 2000 - -(-over // 32)
    code = cli.main([*argv, str(tmp_path / "b2"), "--json"])
    out, err = capsys.readouterr()
    assert err == (
        f"fixpoint: note: 2000 test inputs do not fit board's flash; using the first {fit} (--cases N sets"
        " the number)\n"
    )
    report = json.loads(out)
    assert code == 0 and report["cases"] == fit and report["flash_bytes"] <= 64 * 1024


def test_a_model_too_big_for_flash_keeps_the_linkers_message(
    cross: cmsis_nn.CmsisNn,
    maxpool_files: tuple[Path, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from tests.targets.models import MAXPOOL_SRC

    model, params = maxpool_files
    project = _tiny_flash_project(tmp_path, "4K")
    argv = ["build", "--project", str(project), "--target", "board", "--model", str(model), "--params"]
    code = cli.main([*argv, str(params), "--src", str(MAXPOOL_SRC), "--build-dir", str(tmp_path / "b")])
    err = capsys.readouterr().err
    assert code == 1 and "the firmware does not fit the target's memory:" in err and "test inputs" not in err
    assert "overflowed by" in err


def test_the_params_schema_takes_the_model_layout_of_an_input(built: Built) -> None:
    from quantcore.quantize.params_json import QuantParamsError, dump, loads

    document = json.loads(built.params.read_text())
    # fixpoint quantize records the layout the model file gives its input
    assert document["model"]["inputs"][0]["model_layout"] == ("NHWC" if _kind(built) == "nhwc" else "NCHW")
    assert loads(dump(document))["model"]["inputs"][0]["model_layout"] in ("NHWC", "NCHW")
    document["model"]["inputs"][0]["model_layout"] = "CHWN"
    with pytest.raises(QuantParamsError, match="model_layout"):
        loads(dump(document))
