"""`python -m harness remote`: the judge of a kerneltui on another machine (over SSH, or in a Ray actor).

Each request is one JSON line: the judge's request with paths relative to a workspace, and the files it needs
(the problem folder's, the version, the best it races) in base64. They are written under a work folder of their
own and judged by one long-lived `python -m harness serve` (its workers started ahead, as at home); its lines are
relayed as they come, led by one naming this machine's workspace and state folders (the client maps them onto
its own), and the evaluation's dumps follow as files before its final line. Only the standard library and the
harness are imported here: torch loads in the judge.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import shutil
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from harness import PACKAGE_DIR

MAX_DUMP_BYTES = 256 << 20  # an evaluation's dumps sent back at most (a profile's report included)
DEFAULT_ROOT = "~/.cache/kerneltui-remote"


class BundleError(Exception):
    """A request that cannot be judged as sent (a path outside its folder, bad base64)."""


def inside(base: Path, relative: str) -> Path:
    """`relative` under `base`, refusing absolute paths and `..`: the request names files, never places."""
    path = Path(relative)
    if path.is_absolute() or ".." in path.parts or not path.parts:
        raise BundleError(f"a file path outside the request's folder: {relative!r}")
    return base / path


class RemoteServe:
    """One judge on this machine, fed requests from a kerneltui elsewhere. Used from one thread."""

    def __init__(self, options: list[str], root: str = DEFAULT_ROOT, gpu: str | None = None) -> None:
        self.options, self.gpu = list(options), gpu
        self.root = Path(os.path.expanduser(root)).resolve()
        self.state = self.root / "state"
        self.proc: subprocess.Popen[str] | None = None
        self.ready_line = ""
        self.log_path = self.root / "logs" / "judge.log"

    def start(self) -> str:
        """Starts the judge and returns its ready line (the device it judges on)."""
        from harness.workers.env import judge_env

        for folder in (self.state, self.root / "work", self.root / "logs"):
            folder.mkdir(parents=True, exist_ok=True)
        env = dict(judge_env(), PYTHONUNBUFFERED="1")
        lib = str(PACKAGE_DIR.parent)  # the harness this runs, shipped or installed
        env["PYTHONPATH"] = os.pathsep.join(p for p in (lib, env.get("PYTHONPATH")) if p)
        if self.gpu is not None:
            env["CUDA_VISIBLE_DEVICES"] = self.gpu
        argv = [sys.executable, "-m", "harness", "serve", *self.options, "--state-dir", str(self.state)]
        self.log_path = self.root / "logs" / f"judge-{os.getpid()}.log"
        log = open(self.log_path, "a")  # noqa: SIM115  (the judge's stderr)
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, text=True, env=env, cwd=self.root
        )
        log.close()
        self.ready_line = self._next_line() or json.dumps({"event": "error", "error": self._stopped_text()})
        return self.ready_line

    def ready(self) -> str:
        return self.ready_line or self.start()

    def evaluate(self, bundle: dict[str, Any]) -> list[str]:
        """The whole evaluation's lines at once (a Ray actor's method)."""
        return list(self.lines(bundle))

    def lines(self, bundle: dict[str, Any]) -> Iterator[str]:
        request = dict(bundle["request"])
        work = self.root / "work" / uuid.uuid4().hex
        try:
            self._write_files(work / "ws", bundle.get("files") or {})
            request["path"] = str(inside(work / "ws", request["path"]))
            for raced in (request.get("race_with") or {}).values():
                raced["path"] = str(inside(work / "ws", raced["path"]))
        except (BundleError, KeyError, ValueError, TypeError) as exc:
            yield json.dumps({"event": "error", "id": request.get("id"), "error": f"bad remote request: {exc}"})
            return
        here = {"event": "remote", "ws": str(work / "ws"), "state": str(self.state), "host": socket.gethostname()}
        yield json.dumps(here)
        try:
            yield from self._judge(request)
        finally:
            shutil.rmtree(work, ignore_errors=True)

    def _judge(self, request: dict[str, Any]) -> Iterator[str]:
        if self.proc is None or self.proc.poll() is not None:
            self.start()
        assert self.proc is not None and self.proc.stdin is not None
        try:
            self.proc.stdin.write(json.dumps(request) + "\n")
            self.proc.stdin.flush()
        except OSError:  # it died before the request reached it
            yield json.dumps({"event": "error", "id": request.get("id"), "error": self._stopped_text()})
            return
        while True:
            line = self._next_line()
            if line is None:
                yield json.dumps({"event": "error", "id": request.get("id"), "error": self._stopped_text()})
                return
            event = _parsed(line)
            if event.get("event") == "done" and event.get("id") == request.get("id"):
                yield self._dumps_line(event.get("evaluation") or {})
                yield line
                return
            yield line
            if event.get("event") == "error" and event.get("id") == request.get("id"):
                return

    def _next_line(self) -> str | None:
        assert self.proc is not None and self.proc.stdout is not None
        line = self.proc.stdout.readline()
        return line.rstrip("\n") if line else None

    def _stopped_text(self) -> str:
        code = self.proc.wait() if self.proc else None
        try:
            tail = self.log_path.read_text(errors="replace").strip().splitlines()[-3:]
        except OSError:
            tail = []
        said = f"the judge on {socket.gethostname()} stopped (exit {code}), its log {self.log_path}"
        return said + (": " + " | ".join(tail) if tail else "")

    def _write_files(self, base: Path, files: dict[str, str]) -> None:
        for relative, data in files.items():
            target = inside(base, relative)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(base64.b64decode(data, validate=True))

    def _dumps_line(self, evaluation: dict[str, Any]) -> str:
        """The evaluation's dumps folder (dumps/<problem>/<version>/<hash>) as files relative to the state."""
        folder = self.state / "dumps" / str(evaluation.get("problem")) / str(evaluation.get("version"))
        folder = folder / str(evaluation.get("hash", ""))[:12]
        files: dict[str, str] = {}
        total = 0
        for path in sorted(folder.rglob("*")) if folder.is_dir() else []:
            if not path.is_file() or path.is_symlink():
                continue
            total += path.stat().st_size
            if total > MAX_DUMP_BYTES:
                break
            files[str(path.relative_to(self.state))] = base64.b64encode(path.read_bytes()).decode()
        return json.dumps({"event": "remote-files", "files": files})

    def close(self) -> None:
        if self.proc is not None and self.proc.stdin is not None:
            try:
                self.proc.stdin.close()
                self.proc.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.terminate()  # it ends its workers and removes its folders, killed if it has not
                try:
                    self.proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    self.proc.kill()


def _parsed(line: str) -> dict[str, Any]:
    try:
        data = json.loads(line)
    except json.JSONDecodeError:
        return {}
    return data if isinstance(data, dict) else {}


def main(argv: list[str]) -> int:
    """Requests on stdin, one JSON line each; every line of the answer on stdout."""
    parser = argparse.ArgumentParser(prog="python -m harness remote")
    parser.add_argument("--root", default=DEFAULT_ROOT, help="where work folders, dumps and peaks are kept")
    parser.add_argument("--gpu", help="the GPU this judge uses (CUDA_VISIBLE_DEVICES)")
    args, options = parser.parse_known_args(argv)
    serve = RemoteServe(options, args.root, args.gpu)
    print(serve.start(), flush=True)
    try:
        for raw in sys.stdin:
            if not raw.strip():
                continue
            try:
                bundle = json.loads(raw)
            except json.JSONDecodeError as exc:
                print(json.dumps({"event": "error", "error": f"bad remote request: {exc}"}), flush=True)
                continue
            for line in serve.lines(bundle):
                print(line, flush=True)
    finally:
        serve.close()
    return 0
