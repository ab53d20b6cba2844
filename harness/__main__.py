"""`python -m harness VERSION_FILE [--json]`: the ladder alone, in the GPU box's Python.

`--stream` prints one JSON object per line as rungs finish ({"event": "rung"...}, then
{"event": "done"...}). `python -m harness serve` reads one JSON request per line on stdin
({"path": ..., "rungs": [...], "timeout": ...}) and keeps a worker started ahead of each.
Exit status: 0 every rung passed (or was skipped), 1 a rung failed, 2 bad usage or a bad problem.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.contract import options as ladder_options
from harness.contract import protocol
from harness.contract.results import RungResult

if TYPE_CHECKING:
    from harness.judge.ladder import Ladder
    from harness.workers.process import WorkerPool

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def emit(event: protocol.JudgeEvent) -> None:
    sys.stdout.write(protocol.line(event) + "\n")
    sys.stdout.flush()


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if os.environ.pop("KERNELTUI_WATCH_PARENT", None):
        from harness.containment.sandbox import die_with_parent

        die_with_parent()
    if argv[:1] == ["serve"]:
        return serve(argv[1:])
    if argv[:1] == ["doctor"]:
        return doctor(argv[1:])
    if argv[:1] == ["remote"]:  # the judge of a kerneltui on another machine
        from harness.judge.remote import main as remote_main

        return remote_main(argv[1:])
    parser = argparse.ArgumentParser(
        prog="python -m harness", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("version", type=Path, help="a version file, e.g. kernels/softmax/v002.py")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--stream", action="store_true", help="print JSON lines as rungs finish")
    ladder_options.add_arguments(parser)
    args = parser.parse_args(argv)
    try:
        options = make_options(ladder_options.given(args), args.version)
    except (ValueError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE

    from harness.judge.ladder import spawn_for
    from harness.workers.process import WorkerPool

    pool = WorkerPool(spawn_for(options), reap=True)
    pool.prestart(options.rungs)  # before torch is imported here, so the two imports overlap

    from harness.contract.report import evaluation_text, rung_line, trust_lines
    from harness.contract.source import VersionTooLarge
    from harness.judge.ladder import Ladder
    from harness.judge.rungs.builtin import LADDER
    from harness.problem.load import ProblemError

    def on_rung(rung: RungResult) -> None:
        if args.stream:
            emit(protocol.RungFinished(rung))
        elif not args.json:
            print(rung_line(rung), flush=True)

    ladder = Ladder(options, LADDER, pool)
    try:
        ev = ladder.evaluate(args.version, on_rung)
    except (ProblemError, VersionTooLarge) as exc:
        if args.stream:
            emit(protocol.Failed(str(exc), isinstance(exc, ProblemError)))
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    finally:
        ladder.close()
    if args.stream:
        emit(protocol.Finished(ev))
    elif args.json:
        print(ev.dumps())
    else:
        print("\n".join([*trust_lines(ev), evaluation_text(ev).split("\n", 1)[0]]))
    return EXIT_OK if ev.ok else EXIT_FAILED


def make_options(values: dict[str, Any], version: Path | None, where: str = "") -> Any:
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


def serve(argv: list[str]) -> int:
    """Judges requests from stdin one at a time, a fresh worker pre-started for each next one."""
    parser = argparse.ArgumentParser(prog="python -m harness serve")
    ladder_options.add_arguments(parser)
    parser.add_argument("--once", action="store_true", help="judge one request, with no spare worker, then exit")
    args = parser.parse_args(argv)
    from harness.judge.ladder import spawn_for
    from harness.workers.process import WorkerPool

    values = ladder_options.given(args)
    try:
        base = make_options(values, None)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    pool = WorkerPool(spawn_for(base), keep_spare=not args.once, reap=True)
    pool.prestart(base.rungs)

    from harness.judge.ladder import Ladder
    from harness.judge.rungs.builtin import LADDER

    ladder = Ladder(base, LADDER, pool)
    # Stopped (SIGTERM) mid-evaluation, it unwinds as at the end of its input: the evaluation's workers and
    # folders, the templates and their folders, all ended and removed before it exits.
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    emit(protocol.Ready(ladder.device_info))
    idle = IdleSpares(pool, base.spare_idle_s)
    try:
        for line in sys.stdin:
            if not line.strip():
                continue
            idle.busy()
            try:
                finished = _judge_line(ladder, values, line)
            finally:
                idle.idle()
            if finished and args.once:
                break
    finally:
        idle.stop()
        ladder.close()
    return EXIT_OK


def _exit_on_sigterm(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


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


def _judge_line(ladder: Ladder, values: dict[str, Any], line: str) -> bool:
    """One request: its evaluation's events emitted. True when it was judged to the end (not refused)."""
    from harness.contract.source import VersionTooLarge
    from harness.problem.load import ProblemError

    try:
        request = protocol.JudgeRequest.parse(line)
    except protocol.BadRequest as exc:
        emit(protocol.Failed(f"bad request: {exc}", id=exc.id))
        return False
    path, rid = Path(request.path), request.id
    try:
        ladder.options = make_options({**values, **request.options}, path, "request")
    except (ValueError, FileNotFoundError) as exc:
        emit(protocol.Failed(f"bad request: {exc}", id=rid))
        return False
    emit(protocol.Started(rid, str(path)))
    try:
        ev = ladder.evaluate(path, functools.partial(_emit_rung, rid))
    except (ProblemError, VersionTooLarge) as exc:
        emit(protocol.Failed(str(exc), isinstance(exc, ProblemError), rid))
        return False
    emit(protocol.Finished(ev, rid))
    return True


def doctor(argv: list[str]) -> int:
    """What this box offers for containing versions (python -m harness doctor [--json])."""
    from harness.judge.doctor import facts, report

    found = facts()
    print(json.dumps(found) if "--json" in argv else report(found))
    return EXIT_OK


def _emit_rung(rid: Any, rung: RungResult) -> None:
    emit(protocol.RungFinished(rung, rid))


if __name__ == "__main__":
    sys.exit(main())
