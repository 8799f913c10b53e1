"""Where `fixpoint quantize` spends its time, beside ONNX Runtime's quantize_static on the same model/data.

    python bench/quantize_profile.py [--models lenet5 dscnn mbv2] [--dir DIR] [--calib 100] [--top 12]
                                     [--repeat 3] [--method minmax]

For each Fashion-MNIST benchmark net (bench/fashion_mnist; train.py makes them, into --dir) and the first
--calib images of calib_1000.npz, in the same run:
  1. the wall time of the whole CLI process `fixpoint quantize MODEL --calib DATA -o JSON` (default
     automatic choices: equalization, bias correction, pools), best of --repeat (runs alternate with 2's);
  2. ONNX Runtime quant_pre_process + quantize_static (QDQ, per-channel QInt8, MinMax), as a fresh
     process too (python start and imports included, like the CLI; torch hidden, as run.py's peer
     processes do: importing it would add seconds onnxruntime does not need) and in-process once warm
     (the figure bench/fashion_mnist/run.py reports);
  3. a cProfile of each phase of the command in this process (load the model, load the data, quantize,
     write the JSON): the top --top entries by cumulative time, Fixpoint's own functions first;
  4. the imports of the CLI process (python -X importtime): the top --top by cumulative time.
Wall time on a shared machine is noisy: compare the figures of one run, not across runs.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "fashion_mnist"))

import fmnist  # noqa: E402
import peers  # noqa: E402

ORT_SCRIPT = """
import sys, time
start = time.perf_counter()
sys.path.insert(0, {bench!r})
sys.modules["torch"] = None  # as peers.py's own process (run.py): onnxruntime's quantizer without torch
import numpy as np, peers
from pathlib import Path
with np.load({calib!r}) as npz:
    x = npz["x"]
peers.ort_quantize(Path({model!r}), x, {method!r}, Path({work!r}))
"""


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["lenet5", "dscnn", "mbv2"])
    parser.add_argument("--dir", type=Path, default=fmnist.default_cache(), help="where MODEL.onnx are")
    parser.add_argument("--calib", type=int, default=100, help="calibration images (a multiple of 50)")
    parser.add_argument("--top", type=int, default=12, help="profile entries shown per phase")
    parser.add_argument("--repeat", type=int, default=3, help="process runs timed (the best is shown)")
    parser.add_argument("--method", default="minmax", choices=["minmax", "percentile", "entropy", "mse"])
    return parser.parse_args()


def best_walls(commands: list[list[str]], repeat: int) -> list[float]:
    """Per command, the shortest wall time of `repeat` runs (the least disturbed by other load); the
    commands take turns, so a change in the machine's load falls on all of them alike."""
    times: list[list[float]] = [[] for _ in commands]
    for _ in range(repeat):
        for command, taken in zip(commands, times, strict=True):
            start = time.perf_counter()
            subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            taken.append(time.perf_counter() - start)
    return [min(taken) for taken in times]


def cli_command(model: Path, calib: Path, out: Path, method: str) -> list[str]:
    flags = ["--calib", str(calib), "--method", method, "-o", str(out)]
    return [sys.executable, "-m", "quantcore.cli", "quantize", str(model), *flags]


def ort_process_command(model: Path, calib: Path, work: Path) -> list[str]:
    script = ORT_SCRIPT.format(
        bench=str(HERE / "fashion_mnist"), calib=str(calib), model=str(model), method="MinMax", work=str(work)
    )
    return [sys.executable, "-c", script]


def profiled(label: str, top: int, work: Callable[[], Any]) -> Any:
    """Run `work` under cProfile; print its time and its top entries by cumulative time."""
    profile = cProfile.Profile()
    start = time.perf_counter()
    result = profile.runcall(work)
    seconds = time.perf_counter() - start
    text = io.StringIO()
    stats = pstats.Stats(profile, stream=text)
    stats.sort_stats("cumulative").print_stats("quantcore", top)
    print(f"  -- phase {label}: {seconds:.3f} s (under cProfile)")
    print("\n".join("    " + line for line in _entries(text.getvalue())))
    return result


def _entries(report: str) -> list[str]:
    """The table lines of a pstats report (header and rows), paths shortened to the package."""
    lines = report.splitlines()
    start = next((i for i, line in enumerate(lines) if line.lstrip().startswith("ncalls")), len(lines))
    return [_short(line) for line in lines[start:] if line.strip()]


def _short(line: str) -> str:
    marker = line.find("quantcore/")
    if marker < 0:
        return line
    head = line[:marker]
    cut = head.rfind(" ") + 1
    return head[:cut] + line[marker:]


def profile_phases(model_path: Path, calib: Path, out: Path, method: str, top: int) -> None:
    from quantcore import pipeline
    from quantcore.calibrate.method import Method, RangeMethod
    from quantcore.quantize import params_json

    model = profiled("load_model", top, lambda: pipeline.load_model(model_path))
    data = profiled("load_data", top, lambda: pipeline.load_data(calib, model.graph))
    options = pipeline.QuantizeOptions(method=RangeMethod(Method(method)))
    result = profiled("quantize", top, lambda: pipeline.quantize(model, data, options))
    profiled("write", top, lambda: params_json.write(out, result.document))


def import_times(command: list[str], top: int) -> list[str]:
    """The slowest imports of the CLI process by cumulative microseconds (python -X importtime)."""
    run = subprocess.run(
        [command[0], "-X", "importtime", *command[1:]], capture_output=True, text=True, check=True
    )
    rows = []
    for line in run.stderr.splitlines():
        if not line.startswith("import time:") or "cumulative" in line:
            continue
        _, cumulative, name = line.split("|")
        rows.append((int(cumulative), name.rstrip()))
    rows.sort(reverse=True)
    return [f"    {us / 1e6:7.3f} s  {name}" for us, name in rows[:top]]


def main() -> int:
    args = parse_args()
    fmnist.byte_compile()  # the CLI timed as installed: no module compiled again in every process
    with tempfile.TemporaryDirectory(prefix="fixpoint-qprofile-") as tmp:
        work = Path(tmp)
        calib = work / f"calib_{args.calib}.npz"
        with np.load(args.dir / "calib_1000.npz") as npz:
            np.savez(calib, x=npz["x"][: args.calib])
        rows = []
        for name in args.models:
            model = args.dir / f"{name}.onnx"
            out = work / f"{name}.json"
            print(f"== {name}", flush=True)
            cli = cli_command(model, calib, out, args.method)
            ours, ort_process = best_walls([cli, ort_process_command(model, calib, work)], args.repeat)
            with np.load(calib) as npz:
                x = npz["x"]
            peers.ort_quantize(model, x, "MinMax", work)  # warm-up: imports and one-off initialisation
            ort_warm = min(peers.ort_quantize(model, x, "MinMax", work)[1] for _ in range(args.repeat))
            rows.append((name, ours, ort_process, ort_warm))
            profile_phases(model, calib, work / f"{name}.profile.json", args.method, args.top)
            print("  -- imports of the CLI process (cumulative)")
            print("\n".join(import_times(cli, args.top)))
        print(f"\nwall time, best of {args.repeat} ({args.calib} calibration images, --method {args.method})")
        print(
            "| net | fixpoint quantize (process) | ORT pre-process + quantize_static (process) |"
            " ORT in-process, warm | ours / ORT process |"
        )
        print("|---|---:|---:|---:|---:|")
        for name, ours, ort_process, ort_warm in rows:
            print(
                f"| {name} | {ours:.2f} s | {ort_process:.2f} s | {ort_warm:.2f} s"
                f" | {ours / ort_process:.2f} |"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
