"""`python -m harness VERSION_FILE [--json]`: the ladder alone, in the GPU box's Python.

`--stream` prints one JSON object per line as rungs finish ({"event": "rung"...}, then
{"event": "done"...}). `python -m harness serve` reads one JSON request per line on stdin
({"path": ..., "rungs": [...], "timeout": ...}) and keeps a worker started ahead of each.
Exit status: 0 every rung passed (or was skipped), 1 a rung failed, 2 bad usage or a bad problem.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
from pathlib import Path

from harness.contract import options as ladder_options
from harness.contract import protocol
from harness.contract.results import RungResult

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
    from harness.judge.serve import make_options

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


def serve(argv: list[str]) -> int:
    from harness.judge.serve import serve as serve_requests

    # Stopped (SIGTERM) mid-evaluation, it unwinds as at the end of its input: the evaluations' workers and
    # folders, the templates and their folders, all ended and removed before it exits.
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    return serve_requests(argv, emit)


def _exit_on_sigterm(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


def doctor(argv: list[str]) -> int:
    """What this box offers for containing versions (python -m harness doctor [--json])."""
    from harness.judge.doctor import facts, report, start_fork_server

    start_fork_server()
    found = facts()
    print(json.dumps(found) if "--json" in argv else report(found))
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
