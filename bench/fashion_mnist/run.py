"""Benchmark: Fixpoint's int8 PTQ against ONNX Runtime, NNCF and PyTorch PT2E on five Fashion-MNIST nets.

    python bench/fashion_mnist/run.py [--out DIR] [--models ...] [--sizes 100 1000] [--test-samples 10000]
                                      [--repeat 3] [--json PATH] [--no-nncf] [--no-pt2e] [--retrain]

Trains and exports the models first when they are missing (train.py; --retrain forces it). For each model
and calibration size, every tool quantizes from the same calibration images (calib_N.npz, train split)
and is scored on the same first --test-samples images of t10k (test.npz):
  fixpoint/METHOD   `fixpoint quantize MODEL --calib calib_N.npz -o P.json --method METHOD` (minmax,
                    percentile, entropy, mse; the default automatic choices), scored by `fixpoint evaluate
                    MODEL P.json --data test.npz --json` (onnxruntime float vs the int8 reference executor)
  ort/METHOD/pc|pt  ONNX Runtime quant_pre_process + quantize_static (QDQ, QInt8, per-channel or per-tensor
                    weights), run by onnxruntime; MinMax, Entropy, Percentile
  nncf/CONFIG       Intel NNCF's nncf.quantize on the pre-processed ONNX model: its default, and the
                    configuration matched to CMSIS-NN's scheme (peers.NNCF_CONFIGS), with and without its
                    fast bias correction; run by onnxruntime. Skipped with one line when nncf is missing
                    (pip install -e '.[bench]')
  pt2e/xnnpack      torch.export + torchao prepare_pt2e (XNNPACK quantizer, per-channel) + convert_pt2e
Columns: float and int8 top-1 (%), drop (points), float/int8 arg-max agreement (%), output SQNR over the
logits (dB), and three times (seconds):
  proc s   the whole quantization as a fresh process: python start and imports included (Fixpoint: the
           `fixpoint quantize` CLI; ORT and NNCF: peers.py as a script), best of --repeat runs
  warm s   the same quantization in this process, which has done it before (imports and one-off set-up
           paid): model loading and pre-processing (ORT's quant_pre_process, Fixpoint's import, BN folding,
           fusion, NHWC), calibration and conversion; scoring is not counted
  eval s   Fixpoint only: the `fixpoint evaluate` CLI process over the test images (one run)
Each model ends with a summary line: is `fixpoint quantize` (CLI) faster than every ORT process, and is
each other Fixpoint method's output SQNR within 0.5 dB of minmax's (or above it)?
One table per model is printed; --json writes every figure, Fixpoint's per-layer SQNR included.
The CLI runs whichever quantcore this interpreter imports (PYTHONPATH first): to time another tree, set
PYTHONPATH to it. Wall time on a shared 2-core machine is noisy: compare the tools within one run.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import fmnist
import numpy as np
import peers

MODEL_NAMES = ("lenet5", "convbn", "dscnn", "mbv2", "outlier")
FIXPOINT_METHODS = ("minmax", "percentile", "entropy", "mse")
SQNR_BAR_DB = 0.5  # issue 20: every calibration method within 0.5 dB of min/max's output SQNR, or above
PEERS = Path(__file__).with_name("peers.py")


@dataclass
class Row:
    tool: str
    method: str
    calib: int
    top1_float: float | None = None
    top1_int8: float | None = None
    agreement: float | None = None
    output_sqnr_db: float | None = None
    quantize_s: float | None = None
    """Warm: the whole quantization step in this process (pre-processing / model preparation included)."""
    process_s: float | None = None
    """Fresh process: the same step with python start and imports, best of --repeat runs."""
    evaluate_s: float | None = None
    """Fixpoint only: the `fixpoint evaluate` process over the test images."""
    note: str = ""
    load_s: float | None = None
    """Fixpoint only: the load_model (import + prepare) share of quantize_s."""
    layers: list[dict[str, Any]] = field(default_factory=list)
    activation_scales: dict[str, float] = field(default_factory=dict)
    """ORT only: the QDQ model's activation scales by tensor (to tell whether two methods chose alike)."""

    @property
    def drop_points(self) -> float | None:
        if self.top1_float is None or self.top1_int8 is None:
            return None
        return 100 * (self.top1_float - self.top1_int8)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=fmnist.default_cache(), help="cache folder")
    parser.add_argument("--models", nargs="+", default=list(MODEL_NAMES), choices=MODEL_NAMES)
    parser.add_argument(
        "--sizes",
        nargs="+",
        type=int,
        default=list(fmnist.CALIB_SIZES),
        choices=fmnist.CALIB_SIZES,
        help="calibration set sizes",
    )
    parser.add_argument("--test-samples", type=int, default=10000, help="first N images of t10k (all)")
    parser.add_argument("--repeat", type=int, default=3, help="fresh-process timings: best of N runs")
    parser.add_argument("--json", type=Path, help="write all figures to this file")
    parser.add_argument("--no-nncf", action="store_true", help="skip Intel NNCF")
    parser.add_argument("--no-pt2e", action="store_true", help="skip PyTorch PT2E")
    parser.add_argument("--retrain", action="store_true", help="retrain the models first")
    args = parser.parse_args()
    if args.repeat < 1:
        parser.error("--repeat: at least 1")
    return args


