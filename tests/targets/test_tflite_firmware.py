"""The generated C of TFLM's int8 example models computes what TensorFlow Lite Micro computes: 0 differing
output bytes against TFLM's interpreter (the tflite-micro package, reference kernels), on the host and on
qemu-m4 and qemu-m55.

Through the public commands, as a user would: `fixpoint quantize MODEL.tflite -o p.json` (no --calib),
then `fixpoint verify --target T --model MODEL.tflite --params p.json --data D` with D the real values
(q - zero_point) * scale of int8 vectors q, which verify quantizes back to q exactly as model.h tells an
application. verify checks every layer against Fixpoint's reference executor; this test also runs the
firmware verify built and compares its output bytes with TFLM's outputs for the same q directly - not
only through the reference. The vectors: random int8 over the whole range, plus every byte -128 and
every byte 127 (the kernels' saturation paths).

The LSTM models (mnist_lstm, micro_speech_lstm) keep their hidden and cell state from one invoke to the
next on both sides (TFLM's variable tensors, the layer's static buffers in the firmware): the cases run
in a row, so every case after the first checks the carried state too.

The board route (flash-verify: GDB-stub flash, the harness over the UART) runs person_detect on qemu-m4.

Runtime: all three models on all three targets, about 11 s in all here. person_detect (300 KB of
weights) is the slow one and still takes 1-3 s per target (build, then QEMU for 4 invokes), so no board
is left out; its flash-verify takes about 15 s (every layer's bytes cross the 115200-baud UART).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from quantcore import cli
from quantcore.targets import cmsis_nn
from quantcore.targets.run import qemu_command, run_process
from quantcore.targets.target import BUILTIN, Kind
from tests import tflm

pytestmark = pytest.mark.cmsis_nn

MODELS = [
    "hello_world_int8",
    "micro_speech_quantized",
    "person_detect",
    "trained_lstm_int8",
    "micro_speech_lstm",
]
TARGETS = ["host", "qemu-m4", "qemu-m55"]
RANDOM_CASES = 2


class Prepared:
    """One model quantized by `fixpoint quantize`, its int8 test vectors, D for them and TFLM's outputs."""

    def __init__(self, name: str, folder: Path) -> None:
        self.model = tflm.model(name)
        self.params = folder / "p.json"
        assert cli.main(["quantize", str(self.model), "-o", str(self.params)]) == 0
        interpreter = tflm.interpreter(self.model)
        shape, scale, zero_point = tflm.input_quantization(interpreter)
        rng = np.random.default_rng(18)
        q = np.concatenate([
            rng.integers(-128, 128, size=(RANDOM_CASES, *shape), dtype=np.int8),
            np.full((1, *shape), -128, np.int8),
            np.full((1, *shape), 127, np.int8),
        ])  # fmt: skip
        self.data = folder / "d.npy"
        np.save(self.data, tflm.real_values(q, scale, zero_point))
        self.cases = len(q)
        self.tflm_outputs = [output.tobytes() for output in tflm.outputs(interpreter, q)]


@pytest.fixture(scope="module", params=MODELS)
def prepared(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Prepared:
    return Prepared(str(request.param), tmp_path_factory.mktemp(str(request.param)))


def _firmware_outputs(target: str, build_dir: Path) -> list[bytes]:
    """Run the firmware verify left in `build_dir` again and read each case's OUTPUT line."""
    spec = BUILTIN[target]
    if spec.kind is Kind.HOST:
        command = [str(build_dir / "firmware")]
    else:
        assert spec.machine is not None
        semihosting = ["-serial", "none", "-semihosting-config", "enable=on,target=native"]
        command = [*qemu_command(spec.machine), *semihosting, "-kernel", str(build_dir / "firmware.elf")]
    result = run_process(command, f"{target} firmware", 120.0, None)
    return [case.output for case in result.transcript.cases]


@pytest.mark.parametrize("target", TARGETS)
def test_firmware_outputs_equal_tflms_byte_for_byte(
    prepared: Prepared,
    target: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    cross: cmsis_nn.CmsisNn,
) -> None:
    build_dir = tmp_path / "build"
    argv = ["verify", "--target", target, "--model", str(prepared.model), "--params", str(prepared.params)]
    argv += ["--data", str(prepared.data), "--build-dir", str(build_dir), "--json", "--no-float-metrics"]
    capsys.readouterr()
    assert cli.main(argv) == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["verdict"], report["cases"], report["mismatched_bytes_total"]) == (
        "pass",
        prepared.cases,
        0,
    )
    assert report["inputs"] == str(prepared.data)
    outputs = _firmware_outputs(target, build_dir)
    differing = sum(
        sum(a != b for a, b in zip(ours, theirs, strict=True))
        for ours, theirs in zip(outputs, prepared.tflm_outputs, strict=True)
    )
    assert differing == 0
    assert len(outputs) == prepared.cases


def test_flash_verify_on_qemu_m4_takes_the_same_data(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], gdb: cmsis_nn.CmsisNn
) -> None:
    """The board route (GDB-stub flash, harness over the UART) with person_detect, the issue's model for
    import -> generate -> verify on qemu-m4: every layer of every case equal to the reference, which
    the test above holds equal to TFLM."""
    prepared = Prepared("person_detect", tmp_path)
    argv = ["flash-verify", "--target", "qemu-m4", "--model", str(prepared.model)]
    argv += ["--params", str(prepared.params), "--data", str(prepared.data), "--json", "--no-float-metrics"]
    argv += ["--build-dir", str(tmp_path / "build")]
    capsys.readouterr()
    assert cli.main(argv) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["channel"].startswith("UART of QEMU mps2-an386")
    assert (report["verdict"], report["cases"], report["mismatched_bytes_total"]) == (
        "pass",
        prepared.cases,
        0,
    )
