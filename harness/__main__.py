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
import sys
from pathlib import Path
from typing import Any

from harness import protocol
from harness.results import DEFAULT_RUNGS, RUNG_ORDER, RungResult
from harness.source import MAX_VERSION_KB

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def parse_rungs(text: str | None) -> tuple[str, ...]:
    if not text:
        return DEFAULT_RUNGS
    wanted = [r.strip() for r in text.split(",") if r.strip()]
    unknown = [r for r in wanted if r not in RUNG_ORDER]
    if unknown:
        raise ValueError(f"unknown rung(s) {', '.join(unknown)}; rungs are {', '.join(RUNG_ORDER)}")
    return tuple(r for r in RUNG_ORDER if r in wanted)


def add_ladder_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per call into the version (default 60)")
    parser.add_argument("--rungs", help=f"comma-separated subset of {','.join(RUNG_ORDER)}")
    parser.add_argument("--arch", default="sm_90", help="target for compiling with no GPU (default sm_90)")
    parser.add_argument("--seeds", type=int, default=2, help="seeds per correctness case (default 2)")
    parser.add_argument(
        "--state-dir", type=Path, help="where dumps and device peaks go (default <workspace>/.kerneltui)"
    )
    parser.add_argument(
        "--no-sandbox", action="store_true", help="run workers unconfined (no bubblewrap, Landlock or seccomp)"
    )
    parser.add_argument(
        "--max-memory-mb", type=float, help="memory for the kernel's processes (default half the machine's)"
    )
    parser.add_argument(
        "--best-us",
        help="the best median so far in µs, or a JSON object of them by device name: a version is judged again "
        "in a fresh worker before it can beat it (default: every passing version is)",
    )
    parser.add_argument("--no-confirm", action="store_true", help="do not judge a new best again in a fresh worker")
    parser.add_argument(
        "--max-version-kb", type=float, default=MAX_VERSION_KB, help="a larger version file is refused (default 1024)"
    )
    parser.add_argument(
        "--max-file-mb",
        type=float,
        default=512.0,
        help="largest file the kernel's process may write, its printed output included (default 512)",
    )


def emit(event: protocol.JudgeEvent) -> None:
    sys.stdout.write(protocol.line(event) + "\n")
    sys.stdout.flush()


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if os.environ.pop("KERNELTUI_WATCH_PARENT", None):
        from harness.sandbox import die_with_parent

        die_with_parent()
    if argv[:1] == ["serve"]:
        return serve(argv[1:])
    if argv[:1] == ["doctor"]:
        return doctor(argv[1:])
    parser = argparse.ArgumentParser(
        prog="python -m harness", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("version", type=Path, help="a version file, e.g. kernels/softmax/v002.py")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--stream", action="store_true", help="print JSON lines as rungs finish")
    add_ladder_options(parser)
    args = parser.parse_args(argv)
    try:
        options = make_options(args, args.version)
    except (ValueError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE

    from harness.ladder import spawn_for
    from harness.workers import WorkerPool

    pool = WorkerPool(spawn_for(options), reap=True)
    pool.prestart()  # before torch is imported here, so the two imports overlap

    from harness.ladder import Ladder
    from harness.problem import ProblemError
    from harness.report import evaluation_text, rung_line, trust_lines
    from harness.source import VersionTooLarge

    def on_rung(rung: RungResult) -> None:
        if args.stream:
            emit(protocol.RungFinished(rung))
        elif not args.json:
            print(rung_line(rung), flush=True)

    ladder = Ladder(options, pool)
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


def make_options(args: argparse.Namespace, version: Path | None) -> Any:
    from harness.aot import parse_arch
    from harness.options import Options

    parse_arch(args.arch)
    if version is not None:
        if not version.is_file():
            raise FileNotFoundError(f"no such version file: {version}")
        if version.name == "problem.py" or version.suffix != ".py":
            raise ValueError(f"{version} is not a version file (expected e.g. kernels/<problem>/v001.py)")
    state = args.state_dir or (version.resolve().parent.parent / ".kerneltui" if version else None)
    return Options(
        rungs=parse_rungs(args.rungs),
        timeout=args.timeout,
        arch=args.arch,
        seeds_per_case=args.seeds,
        state_dir=state,
        confine=not args.no_sandbox,
        max_file_mb=args.max_file_mb,
        max_memory_mb=args.max_memory_mb,
        max_version_kb=args.max_version_kb,
        confirm=not args.no_confirm,
        best_us=parse_best(args.best_us),
    )


def parse_best(value: Any) -> float | dict[str, float] | None:
    """--best-us: a number, or {device name: µs}; a JSON request may give either directly."""
    if value is None or isinstance(value, (int, float, dict)):
        return {str(k): float(v) for k, v in value.items()} if isinstance(value, dict) else value
    text = str(value).strip()
    parsed = json.loads(text) if text.startswith("{") else float(text)
    return parse_best(parsed)


def serve(argv: list[str]) -> int:
    """Judges requests from stdin one at a time, a fresh worker pre-started for each next one."""
    parser = argparse.ArgumentParser(prog="python -m harness serve")
    add_ladder_options(parser)
    args = parser.parse_args(argv)
    from harness.ladder import spawn_for
    from harness.workers import WorkerPool

    base = make_options(args, None)
    pool = WorkerPool(spawn_for(base), keep_spare=True, reap=True)
    pool.prestart()

    from harness.ladder import Ladder
    from harness.problem import ProblemError
    from harness.source import VersionTooLarge

    ladder = Ladder(base, pool)
    emit(protocol.Ready(ladder.device_info))
    try:
        for line in sys.stdin:
            if not line.strip():
                continue
            try:
                request = json.loads(line)
                path = Path(request["path"])
                ladder.options = make_options(argparse.Namespace(**{**vars(args), **_overrides(request)}), path)
            except (ValueError, KeyError, TypeError, FileNotFoundError) as exc:
                emit(protocol.Failed(f"bad request: {exc}", id=_request_id(line)))
                continue
            rid = request.get("id")
            emit(protocol.Started(rid, str(path)))
            try:
                ev = ladder.evaluate(path, functools.partial(_emit_rung, rid))
            except (ProblemError, VersionTooLarge) as exc:
                emit(protocol.Failed(str(exc), isinstance(exc, ProblemError), rid))
                continue
            emit(protocol.Finished(ev, rid))
    finally:
        ladder.close()
    return EXIT_OK


def doctor(argv: list[str]) -> int:
    """What this box offers for containing versions (python -m harness doctor [--json])."""
    from harness.doctor import facts, report

    found = facts()
    print(json.dumps(found) if "--json" in argv else report(found))
    return EXIT_OK


def _emit_rung(rid: Any, rung: RungResult) -> None:
    emit(protocol.RungFinished(rung, rid))


def _overrides(request: dict[str, Any]) -> dict[str, Any]:
    known = {
        "timeout": "timeout",
        "rungs": "rungs",
        "seeds": "seeds",
        "state_dir": "state_dir",
        "max_file_mb": "max_file_mb",
        "best_us": "best_us",
    }
    out: dict[str, Any] = {}
    for key, attr in known.items():
        if key in request:
            value = request[key]
            out[attr] = ",".join(value) if key == "rungs" and isinstance(value, list) else value
    if "state_dir" in out and out["state_dir"] is not None:
        out["state_dir"] = Path(out["state_dir"])
    return out


def _request_id(line: str) -> Any:
    try:
        return json.loads(line).get("id")
    except (ValueError, AttributeError):
        return None


if __name__ == "__main__":
    sys.exit(main())