def ensure_models(args: argparse.Namespace) -> None:
    missing = [
        m for m in args.models if not (args.out / f"{m}.onnx").exists() or not (args.out / f"{m}.pt").exists()
    ]
    if missing or args.retrain:
        command = [
            sys.executable,
            str(Path(__file__).with_name("train.py")),
            "--out",
            str(args.out),
            "--models",
            *(args.models if args.retrain else missing),
        ]
        subprocess.run(command + (["--retrain"] if args.retrain else []), check=True)
    fmnist.write_arrays(args.out)


@dataclass(frozen=True)
class Case:
    """One model and calibration set, and the test images every tool is scored on."""

    onnx_path: Path
    calib_path: Path
    test_path: Path
    n_test: int
    calib_x: np.ndarray
    test_x: np.ndarray
    test_y: np.ndarray
    float_logits: np.ndarray
    workdir: Path
    repeat: int


def timed_process(command: list[str], repeat: int) -> tuple[float, str]:
    """(best wall time of `repeat` runs of the command, the last run's stdout); a failed run raises with
    its stderr's last line."""
    best, stdout = math.inf, ""
    for _ in range(repeat):
        start = time.perf_counter()
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        seconds = time.perf_counter() - start
        if done.returncode != 0:
            last = (done.stderr.strip().splitlines() or ["(no message)"])[-1]
            raise RuntimeError(f"{' '.join(command[1:4])}... exited {done.returncode}: {last}")
        best, stdout = min(best, seconds), done.stdout
    return best, stdout


# ---------------------------------------------------------------- Fixpoint


def fixpoint_cli(*arguments: str | Path) -> list[str]:
    """The `fixpoint` command as this interpreter runs it (python -m quantcore.cli, what the script runs).
    -P: the quantcore this interpreter imports (PYTHONPATH, the venv), not one in the current folder,
    which -m would otherwise put first."""
    return [sys.executable, "-P", "-m", "quantcore.cli", *map(str, arguments)]


def fixpoint_in_process(case: Case, method: str) -> tuple[float, float]:
    """(seconds of load_model + quantize, the load_model share), as `fixpoint quantize` runs them, in this
    process."""
    from quantcore import pipeline
    from quantcore.calibrate.method import Method, RangeMethod

    start = time.perf_counter()
    model = pipeline.load_model(case.onnx_path)
    loaded = time.perf_counter()
    calib = pipeline.load_data(case.calib_path, model.graph)
    pipeline.quantize(model, calib, pipeline.QuantizeOptions(method=RangeMethod(Method(method))))
    return time.perf_counter() - start, loaded - start


