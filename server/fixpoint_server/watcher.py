"""File-system events for files the editor does not have open, from a watchdog observer thread.

Events are handed to the event loop (call_soon_threadsafe); the index decides whether a path matters and
the checker coalesces: many events in a burst become one check after DISK_DELAY. A change to
fixpoint.toml reloads the project settings first.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from watchdog.events import FileSystemEvent, FileSystemEventHandler
from watchdog.observers import Observer

from quantcore.project import FILENAME

if TYPE_CHECKING:
    from fixpoint_server.language_server import FixpointServer

log = logging.getLogger(__name__)


class _Handler(FileSystemEventHandler):
    def __init__(self, ls: FixpointServer, loop: asyncio.AbstractEventLoop) -> None:
        self.ls, self.loop = ls, loop

    def on_any_event(self, event: FileSystemEvent) -> None:
        if event.is_directory or event.event_type in ("opened", "closed_no_write"):
            return
        paths = [_path(event.src_path)]
        if getattr(event, "dest_path", ""):
            paths.append(_path(event.dest_path))
        for path in paths:
            self.loop.call_soon_threadsafe(_changed, self.ls, path, event.event_type)


def _path(raw: bytes | str) -> Path:
    return Path(raw.decode() if isinstance(raw, bytes) else raw)


def _changed(ls: FixpointServer, path: Path, event_type: str) -> None:
    from fixpoint_server.checker import DISK_DELAY

    if path in ls.index.open_docs and event_type != "deleted":
        return  # the editor's buffer is the truth for an open document
    if path.name == FILENAME and path.parent == ls.index.root:
        ls.reload_project()
        ls.checker.request(DISK_DELAY)
        return
    if ls.index.changed_on_disk(path):  # a path that is no longer a file counts as deleted there
        ls.checker.request(DISK_DELAY)


def start_watching(ls: FixpointServer) -> Any:
    """A started observer on the workspace root (None when the platform refuses one: checks still run
    on editor events)."""
    try:
        observer = Observer()
        observer.schedule(_Handler(ls, asyncio.get_event_loop()), str(ls.index.root), recursive=True)
        observer.daemon = True
        observer.start()
        ls.index.watching = True  # events now say what changed on disk: no stat of every file per check
    except (OSError, RecursionError) as exc:
        # inotify's watch limit; or watchdog's recursive os.walk on folders nested ~1,000 deep
        why = "folders nest too deep" if isinstance(exc, RecursionError) else str(exc)
        log.warning("not watching %s: %s", ls.index.root, why)
        ls.warn(
            f"Fixpoint is not watching {ls.index.root} for changes ({why}); files are checked again when"
            " you edit or save them, or with Check Workspace"
        )
        return None
    return observer
