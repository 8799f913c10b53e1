"""Benchmark of the CLI's start-up, as the editor pays it on every command it spawns (prints figures; not a
test): the wall time of `python -c pass` (the interpreter's own floor), `fixpoint --help`, `fixpoint check`
on the shipped broken example and `fixpoint generate --help`, median and minimum of --runs runs each.

With --before DIR (another checkout of this repository, e.g. `git worktree add /tmp/fixpoint-before
<commit>`), every command runs in both trees in the same run, alternately, so that the ratio between them
does not depend on how loaded the machine was; each tree is put first on PYTHONPATH (its quantcore and its
server/fixpoint_server), the interpreter and installed packages are this environment's.

    .venv/bin/python bench/startup.py [--runs 10] [--before /tmp/fixpoint-before] [--after DIR]
"""

from __future__ import annotations

import argparse
import os
import platform
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
COMMANDS = {
    "python -c pass": None,
    "fixpoint --help": ["--help"],
    "fixpoint check examples/broken": ["check", "{tree}/examples/broken"],
    "fixpoint generate --help": ["generate", "--help"],
}
"""What is timed: a label and the CLI's arguments ({tree}: the checkout's folder); None: the bare
interpreter."""
EXPECTED_STATUS = (0, 1)
"""--help exits 0; check exits 1 on the broken example (its seeded errors)."""


def command_line(argv: list[str] | None, tree: Path) -> list[str]:
    if argv is None:
        return [sys.executable, "-c", "pass"]
    script = Path(sys.executable).with_name("fixpoint")  # the installed console script, as the editor runs it
    start = [str(script)] if script.is_file() else [sys.executable, "-m", "quantcore.cli"]
    return [*start, *(arg.format(tree=tree) for arg in argv)]


def environment(tree: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(tree), str(tree / "server")])
    env.pop("FIXPOINT_DEBUG", None)
    return env


def seconds(command: list[str], env: dict[str, str], cwd: str) -> float:
    started = time.perf_counter()
    done = subprocess.run(command, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    elapsed = time.perf_counter() - started
    if done.returncode not in EXPECTED_STATUS:
        sys.exit(f"{shlex.join(command)} exited {done.returncode}:\n{done.stderr.decode(errors='replace')}")
    return elapsed


def measure(trees: dict[str, Path], runs: int) -> dict[tuple[str, str], list[float]]:
    """Every command in every tree, `runs` rounds, interleaved; times in seconds."""
    times: dict[tuple[str, str], list[float]] = {(c, t): [] for c in COMMANDS for t in trees}
    with tempfile.TemporaryDirectory() as cwd:  # no ./fixpoint.toml, no checkout as the current folder
        for _ in range(runs):
            for label, argv in COMMANDS.items():
                for name, tree in trees.items():
                    command = command_line(argv, tree)
                    times[label, name].append(seconds(command, environment(tree), cwd))
    return times


def report(times: dict[tuple[str, str], list[float]], trees: dict[str, Path], runs: int) -> str:
    floor = {t: statistics.median(times["python -c pass", t]) for t in trees}
    header = f"{'command':34}" + "".join(f"{name + ' median':>16}{'min':>9}{'x floor':>9}" for name in trees)
    if "before" in trees:
        header += f"{'after/before':>14}"
    lines = [f"wall time of {runs} runs each, ms (x floor: median / median of `python -c pass`)", header]
    for label in COMMANDS:
        row = f"{label:34}"
        for name in trees:
            median, least = statistics.median(times[label, name]), min(times[label, name])
            row += f"{median * 1000:16.1f}{least * 1000:9.1f}{median / floor[name]:9.1f}"
        if "before" in trees:
            ratio = statistics.median(times[label, "after"]) / statistics.median(times[label, "before"])
            row += f"{ratio:14.2f}"
        lines.append(row)
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10, help="runs of each command (default 10)")
    parser.add_argument("--before", type=Path, help="an older checkout to time beside --after")
    parser.add_argument("--after", type=Path, default=REPO, help="the checkout to time (default: this one)")
    args = parser.parse_args()
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    after = args.after.resolve()
    trees = {"this": after} if args.before is None else {"before": args.before.resolve(), "after": after}
    for tree in trees.values():
        if not (tree / "quantcore" / "cli.py").is_file():
            parser.error(f"{tree} is not a checkout of this repository (no quantcore/cli.py)")
    print(f"$ {shlex.join([Path(sys.executable).name, *sys.argv])}")
    print(f"python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} CPUs")
    for name, tree in trees.items():
        commit = subprocess.run(
            ["git", "-C", str(tree), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(tree), "status", "--porcelain"], capture_output=True, text=True
        )
        print(
            f"{name}: {tree.name} at {commit or '?'}{' (with uncommitted changes)' if dirty.stdout else ''}"
        )
    print(report(measure(trees, args.runs), trees, args.runs))


if __name__ == "__main__":
    main()
