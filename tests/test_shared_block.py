"""Large tensors through memory the judge shares with its worker (harness.wire.shared_block): on the CPU a sealed
memfd, the path the GPU's device block takes too; frames that lie about it, and a worker that attacks it."""

from __future__ import annotations

import os
import socket
import threading
from pathlib import Path

import pytest
import torch

from harness.wire import frames as wire
from harness.wire import shared_block
from harness.wire.digest import digest_of
from harness.wire.shared_block import MIN_BYTES, HostBlock, Placement
from tests.conftest import add_version, judge_many, make_workspace, rung, traced

LARGE = MIN_BYTES // 4  # float32 elements: a tensor of exactly the size that goes through the block


def send_beside(sock: socket.socket, tensors: list[torch.Tensor], share: Placement) -> threading.Thread:
    """wire.send in a thread: what goes through the socket waits for the other side to read it."""
    thread = threading.Thread(target=wire.send, args=(sock, {"op": "x"}, tensors), kwargs={"share": share})
    thread.start()
    return thread


def test_large_tensors_go_through_the_block_and_small_ones_through_the_socket() -> None:
    a, b = socket.socketpair()
    sender = HostBlock.allocate(4 * MIN_BYTES)
    receiver = HostBlock.adopt(sender.fd, sender.size)  # the same memory, mapped again
    big, small = torch.randn(2 * LARGE).reshape(-1, 8).t(), torch.randn(5)
    wire.send(a, {"op": "x"}, [big, small], share=Placement(sender))
    header, got = wire.recv(b, timeout=5, block=receiver)
    assert [("shared" in spec) for spec in header["tensors"]] == [True, False]
    assert torch.equal(got[0], big) and got[0].stride() == big.stride() and torch.equal(got[1], small)
    receiver.view.fill_(7)  # what arrived is a copy: the block is the other side's to write next
    assert torch.equal(got[0], big)
    sender.close()
    receiver.close()


def test_bytes_changed_in_the_block_after_the_frame_was_sent_are_refused() -> None:
    """A thread of the version's rewriting an output it reported, while the judge copies it out of the block, can
    race the judge's copy: the sender's digest, taken as it placed the tensor, must match the receiver's copy."""
    a, b = socket.socketpair()
    sender = HostBlock.allocate(4 * MIN_BYTES)
    receiver = HostBlock.adopt(sender.fd, sender.size)
    output = torch.zeros(LARGE)
    wire.send(a, {"op": "x"}, [output], share=Placement(sender))
    sender.view[4096:4100] = torch.tensor([1, 2, 3, 4], dtype=torch.uint8)  # after the report, before the copy
    with pytest.raises(wire.ChannelError, match="changed after it was sent"):
        wire.recv(b, timeout=5, block=receiver)
    sender.close()
    receiver.close()


def test_the_digest_sees_a_swap_and_a_one_byte_tail() -> None:
    data = torch.arange(4 * 1000 + 3, dtype=torch.int64).remainder(251).to(torch.uint8)
    swapped = data.clone()
    swapped[[0, 4]] = swapped[[4, 0]]  # two words swapped: their plain sum is the same
    tail = data.clone()
    tail[-1] += 1
    assert len({digest_of(d) for d in (data, swapped, tail)}) == 3
    assert digest_of(data) == digest_of(data.clone())


def test_tensors_that_do_not_fit_go_through_the_socket() -> None:
    a, b = socket.socketpair()
    block = HostBlock.allocate(MIN_BYTES + 1024)
    tensors = [torch.randn(LARGE), torch.randn(LARGE)]
    sending = send_beside(a, tensors, Placement(block))
    header, got = wire.recv(b, timeout=30, block=block)
    sending.join()
    assert [("shared" in spec) for spec in header["tensors"]] == [True, False]
    assert all(torch.equal(x, y) for x, y in zip(got, tensors, strict=True))


