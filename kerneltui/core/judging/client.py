"""The one client of a judge (JudgeClient: start, submit, stop; what the judge says delivered as typed messages)
over one of three transports: a local `python -m harness serve` process (LocalProcess, here), a judge on a GPU
box reached over SSH (kerneltui.core.judging.ssh_judges) or in a Ray actor (kerneltui.core.judging.ray_judges).
The scheduler keeps one client per GPU; `kerneltui eval` starts one for a single version (`once`: no spare
worker). Both record the judge's events with `record_event`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import os
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Protocol

from harness.containment.watch import killed_for_memory, oom_kills
from harness.contract import protocol
from harness.contract.options import Options
from harness.workers.env import judge_env, link_harness
from kerneltui.core.judging import dump_budget
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


def serve_options(options: Options, state: Path) -> list[str]:
    """`python -m harness serve`'s options for a judge of these ladder options (the best and the race are sent with
    each request, not fixed at its start)."""
    return dataclasses.replace(options, state_dir=state, best_us=None, race_with=None).to_argv()


# --- what a judge says to its client's owner --------------------------------------------------------------


@dataclass(frozen=True)
class JudgeSaid:
    """A line of the judge's output (harness.contract.protocol parses it)."""

    judge: JudgeClient
    generation: int  # which start of the judge said it: a restarted judge's old lines are told apart
    line: str


@dataclass(frozen=True)
class JudgeEnded:
    """The judge's process ended (its exit code, None where there is none to tell)."""

    judge: JudgeClient
    generation: int
    code: int | None


@dataclass(frozen=True)
class JudgeLost:
    """A judge elsewhere was lost (the connection dropped, the Ray node died): not the version's fault."""

    judge: JudgeClient
    generation: int
    reason: str


JudgeMessage = JudgeSaid | JudgeEnded | JudgeLost


@dataclass(frozen=True)
class Heard:
    """Where a transport reports, for one start of its judge, a line, its end, or its loss."""

    said: Callable[[str], None]
    ended: Callable[[int | None], None]
    lost: Callable[[str], None]


class Transport(Protocol):
    """How requests reach a judge and its lines come back."""

    where: str
    capacity: int  # requests it takes at once

    def start(self, heard: Heard) -> None: ...

    def send(self, request: dict[str, Any]) -> None:
        """OSError when the judge is gone."""

    def stop(self, grace: float) -> None: ...

    def tail(self, chars: int) -> str:
        """The end of what the judge wrote on its stderr (or what went wrong reaching it)."""


class JudgeClient:
    """One judge as its owner drives it, whatever carries the requests; what the judge says is delivered, typed,
    from the transport's own thread."""

    def __init__(self, index: int, transport: Transport, deliver: Callable[[JudgeMessage], None]) -> None:
        self.index, self.transport, self.deliver = index, transport, deliver
        self.where = transport.where
        self.generation = 0
        self.ready = False
        # the evaluations sent to it and not yet judged, by id: their problem/version. A local judge takes several
        # (it judges each one's verdict first, harness.judge.serve); a remote one, one at a time
        self.in_flight: dict[int, str] = {}
        self.capacity = transport.capacity
        self.started: set[int] = set()  # those of them it said it began (a parked one stays begun)
        self.judged = 0  # evaluations it finished (failures of the judge aside)
        self.device: dict[str, Any] = {}
        self.restarts = 0

    def start(self) -> None:
        self.generation += 1
        self.ready = False
        generation = self.generation
        self.transport.start(
            Heard(
                said=lambda line: self.deliver(JudgeSaid(self, generation, line)),
                ended=lambda code: self.deliver(JudgeEnded(self, generation, code)),
                lost=lambda reason: self.deliver(JudgeLost(self, generation, reason)),
            )
        )

    def done(self, evaluation_id: int) -> None:
        """It is judged (or refused): no longer the judge's."""
        self.in_flight.pop(evaluation_id, None)
        self.started.discard(evaluation_id)

    @property
    def has_room(self) -> bool:
        return self.ready and len(self.in_flight) < self.capacity

    def submit(
        self,
        evaluation_id: int,
        path: Path,
        best: dict[str, Any],
        rungs: tuple[str, ...] | None = None,
        label: str = "",
    ) -> None:
        """OSError when the judge is gone. `best`: Store.best_request's keys. `rungs`: these instead of the judge's
        own (a profile's)."""
        options = {**best, "rungs": list(rungs)} if rungs else dict(best)
        request = protocol.JudgeRequest(str(path), evaluation_id, options)  # what the judge's serve reads back
        self.in_flight[evaluation_id] = label
        try:
            self.transport.send(request.to_json())
        except OSError:
            self.in_flight.pop(evaluation_id, None)
            raise

    def stop(self, grace: float = 5.0) -> None:
        self.transport.stop(grace)

    def stderr_tail(self, chars: int = 2000) -> str:
        return self.transport.tail(chars)