def fixpoint_row(case: Case, method: str) -> Row:
    """One method: the CLI quantize (timed), the CLI evaluate of its JSON (timed, and the scores), and the
    in-process quantize time."""
    from quantcore.verify.report import EvaluationReport

    params = case.workdir / f"{case.onnx_path.stem}.{method}.params.json"
    quantize = fixpoint_cli(
        "quantize", case.onnx_path, "--calib", case.calib_path, "-o", params, "--method", method
    )
    process_s, _ = timed_process(quantize, case.repeat)
    evaluate = fixpoint_cli(
        "evaluate", case.onnx_path, params, "--data", case.test_path, "--samples", case.n_test, "--json"
    )
    evaluate_s, text = timed_process(evaluate, 1)
    report = EvaluationReport.from_dict(json.loads(text))
    warm_s, load_s = fixpoint_in_process(case, method)
    return Row(
        "fixpoint",
        method,
        len(case.calib_x),
        report.top1_float,
        report.top1_int8,
        report.agreement,
        report.output_sqnr_db,
        quantize_s=warm_s,
        process_s=process_s,
        evaluate_s=evaluate_s,
        load_s=load_s,
        layers=[
            {"name": layer.name, "op": layer.op, "sqnr_db": layer.sqnr_db, "cosine": layer.cosine}
            for layer in report.layers
        ],
    )


def run_fixpoint(case: Case, methods: tuple[str, ...] = FIXPOINT_METHODS) -> list[Row]:
    return [fixpoint_row(case, method) for method in methods]


# ---------------------------------------------------------------- peers


def peer_row(case: Case, tool: str, config: str, per_tensor: bool = False) -> Row:
    """One ORT or NNCF configuration: warm in-process quantization (its QDQ model scored), then the same
    quantization as a fresh process (peers.py as a script). A peer failing is a finding: in the note."""
    label = f"{config.lower()}/{'pt' if per_tensor else 'pc'}" if tool == "ort" else config
    row = Row(tool, label, len(case.calib_x))
    try:
        if tool == "ort":
            qdq, seconds = peers.ort_quantize(
                case.onnx_path, case.calib_x, config, case.workdir, per_channel=not per_tensor
            )
        else:
            qdq, seconds = peers.nncf_quantize(case.onnx_path, case.calib_x, config, case.workdir)
        scores = peers.score(case.float_logits, peers.ort_run(qdq, case.test_x), case.test_y)
        command = [sys.executable, str(PEERS), tool, str(case.onnx_path), str(case.calib_path)]
        command += [str(case.workdir), "--config", config, *(["--per-tensor"] if per_tensor else [])]
        process_s, _ = timed_process(command, case.repeat)
    except Exception as exc:  # reported in the table and the JSON, the run goes on
        row.note = f"failed: {type(exc).__name__}: {exc}"[:300]
        return row
    row.top1_float, row.top1_int8 = scores.top1_float, scores.top1_int8
    row.agreement, row.output_sqnr_db = scores.agreement, scores.output_sqnr_db
    row.quantize_s, row.process_s = seconds, process_s
    if tool == "ort":
        row.activation_scales = peers.qdq_activation_scales(qdq)
    return row


def run_ort(case: Case) -> list[Row]:
    rows = [
        peer_row(case, "ort", method, per_tensor)
        for per_tensor in (False, True)
        for method in peers.ORT_METHODS
    ]
    _note_same_scales(rows)
    return rows


def _note_same_scales(rows: list[Row]) -> None:
    """Mark the ORT rows whose activation scales are min/max's (a calibrator that changed nothing)."""
    scales = {row.method: row.activation_scales for row in rows if row.activation_scales}
    for row in rows:
        method, granularity = row.method.split("/")
        minmax = scales.get(f"minmax/{granularity}")
        if method != "minmax" and minmax is not None and row.activation_scales == minmax:
            row.note = f"activation scales identical to ort/minmax/{granularity}"


def run_nncf(case: Case) -> list[Row]:
    return [peer_row(case, "nncf", config) for config in peers.NNCF_CONFIGS]


def run_pt2e(name: str, out: Path, case: Case) -> Row:
    from models import MODELS

    calib = len(case.calib_x)
    why = peers.pt2e_available()
    if why is not None:
        return Row("pt2e", "xnnpack", calib, note=f"skipped: {why}")
    try:
        run, seconds = peers.pt2e_quantize(MODELS[name], out / f"{name}.pt", case.calib_x)
        s = peers.score(case.float_logits, run(case.test_x), case.test_y)
    except Exception as exc:  # as for ONNX Runtime: reported in the table and the JSON
        return Row("pt2e", "xnnpack", calib, note=f"failed: {type(exc).__name__}: {exc}"[:300])
    return Row("pt2e", "xnnpack", calib, **asdict(s), quantize_s=seconds)


