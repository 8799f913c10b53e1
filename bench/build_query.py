"""Benchmark of the build query (server/fixpoint_server/parse/build_files/build_query.py; prints figures,
not a test): how long one `make -pnBk` takes on real Makefiles, and how often it runs while the rules
check on every keystroke.

- The shipped example's Makefile (examples/fashion/firmware: CMSIS-NN's integer kernels compiled from
  source, its $(filter-out ...) and $(patsubst ...) of them), with CMSIS-NN's sources copied into the
  tree (CMSIS_NN ?= CMSIS-NN), and a synthetic Makefile over --files sources ($(wildcard ...), pattern
  rules, an include).
- kernel-opt-level's check over that synthetic tree, --checks times, without and with the build query
  (background, as in the server): the time per check, and how many times make ran; then the same with
  the Makefile saved every 50 checks.

    .venv/bin/python bench/build_query.py [--runs 20] [--files 2000] [--checks 200]
"""

from __future__ import annotations

import argparse
import functools
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from fixpoint_server.index import WorkspaceIndex
from fixpoint_server.parse.build_files.build_query import BuildQuery, query_make
from fixpoint_server.rules import kernel_opt_level
from fixpoint_server.rules.build_facts import enable_build_query

from quantcore.project import Project

REPO = Path(__file__).resolve().parents[1]
CMSIS_NN = Path(os.environ.get("FIXPOINT_CMSIS_NN", Path.home() / ".cache" / "fixpoint" / "cmsis-nn"))


def figures(name: str, seconds: list[float]) -> None:
    ordered = sorted(seconds)
    p95 = ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]
    print(
        f"{name}: median {1e3 * statistics.median(ordered):.1f} ms, p95 {1e3 * p95:.1f} ms,"
        f" max {1e3 * ordered[-1]:.1f} ms ({len(ordered)} runs)"
    )


def timed(function: Callable[[], object], runs: int) -> list[float]:
    seconds = []
    for _ in range(runs):
        started = time.perf_counter()
        function()
        seconds.append(time.perf_counter() - started)
    return seconds


def example_tree(root: Path) -> Path | None:
    if not (CMSIS_NN / "Source").is_dir():
        print(f"the shipped example: skipped, no CMSIS-NN checkout at {CMSIS_NN} (FIXPOINT_CMSIS_NN)")
        return None
    firmware = root / "firmware"
    shutil.copytree(REPO / "examples" / "fashion" / "firmware", firmware)
    for part in ("Include", "Source"):
        shutil.copytree(CMSIS_NN / part, firmware / "CMSIS-NN" / part)
    makefile = firmware / "Makefile"  # its default checkout is in ~/.cache: the copy in the tree instead
    makefile.write_text(
        makefile.read_text().replace("CMSIS_NN ?= $(HOME)/.cache/fixpoint/cmsis-nn", "CMSIS_NN ?= CMSIS-NN")
    )
    (firmware / "src" / "model").mkdir(parents=True, exist_ok=True)
    (firmware / "src" / "model" / "model.h").write_text("int model_invoke(void);\n")
    return firmware


SYNTHETIC = """\
CC = arm-none-eabi-gcc
include config.mk
SRCS := $(wildcard src/*.c) $(wildcard CMSIS-NN/Source/*.c)
OBJS := $(SRCS:%.c=build/%.o)
KERNEL_CFLAGS := $(filter-out -O3,$(CFLAGS)) -O1
all: build/app.elf
build/app.elf: $(OBJS)
\t$(CC) $^ -o $@
build/CMSIS-NN/%.o: CMSIS-NN/%.c
\t$(CC) $(KERNEL_CFLAGS) -c $< -o $@
build/%.o: %.c
\t$(CC) $(CFLAGS) -c $< -o $@
"""


def synthetic_tree(root: Path, files: int) -> Path:
    tree = root / "synthetic"
    for i in range(files):
        folder = "CMSIS-NN/Source" if i % 10 == 0 else "src"
        path = tree / folder / f"f{i}.c"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"int f{i}(void) {{ return {i}; }}\n")
    (tree / "Makefile").write_text(SYNTHETIC)
    (tree / "config.mk").write_text("ifeq ($(DEBUG),1)\nCFLAGS += -O0 -g\nelse\nCFLAGS += -O3\nendif\n")
    return tree


def make_runs(name: str, makefile: Path, runs: int) -> None:
    result = query_make(makefile, makefile.parent)
    if result.problem is not None:
        print(f"{name}: make gave no answer: {result.problem}")
        return
    print(f"{name}: {len(result.compiled)} sources compiled in the dry run, {len(result.globals)} variables")
    figures(f"{name}: one make -pnBk", timed(lambda: query_make(makefile, makefile.parent), runs))


def checks(tree: Path, count: int) -> None:
    project = Project(path=tree / "fixpoint.toml", generated=tree / "generated")
    for asked in (False, True):
        index = WorkspaceIndex(tree, project)
        index.scan()
        query = BuildQuery(tree) if asked else None
        if query is not None:
            enable_build_query(index.cache, query)
            kernel_opt_level.check(index.context())
            query.wait(60)
        found = len(kernel_opt_level.check(index.context()))
        label = "with the build query" if asked else "text reader only"
        check = functools.partial(lambda i: kernel_opt_level.check(i.context()), index)
        figures(f"kernel-opt-level check, {label}", timed(check, count))
        if query is None:
            print(f"  {found} findings")
            continue
        print(f"  {found} findings; make ran {query.runs} time(s) for {count + 2} checks")
        makefile = tree / "Makefile"
        runs_before = query.runs
        for i in range(count):
            if i % 50 == 0:
                makefile.write_text(SYNTHETIC + f"# saved {i}\n")
            kernel_opt_level.check(index.context())
        query.wait(60)
        print(f"  {count} checks, the Makefile saved every 50: make ran {query.runs - runs_before} time(s)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--files", type=int, default=2000)
    parser.add_argument("--checks", type=int, default=200)
    args = parser.parse_args()
    print("$ " + " ".join([Path(sys.executable).name, *sys.argv]))
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        example = example_tree(root)
        if example is not None:
            make_runs("the shipped example's Makefile", example / "Makefile", args.runs)
        tree = synthetic_tree(root, args.files)
        make_runs(f"a synthetic Makefile over {args.files} sources", tree / "Makefile", args.runs)
        checks(tree, args.checks)


if __name__ == "__main__":
    main()
