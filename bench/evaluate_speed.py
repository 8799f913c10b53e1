"""Benchmark: `fixpoint evaluate` wall time over the Fashion-MNIST test set, two source trees side by side.

    python bench/evaluate_speed.py --before TREE [--after TREE] [--base TREE] [--models lenet5 dscnn ...]
                                   [--samples 10000] [--cache DIR] [--profile] [--repeat R]

Each net (trained and exported by bench/fashion_mnist/run.py or train.py into the benchmark cache) is
quantized once with default options and 100 calibration images, by the --before tree (an older tree may
refuse a newer quantizer's document - a transform it does not know - while a newer one reads older
documents); then `fixpoint
evaluate MODEL params.json --data test.npz --report-json R` runs as a whole CLI process with PYTHONPATH
pointing at --before (e.g. a checkout of main) and at --after (this tree by default), one after the other
in the same run. Printed per net: both wall times, their ratio, whether the int8 top-1 is the same in
every report (the integer results must not change), and the largest relative difference between the
reports' other figures (0 when identical): from issue 20's work on, evaluate's float reference runs with
onnxruntime's graph optimizations (float32 rounding: about 1e-6 of a figure) and its sums in another
order of additions (about 1e-15); more than FIGURES_DIFFER fails the run.
Beside the wall time, the CPU time (user + system) of each evaluate process and its threads: on a shared
machine it moves less with the load than wall time does. --base adds a third tree (e.g. the code before
a whole series of changes), run and compared the same way; ratios are then given against it too.
--busy N runs N other processes that each keep a core busy for the whole measurement: a shared machine
made reproducible (the figures of issue 20, 15-105 s before its work, were taken on the benchmark machine
under such load; the tree before it runs its matrix products on all of OpenBLAS's threads, which then
wait for each other - 3x slower there than on an idle machine, where it took 4.5-32 s).
--profile writes a cProfile of each evaluate (the .prof files beside the reports) and prints its top
functions by cumulative time.
Wall time on a shared machine is noisy: compare the ratio within one run, and use --repeat (the two
sides alternate, so a burst of load elsewhere hits both; the fastest run of each side is kept).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "fashion_mnist"))

import fmnist  # noqa: E402  (bench/fashion_mnist is not a package)

NETS = ("lenet5", "convbn", "dscnn", "mbv2", "outlier")
FIGURES_DIFFER = 1e-3
"""Relative difference between two trees' figures taken as a changed result, not rounding (above)."""
# Each tree's own console entry: quantcore.cli.run where it has one (the quick exit), else main.
_CLI = "import sys; from quantcore import cli; getattr(cli, 'run', lambda: sys.exit(cli.main()))()"


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, required=True, help="source tree of the 'before' code")
    parser.add_argument("--after", type=Path, default=HERE.parent, help="source tree of the 'after' code")
    parser.add_argument("--base", type=Path, help="a third tree, e.g. before a whole series of changes")
    parser.add_argument("--models", nargs="+", default=list(NETS), choices=NETS)
    parser.add_argument("--samples", type=int, default=10000, help="first N test images")
    parser.add_argument("--cache", type=Path, default=fmnist.default_cache(), help="benchmark cache")
    parser.add_argument("--profile", action="store_true", help="cProfile each evaluate")
    parser.add_argument("--busy", type=int, default=0, help="other processes keeping a core busy each")
    parser.add_argument(
        "--repeat", type=int, default=1, help="runs per side, alternating before/after; the fastest counts"
    )
    return parser.parse_args()


def quantize(tree: Path, model: Path, calib: Path, params: Path) -> None:
    command = [*_python(_CLI), "quantize", str(model), "--calib", str(calib), "-o", str(params)]
    subprocess.run(command, check=True, env=_env(tree), stdout=subprocess.DEVNULL)


def evaluate(
    tree: Path, model: Path, params: Path, data: Path, samples: int, report: Path, profile: bool
) -> tuple[float, float]:
    """Wall time and CPU time (user + system, its threads included) of one `fixpoint evaluate` process
    run from `tree`."""
    cli = ["evaluate", str(model), str(params), "--data", str(data), "--samples", str(samples)]
    cli += ["--report-json", str(report)]
    if profile:
        prof = report.with_suffix(".prof")
        code = f"import cProfile; from quantcore.cli import main; cProfile.run('main()', {str(prof)!r})"
        command = [*_python(code), *cli]
    else:
        command = [*_python(_CLI), *cli]
    start, before = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(command, check=True, env=_env(tree), stdout=subprocess.DEVNULL)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return time.perf_counter() - start, cpu


def _python(code: str) -> list[str]:
    # sys.argv[0] is "-c"; the CLI reads sys.argv[1:]. The tree comes from PYTHONPATH (_env); -P keeps
    # `python -c` from putting the working directory ahead of it: run from inside a checkout, both sides
    # would otherwise import that checkout's quantcore and time the same code.
    return [sys.executable, "-P", "-c", code]