# ---------------------------------------------------------------- one model


def make_case(args: argparse.Namespace, name: str, size: int, n_test: int, workdir: Path) -> Case:
    onnx_path, calib_path, test_path = (
        args.out / f"{name}.onnx",
        args.out / f"calib_{size}.npz",
        args.out / "test.npz",
    )
    with np.load(calib_path) as npz:
        calib_x = npz["x"]
    with np.load(test_path) as npz:
        test_x, test_y = npz["x"][:n_test], npz["y"][:n_test]
    logits = peers.ort_run(onnx_path, test_x)
    return Case(
        onnx_path, calib_path, test_path, n_test, calib_x, test_x, test_y, logits, workdir, args.repeat
    )


def run_tools(args: argparse.Namespace, name: str, case: Case) -> list[Row]:
    """Every tool on one case, in the order of the table."""

    def stage(tool: str) -> None:
        print(f"  {name}: calibration {len(case.calib_x)}: {tool}", flush=True)

    stage("fixpoint")
    rows = run_fixpoint(case)
    stage("onnxruntime")
    rows += run_ort(case)
    if not args.no_nncf and peers.nncf_available() is None:
        stage("nncf")
        rows += run_nncf(case)
    if not args.no_pt2e:
        stage("pt2e")
        rows.append(run_pt2e(name, args.out, case))
    return rows


def warm_up(args: argparse.Namespace, workdir: Path) -> None:
    """One untimed in-process quantization by every tool on the first model and the smallest calibration
    set, so that the first warm figure does not pay for lazy imports and one-off initialisation (none of
    the tools caches anything between models: each quantization starts from the .onnx / .pt file)."""
    case = make_case(args, args.models[0], min(args.sizes), 100, workdir)
    fixpoint_in_process(case, "minmax")
    for method in peers.ORT_METHODS:
        peers.ort_quantize(case.onnx_path, case.calib_x, method, workdir)
    if not args.no_nncf and peers.nncf_available() is None:
        peers.nncf_quantize(case.onnx_path, case.calib_x, peers.NNCF_CONFIGS[-1], workdir)
    if not args.no_pt2e:
        run_pt2e(args.models[0], args.out, case)


def bench_model(name: str, args: argparse.Namespace, workdir: Path) -> list[Row]:
    rows = []
    for size in args.sizes:
        rows += run_tools(args, name, make_case(args, name, size, args.test_samples, workdir))
    return rows


# ---------------------------------------------------------------- output


def _fmt(value: float | None, digits: int, scale: float = 1.0) -> str:
    if value is None:
        return "-"
    if math.isinf(value):
        return "inf"
    return f"{value * scale:.{digits}f}"


HEADER = (
    "calib", "tool/method", "top-1 float", "top-1 int8", "drop (pts)", "agree %", "SQNR dB",
    "proc s", "warm s", "eval s",
)  # fmt: skip


def _cells(r: Row) -> list[str]:
    return [
        str(r.calib),
        f"{r.tool}/{r.method}",
        _fmt(r.top1_float, 2, 100),
        _fmt(r.top1_int8, 2, 100),
        _fmt(r.drop_points, 2),
        _fmt(r.agreement, 2, 100),
        _fmt(r.output_sqnr_db, 2),
        _fmt(r.process_s, 2),
        _fmt(r.quantize_s, 2),
        _fmt(r.evaluate_s, 2),
    ]


