"""`python -m agents.reaper COMMAND...`: runs an external agent and, when it ends, ends all it started.

An ACP agent is a tree of processes (codex-acp starts a native binary, every agent starts kerneltui's
MCP server, some start shells). Between kerneltui and that tree stands this small process: the
subreaper of the tree, so daemons and orphans stay its descendants; when the agent exits, when
kerneltui asks it to stop (SIGTERM, or stdin closed by the ACP transport) or when kerneltui dies, it
sends SIGTERM to every descendant, waits briefly, then SIGKILL. Its exit status is the agent's.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time

from harness.containment.sandbox import die_with_parent
from harness.containment.watch import become_subreaper, kill_all, processes, tree

GRACE_S = 2.0


def descendants() -> list[int]:
    return [pid for pid in tree(os.getpid(), processes()) if pid != os.getpid()]


def end_tree() -> None:
    """SIGTERM to every descendant, SIGKILL to what remains after a grace period; reaps them all."""
    for pid in descendants():
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + GRACE_S
    while descendants() and time.monotonic() < deadline:
        _reap()
        time.sleep(0.05)
    for _ in range(20):
        left = descendants()
        if not left:
            break
        kill_all(left)
        time.sleep(0.01)
    _reap()


def _reap() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def main(argv: list[str]) -> int:
    if not argv:
        print("usage: python -m agents.reaper COMMAND [ARGS...]", file=sys.stderr)
        return 2
    become_subreaper()
    die_with_parent(signal.SIGTERM)  # kerneltui killed outright: told to stop like any other stop
    try:
        child = subprocess.Popen(argv)
    except OSError as exc:
        print(f"cannot start {argv[0]}: {exc.strerror or exc}", file=sys.stderr)
        return 127
    stop = {"asked": False}

    def forward(signum: int, _: object) -> None:
        stop["asked"] = True
        with contextlib.suppress(ProcessLookupError):
            child.send_signal(signum)

    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, forward)
    asked_at: float | None = None
    while child.poll() is None:
        if stop["asked"] and asked_at is None:
            asked_at = time.monotonic()
        if asked_at is not None and time.monotonic() - asked_at > GRACE_S:
            break  # asked to stop and the agent did not: its tree is ended below
        with contextlib.suppress(subprocess.TimeoutExpired):
            child.wait(timeout=0.2)
    end_tree()
    return child.returncode if child.returncode is not None and child.returncode >= 0 else 143


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