@pytest.mark.parametrize(
    ("offset", "with_block"),
    [(-512, True), (1 << 40, True), (2 * MIN_BYTES - 16, True), ("0", True), (1.0, True), (0, False)],
)
def test_a_tensor_said_to_lie_outside_the_block_is_refused(offset: object, with_block: bool) -> None:
    a, b = socket.socketpair()
    block = HostBlock.allocate(2 * MIN_BYTES)
    spec = {"dtype": "float32", "shape": [LARGE], "stride": [1], "device": "cpu", "nbytes": MIN_BYTES}
    wire.send(a, {"op": "x", "tensors": []}, [])  # a frame, then one whose header lies
    wire.recv(b, timeout=5, block=block)
    head = wire.json.dumps({"ok": True, "tensors": [{**spec, "shared": offset}]}).encode()
    a.sendall(wire._PREFIX.pack(wire.MAGIC, len(head), 0) + head)
    with pytest.raises(wire.ChannelError, match="shared memory"):
        wire.recv(b, timeout=5, block=block if with_block else None)


def test_a_frame_cannot_name_the_same_bytes_over_and_over() -> None:
    """Each tensor in the block is copied out: a reply naming the whole block ten thousand times would make the
    judge copy it that many times over, and run out of memory."""
    a, b = socket.socketpair()
    block = HostBlock.allocate(MIN_BYTES)
    spec = {"dtype": "uint8", "shape": [block.size], "stride": [1], "device": "cpu", "nbytes": block.size}
    head = wire.json.dumps({"ok": True, "tensors": [{**spec, "shared": 0}] * 10_000}).encode()
    sending = threading.Thread(target=a.sendall, args=(wire._PREFIX.pack(wire.MAGIC, len(head), 0) + head,))
    sending.start()
    with pytest.raises(wire.ChannelError, match="more than the block"):
        wire.recv(b, timeout=30, block=block)
    sending.join()


