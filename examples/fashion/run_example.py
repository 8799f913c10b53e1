"""The example, end to end: a float Fashion-MNIST model in, verified int8 firmware out (`make demo`).

    .venv/bin/python examples/fashion/run_example.py [--host-only] [--cases 8] [--method mse]

Runs the `fixpoint` commands a new user would, printing each one (copy-pastable, relative to the current
folder) under a step header:

  1 quantize      model.onnx + calib.npz            -> out/fashion.params.json
  2 evaluate      float vs int8 on test.npz, layer by layer    -> out/evaluation.json
  3 generate      the C sources into firmware/src/model (firmware/fixpoint.toml)
  4 build         firmware/Makefile for qemu-m4 (CMSIS-NN compiled from its sources), then run it
                  under QEMU: it classifies the test images in firmware/src/test_images.h
  5 flash-verify  flash QEMU's mps2-an386 through its GDB stub, read every layer's bytes over the UART,
                  compare with the bit-exact reference; memory audit  -> out/verify.json
  6 summary
  7 report        one self-contained HTML page + its JSON  -> out/report.html, out/report.json

Everything is written under out/ (git-ignored) except the generated sources, which go where
firmware/fixpoint.toml says (firmware/src/model, git-ignored too). Steps 4 and 5 need CMSIS-NN and the
Arm cross toolchain with QEMU; without them (or with --host-only) they are skipped, the command that
installs what is missing is printed, the host steps still run and the exit status is 0. Exit 1 when a
step that ran failed (verification mismatch included).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
FIRMWARE = HERE / "firmware"
OUT = HERE / "out"
CMSIS_NN_URL = "https://github.com/ARM-software/CMSIS-NN.git"
STEPS = 7


def shown(path: Path) -> str:
    """`path` as the user would type it from the current folder."""
    try:
        return os.path.relpath(path)
    except ValueError:
        return str(path)


def fixpoint_command() -> list[str]:
    """The fixpoint executable beside this Python (the venv's), else the one on PATH."""
    beside = Path(sys.executable).with_name("fixpoint")
    if beside.is_file():
        return [shown(beside)]
    found = shutil.which("fixpoint")
    return [found] if found else [sys.executable, "-m", "quantcore.cli"]


class StepFailed(Exception):
    pass


@dataclass
class Missing:
    """What the target steps need and this machine lacks."""

    cmsis_nn: str | None = None
    packages: list[str] = field(default_factory=list)
    gdb: bool = False

    @property
    def blocking(self) -> list[str]:
        reasons = []
        if self.cmsis_nn:
            reasons.append(
                f"CMSIS-NN: {self.cmsis_nn}\n      get it: {' '.join(fixpoint_command())} cmsis-nn install "
                f"{CMSIS_NN_URL}   (or a local checkout: fixpoint cmsis-nn install /path/to/CMSIS-NN;"
                " or point FIXPOINT_CMSIS_NN at one)"
            )
        if self.packages:
            extra = ["gdb-multiarch"] if self.gdb else []  # not blocking: `fixpoint verify` stands in
            reasons.append(
                f"the Arm cross toolchain / QEMU: {', '.join(self.packages)} not installed\n"
                f"      install: sudo apt-get install {' '.join(self.packages + extra)}"
            )
        return reasons


def find_tools() -> tuple[Path | None, Missing]:
    """The CMSIS-NN checkout and the cross tools, as the fixpoint commands find them."""
    from quantcore.errors import QuantcoreError
    from quantcore.targets import cmsis_nn

    missing = Missing()
    checkout = None
    try:
        checkout = cmsis_nn.locate(None).path
    except QuantcoreError as exc:
        missing.cmsis_nn = str(exc).split(". ")[0]
    present = {
        "gcc-arm-none-eabi": shutil.which("arm-none-eabi-gcc") is not None,
        "libnewlib-arm-none-eabi": _has_newlib(),
        "qemu-system-arm": shutil.which("qemu-system-arm") is not None,
        "make": shutil.which("make") is not None,
    }
    missing.packages = [package for package, found in present.items() if not found]
    missing.gdb = shutil.which("gdb-multiarch") is None
    return checkout, missing


def _has_newlib() -> bool:
    """newlib's libc.a for arm-none-eabi (libnewlib-arm-none-eabi), asked of the compiler when it is there."""
    if shutil.which("arm-none-eabi-gcc") is None:
        return Path("/usr/lib/arm-none-eabi/newlib/libc.a").is_file()
    done = subprocess.run(
        ["arm-none-eabi-gcc", "-print-file-name=libc.a"], capture_output=True, text=True, check=False
    )
    return done.returncode == 0 and Path(done.stdout.strip()).is_absolute()


class Runner:
    def __init__(self) -> None:
        self.started = time.monotonic()
        self.step_started = self.started
        self.skipped: list[str] = []
        self.failed: list[str] = []

    def header(self, number: int, title: str) -> None:
        self.step_started = time.monotonic()
        print(f"\n== {number}/{STEPS} {title}", flush=True)

    def skip(self, step: str, host_only: bool) -> None:
        self.skipped.append(step)
        print("skipped: " + ("--host-only" if host_only else "it needs what is listed at the top"))

    def done(self) -> None:
        print(f"   ({time.monotonic() - self.step_started:.1f} s)", flush=True)

    def run(self, command: list[str], capture: bool = False, redirect: Path | None = None) -> str:
        """Run a command (printed first); its output streams to the terminal unless captured."""
        text = "$ " + shlex.join(command) + (f" > {shown(redirect)}" if redirect else "")
        print(text, flush=True)
        if not capture and redirect is None:
            done = subprocess.run(command, check=False)
            if done.returncode != 0:
                raise StepFailed(f"{shlex.join(command)} exited with status {done.returncode}")
            return ""
        done = subprocess.run(command, stdout=subprocess.PIPE, text=True, check=False)
        if redirect is not None:
            redirect.write_text(done.stdout)
        if done.returncode != 0:
            if capture and done.stdout:
                print(done.stdout, end="")
            raise StepFailed(f"{shlex.join(command)} exited with status {done.returncode}")
        return done.stdout


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host-only", action="store_true", help="skip the build and the verification")
    parser.add_argument("--cases", type=int, default=8, help="test images the verification runs (default 8)")
    parser.add_argument("--method", default="mse", help="calibration method (default mse)")
    parser.add_argument("--jobs", type=int, default=2, help="make -j for the firmware build (default 2)")
    return parser.parse_args()


def main() -> int:
    args = parse_args()
    fixpoint = fixpoint_command()
    r = Runner()
    OUT.mkdir(exist_ok=True)
    params, evaluation, verify = OUT / "fashion.params.json", OUT / "evaluation.json", OUT / "verify.json"
    model, calib, test = HERE / "model.onnx", HERE / "calib.npz", HERE / "test.npz"
    project = FIRMWARE / "fixpoint.toml"
    print(f"Fixpoint example: {shown(model)} (Fashion-MNIST, float) -> int8 firmware for qemu-m4")
    print(f"outputs: {shown(OUT)}/, generated sources: {shown(FIRMWARE / 'src' / 'model')}/")

    checkout, missing = (None, Missing()) if args.host_only else find_tools()
    target_ok = not args.host_only and not missing.blocking
    if args.host_only:
        print("--host-only: the build and the verification (steps 4 and 5) are skipped")
    elif not target_ok:
        print("the target steps (4 build, 5 flash-verify) will be skipped; they need:")
        for reason in missing.blocking:
            print(f"  - {reason}")
    for name in ("evaluation.json", "verify.json", "app.txt", "report.html", "report.json"):
        (OUT / name).unlink(missing_ok=True)  # a previous run's results must not pass for this one's
    app_output = ""
    m, cal, tst, prm, ev = (shown(p) for p in (model, calib, test, params, evaluation))
    try:
        r.header(1, "quantize: calibrate on calib.npz, int8 parameters for CMSIS-NN")
        r.run([*fixpoint, "quantize", m, "--calib", cal, "--method", args.method, "-o", prm])
        r.done()

        r.header(2, "evaluate: float vs int8 on test.npz, layer by layer (bit-exact reference kernels)")
        r.run([*fixpoint, "evaluate", m, prm, "--data", tst, "--report-json", ev])
        r.done()

        r.header(3, "generate: the model's C sources into the firmware tree (firmware/fixpoint.toml)")
        r.run([*fixpoint, "generate", "--project", shown(project)])
        r.done()

        r.header(4, "build: the firmware (Makefile, arm-none-eabi-gcc, CMSIS-NN) for qemu-m4, and run it")
        if target_ok:
            build = os.path.relpath(OUT / "firmware", FIRMWARE)  # make -C: relative to the firmware tree
            make = ["make", "-C", shown(FIRMWARE), f"BUILD={build}", f"CMSIS_NN={checkout}"]
            r.run([*make, f"-j{args.jobs}"])
            app_output = r.run([*make, "--no-print-directory", "-s", "run"], capture=True)
            print(app_output, end="")
            (OUT / "app.txt").write_text(app_output)
        else:
            r.skip("4 build (make -C firmware; make run)", args.host_only)
        r.done()

        r.header(5, "flash-verify: flash QEMU's mps2-an386, read each layer over its UART, compare; memory")
        if target_ok:
            command = "verify" if missing.gdb else "flash-verify"
            if missing.gdb:
                print(
                    "gdb-multiarch is missing (sudo apt-get install gdb-multiarch): the GDB-stub flash route"
                    " is replaced by `fixpoint verify` (QEMU semihosting), the same comparison"
                )
            src, built = shown(FIRMWARE / "src" / "model"), shown(OUT / "qemu-m4")
            options = [
                "--src",
                src,
                "--data",
                tst,
                "--cases",
                str(args.cases),
                "--build-dir",
                built,
                "--json",
            ]
            try:
                r.run([*fixpoint, command, "--project", shown(project), *options], redirect=verify)
            finally:
                if verify.is_file() and verify.stat().st_size:
                    print_verify(json.loads(verify.read_text()))
        else:
            r.skip("5 flash-verify", args.host_only)
        r.done()
    except StepFailed as exc:
        r.failed.append(str(exc))
        print(f"\nFAILED: {exc}", file=sys.stderr)

    r.header(6, "summary")
    summary(evaluation, verify, app_output, r)

    if evaluation.is_file():
        r.header(7, "report: one self-contained HTML page (per-layer error, histograms, memory, verdict)")
        report = [*fixpoint, "report", "--evaluation", ev]
        if verify.is_file() and verify.stat().st_size:
            report += ["--verify", shown(verify)]
        report += ["--params", prm, "--model", m, "--calib", cal, "-o", shown(OUT / "report.html")]
        try:
            r.run([*report, "--report-json", shown(OUT / "report.json")])
        except StepFailed as exc:
            r.failed.append(str(exc))
        r.done()

    total = time.monotonic() - r.started
    print()
    if r.skipped:
        print(f"skipped: {'; '.join(r.skipped)}")
        for reason in missing.blocking:
            print(f"  needs {reason}")
    if r.failed:
        print(f"FAILED in {total:.0f} s: {r.failed[0]}")
        return 1
    print(f"done in {total:.0f} s; open {shown(OUT / 'report.html')}")
    return 0


def print_verify(report: dict[str, Any]) -> None:
    """The per-layer comparison table (what flash-verify prints without --json)."""
    if report.get("verdict") in ("error", "bad-input"):
        print(f"verification {report['verdict']}: {report.get('error')}")
        return
    rows = [("#", "layer", "bytes", "mismatched", "float SQNR dB", "first mismatch (case, channel, index)")]
    for i, layer in enumerate(report["layers"]):
        first = layer.get("first_mismatch")
        where = (
            (
                f"case {first['case']}, ch {first['channel']}, {tuple(first['index'])}: "
                f"{first['expected']} != {first['actual']}"
            )
            if first
            else ""
        )
        sqnr = layer.get("float_sqnr_db")
        rows.append(
            (
                str(i),
                layer["name"],
                str(layer["bytes"]),
                str(layer["mismatched_bytes"]),
                "" if sqnr is None else f"{sqnr:.2f}",
                where,
            )
        )
    widths = [max(len(row[c]) for row in rows) for c in range(len(rows[0]))]
    for row in rows:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
    print(f"target {report['target']} via {report['channel']}; {report['cases']} cases ({report['inputs']})")
    print(
        f"memory: flash {report['flash_bytes']} of {report['flash_budget']} bytes, RAM {report['ram_bytes']}"
        f" of {report['ram_budget']} bytes (arena {report['arena_bytes']}, scratch {report['scratch_bytes']})"
    )
    print(f"{report['verdict'].upper()}: {report['mismatched_bytes_total']} mismatched bytes")


def summary(evaluation: Path, verify: Path, app_output: str, r: Runner) -> None:
    if evaluation.is_file():
        ev = json.loads(evaluation.read_text())
        print(
            f"accuracy  float top-1 {100 * ev['top1_float']:.2f} %, int8 top-1 {100 * ev['top1_int8']:.2f} %"
            f" on {ev['samples']} test images; agreement {100 * ev['agreement']:.2f} %"
        )
        worst = next((layer for layer in ev["layers"] if layer["name"] == ev["worst_layer"]), None)
        worst_text = f"; worst layer {worst['name']} {worst['sqnr_db']:.2f} dB" if worst else ""
        print(f"error     output SQNR {ev['output_sqnr_db']:.2f} dB{worst_text}")
    if verify.is_file() and verify.stat().st_size:
        v = json.loads(verify.read_text())
        if v.get("verdict") in ("pass", "fail"):
            print(
                f"memory    flash {v['flash_bytes']:,} of {v['flash_budget']:,} B, RAM {v['ram_bytes']:,} of"
                f" {v['ram_budget']:,} B (arena {v['arena_bytes']:,} B, scratch {v['scratch_bytes']:,} B)"
            )
            print(
                f"verified  {v['verdict'].upper()} on {v['target']}: {v['mismatched_bytes_total']} mismatched"
                f" bytes over {v['cases']} cases, {len(v['layers'])} layers each"
            )
            if v["verdict"] != "pass":
                r.failed.append(f"verification on {v['target']}: {v['mismatched_bytes_total']} bytes differ")
        else:
            print(f"verified  {v.get('verdict')}: {v.get('error')}")
    correct = [line for line in app_output.splitlines() if line.endswith(" correct")]
    if correct:
        print(f"firmware  {correct[-1]} test images on qemu-m4 (firmware/src/main.c)")
    if r.skipped:
        print(f"skipped   {'; '.join(r.skipped)}")


if __name__ == "__main__":
    sys.exit(main())
