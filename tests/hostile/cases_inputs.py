"""Cases of the classes "exhaustion" (work without end: constant folding, FIFOs, /dev/zero, deep trees and
JSON, decompression bombs) and "boundary" (paths from settings, a JSON or a model that leave the
workspace)."""

from __future__ import annotations

import socket
from collections.abc import Callable

import numpy as np

from tests.hostile import kit, models
from tests.hostile.kit import case as _case
from tests.hostile.runner import HANG_TIMEOUT_S, Case, Plan, Setup, Step, refuse, usage
from tests.hostile.workspace import Workspace


def _check(*argv: str) -> Step:
    """`fixpoint check`: findings or none (exit 0 or 1), but an answer within the hang time limit."""
    return Step(("check", *argv), frozenset({0, 1}), timeout=HANG_TIMEOUT_S)


Names = tuple[str | tuple[str, ...], ...]


def _quantize(model: str, calib: str = "calib.npz", names: Names = ()) -> Step:
    argv = kit.quantize(model, calib, "out.params.json")
    return refuse(*argv, names=names or (model,), timeout=HANG_TIMEOUT_S)


# -- constant folding ---------------------------------------------------------------------------------------

FOLDS: dict[str, tuple[str, str, Names]] = {
    "loop": ("loop-1e12", "a constant Loop of 10^12 iterations", ("loop.onnx", ("endless_loop", "Loop"))),
    "huge": (
        "constant-of-shape-6gb",
        "ConstantOfShape 1x1x40000x40000",
        ("huge.onnx", ("huge_constant", "ConstantOfShape")),
    ),
}
"""models.constant's kind -> (the cases' label, what the model holds, what the refusal must name)."""


def _fold_cases(kind: str) -> list[Case]:
    label, what, names = FOLDS[kind]
    model = f"{kind}.onnx"

    def build(w: Workspace) -> None:
        kit.tiny(w)
        models.save(models.constant(kind), w.path(model))

    def quantize(w: Workspace) -> Plan:
        build(w)
        return Plan([_quantize(model, names=names)])

    def reading(command: str) -> Setup:
        def setup(w: Workspace) -> Plan:
            build(w)
            argv = kit.reading(command, "tiny.params.json", model)
            return Plan([refuse(*argv, names=[names[0]], timeout=HANG_TIMEOUT_S)])

        return setup

    def check(w: Workspace) -> Plan:
        """The model named by the only params JSON of a tree without fixpoint.toml: opening it is enough."""
        w.copy_all("tree")
        kit.tree_model(w, kind)
        return Plan([_check(".")])

    return [
        _case(f"quantize-{label}", "exhaustion", quantize, f"quantize a model with {what}"),
        _case(f"evaluate-{label}", "exhaustion", reading("evaluate"), f"evaluate a model with {what}"),
        _case(f"generate-{label}", "exhaustion", reading("generate"), f"generate from a model with {what}"),
        _case(
            f"check-{label}-params",
            "exhaustion",
            check,
            f"check a tree whose params JSON names a model with {what}",
        ),
    ]


# -- special files in a firmware tree ---------------------------------------------------------------------


def _tree_with(change: Callable[[Workspace], object]) -> Setup:
    def setup(w: Workspace) -> Plan:
        w.copy_all("tree")
        change(w)
        return Plan([_check(".")])

    return setup


def _unix_socket(w: Workspace, relative: str) -> None:
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(w.path(relative)))
    w.later(sock.close)


def _fifo(w: Workspace, relative: str) -> None:
    """A FIFO at `relative`, in place of the file there."""
    w.path(relative).unlink(missing_ok=True)
    kit.fifo(w, relative)


def _devzero(w: Workspace, relative: str) -> None:
    """A symlink to /dev/zero at `relative`, in place of the file there."""
    w.path(relative).unlink(missing_ok=True)
    kit.symlink(w, relative, "/dev/zero")


