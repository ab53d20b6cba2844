"""Judges shared by the whole test run: one `python -m harness serve` per spawn configuration (the options that
decide how its workers start, and the environment variables that change containment), started the first time a
test asks for it and ended with the run. A test that only needs versions judged pays for no judge of its own, nor
for its spare workers and their torch imports.

Tests reach them two ways:
- `judge_many` (conftest) sends versions to one directly;
- kerneltui's own judge clients (the scheduler's judges, `kerneltui eval`, `kerneltui agent`, the MCP server)
  start "the harness's Python" ($KERNELTUI_PYTHON), which for the run is tests/judge_relay.py: it passes its
  `-m harness serve` requests and the judge's lines through a Unix socket to the hub here, which sends them to the
  shared judge for the relay's options, each request with the options the relay was started with. Anything else
  the relay is asked to run goes to the real Python. A test that is about a judge process of its own (its start,
  its exit, its spares) takes the `own_judges` fixture.

Every shared judge runs as on a hostile box: its environment holds secrets (API keys, a ~/.netrc) that no output
may show, and its workers' folders go under a temp folder of its own, which the tests check is left clean.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import queue
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

REPO = Path(__file__).parent.parent
RELAY = Path(__file__).parent / "judge_relay.py"
SECRET = "sk-ant-api03-kerneltui-exploit-secret"
# Workers' limits for every shared judge: small enough that a memory or disk hog is stopped fast.
BASE_ARGS = ("--max-memory-mb", "4000", "--max-file-mb", "64")
# Options that decide how a judge starts its workers: a judge of its own for each set of values. The others
# go with each request.
SPAWN_KEYS = ("sandbox", "fork", "max_memory_mb", "max_file_mb", "arch")
# Environment variables that change what a judge or its workers do: part of a shared judge's configuration.
SPAWN_ENV = ("KERNELTUI_BWRAP", "CUDA_VISIBLE_DEVICES")
# A judge whose workers have no bubblewrap and are started afresh (not forked with namespaces of their own):
# Landlock, seccomp and the judge's watch on their own.
LANDLOCK_ONLY: tuple[tuple[str, ...], dict[str, str]] = (("--no-fork",), {"KERNELTUI_BWRAP": "none"})
READY_S = 300.0

Listener = Callable[[dict[str, Any] | None], None]  # a request's events; None: the judge is gone


class JudgeGone(Exception):
    """The shared judge exited or stopped answering; the message holds its stderr's tail."""


