"""When to re-check and what to publish: debounced, coalesced runs of the rules off the event loop.

Editor events (didOpen/didChange/didSave) ask for a check after EDIT_DELAY. File-system events ask
for one DISK_DELAY after the last of a burst (each event pushes the run back, but never more than
MAX_WAIT after the first), so a `git checkout` touching a thousand files is one run. A request that
arrives during a run makes exactly one more run afterwards, and a checkWorkspace during a run waits
for it: one run at a time. The rules run in a daemon thread (a check stuck in a slow model import
must not keep the process alive after `exit`); publishing happens on the event loop. After each run,
every document that had diagnostics and has none now is published empty, so fixed problems
disappear; unchanged files are not published again.

The rules run incrementally (rules/incremental.py): the index says what changed since the previous run
(an edited document, a file-system event), and only the rules and files that change invalidates are
checked again; the rest of the findings are the previous run's.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from fixpoint_server.findings import Finding
from fixpoint_server.index import WorkspaceIndex
from fixpoint_server.rules import finish, selected
from fixpoint_server.rules.incremental import Engine

EDIT_DELAY = 0.0
"""None: an edit is checked at once. Edits that arrive while a check runs are coalesced into the one run
that follows it, and the changes pygls reads in one go are all applied before the run starts, so a wait
would only add its length to every keystroke's latency."""
DISK_DELAY = 0.25
MAX_WAIT = 2.0
log = logging.getLogger(__name__)

T = TypeVar("T")
Publisher = Callable[[dict[Path, list[Finding]]], None]
"""Receives, per file, its findings (an empty list clears the file's diagnostics)."""


class Checker:
    def __init__(self, index: WorkspaceIndex, publish: Publisher, extra: Callable[[], list[Finding]]) -> None:
        self.index = index
        self.publish = publish
        self.extra = extra
        """Findings that do not come from the rules (fixpoint.toml problems)."""
        self.findings: list[Finding] = []
        self.runs = 0
        self._published: dict[Path, tuple[list[Finding], int | None]] = {}
        self._due: float | None = None
        self._first: float | None = None
        self._wakeup: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None
        self._one_at_a_time: asyncio.Lock | None = None
        self._stopped = False
        self._engine: Engine | None = None
        self._generation: int | None = None
        """The index generation of the last successful run's snapshot."""

    def request(self, delay: float = EDIT_DELAY) -> None:
        """Ask for a check `delay` seconds from now: an editor's request (EDIT_DELAY) keeps the earliest
        due time; a file-system request (DISK_DELAY) moves it to `delay` after the latest event."""
        if self._stopped:
            return
        now = time.monotonic()
        self._first = self._first if self._due is not None and self._first is not None else now
        if delay >= DISK_DELAY:
            due = min(now + delay, self._first + MAX_WAIT)
            self._due = due if self._due is None else max(self._due, due)
        else:
            self._due = now + delay if self._due is None else min(self._due, now + delay)
        if self._task is None or self._task.done():
            self._wakeup = asyncio.Event()
            self._task = asyncio.get_running_loop().create_task(self._loop())
        assert self._wakeup is not None
        self._wakeup.set()

    def stop(self) -> None:
        """No more checks (shutdown): the pending one is cancelled, a running one is left to finish."""
        self._stopped = True
        self._due = None
        if self._task is not None:
            self._task.cancel()

    async def run_now(self) -> list[Finding]:
        """Check immediately (a command's "check workspace"); returns the findings."""
        await self._run()
        return self.findings

    async def _loop(self) -> None:
        while self._due is not None:
            wait = self._due - time.monotonic()
            if wait > 0:
                assert self._wakeup is not None
                self._wakeup.clear()
                with contextlib.suppress(TimeoutError):  # due: run; woken: a new due time
                    await asyncio.wait_for(self._wakeup.wait(), wait)
                continue
            self._due = self._first = None
            await self._run()

    async def _run(self) -> None:
        self._one_at_a_time = self._one_at_a_time or asyncio.Lock()
        async with self._one_at_a_time:  # two runs at once would race over the shared FactsCache
            await self._check()

    def check_rules(self) -> list[Finding]:
        """The rules' findings for the index's current snapshot, reusing the previous run's where the
        changes since do not reach them (runs in the checking thread, one at a time)."""
        generation = self.index.generation
        context = self.index.context()
        context.changes = self.index.changes_since(self._generation)
        modules = selected(context)
        if self._engine is None or self._engine.modules != modules:
            self._engine = Engine(modules)
        self._generation = None  # until this run has succeeded
        found = self._engine.run(context, generation)
        self._generation = generation
        return finish(context, (f for findings in found.values() for f in findings))

    async def _check(self) -> None:
        started = time.perf_counter()
        try:
            findings = await in_daemon_thread(self.check_rules)
        except Exception:  # never let one failed run stop the server's checking
            log.exception("check failed")
            return
        self.findings = findings + self.extra()
        self.runs += 1
        if self.runs == 1:
            # The index's facts are hundreds of thousands of long-lived objects: keep them out of the
            # cyclic collector's full passes, which otherwise stall a keystroke's check now and then.
            gc.collect()
            gc.freeze()
        log.info(
            "check %d: %d findings in %.0f ms (slowest: %s)",
            self.runs,
            len(self.findings),
            1e3 * (time.perf_counter() - started),
            self._slowest(),
        )
        self._publish()

    def _slowest(self) -> str:
        """The three slowest parts of the last run (the C workspace's update is parsing what changed)."""
        spent = self._engine.spent if self._engine is not None else {}
        top = sorted(spent.items(), key=lambda item: -item[1])[:3]
        return ", ".join(f"{name.rsplit('.', 1)[-1]} {1e3 * seconds:.0f} ms" for name, seconds in top)

    def _publish(self) -> None:
        """Publish what changed: a file whose findings differ from the last published ones, a file
        with findings no more (an empty list clears it), and an open document edited since (the
        editor wants diagnostics for its new version, even when they are the same)."""
        grouped: dict[Path, list[Finding]] = {}
        for finding in self.findings:
            grouped.setdefault(finding.path, []).append(finding)
        for path in self._published.keys() - grouped.keys():
            grouped[path] = []
        changed = {}
        for path, findings in grouped.items():
            version = self.index.open_docs.get(path, (None, ""))[0]
            if self._published.get(path) != (findings, version):
                changed[path] = findings
                self._published[path] = (findings, version)
        self._published = {p: v for p, v in self._published.items() if v[0]}
        self.publish(changed)


async def in_daemon_thread(function: Callable[..., T], *args: object) -> T:
    """`function(*args)` in a daemon thread, awaited. The event loop's default executor would do, but
    its threads are joined when the process exits: one stuck thread and `exit` never ends."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()

    def settle(result: T | None, error: Exception | None) -> None:
        if future.done():
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)  # type: ignore[arg-type]

    def work() -> None:
        try:
            result, error = function(*args), None
        except Exception as exc:  # handed to the awaiting coroutine, which decides
            result, error = None, exc
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: nobody waits any more
            loop.call_soon_threadsafe(settle, result, error)

    threading.Thread(target=work, name="fixpoint-check", daemon=True).start()
    return await future
