"""Running a case and classifying its outcome.

A case's setup builds its inputs in a fresh workspace and returns a Plan: `fixpoint` commands (Steps, run
in order in the workspace) or a language-server scenario, plus checks of what they left. The outcome is
the most severe of:

    crash     a traceback, a signal, MemoryError/RecursionError, the memory watchdog
    hang      the time limit passed (the process tree is killed)
    outside   a file created, changed or removed outside the workspace
    damaged   a pre-existing file changed by a command that failed, or a half-written output set
    injected  hostile text from a model or setting became code in generated C or a linker script
    accepted  exit 0 where a refusal was expected
    refused   a non-zero exit where success was expected (a legal input turned away)
    unclear   a refusal whose message is empty, several lines, lacks the file/option/node it must name,
              or whose exit status is not the expected one
    pass      everything as a correct product behaves
"""

from __future__ import annotations

import re
import time
import traceback
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.hostile import process
from tests.hostile.workspace import Fixtures, Workspace, changed, file_hashes, remove_tree, surroundings

OUTCOMES = ("crash", "hang", "outside", "damaged", "injected", "accepted", "refused", "unclear", "pass")
"""Most severe first."""
ERROR = "error"
"""Not an outcome of the product: the runner could not set the case up (reported, never hidden)."""
DEFAULT_TIMEOUT_S = 60.0
HANG_TIMEOUT_S = 30.0
"""For cases built to hang: a fixed product refuses them in seconds."""

_TRACEBACK = re.compile(r"Traceback \(most recent call last\)|\b(MemoryError|RecursionError)\b")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
"""Control characters (a CR, an ESC sequence) that let a hostile name forge or recolour a terminal line."""
_WARNING = re.compile(r"^(fixpoint[\w -]*: )?warning: ", re.IGNORECASE)


@dataclass(frozen=True)
class Step:
    """One `fixpoint` command and what a correct product does with it."""

    argv: Sequence[str]
    exits: frozenset[int] = frozenset({0})
    names: Sequence[str | tuple[str, ...]] = ()
    """Text the one-line message must contain (a tuple: any of its members); compared case-insensitively."""
    timeout: float = DEFAULT_TIMEOUT_S
    env: dict[str, str] = field(default_factory=dict)
    fsize: int | None = None
    """RLIMIT_FSIZE for the command (a write past it fails, as on a full disk)."""
    message: bool | None = None
    """Whether a non-zero exit must come with a one-line message naming `names` (default: for refusals)."""

    @property
    def refusal(self) -> bool:
        return 0 not in self.exits

    @property
    def needs_message(self) -> bool:
        return self.refusal if self.message is None else self.message


def ok(*argv: str, **kw: Any) -> Step:
    return Step(argv, **kw)


def refuse(
    *argv: str, names: Sequence[str | tuple[str, ...]] = (), exits: Iterable[int] = (1, 2), **kw: Any
) -> Step:
    return Step(argv, frozenset(exits), names, **kw)


def usage(*argv: str, names: Sequence[str | tuple[str, ...]] = (), **kw: Any) -> Step:
    """A bad option value: exit 2, naming the option."""
    return Step(argv, frozenset({2}), names, **kw)


Check = Callable[[Workspace], "tuple[str, str] | None"]
"""A check of what the commands left: None, or (outcome, detail)."""


@dataclass
class Plan:
    steps: Sequence[Step] = ()
    lsp: Any = None
    """A lsp_client.Scenario instead of steps."""
    checks: Sequence[Check] = ()
    protect: Sequence[str] = ()
    """Workspace files that must keep their bytes whatever the commands do."""


Setup = Callable[[Workspace], Plan]
"""Builds a case's inputs in its fresh workspace and says what to run."""


@dataclass(frozen=True)
class Case:
    id: str
    klass: str
    """The issue's class: injection, high, exhaustion, boundary, numbers, tracebacks, unclear, lsp."""
    setup: Setup
    about: str = ""
    needs: tuple[str, ...] = ()
    """What the case cannot run without (kit.NEEDS: cmsis-nn, arm, git, gcc, ...): skipped, with why."""


@dataclass(frozen=True)
class Result:
    case: str
    klass: str
    outcome: str
    detail: str
    seconds: float
    also: tuple[str, ...] = ()
    """Other outcomes the case had besides the most severe one (a crash that also damaged outputs)."""


# -- classification ------------------------------------------------------------------------------------


def message_lines(stderr: str) -> list[str]:
    """The lines of an error message, warnings left out."""
    return [line for line in stderr.strip().splitlines() if line.strip() and not _WARNING.match(line)]


def classify_step(step: Step, done: process.Finished) -> tuple[str, str]:
    """(outcome, detail) of one finished command against what `step` expects."""
    label = f"`fixpoint {_short(' '.join(step.argv))}`"
    if done.killed == "memory":
        return "crash", f"{label}: killed by the memory watchdog (RSS above {process.MEMORY_LIMIT >> 30} GiB)"
    if done.killed == "output":
        return "crash", f"{label}: killed after writing more than {process.OUTPUT_LIMIT >> 20} MiB of output"
    if done.killed == "timeout":
        return "hang", f"{label}: no end within {step.timeout:g} s"
    if done.returncode < 0:
        return "crash", f"{label}: killed by signal {-done.returncode}"
    found = _TRACEBACK.search(done.stderr)
    if found:
        return "crash", f"{label}: {_last_line(done.stderr)} ({found.group(0)})"
    if done.returncode in step.exits:
        return _message_outcome(step, done, label) if done.returncode and step.needs_message else ("pass", "")
    if done.returncode == 0:
        return "accepted", f"{label}: exit 0, expected a refusal naming {_names(step)}"
    if not step.refusal:
        return "refused", f"{label}: exit {done.returncode}: {_last_line(done.stderr) or '(no message)'}"
    return (
        "unclear",
        f"{label}: exit {done.returncode}, expected {sorted(step.exits)}: {_last_line(done.stderr)}",
    )


