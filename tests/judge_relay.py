"""The harness's Python as kerneltui starts it during the tests ($KERNELTUI_PYTHON): `-m harness serve FLAGS` is
passed to the run's shared judges through the hub's socket ($KERNELTUI_JUDGE_HUB, tests/judges.py); anything else
runs in the real Python. Standard library only: it runs with the judge's environment."""

from __future__ import annotations

import json
import os
import socket
import sys
import threading

REAL_PYTHON = sys.executable  # the run's (a venv's), as the shim that runs this names it
PASSED_ENV = ("KERNELTUI_BWRAP", "CUDA_VISIBLE_DEVICES")


def pass_requests(conn: socket.socket) -> None:
    """The client's requests to the hub; its input closed, the hub is told (it ends once they are judged)."""
    try:
        for line in sys.stdin.buffer:
            conn.sendall(line)
        conn.shutdown(socket.SHUT_WR)
    except OSError:  # the hub ended the relay (an evaluation of `--once` done, or the judge gone)
        pass


def main() -> int:
    args = sys.argv[1:]
    if args[:3] != ["-m", "harness", "serve"] or not os.environ.get("KERNELTUI_JUDGE_HUB"):
        os.execv(REAL_PYTHON, [REAL_PYTHON, *args])
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.connect(os.environ["KERNELTUI_JUDGE_HUB"])
    env = {k: os.environ[k] for k in PASSED_ENV if k in os.environ}
    conn.sendall((json.dumps({"args": args[3:], "env": env}) + "\n").encode())
    threading.Thread(target=pass_requests, args=(conn,), daemon=True).start()
    with conn.makefile("rb") as lines:
        for line in lines:
            sys.stdout.buffer.write(line)
            sys.stdout.buffer.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