IN_FLIGHT = protocol.MAX_PARKED + 2  # a local judge's requests at once: those parked, one judged, one waiting


class LocalProcess:
    """A judge in a process of this machine: `python -m harness serve`, its stderr in a log of its own (a file,
    never a pipe: a pipe nobody drains blocks a chatty judge for good)."""

    def __init__(
        self,
        python: str,
        options: Options,
        state: Path,
        gpu: str | None = None,
        once: bool = False,
        log_path: Path | None = None,
    ) -> None:
        self.argv = [python, "-m", "harness", "serve", *serve_options(options, state), *(["--once"] if once else [])]
        self.env = harness_env(state)
        if gpu is not None:
            self.env["CUDA_VISIBLE_DEVICES"] = str(gpu)
        self.where = "this machine" if gpu is None else f"GPU {gpu}"
        # requests sent ahead: one to judge and the rest waiting, so that the judge sees them and parks an evaluation
        # after its verdict; one at a time for a one-off evaluation
        self.capacity = 1 if once else IN_FLIGHT
        self.state, self.log_path = state, log_path
        self.log: IO[bytes] | None = None
        self.proc: subprocess.Popen[str] | None = None

    def start(self, heard: Heard) -> None:
        self.state.mkdir(parents=True, exist_ok=True)
        if self.log:
            self.log.close()
        # a log file of its own (appended across restarts), else a temporary one for a one-off evaluation
        self.log = open(self.log_path, "ab") if self.log_path else tempfile.TemporaryFile()  # noqa: SIM115
        try:
            self.proc = subprocess.Popen(
                self.argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=self.log,
                text=True,
                env=self.env,
                bufsize=1,
                start_new_session=True,
                cwd=self.state,  # `-m` puts the cwd first on sys.path: kerneltui's folder, not an agent's
            )
        except OSError as exc:  # no such Python ($KERNELTUI_PYTHON, [ladder] python): said where its stderr goes
            self.proc = None
            self.log.write(f"the judge's Python could not be started ({self.argv[0]}): {exc.strerror}\n".encode())
            heard.ended(None)
            return
        said = functools.partial(_read, self.proc, heard, self.log, oom_kills())
        threading.Thread(target=said, name="kerneltui-judge", daemon=True).start()

    def send(self, request: dict[str, Any]) -> None:
        if self.proc is None or self.proc.stdin is None:
            raise OSError("the judge was never started")
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()

    def stop(self, grace: float) -> None:
        if self.proc is not None:
            close_input(self.proc, grace)

    def tail(self, chars: int) -> str:
        if self.log is None:
            return ""
        try:
            self.log.flush()
            with open(self.log.fileno(), "rb", closefd=False) as log:
                size = log.seek(0, os.SEEK_END)
                log.seek(max(0, size - 4 * chars))
                return log.read().decode(errors="replace")[-chars:].strip()
        except (OSError, ValueError):
            return ""


def _read(proc: subprocess.Popen[str], heard: Heard, log: IO[bytes], oom_before: int | None) -> None:
    """The judge's lines as they come, then its end: one the out-of-memory killer caused is said in its log, whose
    tail the scheduler shows."""
    assert proc.stdout is not None
    for line in proc.stdout:
        heard.said(line)
    code = proc.wait()
    if killed_for_memory(code, oom_before):
        with contextlib.suppress(OSError, ValueError):
            log.seek(0, os.SEEK_END)
            log.write(b"the judge was killed by the kernel's out-of-memory killer: this box ran out of memory\n")
    heard.ended(code)


def close_input(proc: subprocess.Popen[Any], grace: float) -> None:
    """Closes a judge's input (it finishes what it judges and exits); ended past `grace` seconds."""
    with contextlib.suppress(OSError, ValueError):
        assert proc.stdin is not None
        proc.stdin.close()
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        end(proc)


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