TREE_CASES: dict[str, tuple[Callable[[Workspace], object], str]] = {
    "fifo-source": (lambda w: kit.fifo(w, "src/pipe.c"), "a FIFO named src/pipe.c"),
    "fifo-makefile": (lambda w: kit.fifo(w, "Makefile"), "a FIFO named Makefile"),
    "fifo-params": (lambda w: kit.fifo(w, "model/other.params.json"), "a FIFO named like a params JSON"),
    "fifo-project": (lambda w: _fifo(w, "fixpoint.toml"), "fixpoint.toml is a FIFO"),
    "devzero-source": (lambda w: kit.symlink(w, "src/zero.c", "/dev/zero"), "src/zero.c -> /dev/zero"),
    "devzero-header": (lambda w: kit.symlink(w, "src/zero.h", "/dev/zero"), "src/zero.h -> /dev/zero"),
    "devzero-cmake": (lambda w: kit.symlink(w, "CMakeLists.txt", "/dev/zero"), "CMakeLists.txt -> /dev/zero"),
    "devzero-params": (
        lambda w: kit.symlink(w, "model/zero.params.json", "/dev/zero"),
        "a params JSON -> /dev/zero",
    ),
    "urandom-source": (
        lambda w: kit.symlink(w, "src/random.c", "/dev/urandom"),
        "src/random.c -> /dev/urandom",
    ),
    "socket-source": (lambda w: _unix_socket(w, "src/socket.c"), "a UNIX socket named src/socket.c"),
    "nested-1500": (lambda w: kit.nested_dirs(w, "src/deep", 1500), "1,500 nested folders"),
    "symlink-cycle": (lambda w: kit.symlink(w, "src/cycle", ".."), "src/cycle -> .. (a folder cycle)"),
    "deep-json-arrays": (
        lambda w: w.write("model/deep.params.json", kit.deep_json()),
        "a params JSON of 200,000 nested arrays",
    ),
    "deep-json-objects": (
        lambda w: w.write("model/deep.params.json", kit.deep_json(kind="{}")),
        "200,000 nested objects",
    ),
    "huge-source": (lambda w: w.write("src/huge.c", "int x;\n" * 11_000_000), "a 77 MB C source"),
    "dangling-symlink": (lambda w: kit.symlink(w, "src/gone.c", "nowhere.c"), "src/gone.c -> a missing file"),
    "symlink-outside": (
        lambda w: kit.symlink(w, "src/secret.c", w.outside / "keep.txt"),
        "a source linking outside",
    ),
}


def _special(argv: tuple[str, ...], relative: str, make: Callable[[Workspace, str], object]) -> Setup:
    def setup(w: Workspace) -> Plan:
        kit.tiny(w)
        make(w, relative)
        return Plan([refuse(*argv, names=[relative], timeout=HANG_TIMEOUT_S)])

    return setup


def _special_file_cases() -> list[Case]:
    commands: dict[str, tuple[tuple[str, ...], str]] = {
        "quantize-model": (kit.quantize("model.onnx"), "model.onnx"),
        "quantize-calib": (kit.quantize(calib="calib.npz"), "calib.npz"),
        "quantize-calib-npy": (kit.quantize(calib="calib.npy"), "calib.npy"),
        "evaluate-params": (kit.evaluate("p.params.json"), "p.params.json"),
        "generate-params": (kit.generate("p.params.json"), "p.params.json"),
        "generate-project": (("generate", "--project", "fixpoint.toml"), "fixpoint.toml"),
        "report-evaluation": (
            ("report", "--evaluation", "evaluation.json", "-o", "r.html"),
            "evaluation.json",
        ),
    }
    cases = []
    for label, (argv, relative) in commands.items():
        for kind, make in (("fifo", _fifo), ("devzero", _devzero)):
            what = "a FIFO" if kind == "fifo" else "a symlink to /dev/zero"
            cases.append(
                _case(
                    f"{label}-{kind}", "exhaustion", _special(argv, relative, make), f"{relative} is {what}"
                )
            )
    return cases


def _images(w: Workspace, png: bytes) -> Plan:
    kit.tiny(w)
    w.write("images/a.png", models.png(8, 8))
    w.write("images/b.png", png)
    return Plan([_quantize("tiny.onnx", "images", names=("b.png",))])


def _zip_bomb(w: Workspace) -> Plan:
    kit.tiny(w)
    w.copy("zipbomb", "bomb.npz")
    return Plan([_quantize("tiny.onnx", "bomb.npz", names=("bomb.npz",))])


