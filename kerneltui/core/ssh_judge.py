"""A judge on a GPU box reached over SSH: `ssh HOST python3 -c BOOTSTRAP`, which takes this kerneltui's harness
on stdin (kept there by its digest, so both ends judge alike), then requests, one JSON line each.

Targets are URLs: `ssh://[user@]host[:port][?gpus=0,1&python=/opt/venv/bin/python]` (one judge per GPU named, each
pinned with CUDA_VISIBLE_DEVICES there; without gpus, one judge using what the box shows it). Only the remote
box's Python with torch and triton is needed there; authentication is ssh's own (keys, agent, ~/.ssh/config).
"""

from __future__ import annotations

import base64
import hashlib
import json
import queue
import shlex
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any
from urllib.parse import parse_qs, urlsplit

from harness.contract.options import Options
from harness.judge.remote import DEFAULT_ROOT
from kerneltui.core.remote import RemoteError, RemoteJudge

HARNESS = Path(__file__).resolve().parents[2] / "harness"
BOOTSTRAP = r"""
import base64, json, os, shutil, sys
head = json.loads(sys.stdin.readline())
root = os.path.expanduser(head["root"])
lib = os.path.join(root, "lib", head["digest"])
if not os.path.isdir(lib):
    tmp = "%s.%d" % (lib, os.getpid())
    for rel, data in head["files"].items():
        path = os.path.join(tmp, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as out:
            out.write(base64.b64decode(data))
    try:
        os.rename(tmp, lib)
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)
sys.path.insert(0, lib)
from harness.judge.remote import main
sys.exit(main(sys.argv[1:]))
"""


@dataclass(frozen=True)
class SshTarget:
    host: str  # [user@]host
    port: int | None = None
    gpus: tuple[str, ...] = ()
    python: str = "python3"
    root: str = DEFAULT_ROOT

    @classmethod
    def parse(cls, url: str) -> SshTarget:
        parts = urlsplit(url)
        if parts.scheme != "ssh" or not parts.hostname:
            raise RemoteError(f"executor {url!r}: expected ssh://[user@]host[:port][?gpus=0,1&python=PATH]")
        query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        unknown = set(query) - {"gpus", "python", "root"}
        if unknown:
            raise RemoteError(f"executor {url!r}: unknown {', '.join(sorted(unknown))} (gpus, python, root)")
        host = f"{parts.username}@{parts.hostname}" if parts.username else parts.hostname
        gpus = tuple(g.strip() for g in query.get("gpus", "").split(",") if g.strip())
        return cls(host, parts.port, gpus, query.get("python", "python3"), query.get("root", DEFAULT_ROOT))


def harness_head(root: str) -> str:
    """The first line a remote judge reads: this harness's files and their digest."""
    files = {
        str(p.relative_to(HARNESS.parent)): p.read_bytes()
        for p in sorted(HARNESS.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts
    }
    digest = hashlib.sha256(b"".join(k.encode() + b"\0" + v for k, v in files.items())).hexdigest()[:16]
    encoded = {k: base64.b64encode(v).decode() for k, v in files.items()}
    return json.dumps({"root": root, "digest": digest, "files": encoded})


class SshJudge(RemoteJudge):
    def __init__(
        self,
        index: int,
        target: SshTarget,
        gpu: str | None,
        ssh_options: list[str],
        options: Options,
        workspace_root: Path,
        state: Path,
        inbox: queue.Queue[tuple[str, Any, Any]],
    ) -> None:
        where = f"ssh {target.host}" + (f" GPU {gpu}" if gpu is not None else "")
        super().__init__(index, where, options, workspace_root, state, inbox)
        self.target, self.remote_gpu, self.ssh_options = target, gpu, ssh_options
        self.log_path = state / "logs" / f"judge-{index}-ssh.log"
        self.stopping = False
        self.said_lost = False  # lost() already said for this connection

    def ssh_argv(self) -> list[str]:
        remote = [self.target.python, "-c", BOOTSTRAP, "--root", self.target.root]
        remote += ["--gpu", self.remote_gpu] if self.remote_gpu is not None else []
        port = ["-p", str(self.target.port)] if self.target.port else []
        options = ["-o", "BatchMode=yes", "-o", "ServerAliveInterval=15", "-o", "ServerAliveCountMax=4"]
        return ["ssh", *options, *self.ssh_options, *port, self.target.host, shlex.join(remote + self.options_argv)]

    def start(self) -> subprocess.Popen[str]:
        if self.log:
            self.log.close()
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self.log = open(self.log_path, "a")  # noqa: SIM115  (ssh's stderr, for as long as it runs)
        self.ready, self.stopping, self.remote_ws, self.said_lost = False, False, None, False
        self.proc = subprocess.Popen(
            self.ssh_argv(),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.log,
            text=True,
            bufsize=1,
            start_new_session=True,
        )
        self.spawn(self._read, self.proc)
        return self.proc

    def _read(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stdin is not None and proc.stdout is not None
        try:
            proc.stdin.write(harness_head(self.target.root) + "\n")
            proc.stdin.flush()
        except OSError as exc:  # ssh ended before the harness reached it: its stderr says why
            self.said.append(f"the harness was not sent to {self.target.host}: {exc}")
        for line in proc.stdout:
            self.relay(line)
        code = proc.wait()
        if not self.stopping and proc is self.proc and not self.said_lost:
            self.lost(f"the connection to {self.target.host} ended (ssh exit {code}): {self._log_tail()}")

    def send(self, bundle: dict[str, Any]) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        stdin: IO[str] = self.proc.stdin
        stdin.write(json.dumps(bundle) + "\n")
        stdin.flush()

    def _log_tail(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-600:].strip() or "nothing on its stderr"
        except OSError:
            return "no log"

    def stderr_tail(self, chars: int = 2000) -> str:
        return (super().stderr_tail(chars) + "\n" + self._log_tail())[-chars:]

    def lost(self, reason: str) -> None:
        """Said once per connection; the connection is ended (a remote that could not start keeps it open)."""
        if self.said_lost:
            return
        self.said_lost = True
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
        super().lost(reason)

    def stop(self, grace: float = 5.0) -> None:
        self.stopping = True
        super().stop(grace)
