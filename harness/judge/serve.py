"""`python -m harness serve`: requests from stdin, one JSON object a line, judged with each one's verdict first.

A request is judged at once up to its verdict (load, compile, correctness and the problem's own rungs). If another
request is waiting by then, the evaluation is parked there, its workers frozen (stopped, their memory kept), and
the next request's verdict goes first. A request that came while the judge was at work (versions coming back to
back) is set aside at its verdict even when none waits yet: the next is likely on its way. Parked evaluations go
on (benchmark, roofline, dumps...) oldest first once no request has come for a while (PARK_QUIET_S, longer in a
burst), each then to its end.
So an agent writing versions back to back hears each verdict after its own verdict's time, not after every
earlier version's benchmark; the timed rungs still run alone, every other version's workers frozen.
"""

from __future__ import annotations

import argparse
import queue
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Generator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from harness.contract import options as ladder_options
from harness.contract import protocol
from harness.contract.results import Evaluation

if TYPE_CHECKING:
    from harness.contract.options import Options
    from harness.judge.context import VersionRun
    from harness.judge.ladder import Ladder
    from harness.workers.process import WorkerPool

EXIT_OK, EXIT_USAGE = 0, 2
PARK_QUIET_S = 0.5  # no request for this long: a parked evaluation goes on
# While versions come faster than they are judged (a burst), the quiet a parked evaluation waits for is longer:
# 1.5 times the last gap between requests (up to BURST_QUIET_S), or its benchmark would start just before the next
# version came and keep that version's verdict waiting for seconds
BURST_QUIET_S = 4.0

Emit = Callable[[protocol.JudgeEvent], None]


def make_options(values: dict[str, Any], version: Path | None, where: str = "") -> Options:
    """Options from values by key (a command line's, a request's), checked against the version file."""
    from harness.contract.options import Options
    from harness.gpu.aot import parse_arch

    options = Options().updated(values, where)
    parse_arch(options.arch)
    if version is not None:
        if not version.is_file():
            raise FileNotFoundError(f"no such version file: {version}")
        if version.name == "problem.py" or version.suffix != ".py":
            raise ValueError(f"{version} is not a version file (expected e.g. kernels/<problem>/v001.py)")
    if options.state_dir is None and version is not None:
        options.state_dir = version.resolve().parent.parent / ".kerneltui"
    return options


def serve(argv: list[str], emit: Emit) -> int:
    """Judges requests from stdin, a fresh worker pre-started for each next one."""
    parser = argparse.ArgumentParser(prog="python -m harness serve")
    ladder_options.add_arguments(parser)
    parser.add_argument("--once", action="store_true", help="judge one request, with no spare worker, then exit")
    args = parser.parse_args(argv)
    from harness.judge.ladder import Ladder, spawn_for
    from harness.judge.rungs.builtin import LADDER
    from harness.problem import shapes_only
    from harness.workers import fork_server
    from harness.workers.process import WorkerPool

    values = ladder_options.given(args)
    try:
        base = make_options(values, None)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    spawn = spawn_for(base)
    if spawn.fork:  # torch imported (the ladder's), no thread or CUDA yet: what every worker template shares
        fork_server.start()
    pool = WorkerPool(spawn, keep_spare=not args.once, reap=True)
    pool.prestart(base.rungs)
    ladder = Ladder(base, LADDER, pool)
    if ladder.context.cuda:  # each version's bench cases are made shape-only: their first one's imports paid now
        ladder.context.tools.submit(shapes_only.warm)
    emit(protocol.Ready(ladder.device_info))
    idle = IdleSpares(pool, base.spare_idle_s)
    server = Server(ladder, values, emit, idle, once=args.once)
    try:
        server.run(RequestLines(sys.stdin))
    finally:
        idle.stop()
        server.close()
        ladder.close()
    return EXIT_OK


