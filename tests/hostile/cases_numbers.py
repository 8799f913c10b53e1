"""Cases of the classes "numbers" (values believed without checking), "tracebacks" (errors that must be
messages) and "unclear" (messages that must name the real cause)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import onnx
from onnx import helper

from tests.hostile import kit, models
from tests.hostile.kit import case as _case
from tests.hostile.runner import Case, Plan, Setup, Step, refuse, usage
from tests.hostile.workspace import Workspace

Edit = Callable[[Any], None]
VERIFY_NEEDS = ("cmsis-nn", "gcc")
FLASH_NEEDS = ("cmsis-nn", "arm")


def _with(files: dict[str, bytes | str], *steps: Step) -> Setup:
    """The tiny model's workspace with `files` added, then `steps`."""

    def setup(w: Workspace) -> Plan:
        kit.tiny(w)
        for name, content in files.items():
            w.write(name, content)
        return Plan(list(steps))

    return setup


def _steps(*steps: Step) -> Setup:
    return _with({}, *steps)


def _option(
    klass: str,
    base: tuple[str, ...],
    option: str,
    value: str,
    *,
    names: str | tuple[str, ...] = "",
    about: str = "",
    needs: tuple[str, ...] = (),
    before: tuple[str, ...] = (),
) -> Case:
    """`base` with `option value` out of range: exit 2 naming the option (or `names`). The case's id is
    <command>-<option>-<value>, a negative value spelled "negative"."""
    label = "negative" if value.startswith("-") else value
    step = usage(*base, *before, option, value, names=[names or option])
    return _case(f"{base[0]}-{option[2:]}-{label}", klass, _steps(step), about or f"{option} {value}", needs)


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
        return Plan([refuse(*kit.reading(command, params), names=[params, names])])

    return _case(f"{command}-{name}", "numbers", setup, about)


def _calibration(x: np.ndarray) -> Setup:
    def setup(w: Workspace) -> Plan:
        kit.tiny(w)
        w.npz("odd.npz", x=x)
        return Plan([refuse(*kit.quantize(calib="odd.npz"), names=["odd.npz"])])

    return setup