class SharedJudge:
    """One judge process, and the thread that hands each of its events to the listener of the request it is about.
    Requests may come from several threads: they are judged one at a time, in the order sent."""

    def __init__(self, serve_args: tuple[str, ...], env: dict[str, str]) -> None:
        self.argv = [sys.executable, "-m", "harness", "serve", *BASE_ARGS, *serve_args]
        self.env = env
        self.proc: subprocess.Popen[str] | None = None
        self.lock = threading.Lock()
        self.listeners: dict[str, Listener] = {}
        self.ids = itertools.count(1)
        self.stderr: IO[str] | None = None
        self.ready_line = ""

    @property
    def tmp(self) -> Path:
        """Where its workers' folders go (its TMPDIR)."""
        return Path(self.env["TMPDIR"])

    def ready(self) -> str:
        """Its ready line, once it has started (started now if it is not running)."""
        with self.lock:
            if self.proc is None or self.proc.poll() is not None:
                self._start()
            return self.ready_line

    def _start(self) -> None:
        self.stderr = tempfile.TemporaryFile("w+")  # noqa: SIM115  (read back when the judge fails)
        proc = subprocess.Popen(
            self.argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.stderr,
            text=True,
            cwd=REPO,
            env=self.env,
            start_new_session=True,
        )
        assert proc.stdout is not None
        self.ready_line = proc.stdout.readline()  # its first line, once its workers are started
        if '"ready"' not in self.ready_line:
            proc.kill()
            raise JudgeGone(f"the shared judge did not start: {self.ready_line!r} {self.stderr_tail()}")
        self.proc = proc
        threading.Thread(target=self._read, args=(proc,), daemon=True, name="shared-judge-reader").start()

    def _read(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            try:
                event = json.loads(line)
            except ValueError:
                continue
            rid = str(event.get("id")) if isinstance(event, dict) else ""
            with self.lock:
                listener = self.listeners.get(rid)
                if listener is not None and event.get("event") in ("done", "error"):
                    del self.listeners[rid]
            if listener is not None:
                listener(event)
        proc.wait()
        with self.lock:
            gone, self.listeners = list(self.listeners.values()), {}
        for listener in gone:
            listener(None)

    def submit(self, request: dict[str, Any], listener: Listener) -> str:
        """Sends one request; its events go to `listener`, in the reader's thread. Its id here."""
        self.ready()
        with self.lock:
            assert self.proc is not None and self.proc.stdin is not None
            rid = f"shared-{next(self.ids)}"
            self.listeners[rid] = listener
            try:
                self.proc.stdin.write(json.dumps({**request, "id": rid}) + "\n")
                self.proc.stdin.flush()
            except OSError:
                del self.listeners[rid]
                raise JudgeGone(f"the shared judge is gone; {self.stderr_tail()}") from None
        return rid

    def judge(self, paths: list[Path], wait_s: float = 1800, **request: object) -> dict[str, dict]:
        """Each path's evaluation (a refused version: {"error": ...}), by path and by stem, judged in order."""
        events: queue.Queue[tuple[Path, dict[str, Any] | None]] = queue.Queue()
        for path in paths:
            self.submit({"path": str(path), **request}, lambda event, p=path: events.put((p, event)))  # type: ignore[misc]
        deadline = time.monotonic() + wait_s
        found: dict[str, dict] = {}
        while len(found) < len(paths):
            try:
                path, event = events.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                self.stop(grace=0)
                raise JudgeGone(f"no answer from the shared judge in {wait_s:g} s; {self.stderr_tail()}") from None
            if event is None:
                raise JudgeGone(f"the shared judge exited; {self.stderr_tail()}")
            if event.get("event") == "done":
                found[str(path)] = event["evaluation"]
            elif event.get("event") == "error":
                found[str(path)] = {"error": event["error"]}
        found.update({Path(key).stem: value for key, value in list(found.items())})
        return found

    def stderr_tail(self, chars: int = 3000) -> str:
        if self.stderr is None:
            return ""
        self.stderr.flush()
        self.stderr.seek(0)
        return self.stderr.read()[-chars:]

    def stop(self, grace: float = 30) -> None:
        """Closes its input (it finishes what it judges and exits); killed with its workers past `grace` s."""
        with self.lock:
            proc, self.proc = self.proc, None
        if proc is None:
            return
        with contextlib.suppress(OSError, ValueError):
            assert proc.stdin is not None
            proc.stdin.close()
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                proc.terminate()  # it ends its workers and removes its folders
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, 9)
                proc.wait()


class SharedJudges:
    """The run's shared judges by configuration, and the hub their relays connect to."""

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="kerneltui-shared-judges-"))
        self.home = self.root / "home"
        self.home.mkdir()
        (self.home / ".netrc").write_text(f"machine api password {SECRET}\n")
        self.judges: dict[tuple[tuple[str, ...], tuple[tuple[str, str], ...]], SharedJudge] = {}
        self.lock = threading.Lock()
        self.hub = Hub(self, self.root / "hub.sock")
        self.python = self.root / "python"  # what kerneltui takes for the harness's Python: the relay
        self.python.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{RELAY}" "$@"\n')
        self.python.chmod(0o755)

    def get(self, serve_args: tuple[str, ...] = (), env: dict[str, str] | None = None) -> SharedJudge:
        key = (tuple(serve_args), tuple(sorted((env or {}).items())))
        with self.lock:
            if key not in self.judges:
                tmp = self.root / f"tmp-{len(self.judges)}"
                tmp.mkdir()
                full_env = dict(
                    os.environ,
                    ANTHROPIC_API_KEY=SECRET,
                    MY_SERVICE_TOKEN=SECRET,
                    HOME=str(self.home),
                    TMPDIR=str(tmp),
                    **(env or {}),
                )
                for name in ("KERNELTUI_PYTHON", "KERNELTUI_JUDGE_HUB"):  # the judge and its workers are real
                    full_env.pop(name, None)
                self.judges[key] = SharedJudge(tuple(serve_args), full_env)
            return self.judges[key]

    def stop(self) -> None:
        self.hub.close()
        for judge in self.judges.values():
            judge.stop(grace=5)  # an evaluation a finished test left behind is not waited for long
        shutil.rmtree(self.root, ignore_errors=True)


