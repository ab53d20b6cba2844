"""Watching a workspace for version files (watchdog), and telling when a written file is complete.

An agent may write a file in pieces, or write elsewhere and rename it in. A version is handed on
once it has stayed unchanged for `debounce` seconds and parses with a `custom_kernel` (or KernelBench's
class `ModelNew`); a file that does not parse yet is given `settle` seconds of quiet before it is judged as it
stands (a real syntax error then fails at load, as it should).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from watchdog.events import FileSystemEvent, FileSystemEventHandler
from watchdog.observers import Observer

from harness.contract import source
from harness.contract.problem_files import is_reference_name
from kerneltui.core.workspace import VERSION_RE, ignored_version

TICK_S = 0.01
CLOSED_WAIT_S = 0.05
WRITE_EVENTS = ("created", "modified", "moved", "closed", "deleted")


@dataclass
class Pending:
    due: float
    first_seen: float
    signature: tuple[int, int] | None


def is_version_path(path: Path, root: Path) -> bool:
    return path.parent.parent == root and bool(VERSION_RE.match(path.name))


def file_signature(path: Path) -> tuple[int, int] | None:
    try:
        stat = path.stat()
    except OSError:
        return None
    return stat.st_mtime_ns, stat.st_size


def looks_complete(path: Path) -> bool:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return False
    return source.defines(text, "custom_kernel") or source.defines(text, "ModelNew")  # ModelNew: KernelBench's form


class Debouncer:
    """Calls `ready(path)` once a changed file has been quiet long enough; `gone(path)` when deleted."""

    def __init__(
        self, ready: Callable[[Path], None], gone: Callable[[Path], None], debounce: float = 0.2, settle: float = 2.0
    ) -> None:
        self.ready, self.gone = ready, gone
        self.debounce, self.settle = debounce, settle
        self.pending: dict[Path, Pending] = {}
        self.lock = threading.Lock()
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._run, name="kerneltui-debounce", daemon=True)
        self.thread.start()

    def touched(self, path: Path, closed: bool = False) -> None:
        """closed: the writer closed the file (inotify's close-after-write), a much stronger sign that it
        is done than silence, so only a short wait; a file that does not parse yet still waits longer."""
        now = time.monotonic()
        wait = min(self.debounce, CLOSED_WAIT_S) if closed else self.debounce
        with self.lock:
            entry = self.pending.get(path)
            first = entry.first_seen if entry else now
            self.pending[path] = Pending(now + wait, first, file_signature(path))

    def deleted(self, path: Path) -> None:
        with self.lock:
            self.pending.pop(path, None)
        self.gone(path)

    def stop(self) -> None:
        self.stopped.set()
        self.thread.join(timeout=2)

    def _run(self) -> None:
        while not self.stopped.wait(TICK_S):
            for path in self._due():
                try:
                    self.ready(path)
                except Exception:  # a failing consumer must not stop the watching
                    continue

    def _due(self) -> list[Path]:
        now = time.monotonic()
        due = []
        with self.lock:
            for path, entry in list(self.pending.items()):
                if now < entry.due:
                    continue
                signature = file_signature(path)
                if signature is None:
                    del self.pending[path]
                elif signature != entry.signature:
                    entry.signature, entry.due = signature, now + self.debounce
                elif looks_complete(path) or now - entry.due >= self.settle:
                    del self.pending[path]
                    due.append(path)
        return due


class _Handler(FileSystemEventHandler):
    def __init__(self, watcher: WorkspaceWatcher) -> None:
        self.watcher = watcher
        self.root, self.debouncer, self.on_problem = watcher.root, watcher.debouncer, watcher.on_problem

    def on_any_event(self, event: FileSystemEvent) -> None:
        if event.event_type not in WRITE_EVENTS:
            return  # opening or reading a file (we read them too) is not a change
        if event.is_directory:
            for raw in (event.src_path, getattr(event, "dest_path", "")):
                if raw and Path(str(raw)).parent == self.root and event.event_type in ("created", "moved"):
                    self.watcher.watch_problem(Path(str(raw)))
            return
        paths = [Path(str(event.src_path))]
        if getattr(event, "dest_path", ""):
            paths.append(Path(str(event.dest_path)))
        for path in paths:
            if path.parent.parent == self.root and is_reference_name(path.name):
                self.on_problem(path.parent)  # problem.py or a file it reads: the person's, compared with the accepted
            elif is_version_path(path, self.root):
                if event.event_type == "deleted" or (event.event_type == "moved" and path == paths[0]):
                    self.debouncer.deleted(path)
                else:
                    self.debouncer.touched(path, closed=event.event_type == "closed")
            elif path.parent.parent == self.root and ignored_version(path) and event.event_type != "deleted":
                self.watcher.on_ignored(path)


class WorkspaceWatcher:
    """A watchdog observer over <workspace>/<problem>/vNNN.py, feeding a Debouncer.

    The workspace and each problem folder are watched one level deep, so the flood of files the
    ladder writes under .kerneltui/ never reaches the handler.
    """

    def __init__(
        self,
        root: Path,
        ready: Callable[[Path], None],
        gone: Callable[[Path], None],
        on_problem: Callable[[Path], None],
        debounce: float = 0.2,
        on_ignored: Callable[[Path], None] = lambda path: None,
    ) -> None:
        self.root = root
        self.on_problem, self.on_ignored = on_problem, on_ignored
        self.debouncer = Debouncer(ready, gone, debounce=debounce)
        self.observer = Observer()
        self.handler = _Handler(self)
        self.watched: set[Path] = set()

    def start(self) -> None:
        self.observer.schedule(self.handler, str(self.root), recursive=False)
        for folder in sorted(p for p in self.root.iterdir() if p.is_dir() and not p.name.startswith(".")):
            self.watch_problem(folder)
        self.observer.start()

    def watch_problem(self, folder: Path) -> None:
        if folder in self.watched or folder.name.startswith("."):
            return
        self.watched.add(folder)
        self.observer.schedule(self.handler, str(folder), recursive=False)
        for path in folder.glob("v*.py"):  # written between the folder's creation and this watch
            if is_version_path(path, self.root):
                self.debouncer.touched(path)
        if (folder / "problem.py").is_file():
            self.on_problem(folder)

    def stop(self) -> None:
        self.observer.stop()
        self.debouncer.stop()
        self.observer.join(timeout=2)