def numbers_cases() -> list[Case]:
    n = "numbers"
    calib = models.calibration()
    alignment = ("--alignment", "alignment")
    percentile = ("--method", "percentile")
    cases = [_param_case(name, *spec, command="generate") for name, spec in PARAM_EDITS.items()]
    cases += [_param_case(name, *PARAM_EDITS[name], command="evaluate") for name in EVALUATED]
    cases += [
        _option(n, kit.GENERATE, "--alignment", "0", names=alignment),
        _option(
            n, kit.GENERATE, "--alignment", "3", names=alignment, about="--alignment 3 (not a power of two)"
        ),
        _option(n, kit.GENERATE, "--alignment", "-16", names=alignment),
        *(_option(n, kit.quantize(), o, v) for o in ("--workers", "--samples") for v in ("0", "-3")),
        *(_option(n, kit.quantize(), "--percentile", v, before=percentile) for v in ("150", "nan")),
        *(
            _option(n, kit.VERIFY, option, value, needs=VERIFY_NEEDS)
            for option, value in (
                ("--cases", "200000"),
                ("--timeout", "0"),
                ("--timeout", "inf"),
                ("--seed", "-1"),
            )
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
    kit.read_only(w, "gen")
    step = refuse(*kit.GENERATE, "--alignment", "32", names=["gen"])
    return Plan([step], protect=("gen/model.h", "gen/model.c", "gen/model_data.c"))


def _readonly_quantize(w: Workspace) -> Plan:
    kit.tiny(w)
    w.path("ro").mkdir()
    kit.read_only(w, "ro")
    return Plan([refuse(*kit.quantize(out="ro/p.json"), names=["ro"])])


def _model_file(content: Callable[[], bytes], name: str = "bad.onnx") -> Setup:
    def setup(w: Workspace) -> Plan:
        kit.tiny(w)
        w.write(name, content())
        return Plan([refuse(*kit.quantize(name), names=[name])])

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


def _params(content: str | bytes) -> Setup:
    return _with(
        {"bad.params.json": content}, refuse(*kit.generate("bad.params.json"), names=["bad.params.json"])
    )


def _kernel(command: str) -> Setup:
    def setup(w: Workspace) -> Plan:
        params = kit.edited_params(w, lambda d: kit.layer(d).__setitem__("kernel", "arm_no_such_kernel_s8"))
        return Plan(
            [refuse(*kit.reading(command, params), names=[params, ("arm_no_such_kernel_s8", "kernel")])]
        )

    return setup


def _truncated(name: str) -> Setup:
    def setup(w: Workspace) -> Plan:
        kit.tiny(w)
        data = w.path(name).read_bytes()
        w.path(name).write_bytes(data[: len(data) // 2])
        return Plan([refuse(*kit.quantize(), names=[name])])

    return setup


def _calib_refused(name: str) -> Step:
    return refuse(*kit.quantize(calib=name), names=[name])


def tracebacks_cases() -> list[Case]:
    t = "tracebacks"
    garbage_zip = b"PK\x03\x04" + bytes(range(256)) * 8
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
            _with({"outdir/keep.txt": "keep\n"}, refuse(*kit.quantize(out="outdir"), names=["outdir"])),
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
            needs=VERIFY_NEEDS,
        ),
        _case(
            "build-build-dir-is-a-file",
            t,
            _with(
                {"b.txt": "keep\n"},
                refuse(
                    "build", "--target", "host", *kit.MODEL_PARAMS, "--build-dir", "b.txt", names=["b.txt"]
                ),
            ),
            "build --build-dir naming a file",
            needs=VERIFY_NEEDS,
        ),
        *(
            _option(t, kit.FLASH_QEMU, option, value, needs=FLASH_NEEDS)
            for option, value in (("--gdb-port", "99999"), ("--gdb-port", "-1"), ("--uart-port", "70000"))
        ),
        *(_option(t, kit.VERIFY, "--timeout", value, needs=VERIFY_NEEDS) for value in ("nan", "-5")),
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
                refuse("verify", "--target", "host", "--src", "src", *kit.MODEL_PARAMS, names=["model.h"]),
            ),
            "verify --src with a broken model.h",
            needs=VERIFY_NEEDS,
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
    return Plan([refuse(*kit.quantize("ext.onnx"), names=[("weights.bin", "ext.onnx")])])


def _truncated_params(w: Workspace) -> Plan:
    kit.tiny(w)
    text = w.path("tiny.params.json").read_text()
    w.write("cut.params.json", text[: len(text) // 2])
    return Plan([refuse(*kit.evaluate("cut.params.json"), names=["cut.params.json"])])


def _vectors(w: Workspace) -> Plan:
    w.write("vectors/arm_convolve_s8/case.json", '{"kernel": "arm_convolve_s8", "inputs": 5}')
    w.write("vectors/arm_convolve_s8/case.npz", b"PK\x03\x04garbage")
    return Plan([refuse("conformance", "--vectors", "vectors", names=[("case", "vectors")])])


# -- unclear ----------------------------------------------------------------------------------------------


def _board_missing_device(w: Workspace) -> Plan:
    kit.tiny(w)
    kit.board_project(w, "/dev/ttyFXP-missing0", f"127.0.0.1:{kit.free_port()}")
    return Plan([refuse(*kit.BOARD_FLASH, names=["/dev/ttyFXP-missing0"])])


def _board_socket_refused(w: Workspace) -> Plan:
    kit.tiny(w)
    port = kit.free_port()
    kit.board_project(w, f"socket://127.0.0.1:{port}", f"127.0.0.1:{kit.free_port()}")
    return Plan([refuse(*kit.BOARD_FLASH, names=[f"127.0.0.1:{port}"])])


def _board_no_gdb_server(w: Workspace) -> Plan:
    kit.tiny(w)
    port = kit.free_port()
    kit.board_project(w, kit.pty(w, locked=False), f"127.0.0.1:{port}")
    return Plan([refuse(*kit.BOARD_FLASH, names=[f"127.0.0.1:{port}"])])


def _qemu_port_busy(option: str) -> Setup:
    def setup(w: Workspace) -> Plan:
        kit.tiny(w)
        port = kit.listening_port(w)
        return Plan([refuse(*kit.FLASH_QEMU, option, str(port), names=[str(port)])])

    return setup


def _two_io(w: Workspace) -> Plan:
    kit.tiny(w)
    models.save(models.two_inputs_two_outputs(), w.path("two.onnx"))
    w.npz("two.npz", x=models.calibration())
    return Plan(
        [refuse(*kit.quantize("two.onnx", "two.npz"), names=["two.onnx", ("2 inputs", "two inputs")])]
    )


def _unsupported(w: Workspace, name: str = "trig") -> Plan:
    kit.tiny(w)
    model = models.tiny()
    model.graph.node.insert(2, helper.make_node("Sin", ["relu.out"], ["sin.out"], name=name))
    model.graph.node[3].input[0] = "sin.out"
    w.write("sin.onnx", model.SerializeToString())
    return Plan([refuse(*kit.quantize("sin.onnx"), names=["trig", "Sin"])])


def _symbolic_input(w: Workspace) -> Plan:
    kit.tiny(w)
    model = models.tiny()
    for dim, name in zip(model.graph.input[0].type.tensor_type.shape.dim, "NCHW", strict=True):
        dim.ClearField("dim_value")
        dim.dim_param = name
    w.write("sym.onnx", model.SerializeToString())
    return Plan([refuse(*kit.quantize("sym.onnx"), names=["sym.onnx"])])


def unclear_cases() -> list[Case]:
    u = "unclear"
    return [
        _case(
            "board-serial-device-missing",
            u,
            _board_missing_device,
            "[flash] serial names a missing device",
            needs=FLASH_NEEDS,
        ),
        _case(
            "board-serial-socket-refused",
            u,
            _board_socket_refused,
            "[flash] serial is a socket nobody listens on",
            needs=FLASH_NEEDS,
        ),
        _case(
            "board-no-gdb-server",
            u,
            _board_no_gdb_server,
            "[flash] gdb_remote where no GDB server listens",
            needs=FLASH_NEEDS,
        ),
        _case(
            "qemu-gdb-port-busy",
            u,
            _qemu_port_busy("--gdb-port"),
            "--gdb-port held by another program",
            needs=FLASH_NEEDS,
        ),
        _case(
            "qemu-uart-port-busy",
            u,
            _qemu_port_busy("--uart-port"),
            "--uart-port held by another program",
            needs=FLASH_NEEDS,
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
            _with({"fixpoint.toml": kit.BAD_TOML}, refuse("generate", names=["fixpoint.toml"])),
            "fixpoint.toml with nine bad values: one line naming the file",
        ),
        _case(
            "verify-toml-many-bad-values",
            u,
            _with({"fixpoint.toml": kit.BAD_TOML}, refuse("verify", names=["fixpoint.toml"])),
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
                refuse("verify", *kit.MODEL_PARAMS, names=["toaster"]),
            ),
            "an unknown target",
        ),
    ]
