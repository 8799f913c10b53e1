"""`fixpoint check`'s findings per rule and severity on real firmware trees (not a test: no asserts).

    .venv/bin/python bench/check_real_trees.py                       # the three trees below
    .venv/bin/python bench/check_real_trees.py path/to/tree ...      # others

The trees: CMSIS-NN's own repository ($FIXPOINT_CMSIS_NN or ~/.cache/fixpoint/cmsis-nn; its unit tests
pass bit-exact with their arrays as they are), examples/broken (every seeded mistake of its README must
still be found: the (file, rule) pairs tests/examples lists) and TensorFlow Lite Micro's
tensorflow/lite/micro ($FIXPOINT_TFLM_REPO or ~/.cache/fixpoint/tflite-micro: its kernels, examples and
tests, firmware Fixpoint did not write). A tree that is absent is reported as such. Prints, per tree, the
time of the check and a table of findings per rule and severity; for the broken example, which seeded
mistakes were found and at what severity.
"""

from __future__ import annotations

import collections
import os
import sys
import time
from pathlib import Path

from fixpoint_server.commands.check import check_path
from fixpoint_server.findings import Finding

REPO = Path(__file__).resolve().parents[1]
CACHE = Path.home() / ".cache" / "fixpoint"
BROKEN = REPO / "examples" / "broken"
SEEDED = (
    ("src/head.c", "unscaled-bias"),
    ("src/buffers.c", "misaligned-array"),
    ("src/head.c", "wrong-zero-point"),
    ("Makefile", "kernel-opt-level"),
    ("Makefile", "missing-cmsis-nn"),
    ("src/head.c", "missing-cmsis-nn"),
    ("src/model/model.c", "stale-generated"),
    ("src/model/model.h", "stale-generated"),
    ("src/model/model_data.c", "stale-generated"),
)
"""examples/broken/README.md's mistakes as (file, rule) pairs (tests/examples/test_examples.py)."""
SEVERITIES = ("error", "warning", "info", "hint")


def trees() -> list[tuple[str, Path]]:
    cmsis = Path(os.environ.get("FIXPOINT_CMSIS_NN") or CACHE / "cmsis-nn")
    tflm = Path(os.environ.get("FIXPOINT_TFLM_REPO") or CACHE / "tflite-micro")
    return [
        ("CMSIS-NN repository", cmsis),
        ("examples/broken", BROKEN),
        ("TFLM tensorflow/lite/micro", tflm / "tensorflow" / "lite" / "micro"),
    ]


def table(findings: list[Finding]) -> list[str]:
    counts: collections.Counter[tuple[str, str]] = collections.Counter(
        (f.code.code, f.effective_severity.value) for f in findings
    )
    rules = sorted({rule for rule, _ in counts})
    lines = [f"    {'rule':20}" + "".join(f"{s:>9}" for s in SEVERITIES) + f"{'total':>9}"]
    for rule in rules:
        row = [counts[(rule, s)] for s in SEVERITIES]
        lines.append(f"    {rule:20}" + "".join(f"{n:9d}" for n in row) + f"{sum(row):9d}")
    row = [sum(n for (_, s), n in counts.items() if s == severity) for severity in SEVERITIES]
    lines.append(f"    {'all':20}" + "".join(f"{n:9d}" for n in row) + f"{sum(row):9d}")
    return lines


def seeded(findings: list[Finding], root: Path) -> list[str]:
    found: dict[tuple[str, str], set[str]] = collections.defaultdict(set)
    for f in findings:
        found[(f.path.relative_to(root).as_posix(), f.code.code)].add(f.effective_severity.value)
    lines = []
    for where, rule in SEEDED:
        levels = ", ".join(sorted(found.get((where, rule), ()))) or "MISSING"
        lines.append(f"    seeded {rule:18} {where:24} {levels}")
    return lines


def report(name: str, path: Path) -> None:
    print(f"{name}: {path.relative_to(REPO) if path.is_relative_to(REPO) else path.name}")
    if not path.is_dir():
        print("    absent: skipped")
        return
    c_files = sum(1 for p in path.rglob("*") if p.suffix in (".c", ".cc", ".cpp") and p.is_file())
    started = time.perf_counter()
    findings, root = check_path(path)
    elapsed = time.perf_counter() - started
    print(f"    {c_files} C/C++ sources, checked in {elapsed:.1f} s, {len(findings)} findings")
    print("\n".join(table(findings)))
    if path == BROKEN:
        print("\n".join(seeded(findings, root)))


def main(paths: list[str]) -> None:
    print("$ " + " ".join(["python", "bench/check_real_trees.py", *paths]))
    chosen = [(p, Path(p).resolve()) for p in paths] or trees()
    for name, path in chosen:
        report(name, path)


if __name__ == "__main__":
    main(sys.argv[1:])