class RequestLines:
    """stdin's lines, read by a thread of their own so the judge can see whether one waits without blocking on it."""

    EOF = object()

    def __init__(self, stream: TextIO) -> None:
        self.lines: queue.Queue[tuple[float, object]] = queue.Queue()
        self.arrived = self.before = 0.0  # when the line last returned came, and the one before it
        self.ended = False  # EOF was taken (by an interlude, say): every later next() returns it again
        threading.Thread(target=self._read, args=(stream,), name="kerneltui-requests", daemon=True).start()

    def _read(self, stream: TextIO) -> None:
        try:
            for line in stream:
                if line.strip():
                    self.lines.put((time.monotonic(), line))
        finally:
            self.lines.put((time.monotonic(), self.EOF))

    def next(self, timeout: float | None) -> object | None:
        """The next line (or EOF) within `timeout` seconds (None: however long it takes); None if none came."""
        if self.ended:
            return self.EOF
        try:
            arrived, line = self.lines.get(timeout=timeout)
        except queue.Empty:
            return None
        if line is self.EOF:
            self.ended = True
        else:
            self.before, self.arrived = self.arrived, arrived
        return line

    def waiting(self) -> bool:
        return not self.ended and not self.lines.empty()


@dataclass
class Judging:
    """One request's evaluation under way: its id and the ladder's steps."""

    rid: Any
    steps: Generator[VersionRun, None, Evaluation]
    run: VersionRun | None = None
    burst: bool = False  # it came while the judge was at work: set aside at its verdict, waiting or not


class JudgeFailed(BaseException):
    """The judge failed at another version's verdict in an interlude. Not an Exception, so that the rung it
    interrupted does not take the failure as its own (harness.judge.ladder fails a rung on any Exception): it ends
    the judge, as the same failure between requests does, and its client judges what it began again."""