def _npy_header_lies(w: Workspace) -> Plan:
    """An .npy whose header declares 10^12 samples over 64 bytes of data."""
    kit.tiny(w)
    header = np.lib.format.header_data_from_array_1_0(np.zeros((1, 1, 8, 8), np.float32))
    header["shape"] = (10**12, 1, 8, 8)
    with open(w.path("lies.npy"), "wb") as handle:
        np.lib.format.write_array_header_1_0(handle, header)
        handle.write(bytes(64))
    return Plan([_quantize("tiny.onnx", "lies.npy", names=("lies.npy",))])


def _deep_params(kind: str, command: str) -> Setup:
    def setup(w: Workspace) -> Plan:
        kit.tiny(w)
        w.write("deep.params.json", kit.deep_json(kind=kind))
        argv = kit.reading(command, "deep.params.json")
        return Plan([refuse(*argv, names=["deep.params.json"], timeout=HANG_TIMEOUT_S)])

    return setup


def _deep_json_cases() -> list[Case]:
    return [
        _case(
            f"{command}-deep-json-{'arrays' if kind == '[]' else 'objects'}",
            "exhaustion",
            _deep_params(kind, command),
            f"{command} with a params JSON of 200,000 nested {'arrays' if kind == '[]' else 'objects'}",
        )
        for command in ("evaluate", "generate")
        for kind in ("[]", "{}")
    ]


def exhaustion_cases() -> list[Case]:
    cases = [*_fold_cases("loop"), *_fold_cases("huge")]
    cases += [
        _case(f"check-{name}", "exhaustion", _tree_with(change), f"fixpoint check on a tree with {about}")
        for name, (change, about) in TREE_CASES.items()
    ]
    cases += _special_file_cases()
    cases += _deep_json_cases()
    cases += [
        _case(
            "quantize-png-bomb-900mp",
            "exhaustion",
            lambda w: _images(w, models.bomb_png()),
            "a calibration image whose header claims 30000x30000 pixels",
        ),
        _case(
            "quantize-png-81mp",
            "exhaustion",
            lambda w: _images(w, models.png(9000, 9000)),
            "a 9000x9000 calibration image: past the 64 M pixel limit, under Pillow's warning",
        ),
        _case("quantize-npz-zip-bomb", "exhaustion", _zip_bomb, "an .npz whose x inflates to 3.5 GB"),
        _case("quantize-npy-header-lies", "exhaustion", _npy_header_lies, "an .npy declaring 10^12 samples"),
    ]
    return cases


# -- boundary ---------------------------------------------------------------------------------------------


def _toml(w: Workspace, extra: str) -> Plan:
    kit.tiny(w)
    w.write("fixpoint.toml", f'model = "tiny.onnx"\nparams = "tiny.params.json"\n{extra}')
    return Plan([refuse("generate", names=["fixpoint.toml", ("generated", "params", "model")])])


def _generated_symlink_out(w: Workspace) -> Plan:
    (w.outside / "gen").mkdir()
    kit.symlink(w, "src/model", w.outside / "gen")
    return _toml(w, 'generated = "src/model"\n')


def _outside_input(key: str) -> Setup:
    def setup(w: Workspace) -> Plan:
        w.copy("tiny", *kit.TINY, to="../outside")
        kit.tiny(w)
        other = "params" if key == "model" else "model"
        w.write("fixpoint.toml", f'{other} = "{_file(other)}"\n{key} = "../outside/{_file(key)}"\n')
        return Plan([refuse("generate", "-o", "gen", names=["fixpoint.toml", key])])

    return setup


def _file(key: str) -> str:
    return "tiny.onnx" if key == "model" else "tiny.params.json"


def _model_path(recorded: str, command: str) -> Setup:
    def setup(w: Workspace) -> Plan:
        if recorded.startswith("../outside"):
            w.copy("tiny", "tiny.onnx", to="../outside")
        name = kit.edited_params(w, lambda d: d["model"].update(path=recorded))
        # generate without --model: the model is the one the JSON records
        argv = kit.evaluate(name) if command == "evaluate" else ("generate", "--params", name, "-o", "gen")
        return Plan([refuse(*argv, names=[name, ("model.path", "model")])])

    return setup


