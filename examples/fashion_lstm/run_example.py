"""The recurrent example: a float ONNX LSTM classifier (Fashion-MNIST rows as a 28-step sequence) to
verified int8 firmware, through the public commands, printing each one (copy-pastable from the
repository root):

    .venv/bin/python examples/fashion_lstm/run_example.py [--host-only] [--cases 8]

1 quantize   fixpoint quantize model.onnx --calib calib.npz -o out/fashion_lstm.params.json
2 evaluate   fixpoint evaluate ... --data test.npz --report-json out/evaluation.json
3 verify     fixpoint verify --target T ... --json > out/verify_T.json for T in host, qemu-m4, qemu-m55
             (every layer's bytes against Fixpoint's int8 reference, the memory audit)
4 summary    float vs int8 top-1, output SQNR, flash / RAM / arena / LSTM buffers per target

Everything goes to out/ (git-ignored). The verify steps need a CMSIS-NN checkout and, for the boards, the
Arm toolchain and QEMU; `--host-only` verifies on the host alone. Exit status 1: a step failed.
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
TARGETS = ("host", "qemu-m4", "qemu-m55")


def shown(path: Path) -> str:
    """A path as typed from the repository root."""
    try:
        return str(path.resolve().relative_to(REPO))
    except ValueError:
        return str(path)


def run(args: list[str], redirect: Path | None = None) -> None:
    """One `fixpoint` command, printed, run with this interpreter; its stdout to `redirect` if given."""
    line = "fixpoint " + " ".join(shlex.quote(a) for a in args)
    print(f"$ {line}" + (f" > {shown(redirect)}" if redirect else ""), flush=True)
    command = [sys.executable, "-m", "quantcore.cli", *args]
    out = subprocess.run(
        command, stdout=subprocess.PIPE if redirect else None, text=True, check=False, cwd=REPO
    )
    if redirect is not None:
        redirect.write_text(out.stdout)
    if out.returncode != 0:
        raise SystemExit(f"step failed (exit status {out.returncode}): {line}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host-only", action="store_true", help="verify on the host only")
    parser.add_argument("--cases", type=int, default=8, help="verification cases per target")
    parser.add_argument("--out", type=Path, default=HERE / "out")
    args = parser.parse_args(argv)
    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    model, calib, test = (shown(HERE / f) for f in ("model.onnx", "calib.npz", "test.npz"))
    params = out / "fashion_lstm.params.json"
    print("== 1 quantize", flush=True)
    run(["quantize", model, "--calib", calib, "-o", shown(params)])
    print("== 2 evaluate", flush=True)
    evaluation = out / "evaluation.json"
    run(["evaluate", model, shown(params), "--data", test, "--report-json", shown(evaluation)])
    print("== 3 verify", flush=True)
    reports = {}
    for target in TARGETS[:1] if args.host_only else TARGETS:
        report = out / f"verify_{target}.json"
        verify = ["verify", "--target", target, "--model", model, "--params", shown(params), "--data", test]
        verify += ["--cases", str(args.cases), "--build-dir", shown(out / target), "--json"]
        run(verify, redirect=report)
        reports[target] = json.loads(report.read_text())
    print("== 4 summary", flush=True)
    summary(json.loads(evaluation.read_text()), reports)
    return 0 if all(r["verdict"] == "pass" for r in reports.values()) else 1


def summary(evaluation: dict[str, Any], reports: dict[str, dict[str, Any]]) -> None:
    lstm = next(layer for layer in evaluation["layers"] if layer["op"] == "lstm")
    print(
        f"top-1 float {evaluation['top1_float']:.2%}, int8 {evaluation['top1_int8']:.2%} on"
        f" {evaluation['samples']} test images; output SQNR {evaluation['output_sqnr_db']:.2f} dB, LSTM layer"
        f" {lstm['sqnr_db']:.2f} dB"
    )
    for target, report in reports.items():
        print(
            f"{target}: {report['verdict']}, {report['mismatched_bytes_total']} mismatched bytes over"
            f" {report['cases']} cases; flash {report['flash_bytes']} B, RAM {report['ram_bytes']} B, arena"
            f" {report['arena_bytes']} B, LSTM buffers {report['state_bytes']} B"
        )


if __name__ == "__main__":
    raise SystemExit(main())
