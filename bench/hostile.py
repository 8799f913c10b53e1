"""The hostile-input benchmark of issue 17: run the corpus (tests/hostile) and print the per-class figures.

    .venv/bin/python bench/hostile.py [--jobs 2] [--source DIR] [--only CLASS] [--case TEXT] [--json]

Every case runs the product as a user would (`python -m quantcore.cli ...`, `python -m fixpoint_server`)
in a fresh workspace, under a time limit and a memory watchdog. `--source DIR` runs another checkout of
this repository (DIR and DIR/server first on PYTHONPATH; nothing of it is imported here), e.g. the tree
before the fixes: `git worktree add /tmp/fixpoint-before 8f2e2f7`. Prints the corpus size, per class the
cases and each outcome's count, then the cases that did not pass with one line of detail each.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.hostile.cases import CLASSES, corpus  # noqa: E402
from tests.hostile.kit import missing  # noqa: E402
from tests.hostile.runner import ERROR, OUTCOMES, Result, run_all  # noqa: E402
from tests.hostile.workspace import Fixtures, Product, remove_tree  # noqa: E402

COLUMNS = (
    "cases",
    "pass",
    "crash",
    "hang",
    "damaged",
    "outside",
    "injected",
    "accepted",
    "refused",
    "unclear",
)


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--jobs", type=int, default=2, help="cases run at once (default 2)")
    p.add_argument("--source", type=Path, default=REPO, help="the checkout to run (default: this one)")
    p.add_argument("--only", choices=CLASSES, action="append", help="run only this class (repeatable)")
    p.add_argument("--case", action="append", help="run only cases whose id contains this text (repeatable)")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    p.add_argument("--keep", type=Path, help="build fixtures and workspaces here and keep them")
    return p.parse_args()


def table(results: list[Result], skipped: dict[str, str], seconds: float, source: Path) -> str:
    lines = [f"hostile-input corpus: {len(results) + len(skipped)} cases ({len(skipped)} skipped), "
             f"checkout {source}, {seconds:.0f} s", ""]  # fmt: skip
    lines.append(f"{'class':12}" + "".join(f"{c:>9}" for c in COLUMNS))
    for klass in [*CLASSES, "total"]:
        chosen = [r for r in results if klass in ("total", r.klass)]
        counts = Counter(r.outcome for r in chosen)
        row = [len(chosen), *(counts[c] for c in COLUMNS[1:])]
        lines.append(f"{klass:12}" + "".join(f"{v:>9}" for v in row))
    hidden = Counter(also for r in results for also in r.also)
    if hidden:
        lines.append(
            "also found behind a more severe outcome: "
            + ", ".join(f"{name} {hidden[name]}" for name in OUTCOMES if hidden[name])
        )
    errors = [r for r in results if r.outcome == ERROR]
    if errors:
        lines.append(f"\n{len(errors)} cases could not be set up (runner errors, not product outcomes)")
    failing = sorted((r for r in results if r.outcome != "pass"), key=lambda r: r.case)
    if failing:
        lines += ["", "not passing:"]
        lines += [f"  {r.case:55} {r.outcome:9} {r.detail}{_also(r)}" for r in failing]
    if skipped:
        lines += ["", "skipped:"] + [f"  {case:55} needs {why}" for case, why in sorted(skipped.items())]
    return "\n".join(lines)


def _also(result: Result) -> str:
    return f" (also {', '.join(result.also)})" if result.also else ""


def as_json(results: list[Result], skipped: dict[str, str], seconds: float, source: Path) -> str:
    classes = {
        klass: {"cases": sum(r.klass == klass for r in results),
                **{o: sum(r.klass == klass and r.outcome == o for r in results) for o in (*OUTCOMES, ERROR)}}
        for klass in CLASSES
    }  # fmt: skip
    return json.dumps({
        "source": str(source), "size": len(results) + len(skipped), "seconds": round(seconds, 1),
        "classes": classes,
        "results": [{"case": r.case, "class": r.klass, "outcome": r.outcome, "detail": r.detail,
                     "also": list(r.also), "seconds": round(r.seconds, 2)} for r in results],
        "skipped": skipped,
    }, indent=1)  # fmt: skip


def main() -> int:
    args = parse_args()
    cases = [c for c in corpus() if (not args.only or c.klass in args.only)]
    cases = [c for c in cases if not args.case or any(text in c.id for text in args.case)]
    skipped = {c.id: ", ".join(absent) for c in cases if (absent := missing(c.needs))}
    runnable = [c for c in cases if c.id not in skipped]
    folder = args.keep or Path(tempfile.mkdtemp(prefix="fixpoint-hostile-"))
    product = Product(args.source.resolve())
    started = time.monotonic()

    def progress(result: Result) -> None:
        print(f"{result.outcome:9} {result.seconds:5.1f} s  {result.case}", file=sys.stderr, flush=True)

    try:
        fixtures = Fixtures(folder / "fixtures", product)
        results = run_all(
            runnable, fixtures, folder / "cases", args.jobs, progress, keep=args.keep is not None
        )
    finally:
        if args.keep is None:
            remove_tree(folder)
    seconds = time.monotonic() - started
    print((as_json if args.json else table)(results, skipped, seconds, product.source))
    return 0


if __name__ == "__main__":
    sys.exit(main())