def _external(location: str, make: Callable[[Workspace], object] | None = None) -> Setup:
    def setup(w: Workspace) -> Plan:
        kit.tiny(w)
        (w.outside / "w.bin").write_bytes(models.conv_weight_bytes())
        if make is not None:
            make(w)
        models.save(models.with_external_weights(location), w.path("ext.onnx"))
        return Plan([_quantize("ext.onnx", names=("ext.onnx",))])

    return setup


PASSWD = "../" * 16 + "etc/passwd"
"""../../../etc/passwd with enough ".." to reach /etc/passwd from any workspace."""


def _prefix(prefix: str) -> Setup:
    def setup(w: Workspace) -> Plan:
        kit.tiny(w)
        return Plan([usage(*kit.GENERATE, "--prefix", prefix, names=[("--prefix", "prefix")])])

    return setup


def _board_name_parent(w: Workspace) -> Plan:
    """[board] name = "../../outside/evil": the default build folder, build/<target>, must not follow it."""
    kit.tiny(w)
    kit.board_project(w, "/dev/null", "127.0.0.1:1", name="../../outside/evil")
    return Plan([kit.BOARD_BUILD])


def boundary_cases() -> list[Case]:
    b = "boundary"
    return [
        _case(
            "build-board-name-parent",
            b,
            _board_name_parent,
            "a board named ../../outside/evil: its build folder must stay inside",
            needs=("cmsis-nn", "arm"),
        ),
        _case(
            "generate-toml-generated-parent",
            b,
            lambda w: _toml(w, 'generated = "../escape"\n'),
            "fixpoint.toml generated = '../escape'",
        ),
        _case(
            "generate-toml-generated-absolute",
            b,
            lambda w: _toml(w, f'generated = "{w.outside}/gen"\n'),
            "fixpoint.toml generated = an absolute folder outside",
        ),
        _case(
            "generate-toml-generated-symlink",
            b,
            _generated_symlink_out,
            "fixpoint.toml generated = a symlink to a folder outside",
        ),
        _case(
            "generate-toml-model-outside",
            b,
            _outside_input("model"),
            "fixpoint.toml model = '../outside/...'",
        ),
        _case(
            "generate-toml-params-outside",
            b,
            _outside_input("params"),
            "fixpoint.toml params = '../outside/...'",
        ),
        _case(
            "evaluate-model-path-passwd",
            b,
            _model_path(PASSWD, "evaluate"),
            "a params JSON whose model.path is ../../../etc/passwd",
        ),
        _case(
            "generate-model-path-passwd",
            b,
            _model_path(PASSWD, "generate"),
            "generate without --model from a JSON whose model.path is ../../../etc/passwd",
        ),
        _case(
            "generate-model-path-outside",
            b,
            _model_path("../outside/tiny.onnx", "generate"),
            "generate without --model from a JSON whose model.path leaves the workspace",
        ),
        _case(
            "generate-model-path-absolute",
            b,
            _model_path("/etc/hostname", "generate"),
            "generate without --model from a JSON whose model.path is absolute",
        ),
        _case("external-data-parent", b, _external("../outside/w.bin"), "external data at ../outside/w.bin"),
        _case(
            "external-data-absolute",
            b,
            lambda w: _external(str(w.outside / "w.bin"))(w),
            "external data at an absolute path outside",
        ),
        _case(
            "external-data-symlink",
            b,
            _external("w.bin", lambda w: kit.symlink(w, "w.bin", w.outside / "w.bin")),
            "external data through a symlink to a file outside",
        ),
        _case(
            "external-data-dotdot-inside",
            b,
            _external("sub/../../outside/w.bin", lambda w: w.path("sub").mkdir()),
            "external data at sub/../../outside/w.bin",
        ),
        _case("generate-prefix-parent", b, _prefix("../../outside/evil"), "--prefix ../../outside/evil"),
        _case(
            "generate-prefix-absolute", b, lambda w: _prefix(str(w.outside / "evil"))(w), "--prefix /abs/evil"
        ),
    ]