class Server:
    """The loop: each request's verdict as it comes; parked evaluations finished in the quiet between requests."""

    def __init__(self, ladder: Ladder, values: dict[str, Any], emit: Emit, idle: IdleSpares, once: bool) -> None:
        self.ladder, self.values, self.emit, self.idle, self.once = ladder, values, emit, idle, once
        self.parked: deque[Judging] = deque()
        self.last_request = time.monotonic()
        self.free_since = 0.0  # when the judge last finished what it was doing (a request before any: not a burst)
        self.quiet_s = PARK_QUIET_S
        self.parked_at = 0.0  # when an evaluation was last set aside: the quiet counts from it too
        self.in_interlude = False

    def run(self, requests: RequestLines) -> None:
        if not self.once:
            self.ladder.context.interlude = lambda: self.interlude(requests)
        while True:
            since = max(self.last_request, self.parked_at)
            wait = None if not self.parked else max(0.0, since + self.quiet_s - time.monotonic())
            line = requests.next(wait)
            if line is RequestLines.EOF:
                self.finish_parked(requests)
                return
            self.idle.busy()
            try:
                if isinstance(line, str):
                    burst = requests.arrived < self.free_since or bool(self.parked)
                    if self.take(line, requests, burst) and self.once:
                        return
                elif self.parked:
                    self.go_on(self.parked.popleft(), requests)
            finally:
                self.free_since = time.monotonic()
                if not self.parked:
                    self.idle.idle()

    def take(self, line: str, requests: RequestLines, burst: bool) -> bool:
        """A request judged up to its verdict, then on or set aside (go_on); True once its evaluation ended."""
        self.last_request = time.monotonic()
        gap = requests.arrived - requests.before
        self.quiet_s = min(max(PARK_QUIET_S, 1.5 * gap), BURST_QUIET_S) if burst else PARK_QUIET_S
        judging = self.start(line)
        if judging is not None:
            judging.burst = burst
        return judging is not None and self.go_on(judging, requests)

    def interlude(self, requests: RequestLines) -> None:
        """Between two steps of an evaluation past its verdict (JudgeContext.between): each request waiting by then
        is judged to its verdict and set aside (it came while the judge was at work), then that evaluation goes on.
        Not within one: what an interlude sets aside waits for the quiet, oldest first, as ever."""
        if self.in_interlude:
            return
        self.in_interlude = True
        try:
            while requests.waiting() and len(self.parked) < protocol.MAX_PARKED:
                line = requests.next(0)
                if isinstance(line, str):
                    self.take(line, requests, burst=True)
        except Exception as exc:  # the judge's own failure: it ends the judge, as in the loop, not this rung
            raise JudgeFailed(f"judging another version between this one's steps: {exc!r}") from exc
        finally:
            self.in_interlude = False

    def finish_parked(self, requests: RequestLines) -> None:
        """At the end of the input: what was parked is judged to its end (nothing can wait before it any more)."""
        while self.parked:
            self.go_on(self.parked.popleft(), requests)

    def close(self) -> None:
        """Stopped with evaluations parked: their workers released, nothing more said of them."""
        while self.parked:
            self.parked.popleft().steps.close()

    def start(self, line: str) -> Judging | None:
        """A request's evaluation begun (Started said); None when it was refused (Failed said)."""
        try:
            request = protocol.JudgeRequest.parse(line)
        except protocol.BadRequest as exc:
            self.emit(protocol.Failed(f"bad request: {exc}", id=exc.id))
            return None
        path, rid = Path(request.path), request.id
        try:
            self.ladder.options = make_options({**self.values, **request.options}, path, "request")
        except (ValueError, FileNotFoundError) as exc:
            self.emit(protocol.Failed(f"bad request: {exc}", id=rid))
            return None
        self.emit(protocol.Started(rid, str(path)))
        return Judging(rid, self.ladder.steps(path, lambda rung: self.emit(protocol.RungFinished(rung, rid))))

    def go_on(self, judging: Judging, requests: RequestLines) -> bool:
        """Climbs until the evaluation ends (True: Finished or Failed said) or, its verdict out, parks behind those
        parked before it for a waiting request (False)."""
        from harness.contract.source import VersionTooLarge, VersionUnreadable
        from harness.problem.load import ProblemError

        if judging.run is not None:
            for worker in judging.run.workers.values():
                worker.thaw()
        try:
            while True:
                judging.run = next(judging.steps)
                if (requests.waiting() or judging.burst) and not self.once and len(self.parked) < protocol.MAX_PARKED:
                    for worker in judging.run.workers.values():
                        worker.freeze()
                    self.parked.append(judging)
                    self.parked_at = time.monotonic()
                    return False
        except StopIteration as done:
            self.emit(protocol.Finished(done.value, judging.rid))
            return True
        except (ProblemError, VersionTooLarge) as exc:
            self.emit(protocol.Failed(str(exc), isinstance(exc, ProblemError), judging.rid))
            return True
        except VersionUnreadable as exc:  # gone between its request and its reading (an agent's delete)
            self.emit(protocol.Failed(exc.strerror or str(exc), False, judging.rid))
            return True


class IdleSpares:
    """Ends the pool's spare workers once the judge has had no request for `after_s` seconds (0: never): an
    idle dashboard then holds the judge alone. The next request takes a worker started for it, and the spares
    come back with it."""

    def __init__(self, pool: WorkerPool, after_s: float) -> None:
        self.pool, self.after_s = pool, after_s
        self.since: float | None = time.monotonic()  # None while a request is being judged
        self.lock = threading.Lock()
        self.stopped = threading.Event()
        if after_s > 0:
            threading.Thread(target=self._watch, name="kerneltui-idle-spares", daemon=True).start()

    def busy(self) -> None:
        """A request came: no retiring until it is judged (idle() from the loop's next wait for input)."""
        with self.lock:
            self.since = None

    def idle(self) -> None:
        with self.lock:
            self.since = time.monotonic()

    def stop(self) -> None:
        self.stopped.set()

    def _watch(self) -> None:
        while not self.stopped.wait(min(self.after_s, 5.0)):
            with self.lock:
                due = self.since is not None and time.monotonic() - self.since >= self.after_s
                if due:
                    self.since = time.monotonic()
            if due:
                self.pool.retire_spares()
