"""What `fixpoint build`, `verify` and `flash-verify` share: options, project defaults, the build steps.

Defaults come from ./fixpoint.toml (or --project) when present; command-line options override them.
Exit codes: 0 pass, 1 fail (mismatch, build or run failure), 2 bad input (options, project, data).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from quantcore.commands import _args
from quantcore.errors import InputError

if TYPE_CHECKING:  # imported where used: building the CLI parser imports nothing heavy (test_cli_startup)
    from quantcore.ir import Graph
    from quantcore.kernels.rounding import Rounding
    from quantcore.pipeline import LoadedModel
    from quantcore.project import Project
    from quantcore.quantize.params_problems import Doc
    from quantcore.targets.build import Channel, Firmware
    from quantcore.targets.cmsis_nn import CmsisNn
    from quantcore.targets.memory import MemoryReport
    from quantcore.targets.target import Target
    from quantcore.targets.verify import Cases
    from quantcore.verify.report import LayerMetrics

EXIT_PASS, EXIT_FAIL, EXIT_BAD_INPUT = 0, 1, 2


class BadInput(InputError):
    """An option or setting the command cannot work with (exit status 2)."""


def add_arguments(p: argparse.ArgumentParser, model: bool = True) -> None:
    p.add_argument(
        "--target", help="host, qemu-m4, qemu-m7, qemu-m55 or the project's board (default: fixpoint.toml)"
    )
    p.add_argument("--src", type=Path, help="generated model sources (default: generate into the build dir)")
    p.add_argument("--build-dir", type=Path, help="where to build (default: build/<target>)")
    p.add_argument("--data", help="input samples (.npz/.npy/images); default: seeded random int8 inputs")
    p.add_argument(
        "--cases",
        type=_args.CASES,
        default=None,
        help="number of test cases (default 4, or all samples given)",
    )
    p.add_argument("--seed", type=_args.integer(0, 2**32 - 1), default=0, help="seed of the random inputs")
    if model:
        p.add_argument("--model", help="float ONNX model (default: fixpoint.toml's model)")
        p.add_argument("--params", help="quant-params JSON (default: fixpoint.toml's params)")
    p.add_argument("--project", type=Path, help="fixpoint.toml to read (default: ./fixpoint.toml if present)")
    p.add_argument(
        "--cmsis-nn", dest="cmsis_nn", help="CMSIS-NN checkout (default: [cmsis_nn] path, env, cache)"
    )
    p.add_argument(
        "--timeout",
        type=_args.TIMEOUT,
        default=None,
        help="seconds the firmware may run (default: 60 + 10 per test case per 250 KB of firmware flash)",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object instead of the table")


@dataclass
class Context:
    """The resolved settings of one command run."""

    args: argparse.Namespace
    project: Project
    target: Target
    build_dir: Path

    @property
    def rounding(self) -> Rounding:
        return self.project.rounding


def resolve(args: argparse.Namespace) -> Context:
    from quantcore.project import Project, find_project, load_project_strict
    from quantcore.targets.target import Region, board_target, get_target

    path = args.project or find_project()
    if args.project and not args.project.is_file():
        raise BadInput(f"{args.project} does not exist")
    project = load_project_strict(path) if path else Project()
    board = project.board
    board_t = (
        board_target(board.name, board.core, Region(board.flash_origin, board.flash_size),
                     Region(board.ram_origin, board.ram_size), board.uart_base)
        if board else None
    )  # fmt: skip
    target = get_target(args.target or project.target, board_t)
    if args.build_dir is not None:
        folder_option("--build-dir", args.build_dir)
    return Context(args, project, target, (args.build_dir or Path("build") / target.name).resolve())


def folder_option(option: str, path: Path) -> Path:
    """`path` when it is a folder or does not exist yet; BadInput naming the option when it is not."""
    if path.exists() and not path.is_dir():
        raise BadInput(f"{option} {path}: is a file, not a folder; give a folder (it is created if missing)")
    return path


def checkout(ctx: Context) -> CmsisNn:
    from quantcore.targets import cmsis_nn

    nn = cmsis_nn.locate(ctx.args.cmsis_nn or ctx.project.cmsis_nn)
    warning = cmsis_nn.version_warning(nn)
    if warning:
        print(f"fixpoint: warning: {warning}", file=sys.stderr)
    return nn


@dataclass
class Model:
    loaded: LoadedModel
    document: Doc
    qgraph: Graph
    params_file: str


def load_model(ctx: Context, required: bool, recorded_model: bool = False) -> Model | None:
    """The model and parameters the options (else fixpoint.toml) name, loaded and checked to belong
    together; with `recorded_model`, a missing --model defaults to the one the JSON records."""
    from quantcore import pipeline
    from quantcore.quantize import params_json
    from quantcore.quantize.document import finetuned_weights, from_document

    model = getattr(ctx.args, "model", None)
    params = getattr(ctx.args, "params", None) or ctx.project.params
    document = None
    if params and not Path(params).exists():
        raise BadInput(f"{params} does not exist")
    if recorded_model and model is None and params:
        document = params_json.load(Path(params))
        model = recorded_model_of(document, params)
    model = model or ctx.project.model
    if model and not Path(model).exists():
        raise BadInput(f"{model} does not exist")
    if not (model and params):
        if required:
            raise BadInput(
                "needs the model and its parameters: give --model and --params (or set them in fixpoint.toml)"
            )
        return None
    loaded = pipeline.load_model(model)
    document = document or params_json.load(Path(params))
    pipeline.check_same_model(loaded, document, str(params))
    qgraph = from_document(loaded.graph, document, finetuned_weights(document, params))
    return Model(loaded, document, qgraph, str(params))


def recorded_model_of(document: Doc, params: str | Path) -> str | None:
    """The model file a loaded params document records, when it exists (params_json.recorded_model on
    the document in hand: the file is not read again)."""
    from quantcore.quantize import params_json

    path = params_json.recorded_model(params, document=document)
    return str(path) if path is not None else None


def sources(ctx: Context, model: Model | None) -> Path:
    """--src as given, else the model generated into <build dir>/model for the target's core."""
    if ctx.args.src is not None:
        if not ctx.args.src.is_dir():
            raise BadInput(f"--src {ctx.args.src} is not a directory")
        return Path(ctx.args.src)
    if model is None:
        raise BadInput("give --src DIR (generated sources) or --model and --params to generate them")
    from quantcore.codegen.generate import Sources, generate

    out = ctx.build_dir / "model"
    generate(
        model.qgraph, out, prefix="model", core=ctx.target.core, alignment=ctx.project.alignment,
        force=True, sources=Sources(Path(model.params_file), Path(model.loaded.path)),
    )  # fmt: skip
    return out