def _env(tree: Path) -> dict[str, str]:
    root = tree.resolve()
    return {**os.environ, "PYTHONPATH": f"{root}{os.pathsep}{root / 'server'}"}


def top_functions(prof: Path, count: int = 12) -> str:
    import io
    import pstats

    out = io.StringIO()
    pstats.Stats(str(prof), stream=out).sort_stats("cumulative").print_stats(count)
    lines = out.getvalue().splitlines()
    start = next(i for i, line in enumerate(lines) if "ncalls" in line)
    return "\n".join(lines[start : start + count + 1])


@contextlib.contextmanager
def busy_cores(count: int) -> Iterator[None]:
    """`count` processes spinning on a core each while the body runs (the load of a shared machine)."""
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]
    try:
        yield
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()


def main() -> int:
    args = parse_args()
    with busy_cores(args.busy):
        return measure(args)


def measure(args: argparse.Namespace) -> int:
    paths = fmnist.write_arrays(args.cache)
    trees = {"before": args.before, "after": args.after} | ({"base": args.base} if args.base else {})
    for tree in trees.values():
        fmnist.byte_compile(tree)  # each timed as installed: no module compiled again in every process
    rows = []
    with tempfile.TemporaryDirectory(prefix="evaluate-speed-") as tmp:
        work = Path(tmp)
        for net in args.models:
            model = args.cache / f"{net}.onnx"
            if not model.exists():
                print(f"{net}: {model} is missing; run bench/fashion_mnist/train.py first", file=sys.stderr)
                return 1
            params = work / f"{net}.json"
            # the oldest tree quantizes: a newer one reads older documents, not the reverse
            quantize(args.base or args.before, model, paths["calib_100"], params)
            wall = dict.fromkeys(trees, float("inf"))
            cpu = dict.fromkeys(trees, float("inf"))
            reports = {}
            for _ in range(args.repeat):
                for side, tree in trees.items():
                    report = work / f"{net}.{side}.report.json"
                    seconds, cpu_seconds = evaluate(
                        tree, model, params, paths["test"], args.samples, report, args.profile
                    )
                    wall[side], cpu[side] = min(wall[side], seconds), min(cpu[side], cpu_seconds)
                    reports[side] = json.loads(report.read_text())
                    if args.profile:
                        print(
                            f"--- {net} {side}: {seconds:.1f} s\n{top_functions(report.with_suffix('.prof'))}"
                        )
            same = all(r.get("top1_int8") == reports["after"].get("top1_int8") for r in reports.values())
            differ = max(largest_difference(r, reports["after"]) for r in reports.values())
            rows.append((net, wall, cpu, (same, differ), reports["after"]))
    busy = f", {args.busy} core(s) kept busy by other processes" if args.busy else ""
    print(f"\nfixpoint evaluate, {args.samples} images, whole CLI process{busy}: wall / CPU (user+sys) s")
    print("(fastest of the runs; speed-ups are the 'after' tree's)")
    header = "".join(f"{side:>14}" for side in trees)
    ratios = "".join(f"{'x vs ' + side:>13}" for side in trees if side != "after")
    print(f"{'net':<8}{header}  {ratios}  int8 same  figures differ  top-1 int8  SQNR dB")
    for net, wall, cpu, (same, differ), report in rows:
        cells = "".join(f"{wall[side]:7.2f}/{cpu[side]:6.2f}" for side in trees)
        speedups = "".join(
            f"{wall[side] / wall['after']:6.1f}/{cpu[side] / cpu['after']:5.1f}x "
            for side in trees
            if side != "after"
        )
        top1 = report.get("top1_int8")
        print(
            f"{net:<8}{cells}  {speedups} {same!s:<9}  {differ:14.1e}  "
            f"{'-' if top1 is None else f'{100 * top1:.2f}':>10}  {report['output_sqnr_db']:7.2f}"
        )
    return 0 if all(row[3][0] and row[3][1] <= FIGURES_DIFFER for row in rows) else 1


def largest_difference(a: object, b: object) -> float:
    """The largest relative difference between two reports' numbers (inf where their structure, a string
    or an infinity differs)."""
    if isinstance(a, dict) and isinstance(b, dict):
        if a.keys() != b.keys():
            return float("inf")
        return max((largest_difference(a[k], b[k]) for k in a), default=0.0)
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return float("inf")
        return max((largest_difference(x, y) for x, y in zip(a, b, strict=True)), default=0.0)
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and a != b:
        scale = max(abs(a), abs(b))
        return abs(a - b) / scale if scale not in (0.0, float("inf")) else float("inf")
    return 0.0 if a == b else float("inf")


if __name__ == "__main__":
    sys.exit(main())
