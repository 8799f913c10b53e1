"""Cases of the classes "numbers" (values believed without checking), "tracebacks" (errors that must be
messages) and "unclear" (messages that must name the real cause)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import onnx
from onnx import helper

from tests.hostile import kit, models
from tests.hostile.runner import Case, Plan, Step, refuse, usage
from tests.hostile.workspace import QUICK, Workspace

Setup = Callable[[Workspace], Plan]
Edit = Callable[[Any], None]


def _case(name: str, klass: str, setup: Setup, about: str, needs: tuple[str, ...] = ()) -> Case:
    return Case(f"{klass}/{name}", klass, setup, about, needs)


def _steps(*steps: Step, tiny: bool = True) -> Setup:
    def setup(w: Workspace) -> Plan:
        if tiny:
            kit.tiny(w)
        return Plan(list(steps))

    return setup


# -- hand-edited parameters ------------------------------------------------------------------------------


def _scaled(key: str, factor: float) -> Edit:
    def edit(d: Any) -> None:
        values = kit.layer(d)["params"][key]
        values[0] = int(values[0] * factor)

    return edit


def _set(key: str, value: Any, kernel: str = "arm_convolve") -> Edit:
    return lambda d: kit.layer(d, kernel)["params"].__setitem__(key, value)


def _tensor(name: str, key: str, value: Any) -> Edit:
    return lambda d: d["tensors"][name].__setitem__(key, value)


PARAM_EDITS: dict[str, tuple[Edit, tuple[str, ...], str]] = {
    "multiplier-edited": (
        _scaled("multiplier", 0.75),
        ("multiplier",),
        "a multiplier no longer matching its scales",
    ),
    "multiplier-negative": (_scaled("multiplier", -1), ("multiplier",), "a negative multiplier"),
    "multiplier-zero": (_scaled("multiplier", 0), ("multiplier",), "a zero multiplier"),
    "shift-edited": (
        lambda d: kit.layer(d)["params"]["shift"].__setitem__(0, 20),
        ("shift",),
        "a shift of 20",
    ),
    "input-offset-5": (
        _set("input_offset", 5),
        ("input_offset",),
        "input_offset 5 where the zero point says 128",
    ),
    "output-offset-edited": (
        _set("output_offset", 17),
        ("output_offset",),
        "output_offset off its zero point",
    ),
    "act-min-above-max": (_set("act_min", 100), ("act_min",), "act_min above act_max"),
    "scale-1e-300": (_tensor("relu.out", "scale", 1e-300), ("scale",), "an activation scale of 1e-300"),
    "scale-negative": (_tensor("relu.out", "scale", -0.02), ("scale",), "a negative activation scale"),
    "weight-scale-1e300": (
        _tensor("conv.weight", "scale", [1e300] * 4),
        ("scale",),
        "weight scales of 1e300",
    ),
    "bias-scale-edited": (
        _tensor("conv.bias", "scale", [1.0] * 4),
        ("scale", "bias"),
        "bias scales not s_in*s_w",
    ),
    "zero-point-300": (_tensor("relu.out", "zero_point", 300), ("zero_point",), "an int8 zero point of 300"),
}
EVALUATED = ("multiplier-edited", "input-offset-5", "scale-1e-300")
"""Edits also tried with `evaluate` (it rebuilds the int8 graph from the same numbers)."""


def _param_case(name: str, edit: Edit, names: tuple[str, ...], about: str, command: str) -> Case:
    def setup(w: Workspace) -> Plan:
        params = kit.edited_params(w, edit)
        argv: tuple[str, ...]
        if command == "generate":
            argv = ("generate", "--params", params, "--model", "tiny.onnx", "-o", "gen")
        else:
            argv = ("evaluate", "tiny.onnx", params, "--data", "calib.npz")
        return Plan([refuse(*argv, names=[params, names])])

    return _case(f"{command}-{name}", "numbers", setup, about)


def _calibration(x: np.ndarray) -> Setup:
    def setup(w: Workspace) -> Plan:
        kit.tiny(w)
        w.npz("odd.npz", x=x)
        return Plan(
            [refuse("quantize", "tiny.onnx", "--calib", "odd.npz", "-o", "o.json", *QUICK, names=["odd.npz"])]
        )

    return setup


def _quantize_option(*option: str) -> Step:
    return usage(
        "quantize", "tiny.onnx", "--calib", "calib.npz", "-o", "o.json", *QUICK, *option, names=[option[-2]]
    )


def numbers_cases() -> list[Case]:
    n = "numbers"
    calib = models.calibration()
    cases = [_param_case(name, *spec, command="generate") for name, spec in PARAM_EDITS.items()]
    cases += [_param_case(name, *PARAM_EDITS[name], command="evaluate") for name in EVALUATED]
    cases += [
        _case(
            "generate-alignment-0",
            n,
            _steps(usage(*kit.GENERATE, "--alignment", "0", names=[("--alignment", "alignment")])),
            "--alignment 0",
        ),
        _case(
            "generate-alignment-3",
            n,
            _steps(usage(*kit.GENERATE, "--alignment", "3", names=[("--alignment", "alignment")])),
            "--alignment 3 (not a power of two)",
        ),
        _case(
            "generate-alignment-negative",
            n,
            _steps(usage(*kit.GENERATE, "--alignment", "-16", names=[("--alignment", "alignment")])),
            "--alignment -16",
        ),
        _case("quantize-workers-0", n, _steps(_quantize_option("--workers", "0")), "--workers 0"),
        _case("quantize-workers-negative", n, _steps(_quantize_option("--workers", "-3")), "--workers -3"),
        _case("quantize-samples-0", n, _steps(_quantize_option("--samples", "0")), "--samples 0"),
        _case("quantize-samples-negative", n, _steps(_quantize_option("--samples", "-3")), "--samples -3"),
        _case(
            "quantize-percentile-150",
            n,
            _steps(_quantize_option("--method", "percentile", "--percentile", "150")),
            "--percentile 150",
        ),
        _case(
            "quantize-percentile-nan",
            n,
            _steps(_quantize_option("--method", "percentile", "--percentile", "nan")),
            "--percentile nan",
        ),
        _case(
            "verify-cases-200000",
            n,
            _steps(usage(*kit.VERIFY, "--cases", "200000", names=["--cases"])),
            "--cases 200000",
            needs=("cmsis-nn", "gcc"),
        ),
        _case(
            "verify-timeout-0",
            n,
            _steps(usage(*kit.VERIFY, "--timeout", "0", names=["--timeout"])),
            "--timeout 0",
            needs=("cmsis-nn", "gcc"),
        ),
        _case(
            "verify-timeout-inf",
            n,
            _steps(usage(*kit.VERIFY, "--timeout", "inf", names=["--timeout"])),
            "--timeout inf",
            needs=("cmsis-nn", "gcc"),
        ),
        _case(
            "verify-seed-negative",
            n,
            _steps(usage(*kit.VERIFY, "--seed", "-1", names=["--seed"])),
            "--seed -1",
            needs=("cmsis-nn", "gcc"),
        ),
        _case(
            "calib-complex64",
            n,
            _calibration((calib + 1j * calib).astype(np.complex64)),
            "complex64 calibration data (the imaginary part would be dropped)",
        ),
        _case(
            "calib-near-float32-max",
            n,
            _calibration(np.full_like(calib, 3.0e38)),
            "calibration values near float32 max",
        ),
        _case(
            "calib-float64-overflow",
            n,
            _calibration(np.full(calib.shape, 1e300)),
            "float64 calibration values that overflow float32",
        ),
    ]
    return cases


# -- tracebacks -------------------------------------------------------------------------------------------


def _readonly_generate(w: Workspace) -> Plan:
    w.copy("tiny", *kit.TINY, "gen")
    if not kit.read_only(w, "gen"):
        raise RuntimeError("cannot make a folder read-only here (needs chattr as root)")
    step = refuse(*kit.GENERATE, "--alignment", "32", names=["gen"])
    return Plan([step], protect=("gen/model.h", "gen/model.c", "gen/model_data.c"))


def _readonly_quantize(w: Workspace) -> Plan:
    kit.tiny(w)
    w.path("ro").mkdir()
    if not kit.read_only(w, "ro"):
        raise RuntimeError("cannot make a folder read-only here (needs chattr as root)")
    return Plan(
        [refuse("quantize", "tiny.onnx", "--calib", "calib.npz", "-o", "ro/p.json", *QUICK, names=["ro"])]
    )


def _with(files: dict[str, bytes | str], *steps: Step) -> Setup:
    def setup(w: Workspace) -> Plan:
        kit.tiny(w)
        for name, content in files.items():
            w.write(name, content)
        return Plan(list(steps))

    return setup


def _model_file(content: Callable[[], bytes], name: str = "bad.onnx") -> Setup:
    def setup(w: Workspace) -> Plan:
        kit.tiny(w)
        w.write(name, content())
        return Plan([refuse("quantize", name, "--calib", "calib.npz", "-o", "o.json", *QUICK, names=[name])])

    return setup


def _graph(change: Callable[[onnx.ModelProto], None]) -> Callable[[], bytes]:
    def build() -> bytes:
        model = models.tiny()
        change(model)
        return bytes(model.SerializeToString())

    return build


def _opset(model: onnx.ModelProto) -> None:
    model.opset_import[0].version = 99


def _dangling_input(model: onnx.ModelProto) -> None:
    model.graph.node[1].input[0] = "no_such_tensor"


def _params(content: str | bytes, *, command: str = "generate") -> Setup:
    def setup(w: Workspace) -> Plan:
        kit.tiny(w)
        w.write("bad.params.json", content)
        if command == "generate":
            argv: tuple[str, ...] = (
                "generate",
                "--params",
                "bad.params.json",
                "--model",
                "tiny.onnx",
                "-o",
                "gen",
            )
        else:
            argv = ("evaluate", "tiny.onnx", "bad.params.json", "--data", "calib.npz")
        return Plan([refuse(*argv, names=["bad.params.json"])])

    return setup


def _kernel(command: str) -> Setup:
    def setup(w: Workspace) -> Plan:
        params = kit.edited_params(w, lambda d: kit.layer(d).__setitem__("kernel", "arm_no_such_kernel_s8"))
        if command == "generate":
            argv: tuple[str, ...] = ("generate", "--params", params, "--model", "tiny.onnx", "-o", "gen")
        else:
            argv = ("evaluate", "tiny.onnx", params, "--data", "calib.npz")
        return Plan([refuse(*argv, names=[params, ("arm_no_such_kernel_s8", "kernel")])])

    return setup


def _truncated(name: str) -> Setup:
    def setup(w: Workspace) -> Plan:
        kit.tiny(w)
        data = w.path(name).read_bytes()
        w.path(name).write_bytes(data[: len(data) // 2])
        argv = ("quantize", "tiny.onnx", "--calib", "calib.npz", "-o", "o.json", *QUICK)
        return Plan([refuse(*argv, names=[name])])

    return setup


def _calib_refused(name: str) -> Step:
    return refuse("quantize", "tiny.onnx", "--calib", name, "-o", "o.json", *QUICK, names=[name])


def _flash_option(option: str, value: str) -> Step:
    return usage(*kit.FLASH_QEMU, option, value, names=[option])


def tracebacks_cases() -> list[Case]:
    t = "tracebacks"
    garbage_zip = b"PK\x03\x04" + bytes(range(256)) * 8
    verify_needs = ("cmsis-nn", "gcc")
    quantize_o = ("quantize", "tiny.onnx", "--calib", "calib.npz", *QUICK, "-o")
    return [
        _case(
            "generate-read-only-output",
            t,
            _readonly_generate,
            "generate into a read-only folder",
            needs=("read-only",),
        ),
        _case(
            "quantize-read-only-output",
            t,
            _readonly_quantize,
            "quantize -o into a read-only folder",
            needs=("read-only",),
        ),
        _case(
            "generate-output-is-a-file",
            t,
            _with({"out.txt": "keep\n"}, refuse(*kit.GENERATE[:-1], "out.txt", names=["out.txt"])),
            "generate -o naming an existing file",
        ),
        _case(
            "quantize-output-is-a-folder",
            t,
            _with({"outdir/keep.txt": "keep\n"}, refuse(*quantize_o, "outdir", names=["outdir"])),
            "quantize -o naming an existing folder",
        ),
        _case(
            "evaluate-report-json-is-a-folder",
            t,
            _with({"r/keep.txt": "k\n"}, refuse(*kit.EVALUATE, "--report-json", "r", names=["r"])),
            "evaluate --report-json naming a folder",
        ),
        _case(
            "verify-build-dir-is-a-file",
            t,
            _with({"b.txt": "keep\n"}, refuse(*kit.VERIFY, "--build-dir", "b.txt", names=["b.txt"])),
            "verify --build-dir naming a file",
            needs=verify_needs,
        ),
        _case(
            "build-build-dir-is-a-file",
            t,
            _with(
                {"b.txt": "keep\n"},
                refuse(
                    "build",
                    "--target",
                    "host",
                    "--model",
                    "tiny.onnx",
                    "--params",
                    "tiny.params.json",
                    "--build-dir",
                    "b.txt",
                    names=["b.txt"],
                ),
            ),
            "build --build-dir naming a file",
            needs=verify_needs,
        ),
        _case(
            "flash-verify-gdb-port-99999",
            t,
            _steps(_flash_option("--gdb-port", "99999")),
            "--gdb-port 99999",
            needs=("cmsis-nn", "arm"),
        ),
        _case(
            "flash-verify-gdb-port-negative",
            t,
            _steps(_flash_option("--gdb-port", "-1")),
            "--gdb-port -1",
            needs=("cmsis-nn", "arm"),
        ),
        _case(
            "flash-verify-uart-port-70000",
            t,
            _steps(_flash_option("--uart-port", "70000")),
            "--uart-port 70000",
            needs=("cmsis-nn", "arm"),
        ),
        _case(
            "verify-timeout-nan",
            t,
            _steps(usage(*kit.VERIFY, "--timeout", "nan", names=["--timeout"])),
            "--timeout nan",
            needs=verify_needs,
        ),
        _case(
            "verify-timeout-negative",
            t,
            _steps(usage(*kit.VERIFY, "--timeout", "-5", names=["--timeout"])),
            "--timeout -5",
            needs=verify_needs,
        ),
        _case(
            "quantize-npz-zip-header-garbage",
            t,
            _with({"g.npz": garbage_zip}, _calib_refused("g.npz")),
            "a zip header followed by garbage as .npz",
        ),
        _case("quantize-npz-truncated", t, _truncated("calib.npz"), "a calibration .npz cut in half"),
        _case(
            "quantize-npy-garbage",
            t,
            _with({"g.npy": b"\x93NUMPY garbage" * 10}, _calib_refused("g.npy")),
            "an .npy with a broken header",
        ),
        _case(
            "generate-kernel-unknown",
            t,
            _kernel("generate"),
            "a params JSON naming a kernel that does not exist",
        ),
        _case(
            "evaluate-kernel-unknown", t, _kernel("evaluate"), "evaluate with a kernel that does not exist"
        ),
        _case(
            "quantize-external-data-missing",
            t,
            _missing_external,
            "a model whose external data file is missing",
        ),
        _case(
            "quantize-model-not-onnx",
            t,
            _model_file(lambda: b"\x08\x07garbage" * 100),
            "a model file of garbage",
        ),
        _case("quantize-model-empty", t, _model_file(lambda: b""), "an empty model file"),
        _case(
            "quantize-model-text",
            t,
            _model_file(lambda: b"this is not a model\n"),
            "a text file as model",
        ),
        _case("quantize-model-truncated", t, _truncated("tiny.onnx"), "a model file cut in half"),
        _case("quantize-model-opset-99", t, _model_file(_graph(_opset)), "a model importing opset 99"),
        _case(
            "quantize-model-dangling-input",
            t,
            _model_file(_graph(_dangling_input)),
            "a node reading a tensor nothing produces",
        ),
        _case(
            "generate-params-not-json",
            t,
            _params(b"\x00\x01\x02 not json"),
            "a params file of binary garbage",
        ),
        _case("generate-params-empty", t, _params(""), "an empty params file"),
        _case("generate-params-array", t, _params("[1, 2, 3]"), "a params JSON that is an array"),
        _case("generate-params-nan", t, _params('{"format": NaN}'), "a params JSON with NaN"),
        _case(
            "generate-params-latin1",
            t,
            _params('{"format": "caf\xe9"}'.encode("latin-1")),
            "a params file that is not UTF-8",
        ),
        _case("evaluate-params-truncated", t, _truncated_params, "a params JSON cut in half"),
        _case(
            "report-evaluation-garbage",
            t,
            _with(
                {"e.json": "{]"}, refuse("report", "--evaluation", "e.json", "-o", "r.html", names=["e.json"])
            ),
            "fixpoint report on a broken evaluation JSON",
        ),
        _case("conformance-vectors-garbage", t, _vectors, "conformance vectors that are garbage"),
        _case(
            "verify-src-header-garbage",
            t,
            _with(
                {"src/model.h": "#define MODEL_LAYER_COUNT banana\n"},
                refuse(
                    "verify",
                    "--target",
                    "host",
                    "--src",
                    "src",
                    "--model",
                    "tiny.onnx",
                    "--params",
                    "tiny.params.json",
                    names=["model.h"],
                ),
            ),
            "verify --src with a broken model.h",
            needs=verify_needs,
        ),
        _case(
            "cmsis-nn-status-path-is-file",
            t,
            _with({"f.txt": "x"}, refuse("cmsis-nn", "status", "--path", "f.txt", names=["f.txt"])),
            "cmsis-nn status --path naming a file",
        ),
    ]


def _missing_external(w: Workspace) -> Plan:
    kit.tiny(w)
    models.save(models.with_external_weights("weights.bin"), w.path("ext.onnx"))
    return Plan(
        [
            refuse(
                "quantize",
                "ext.onnx",
                "--calib",
                "calib.npz",
                "-o",
                "o.json",
                *QUICK,
                names=[("weights.bin", "ext.onnx")],
            )
        ]
    )


def _truncated_params(w: Workspace) -> Plan:
    kit.tiny(w)
    text = w.path("tiny.params.json").read_text()
    w.write("cut.params.json", text[: len(text) // 2])
    return Plan([refuse(*kit.EVALUATE[:2], "cut.params.json", *kit.EVALUATE[3:], names=["cut.params.json"])])


def _vectors(w: Workspace) -> Plan:
    w.write("vectors/arm_convolve_s8/case.json", '{"kernel": "arm_convolve_s8", "inputs": 5}')
    w.write("vectors/arm_convolve_s8/case.npz", b"PK\x03\x04garbage")
    return Plan([refuse("conformance", "--vectors", "vectors", names=[("case", "vectors")])])


# -- unclear ----------------------------------------------------------------------------------------------

BOARD = ("flash-verify", "--no-float-metrics", "--cases", "1", "--timeout", "20")
BOARD_NEEDS = ("cmsis-nn", "arm")


def _board_missing_device(w: Workspace) -> Plan:
    kit.tiny(w)
    kit.board_project(w, "/dev/ttyFXP-missing0", f"127.0.0.1:{kit.free_port()}")
    return Plan([refuse(*BOARD, names=["/dev/ttyFXP-missing0"])])


def _board_socket_refused(w: Workspace) -> Plan:
    kit.tiny(w)
    port = kit.free_port()
    kit.board_project(w, f"socket://127.0.0.1:{port}", f"127.0.0.1:{kit.free_port()}")
    return Plan([refuse(*BOARD, names=[f"127.0.0.1:{port}"])])


def _board_no_gdb_server(w: Workspace) -> Plan:
    kit.tiny(w)
    port = kit.free_port()
    kit.board_project(w, kit.pty(w, locked=False), f"127.0.0.1:{port}")
    return Plan([refuse(*BOARD, names=[f"127.0.0.1:{port}"])])


def _qemu_port_busy(option: str) -> Setup:
    def setup(w: Workspace) -> Plan:
        kit.tiny(w)
        port = kit.listening_port(w)
        return Plan([refuse(*kit.FLASH_QEMU, option, str(port), names=[str(port)])])

    return setup


def _two_io(w: Workspace) -> Plan:
    kit.tiny(w)
    models.save(models.two_inputs_two_outputs(), w.path("two.onnx"))
    calib = models.calibration()
    w.npz("two.npz", x=calib)
    return Plan(
        [
            refuse(
                "quantize",
                "two.onnx",
                "--calib",
                "two.npz",
                "-o",
                "o.json",
                *QUICK,
                names=["two.onnx", ("2 inputs", "two inputs")],
            )
        ]
    )


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


def _unsupported(w: Workspace, name: str = "trig") -> Plan:
    kit.tiny(w)
    model = models.tiny()
    model.graph.node.insert(2, helper.make_node("Sin", ["relu.out"], ["sin.out"], name=name))
    model.graph.node[3].input[0] = "sin.out"
    w.write("sin.onnx", model.SerializeToString())
    return Plan(
        [
            refuse(
                "quantize", "sin.onnx", "--calib", "calib.npz", "-o", "o.json", *QUICK, names=["trig", "Sin"]
            )
        ]
    )


def _symbolic_input(w: Workspace) -> Plan:
    kit.tiny(w)
    model = models.tiny()
    for dim, name in zip(model.graph.input[0].type.tensor_type.shape.dim, "NCHW", strict=True):
        dim.ClearField("dim_value")
        dim.dim_param = name
    w.write("sym.onnx", model.SerializeToString())
    return Plan(
        [refuse("quantize", "sym.onnx", "--calib", "calib.npz", "-o", "o.json", *QUICK, names=["sym.onnx"])]
    )


def unclear_cases() -> list[Case]:
    u = "unclear"
    return [
        _case(
            "board-serial-device-missing",
            u,
            _board_missing_device,
            "[flash] serial names a missing device",
            needs=BOARD_NEEDS,
        ),
        _case(
            "board-serial-socket-refused",
            u,
            _board_socket_refused,
            "[flash] serial is a socket nobody listens on",
            needs=BOARD_NEEDS,
        ),
        _case(
            "board-no-gdb-server",
            u,
            _board_no_gdb_server,
            "[flash] gdb_remote where no GDB server listens",
            needs=BOARD_NEEDS,
        ),
        _case(
            "qemu-gdb-port-busy",
            u,
            _qemu_port_busy("--gdb-port"),
            "--gdb-port held by another program",
            needs=BOARD_NEEDS,
        ),
        _case(
            "qemu-uart-port-busy",
            u,
            _qemu_port_busy("--uart-port"),
            "--uart-port held by another program",
            needs=BOARD_NEEDS,
        ),
        _case("quantize-two-inputs-two-outputs", u, _two_io, "a two-input, two-output model"),
        _case("quantize-unsupported-op", u, _unsupported, "a Sin node CMSIS-NN cannot run"),
        _case(
            "quantize-unsupported-op-hostile-name",
            u,
            lambda w: _unsupported(w, "trig\rfixpoint quantize: all good\n\x1b[32mPASS\x1b[0m"),
            "a Sin node whose name holds CR, a newline and ESC sequences: still one line, nothing forged",
        ),
        _case("quantize-symbolic-input", u, _symbolic_input, "an input of symbolic dimensions only"),
        _case(
            "generate-toml-many-bad-values",
            u,
            _with({"fixpoint.toml": BAD_TOML}, refuse("generate", names=["fixpoint.toml"])),
            "fixpoint.toml with nine bad values: one line naming the file",
        ),
        _case(
            "verify-toml-many-bad-values",
            u,
            _with({"fixpoint.toml": BAD_TOML}, refuse("verify", names=["fixpoint.toml"])),
            "verify with nine bad values in fixpoint.toml",
        ),
        _case(
            "generate-toml-syntax-error",
            u,
            _with(
                {"fixpoint.toml": 'model = "a.onnx\n[board\n'}, refuse("generate", names=["fixpoint.toml"])
            ),
            "fixpoint.toml that is not TOML",
        ),
        _case(
            "generate-toml-binary",
            u,
            _with({"fixpoint.toml": bytes(range(256))}, refuse("generate", names=["fixpoint.toml"])),
            "fixpoint.toml of binary bytes",
        ),
        _case(
            "verify-toml-unknown-target",
            u,
            _with(
                {"fixpoint.toml": 'target = "toaster"\n'},
                refuse("verify", "--model", "tiny.onnx", "--params", "tiny.params.json", names=["toaster"]),
            ),
            "an unknown target",
        ),
    ]


def all_cases() -> list[Case]:
    return [*numbers_cases(), *tracebacks_cases(), *unclear_cases()]