def _message_outcome(step: Step, done: process.Finished, label: str) -> tuple[str, str]:
    lines = message_lines(done.stderr)
    if not lines:
        return "unclear", f"{label}: exit {done.returncode} with no message"
    if len(lines) > 1:
        return "unclear", f"{label}: a message of {len(lines)} lines: {_short(' | '.join(lines), 240)}"
    if _CONTROL.search(lines[0]):
        return "unclear", f"{label}: raw control characters in the message: {_short(lines[0])}"
    text = lines[0].lower()
    missing = [
        n for n in step.names if not any(a.lower() in text for a in ((n,) if isinstance(n, str) else n))
    ]
    if missing:
        return "unclear", f"{label}: message lacks {_names(step, missing)}: {_short(lines[0])}"
    return "pass", ""


def _names(step: Step, names: Sequence[str | tuple[str, ...]] | None = None) -> str:
    chosen = step.names if names is None else names
    return (
        ", ".join(repr(n) if isinstance(n, str) else " or ".join(map(repr, n)) for n in chosen) or "its cause"
    )


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return _short(lines[-1]) if lines else ""


def _short(text: str, chars: int = 160) -> str:
    text = text.encode("unicode_escape").decode("ascii") if not text.isprintable() else text
    return text if len(text) <= chars else text[: chars - 3] + "..."


def worst(outcomes: Iterable[tuple[str, str]]) -> tuple[str, str]:
    """The most severe (outcome, detail); the runner's own ERROR first of all."""
    found = [o for o in outcomes if o[0] != "pass"]
    rank = (ERROR, *OUTCOMES)
    return min(found, key=lambda o: rank.index(o[0])) if found else ("pass", "")


# -- running -------------------------------------------------------------------------------------------


def run_steps(w: Workspace, steps: Sequence[Step]) -> list[tuple[str, str]]:
    """Run the steps in order, stopping at the first that does not pass."""
    outcomes = []
    for n, step in enumerate(steps):
        before = file_hashes(w.ws) if step.refusal else {}
        done = process.run(
            w.product.cli(list(step.argv)), w.ws, w.product.env(step.env), step.timeout,
            w.case_dir / "logs" / str(n), step.fsize,
        )  # fmt: skip
        outcomes.append(classify_step(step, done))
        if step.refusal and before:
            after = file_hashes(w.ws)
            damaged = [name for name, digest in before.items() if after.get(name) != digest]
            if damaged:
                outcomes.append(("damaged", f"changed by a failing command: {', '.join(damaged[:5])}"))
        if worst(outcomes)[0] != "pass":
            break
    return outcomes


def run_case(case: Case, fixtures: Fixtures, folder: Path, keep: bool = False) -> Result:
    """Set up, run and classify one case in `folder`/<id>; the folder is removed afterwards unless `keep`."""
    started = time.monotonic()
    case_dir = folder / case.id.replace("/", "__")
    w = Workspace(case_dir, fixtures)
    try:
        outcomes = _run(case, w)
    except Exception as exc:  # the runner's own failure: reported as such, never as a product outcome
        where = traceback.format_exc(limit=-2).splitlines()[-3]
        outcomes = [(ERROR, f"{type(exc).__name__}: {exc} [{where}]")]
    finally:
        w.close()
        if not keep:
            remove_tree(case_dir)
    first = worst(outcomes)
    also = tuple(sorted({name for name, _ in outcomes if name not in ("pass", first[0])}))
    return Result(case.id, case.klass, first[0], first[1], time.monotonic() - started, also)


def _run(case: Case, w: Workspace) -> list[tuple[str, str]]:
    plan = case.setup(w)
    hashes = file_hashes(w.ws) if plan.protect else {}
    protected = {name: hashes.get(name) for name in plan.protect}
    outside_before = surroundings(w.case_dir)
    if plan.lsp is not None:
        from tests.hostile.lsp_client import run_scenario

        outcomes = [run_scenario(w, plan.lsp)]
    else:
        outcomes = run_steps(w, plan.steps)
    outcomes += [found for check in plan.checks if (found := check(w)) is not None]
    now = file_hashes(w.ws) if plan.protect else {}
    damaged = [name for name, digest in protected.items() if now.get(name) != digest]
    if damaged:
        outcomes.append(("damaged", f"changed: {', '.join(damaged)}"))
    moved = [p for p in changed(outside_before, surroundings(w.case_dir)) if p not in ("logs", "ws")]
    if moved:
        outcomes.append(("outside", f"written outside the workspace: {', '.join(moved[:5])}"))
    return outcomes


def run_all(
    cases: Sequence[Case],
    fixtures: Fixtures,
    folder: Path,
    jobs: int = 2,
    on_result: Callable[[Result], None] | None = None,
    keep: bool = False,
) -> list[Result]:
    """Every case, `jobs` at a time (threads: the work is in child processes); results in case order."""
    folder.mkdir(parents=True, exist_ok=True)

    def one(case: Case) -> Result:
        result = run_case(case, fixtures, folder, keep)
        if on_result is not None:
            on_result(result)
        return result

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        return list(pool.map(one, cases))