def table(name: str, rows: list[Row]) -> str:
    lines = [_cells(r) for r in rows]
    widths = [max(len(h), *(len(line[i]) for line in lines)) for i, h in enumerate(HEADER)]

    def render(cells: list[str] | tuple[str, ...]) -> str:
        return (
            "| "
            + " | ".join(
                c.rjust(w) if i != 1 else c.ljust(w)
                for i, (c, w) in enumerate(zip(cells, widths, strict=True))
            )
            + " |"
        )

    out = [f"### {name}", render(HEADER), "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
    out += [render(line) for line in lines]
    out += [f"  note: {r.calib} {r.tool}/{r.method}: {r.note}" for r in rows if r.note]
    out += [summary(name, calib, rows) for calib in sorted({r.calib for r in rows})]
    return "\n".join(out)


def summary(name: str, calib: int, rows: list[Row]) -> str:
    """The issue's two bars for one model and calibration size, on one line."""
    ours = {r.method: r for r in rows if r.tool == "fixpoint" and r.calib == calib}
    return f"  summary {name} ({calib} images): {_speed_verdict(ours, rows, calib)}; {_sqnr_verdict(ours)}"


def _speed_verdict(ours: dict[str, Row], rows: list[Row], calib: int) -> str:
    """`fixpoint quantize` (CLI, default minmax) against the fastest ORT process."""
    ort = [r for r in rows if r.tool == "ort" and r.calib == calib and r.process_s is not None]
    mine = ours.get("minmax")
    if not ort or mine is None or mine.process_s is None:
        return "speed: no figures"
    fastest = min(ort, key=lambda r: r.process_s or math.inf)
    slowest = max(r.process_s or 0.0 for r in ort)
    assert fastest.process_s is not None
    verdict = "faster than" if mine.process_s < fastest.process_s else "NOT faster than"
    return (
        f"fixpoint quantize CLI {mine.process_s:.2f} s {verdict} every ORT process"
        f" ({fastest.process_s:.2f}-{slowest:.2f} s, fastest ort/{fastest.method})"
    )


def _sqnr_verdict(ours: dict[str, Row]) -> str:
    """Each other method's output SQNR against minmax's, and whether it meets the 0.5 dB bar."""
    base = ours.get("minmax")
    if base is None or base.output_sqnr_db is None:
        return "SQNR: no minmax figure"
    parts, failed = [], []
    for method, row in ours.items():
        if method == "minmax" or row.output_sqnr_db is None:
            continue
        delta = row.output_sqnr_db - base.output_sqnr_db
        parts.append(f"{method} {delta:+.2f}")
        if delta < -SQNR_BAR_DB:
            failed.append(method)
    verdict = "all within" if not failed else f"{', '.join(failed)} NOT within"
    return f"SQNR vs minmax {', '.join(parts)} dB: {verdict} {SQNR_BAR_DB} dB"


def _json_safe(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_json_safe(v) for v in value]
    return value


def write_json(path: Path, args: argparse.Namespace, results: dict[str, list[Row]], seconds: float) -> None:
    training = {}
    for name in results:
        record = args.out / f"{name}.json"
        training[name] = json.loads(record.read_text()) if record.exists() else None
    payload = {
        "benchmark": "fashion_mnist",
        "test_samples": args.test_samples,
        "repeat": args.repeat,
        "calib_sizes": args.sizes,
        "seconds": seconds,
        "python": platform.python_version(),
        "versions": _versions(),
        "training": training,
        "models": {
            name: [asdict(r) | {"drop_points": r.drop_points} for r in rows] for name, rows in results.items()
        },
    }
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(_json_safe(payload), indent=2) + "\n")
    os.replace(tmp, path)


def _versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for dist in ("onnxruntime", "onnx", "nncf", "torch", "torchao", "numpy", "fixpoint"):
        try:
            out[dist] = version(dist)
        except PackageNotFoundError:
            out[dist] = "not installed"
    return out


def main() -> int:
    args = parse_args()
    import torch

    torch.set_num_threads(2)
    start = time.perf_counter()
    fmnist.byte_compile()  # Fixpoint's CLI timed as installed: no module compiled again in every process
    ensure_models(args)
    why = peers.nncf_available()
    if why is not None and not args.no_nncf:
        print(f"NNCF rows skipped: {why}")
    results: dict[str, list[Row]] = {}
    with peers.scratch_dir() as tmp:
        print("warming up the tools (untimed)", flush=True)
        warm_up(args, Path(tmp))
        for name in args.models:
            print(f"benchmarking {name}", flush=True)
            results[name] = bench_model(name, args, Path(tmp))
            print(table(name, results[name]), flush=True)
    seconds = time.perf_counter() - start
    print(
        f"\n{len(args.models)} models, calibration sizes {args.sizes}, {args.test_samples} test images,"
        f" best of {args.repeat} processes: {seconds:.0f} s"
    )
    for name, rows in results.items():
        print("\n" + table(name, rows))
    if args.json:
        write_json(args.json, args, results, seconds)
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