def test_the_worker_cannot_shrink_or_grow_the_block_under_the_judge() -> None:
    """A block the worker truncated would make the judge's next read of its mapping a SIGBUS."""
    block = HostBlock.allocate(MIN_BYTES)
    theirs = block.export()
    for size in (0, block.size // 2, 2 * block.size):
        with pytest.raises(PermissionError):
            os.ftruncate(theirs, size)
    assert int(block.view[-1]) == 0
    with pytest.raises(shared_block.ShareError, match="size"):
        HostBlock.adopt(theirs, block.size + 4096)
    os.close(theirs)
    block.close()
    block.close()


def test_a_descriptor_travels_with_its_byte_and_its_absence_is_an_error(tmp_path: Path) -> None:
    a, b = socket.socketpair()
    path = tmp_path / "f"
    path.write_text("shared")
    fd = os.open(path, os.O_RDONLY)
    shared_block.send_fd(a, fd)
    got = shared_block.receive_fd(b)
    assert got != fd and os.read(got, 6) == b"shared"
    os.close(got)
    a.sendall(b"F")
    with pytest.raises(shared_block.ShareError, match="no descriptor"):
        shared_block.receive_fd(b)


def test_a_worker_maps_a_block_only_of_the_size_it_was_told() -> None:
    a, b = socket.socketpair()
    block = HostBlock.allocate(MIN_BYTES)
    for size, message in ((block.size + 4096, "size"), ("1e9", "bytes"), (-1, "bytes")):
        theirs = block.export()
        shared_block.send_fd(a, theirs)
        os.close(theirs)
        with pytest.raises(shared_block.ShareError, match=message):
            shared_block.accept(b, "cpu", size)
    shared_block.send_fd(a, block.fd)
    mapped = shared_block.accept(b, "cpu", block.size)
    block.view[:4].fill_(9)
    assert mapped.view[:4].tolist() == [9, 9, 9, 9]


def test_no_block_is_asked_for_small_tensors_and_one_kind_is_chosen() -> None:
    assert shared_block.bytes_to_share([torch.zeros(10), torch.zeros(LARGE - 1)]) is None
    assert shared_block.bytes_to_share([torch.zeros(LARGE, device="meta")]) is None
    kind, size = shared_block.bytes_to_share([torch.zeros(LARGE), torch.zeros(3), torch.zeros(LARGE)]) or ("", 0)
    assert kind == "cpu" and size >= 4 * MIN_BYTES  # room for the reply's outputs and inputs as well


SCRIBBLES = '''"""Truncates every large file it can reach (the shared block among them) and scribbles on mappings."""
import os
import stat

import torch


def custom_kernel(a, b):
    for fd in range(3, 1024):
        try:
            if stat.S_ISREG(os.fstat(fd).st_mode) and os.fstat(fd).st_size >= 1 << 20:
                os.ftruncate(fd, 0)
        except OSError:
            pass
    return a + b
'''


@pytest.mark.slow
def test_a_worker_judges_large_inputs_through_the_block_and_cannot_pull_it_from_under_the_judge(
    tmp_path: Path,
) -> None:
    """Inputs of 2 MiB each go to the worker, and outputs and inputs back, through the block; a version that
    truncates it leaves the judge standing and its verdict right; one that writes its input is caught."""
    folder = make_workspace(tmp_path / "ws")
    source = (folder / "problem.py").read_text()
    (folder / "problem.py").write_text(source.replace('cases = [{"n": 1},', f'cases = [{{"n": {2 * LARGE}}},'))
    (folder / "scribbles.py").write_text(SCRIBBLES)
    paths = [add_version(folder, "good"), folder / "scribbles.py", add_version(folder, "modifies_inputs")]
    with traced() as trace:
        results = judge_many(paths, rungs=["load", "compile", "correctness"])
    assert results["good"]["status"] == "pass", rung(results["good"], "correctness")
    assert results["scribbles"]["status"] == "pass", rung(results["scribbles"], "correctness")
    err = rung(results["modifies_inputs"], "correctness")["err"] or ""
    assert "modified its input 0" in err and f"of {2 * LARGE} elements changed" in err
    changed = int(err.split("(")[-1].split(" of ")[0])  # a + b == a where b is below a's precision
    assert changed > 0.99 * 2 * LARGE, err
    shares = [line for line in trace if '"share"' in line]
    assert len(shares) >= 3 and all('"ok": true' in line for line in shares), shares


@pytest.mark.gpu
def test_a_gpu_worker_maps_the_judges_device_memory_for_bench_inputs(tmp_path: Path) -> None:
    """On a GPU the block is device memory (CUDA's virtual memory API, a POSIX descriptor): the bench case's
    64 MiB inputs and the output reach the worker and come back through it, and the verdict stands."""
    import json

    folder = make_workspace(tmp_path / "ws")
    rungs = ["load", "compile", "correctness", "benchmark"]
    with traced() as trace:
        results = judge_many([add_version(folder, "good")], rungs=rungs, confirm=False)
    assert results["good"]["status"] == "pass", [(r["name"], r["err"]) for r in results["good"]["rungs"]]
    shares = [json.loads(line) for line in trace if '"share"' in line]
    assert shares and all(s["ok"] and s["what"] == "cuda" for s in shares), shares


def call_in_a_worker(inputs: list[torch.Tensor]) -> tuple[object, str | None, dict]:
    """One `call` of `a + b` in a real worker: (its block, its share_note, the reply's header)."""
    from harness.workers.process import WorkerPool

    pool = WorkerPool()
    worker = pool.take("run")
    try:
        worker.wait_ready()
        version = worker.copy_in(b"def custom_kernel(a, b):\n    return a + b\n", "v001.py")
        loaded, _ = worker.request({"op": "load", "path": str(version), "dsls": []}, None, 120, "loading")
        assert loaded.get("ok"), loaded
        tensors: list[torch.Tensor] = []
        tree = wire.encode_tree(inputs, tensors)
        reply, got = worker.request({"op": "call", "inputs": tree}, tensors, 120, "calling")
        assert reply.get("ok") and torch.equal(wire.decode_tree(reply["outputs"], got)[0], inputs[0] + inputs[1])
        return worker.block, worker.share_note, reply
    finally:
        pool.release(worker)
        pool.close()


def test_a_worker_takes_a_call_and_answers_it_through_the_block() -> None:
    block, note, reply = call_in_a_worker([torch.randn(LARGE), torch.randn(LARGE)])
    assert block is not None and note is None
    assert [("shared" in spec) for spec in reply["tensors"]] == [True, True, True]  # the output, the inputs after


def test_a_block_the_worker_does_not_see_as_written_is_dropped_for_the_socket(monkeypatch: pytest.MonkeyPatch) -> None:
    """Should the worker's mapping not hold the judge's bytes (a driver that maps something else), the block is
    not used, either way: the request and its reply go through the socket, and share_note says why."""
    monkeypatch.setattr(shared_block, "write_probe", lambda block: "ff" * shared_block.PROBE_BYTES)
    block, note, reply = call_in_a_worker([torch.randn(LARGE), torch.randn(LARGE)])
    assert block is None and "does not see the judge's bytes" in (note or "")
    assert not any("shared" in spec for spec in reply["tensors"])