def cases(ctx: Context, model: Model | None, src: Path) -> Cases:
    """The test cases: from --data (needs the model), prepared on the host as src's model.h tells an
    application (quantcore.targets.verify.documented_cases); else seeded random inputs, which are
    already bytes in the firmware's layout."""
    import numpy as np

    from quantcore.targets import verify
    from quantcore.targets.build import read_contract, read_header

    count = ctx.args.cases
    if ctx.args.data:
        if model is None:
            raise BadInput("--data needs --model and --params (to quantize the samples)")
        from quantcore import pipeline

        dataset = pipeline.load_data(ctx.args.data, model.qgraph)
        return verify.documented_cases(read_contract(src), dataset.x, str(ctx.args.data), count)
    if model is not None:
        return verify.random_cases(model.qgraph, count or verify.DEFAULT_CASES, ctx.args.seed)
    rng = np.random.default_rng(ctx.args.seed)
    size = (count or verify.DEFAULT_CASES, read_header(src).input_bytes)
    values = rng.integers(-128, 127, size=size, endpoint=True)
    return verify.Cases(values.astype(np.int8), f"random (seed {ctx.args.seed})")


def build(
    ctx: Context, src: Path, test_cases: Cases, channel: Channel | None = None
) -> tuple[Firmware, Cases]:
    """The firmware and the cases it embeds. Without --cases, cases that would overflow the target's
    flash are cut to the number that fits (the linker's overflow / one input's bytes), with a note."""
    from quantcore.targets.build import BuildRequest, build_firmware, read_header
    from quantcore.targets.errors import TestInputsOverflow

    read_header(src)
    nn = checkout(ctx)

    def attempt(cases: Cases) -> Firmware:
        request = BuildRequest(ctx.target, src, ctx.build_dir, cases.as_bytes(), nn, ctx.rounding, channel)
        return build_firmware(request)

    try:
        return attempt(test_cases), test_cases
    except TestInputsOverflow as exc:
        if ctx.args.cases is not None:
            raise
        kept = test_cases.head(exc.fit)
        print(
            f"fixpoint: note: {test_cases.count} test inputs do not fit {ctx.target.name}'s flash;"
            f" using the first {exc.fit} (--cases N sets the number)",
            file=sys.stderr,
        )
        return attempt(kept), kept


def audit(ctx: Context, firmware: Firmware) -> MemoryReport:
    """Measure and check the budget (not for the host); BudgetError before anything is flashed."""
    from quantcore.targets import memory

    if not firmware.target.cross:
        return memory.measure(firmware, memory.Budget(None, None))
    limits = memory.target_budget(firmware)
    budget = memory.Budget(ctx.project.budget.flash or limits.flash, ctx.project.budget.ram or limits.ram)
    report = memory.measure(firmware, budget)
    memory.check_budget(report, f"{ctx.target.name}'s budget")
    return report


def float_metrics(model: Model | None, test_cases: Cases) -> list[LayerMetrics]:
    """The quantizer's per-layer float-vs-int8 figures on the very inputs the firmware ran."""
    if model is None:
        return []
    from quantcore import pipeline
    from quantcore.data import DataSet
    from quantcore.ir.io_layout import to_model
    from quantcore.targets import verify

    name = model.qgraph.inputs[0]
    x = to_model(model.qgraph, name, verify.float_inputs(model.qgraph, test_cases)).astype("float32")
    report = pipeline.evaluate(model.loaded, model.document, DataSet(x), params_file=model.params_file)
    return list(report.layers)


def guarded(command: str, args: argparse.Namespace, body: Callable[[], int]) -> int:
    """Run `body`; an error is its one-line message (quantcore.commands.failure.describe: exit 2 for bad
    input, 1 for a failure), printed as JSON too with --json."""
    from quantcore.commands.failure import describe

    try:
        return body()
    except Exception as exc:
        if getattr(args, "debug", False):
            raise
        code, message = describe(exc)
        return _error(command, args, exc, message, code)


def _error(command: str, args: argparse.Namespace, exc: Exception, message: str, code: int) -> int:
    from quantcore.commands.failure import one_line_message

    message = one_line_message(message)
    if args.json:
        verdict = "error" if code == EXIT_FAIL else "bad-input"
        kind = type(exc).__name__
        print(json.dumps({"target": args.target, "verdict": verdict, "error": message, "kind": kind}))
    print(f"fixpoint {command}: {message}", file=sys.stderr)
    return code