class Hub:
    """Accepts relays on a Unix socket: each says how its judge was started, then passes requests and gets back the
    judge's lines, with its own request ids."""

    def __init__(self, judges: SharedJudges, path: Path) -> None:
        self.judges = judges
        self.path = path
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(str(path))
        self.server.listen(64)
        threading.Thread(target=self._accept, daemon=True, name="judge-hub").start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return  # closed
            threading.Thread(target=RelayClient(self.judges, conn).serve, daemon=True, name="judge-hub-client").start()

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.server.close()


class RelayClient:
    """One relay: a judge as kerneltui started it (`python -m harness serve FLAGS`), served by a shared one."""

    def __init__(self, judges: SharedJudges, conn: socket.socket) -> None:
        self.judges, self.conn = judges, conn
        self.reader = conn.makefile("r", encoding="utf-8")
        self.lock = threading.Lock()
        self.pending = 0
        self.ended = False  # its input closed: it ends once nothing it sent is still being judged
        self.once = False
        self.closed = False

    def serve(self) -> None:
        try:
            hello = json.loads(self.reader.readline() or "{}")
            judge, defaults = self._judge_for(hello.get("args", []), hello.get("env", {}))
            self._send(judge.ready())
            for line in self.reader:
                if line.strip():
                    self._request(judge, defaults, line)
        except (OSError, ValueError, JudgeGone) as exc:
            with contextlib.suppress(OSError):
                self._send(json.dumps({"event": "error", "error": f"test judge hub: {exc}", "id": None}) + "\n")
            self._close()
            return
        with self.lock:
            self.ended = True
            done = self.pending == 0
        if done:
            self._close()

    def _judge_for(self, args: list[str], env: dict[str, str]) -> tuple[SharedJudge, dict[str, Any]]:
        from harness.contract import options

        parser = argparse.ArgumentParser()
        options.add_arguments(parser)
        parser.add_argument("--once", action="store_true")
        given = parser.parse_args(args)
        self.once = given.once
        values = options.given(given)
        spawn = {k: v for k, v in values.items() if k in SPAWN_KEYS}
        flags = options.Options().updated(spawn).to_argv()
        wanted_env = {k: v for k, v in env.items() if k in SPAWN_ENV}
        return self.judges.get(tuple(flags), wanted_env), {k: v for k, v in values.items() if k not in SPAWN_KEYS}

    def _request(self, judge: SharedJudge, defaults: dict[str, Any], line: str) -> None:
        request = json.loads(line)
        own_id = request.pop("id", None)

        def listen(event: dict[str, Any] | None) -> None:
            if event is None:  # the shared judge died: so did this one, as far as its client can tell
                self._close()
                return
            event["id"] = own_id
            with contextlib.suppress(OSError):
                self._send(json.dumps(event) + "\n")
            if event.get("event") in ("done", "error"):
                with self.lock:
                    self.pending -= 1  # `--once` ends after one evaluation (a refused request is not one)
                    finished = (self.once and event["event"] == "done") or (self.ended and self.pending == 0)
                if finished:
                    self._close()

        with self.lock:
            self.pending += 1
        judge.submit({**defaults, **request}, listen)

    def _send(self, text: str) -> None:
        self.conn.sendall(text.encode())

    def _close(self) -> None:
        with self.lock:
            if self.closed:
                return
            self.closed = True
        with contextlib.suppress(OSError):
            self.conn.shutdown(socket.SHUT_RDWR)
        self.conn.close()


_shared: SharedJudges | None = None


def shared_judges() -> SharedJudges:
    global _shared
    if _shared is None:
        _shared = SharedJudges()
    return _shared


def stop_shared_judges() -> None:
    if _shared is not None:
        _shared.stop()
