"""What the correctness rung's recorded calls cost in a worker: N calls, each under a profiler session of its own, or
all sharing one session collected at the end (as the rung makes them), with the collection's parts.

    python benchmarks/correctness_calls.py [--calls 19] [--repeat 3]

A real harness.worker.main.Worker in this process, on one end of a socket pair, gets real call requests (inputs
materialized, poisoned, recorded, outputs sent back) for a small torch entry (softmax of a 64x128 tensor plus
another): what is timed is the worker's side, the recorder and torch's profiler, not a kernel. On a GPU the inputs
and the profiler's CUDA activity are on the device. Prints, per way and repeat: the calls' milliseconds, the
collection's, and inside each session's stop, Kineto's stop, reading its events, and sorting them into calls.
"""

from __future__ import annotations

import argparse
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import torch  # noqa: E402

import harness.worker.main as worker_mod  # noqa: E402
from harness.contract.messages import CallRequest, ProfiledRequest  # noqa: E402
from harness.wire import frames as wire  # noqa: E402
from harness.worker import profiled  # noqa: E402

PARTS: dict[str, float] = {}


def timed_stop(stop: Any) -> Any:
    """Profiled.stop with its parts timed into PARTS."""

    def wrapped(self: profiled.Profiled) -> list[dict[str, Any]]:
        start = time.perf_counter()
        self.prof.stop()
        stopped = time.perf_counter()
        events = self.prof.events()
        read = time.perf_counter()
        self.prof.stop, self.prof.events = (lambda: None), (lambda: events)
        records = stop(self)
        for part, seconds in (("kineto stop", stopped - start), ("events", read - stopped)):
            PARTS[part] = PARTS.get(part, 0.0) + seconds
        PARTS["into calls"] = PARTS.get("into calls", 0.0) + time.perf_counter() - read
        return records

    return wrapped


def run(shared: bool, calls: int, device: torch.device) -> tuple[float, float]:
    ours, theirs = socket.socketpair()
    threading.Thread(target=drain, args=(theirs,), daemon=True).start()
    worker = worker_mod.Worker(ours, "run", "sm_90")
    worker.entry = lambda x, y: torch.softmax(x, -1) + y
    start = time.perf_counter()
    for _ in range(calls):
        tensors: list[torch.Tensor] = []
        inputs = [torch.randn(64, 128, device=device), torch.randn(64, 128, device=device)]
        request = CallRequest(wire.encode_tree(inputs, tensors), shared_profile=shared)
        worker.do_call(request.header(), tensors)
    called = time.perf_counter()
    if shared:
        worker.do_profiled(ProfiledRequest().header(), [])
    collected = time.perf_counter()
    ours.close()
    return called - start, collected - called


def drain(sock: socket.socket) -> None:
    while True:
        try:
            wire.recv(sock, timeout=30)
        except Exception:
            return


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=19, help="calls a verdict makes (19: softmax's on an H100)")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    profiled.Profiled.stop = timed_stop(profiled.Profiled.stop)  # type: ignore[method-assign]
    profiled.warm(device.type == "cuda")
    print(f"{torch.cuda.get_device_name() if device.type == 'cuda' else 'CPU'}: {args.calls} calls, milliseconds")
    for _ in range(args.repeat):
        for shared in (False, True):
            PARTS.clear()
            calls_s, collect_s = run(shared, args.calls, device)
            parts = ", ".join(f"{name} {1000 * s:.1f}" for name, s in PARTS.items())
            way = "one shared session " if shared else "a session per call"
            total = 1000 * (calls_s + collect_s)
            print(f"{way}: calls {1000 * calls_s:6.1f}  collect {1000 * collect_s:5.1f}  all {total:6.1f}  ({parts})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
