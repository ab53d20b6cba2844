"""The one client of the judge: a `python -m harness serve` process in the GPU box's Python, fed requests as
JSON lines and read back through harness.contract.protocol, with what it says written into the history.

The scheduler keeps one per GPU for the dashboard; `kerneltui eval` starts one for a single version
(`--once`: no spare worker). Both record the judge's events with `record_event`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import queue
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from harness.contract import protocol
from harness.contract.options import Options
from harness.workers.process import judge_env, link_harness
from kerneltui.core import dump_budget
from kerneltui.history.store import Store


def harness_python() -> str:
    """The Python that runs the ladder: $KERNELTUI_PYTHON (the GPU box's torch), else this one."""
    return os.environ.get("KERNELTUI_PYTHON") or sys.executable


def harness_env(state: Path) -> dict[str, str]:
    """Environment for the judge: no secret (API keys live only in the agent's process), only what the
    ladder and CUDA read, and a path holding only our harness package: another Python (the GPU box's) has none,
    and this one may have found it only through its working folder (kerneltui run from a checkout it was not
    installed from), which the judge, started in its state folder, does not share."""
    env = dict(judge_env(), PYTHONUNBUFFERED="1", KERNELTUI_WATCH_PARENT="1")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (link_harness(state / "runtime"), os.environ.get("PYTHONPATH")) if p)
    return env


class JudgeProcess:
    """One judge: started with the ladder's options, given versions one at a time, its lines read by the caller."""

    def __init__(
        self,
        python: str,
        options: Options,
        state: Path,
        stderr: IO[str] | IO[bytes] | int,
        gpu: str | None = None,
        once: bool = False,
    ) -> None:
        options = dataclasses.replace(options, state_dir=state, best_us=None, race_with=None)  # sent per request
        self.argv = [python, "-m", "harness", "serve", *options.to_argv(), *(["--once"] if once else [])]
        self.env = harness_env(state)
        if gpu is not None:
            self.env["CUDA_VISIBLE_DEVICES"] = str(gpu)
        self.state, self.stderr = state, stderr
        self.proc: subprocess.Popen[str] | None = None

    def start(self) -> subprocess.Popen[str]:
        self.state.mkdir(parents=True, exist_ok=True)
        self.proc = subprocess.Popen(
            self.argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.stderr,  # a file, never a pipe: a pipe nobody drains blocks a chatty judge for good
            text=True,
            env=self.env,
            bufsize=1,
            start_new_session=True,
            cwd=self.state,  # `-m` puts the cwd first on sys.path: kerneltui's folder, not an agent's
        )
        return self.proc

    def submit(
        self, evaluation_id: int, path: Path, best: dict[str, Any], rungs: tuple[str, ...] | None = None
    ) -> None:
        """OSError when the judge is gone. `best`: Store.best_request's keys. `rungs`: these instead of the judge's
        own (a profile's)."""
        assert self.proc is not None and self.proc.stdin is not None
        request: dict[str, object] = {"id": evaluation_id, "path": str(path), **best}
        if rungs:
            request["rungs"] = list(rungs)
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()

    def lines(self) -> Iterator[str]:
        assert self.proc is not None and self.proc.stdout is not None
        yield from self.proc.stdout

    def stop(self, grace: float = 5.0) -> None:
        """Closes its input (it finishes what it judges and exits); killed past `grace` seconds."""
        if self.proc is None:
            return
        with contextlib.suppress(OSError, ValueError):
            assert self.proc.stdin is not None
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            end(self.proc)


def end(proc: subprocess.Popen[Any]) -> None:
    """Asks a judge to stop now (SIGTERM: it ends its workers and removes its folders), killed if it has not in
    ten seconds."""
    with contextlib.suppress(ProcessLookupError):
        proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def record_event(store: Store, evaluation_id: int, event: protocol.JudgeEvent, rung_index: int) -> None:
    """A judge's rung, result or failure for `evaluation_id`, written into the history."""
    if isinstance(event, protocol.RungFinished):
        store.add_rung(evaluation_id, rung_index, event.rung)
    elif isinstance(event, protocol.Finished):
        store.finish_evaluation(evaluation_id, event.evaluation)
        dumps = event.evaluation.rung("dumps")
        dump_budget.after_evaluation(store, evaluation_id, bool(dumps and dumps.ok and dumps.metrics.get("files")))
    elif isinstance(event, protocol.Failed):
        store.fail_evaluation(evaluation_id, event.error, status="error")


class Judge(JudgeProcess):
    """The scheduler's judge: its lines go to the scheduler's inbox from a thread of its own, with its exit."""

    def __init__(
        self,
        index: int,
        gpu: str | None,
        python: str,
        options: Options,
        state: Path,
        inbox: queue.Queue[tuple[str, Any, Any]],
    ) -> None:
        self.log_path = state / "logs" / f"judge-{index}.log"
        super().__init__(python, options, state, subprocess.DEVNULL, gpu)  # a log per start, opened there
        self.index, self.gpu, self.inbox = index, gpu, inbox
        self.where = "this machine" if gpu is None else f"GPU {gpu}"
        self.busy: int | None = None
        self.busy_label = ""  # problem/version it judges now
        self.judged = 0  # evaluations it finished (failures of the judge aside)
        self.device: dict[str, Any] = {}
        self.ready = False
        self.restarts = 0
        self.log: IO[str] | None = None

    def start(self) -> subprocess.Popen[str]:
        if self.log:
            self.log.close()
        self.log = self.stderr = open(self.log_path, "a")  # noqa: SIM115  (kept open for the process's life)
        self.ready = False
        proc = super().start()
        threading.Thread(target=self._read, args=(proc,), name=f"kerneltui-judge-{self.index}", daemon=True).start()
        return proc

    def _read(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            self.inbox.put(("line", self, line))
        proc.wait()
        self.inbox.put(("judge-exit", self, proc))

    def submit(
        self, evaluation_id: int, path: Path, best: dict[str, Any], rungs: tuple[str, ...] | None = None
    ) -> None:
        self.busy = evaluation_id
        super().submit(evaluation_id, path, best, rungs)

    def stderr_tail(self, chars: int = 2000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:].strip()
        except OSError:
            return ""

    def stop(self, grace: float = 5.0) -> None:
        super().stop(grace)
        if self.log:
            self.log.close()
