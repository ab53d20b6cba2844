"""How long `kerneltui mcp` takes to answer an MCP client's initialize, and to list its tools.

    python benchmarks/mcp_start.py [--runs 5] [--busy N]

Starts the server on a scratch workspace as a client does (stdio), sends initialize, then tools/list, and
prints the median and worst seconds to each answer over the runs. --busy N runs N processes spinning on
the CPU meanwhile (a loaded box: clients give a server 10 to 30 s to start).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}},
}


def spin() -> None:
    while True:
        pass


def one_start(workspace: Path) -> tuple[float, float]:
    start = time.perf_counter()
    server = subprocess.Popen(
        [sys.executable, "-m", "kerneltui", "mcp", "--workspace", str(workspace), "--config", str(workspace / "none")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        cwd=REPO,
    )
    assert server.stdin is not None and server.stdout is not None
    server.stdin.write(json.dumps(INITIALIZE) + "\n")
    server.stdin.flush()
    server.stdout.readline()
    initialized = time.perf_counter() - start
    server.stdin.write(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}) + "\n")
    server.stdin.write(json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}) + "\n")
    server.stdin.flush()
    server.stdout.readline()
    listed = time.perf_counter() - start
    server.stdin.close()
    server.wait(timeout=60)
    return initialized, listed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--busy", type=int, default=0)
    args = parser.parse_args()
    spinners = [multiprocessing.Process(target=spin, daemon=True) for _ in range(args.busy)]
    for process in spinners:
        process.start()
    try:
        with tempfile.TemporaryDirectory(prefix="kerneltui-mcp-") as root:
            workspace = Path(root) / "ws"
            (workspace / "vadd").mkdir(parents=True)
            shutil.copy(REPO / "tests" / "fixtures" / "vadd" / "problem.py", workspace / "vadd" / "problem.py")
            times = [one_start(workspace) for _ in range(args.runs)]
    finally:
        for process in spinners:
            process.terminate()
    for i, what in enumerate(("initialize answered", "tools listed")):
        values = [t[i] for t in times]
        print(f"{what}: median {statistics.median(values):.2f} s, worst {max(values):.2f} s ({args.runs} runs, "
              f"{args.busy} busy processes)")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
