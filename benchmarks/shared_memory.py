"""What a request with large tensors costs through the socket and through the block the judge shares.

    python benchmarks/shared_memory.py [--sizes-mib 1,16,64,256] [--calls 5] [--json OUT.json]

One real worker per path, a version that returns `a + b`, and `call` requests whose two inputs are each
SIZE MiB (on the GPU where there is one, else on the CPU): each request sends the two inputs, and the reply
brings back the output and both inputs as they are after the call, as the correctness rung's requests do.
Prints, per size, the median seconds of a request from the judge's side by each path and their ratio.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness.contract.messages import CallReply, CallRequest, LoadReply, LoadRequest
from harness.wire import frames as wire
from harness.workers.process import WorkerPool, WorkerProcess

VERSION = b"def custom_kernel(a, b):\n    return a + b\n"


def timed_requests(worker: WorkerProcess, inputs: list[torch.Tensor], calls: int) -> list[float]:
    seconds = []
    for _ in range(calls + 1):  # the first one allocates the block, or warms the socket path
        tensors: list[torch.Tensor] = []
        tree = wire.encode_tree(inputs, tensors)
        start = time.perf_counter()
        reply, got = worker.ask(CallRequest(tree), tensors, 600, "benchmark")
        seconds.append(time.perf_counter() - start)
        assert isinstance(reply, CallReply), reply
        out = got[reply.outputs[0]]
        assert torch.equal(out.to(inputs[0].device), inputs[0] + inputs[1])
    return seconds[1:]


def measure(pool: WorkerPool, sizes_mib: list[int], calls: int, shared: bool) -> dict[int, float]:
    worker = pool.take("run")
    try:
        worker.wait_ready()
        if not shared:
            worker.share_note = "through the socket, for comparison"
        path = worker.copy_in(VERSION, "v001.py")
        loaded, _ = worker.ask(LoadRequest(str(path)), None, 120, "loading")
        assert isinstance(loaded, LoadReply), loaded
        device = "cuda" if loaded.cuda else "cpu"
        found = {}
        for size in sizes_mib:
            n = size * (1 << 20) // 4
            inputs = [torch.randn(n, device=device), torch.randn(n, device=device)]
            found[size] = statistics.median(timed_requests(worker, inputs, calls))
        if shared and worker.share_note:
            print(f"sharing failed: {worker.share_note}", file=sys.stderr)
        return found
    finally:
        pool.release(worker)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes-mib", default="1,16,64,256")
    parser.add_argument("--calls", type=int, default=5)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes_mib.split(",")]
    pool = WorkerPool()
    try:
        socket_s = measure(pool, sizes, args.calls, shared=False)
        shared_s = measure(pool, sizes, args.calls, shared=True)
    finally:
        pool.close()
    device = torch.cuda.get_device_name() if torch.cuda.is_available() else "CPU"
    print(f"{device}: a `call` request, two inputs of SIZE each, output and inputs back (median of {args.calls})")
    print(f"{'size':>9} {'socket s':>10} {'shared s':>10} {'ratio':>7}")
    for size in sizes:
        print(f"{size:>5} MiB {socket_s[size]:>10.4f} {shared_s[size]:>10.4f} {socket_s[size] / shared_s[size]:>6.1f}x")
    if args.json:
        rows = [{"mib": s, "socket_s": socket_s[s], "shared_s": shared_s[s]} for s in sizes]
        args.json.write_text(json.dumps({"device": device, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
