"""A judge on a GPU box reached over SSH: `ssh HOST python3 -c BOOTSTRAP`, which takes this kerneltui's harness
on stdin (kept there by its digest, so both ends judge alike), then requests, one JSON line each.

Targets are URLs: `ssh://[user@]host[:port][?gpus=0,1&python=/opt/venv/bin/python]` (one judge per GPU named, each
pinned with CUDA_VISIBLE_DEVICES there; without gpus, one judge using what the box shows it). Only the remote
box's Python with torch and triton is needed there; authentication is ssh's own (keys, agent, ~/.ssh/config).
"""

from __future__ import annotations

import base64
import functools
import hashlib
import json
import shlex
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any
from urllib.parse import parse_qs, urlsplit

from harness import PACKAGE_DIR
from harness.contract.options import Options
from harness.judge.remote import DEFAULT_ROOT
from kerneltui.core.judging.client import Heard, close_input, serve_options
from kerneltui.core.judging.remote import RemoteError, RemoteRelay, spawn

HARNESS = PACKAGE_DIR  # this kerneltui's harness, shipped to the judge there
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


class SshTransport:
    """A judge over one ssh connection: the harness sent first, then requests as bundles, its lines relayed."""

    def __init__(
        self,
        index: int,
        target: SshTarget,
        gpu: str | None,
        ssh_options: list[str],
        options: Options,
        workspace_root: Path,
        state: Path,
    ) -> None:
        self.where = f"ssh {target.host}" + (f" GPU {gpu}" if gpu is not None else "")
        self.capacity = 1  # a lost connection queues what it held again: one at a time keeps that to one
        self.target, self.remote_gpu, self.ssh_options = target, gpu, ssh_options
        self.options_argv = serve_options(options, state)
        self.relay = RemoteRelay(self.where, workspace_root, state)
        self.log_path = state / "logs" / f"judge-{index}-ssh.log"
        self.log: IO[str] | None = None
        self.proc: subprocess.Popen[str] | None = None
        self.stopping = False
        self.said_lost = False  # lost already said for this connection
        self.heard: Heard | None = None

    def ssh_argv(self) -> list[str]:
        remote = [self.target.python, "-c", BOOTSTRAP, "--root", self.target.root]
        remote += ["--gpu", self.remote_gpu] if self.remote_gpu is not None else []
        port = ["-p", str(self.target.port)] if self.target.port else []
        options = ["-o", "BatchMode=yes", "-o", "ServerAliveInterval=15", "-o", "ServerAliveCountMax=4"]
        return ["ssh", *options, *self.ssh_options, *port, self.target.host, shlex.join(remote + self.options_argv)]

    def start(self, heard: Heard) -> None:
        if self.log:
            self.log.close()
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self.log = open(self.log_path, "a")  # noqa: SIM115  (ssh's stderr, for as long as it runs)
        self.relay.begin()
        self.stopping, self.said_lost, self.heard = False, False, heard
        self.proc = subprocess.Popen(
            self.ssh_argv(),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.log,
            text=True,
            bufsize=1,
            start_new_session=True,
        )
        spawn(f"kerneltui-ssh-{self.where}", self._read, self.proc, heard)

    def _read(self, proc: subprocess.Popen[str], heard: Heard) -> None:
        assert proc.stdin is not None and proc.stdout is not None
        try:
            proc.stdin.write(harness_head(self.target.root) + "\n")
            proc.stdin.flush()
        except OSError as exc:  # ssh ended before the harness reached it: its stderr says why
            self.relay.said.append(f"the harness was not sent to {self.target.host}: {exc}")
        lose = Heard(heard.said, heard.ended, functools.partial(self._lose, proc, heard))
        for line in proc.stdout:
            self.relay.relay(line, lose)
        code = proc.wait()
        if not self.stopping and proc is self.proc:
            lose.lost(f"the connection to {self.target.host} ended (ssh exit {code}): {self._log_tail()}")

    def _lose(self, proc: subprocess.Popen[str], heard: Heard, reason: str) -> None:
        """Said once per connection, which ends with it (a remote that could not start keeps it open)."""
        if self.said_lost or proc is not self.proc:
            return
        self.said_lost = True
        if proc.poll() is None:
            proc.kill()
        heard.lost(self.relay.lose(reason))

    def send(self, request: dict[str, Any]) -> None:
        assert self.heard is not None
        if self.proc is None or self.proc.stdin is None:
            raise OSError("the ssh connection was never opened")
        bundle = self.relay.bundle(request, self.heard)
        if bundle is not None:
            self.proc.stdin.write(json.dumps(bundle) + "\n")
            self.proc.stdin.flush()

    def _log_tail(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-600:].strip() or "nothing on its stderr"
        except OSError:
            return "no log"

    def tail(self, chars: int) -> str:
        return (self.relay.tail(chars) + "\n" + self._log_tail())[-chars:]

    def stop(self, grace: float) -> None:
        self.stopping = True
        if self.proc is not None:
            close_input(self.proc, grace)  # through ssh: the judge there finishes and exits
        if self.log:
            self.log.close()
