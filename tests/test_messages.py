"""The typed messages on both channels (harness.contract.messages, harness.contract.protocol's JudgeRequest): each
reply read back as it was written, and hostile frames (random ones, and a table of the shapes an attack takes) met
by MalformedReply and nothing else; the judge's typed entry (WorkerProcess.ask) turning that into the worker's failure;
and, end to end, versions that forge a reply fail as the worker's failure in a real judge, which goes on."""

from __future__ import annotations

import contextlib
import json
import math
import random
import re
import socket
import struct
import threading
import typing
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch

from harness.contract import fields, messages, protocol
from harness.contract.messages import (
    BenchReply,
    CallReply,
    CallRequest,
    Failure,
    MalformedReply,
    Request,
    TemplateReady,
    WorkerReady,
)
from harness.wire import frames as wire
from harness.workers.process import WorkerFailure, WorkerProcess
from tests.conftest import add_version, judge_many, make_workspace, rung

SPEC = {"dtype": "float32", "shape": [1], "stride": [1], "device": "cpu", "nbytes": 4}
TREE = [{"$t": 1}, {"$tuple": [{"$t": 2}, 3, {"$float": "nan"}]}, {"$dict": [["eps", 1e-6], ["t", {"$dtype": "f32"}]]}]
RECORDED = {"ops": {"aten::add": 1}, "launches": [{"name": "k", "constexprs": {"BLOCK": 1024}}], "origins": [["x"]]}

# One honest reply of each message, with how many tensors its frame carries.
SAMPLES: list[tuple[Any, int]] = [
    (Failure("v001.py:3: RuntimeError: boom", "python", "call", "Traceback ..."), 0),
    (messages.LoadReply(True, {"add_kernel": "0123456789ab"}, "custom_kernel"), 0),
    (CallReply((0,), TREE, 0.25, RECORDED, {"inputs": 0.01, "recorded call": 0.2}, ("cpu",) * 3), 3),
    (messages.CompileReply(0.5, {"launches": [], "ops": {}}), 0),
    (messages.PrecompileReply(1.5, 2, (("AB", "CD"), ()), 0, 4, 1), 0),
    (messages.ShareReply("ab" * 32), 0),
    (messages.RegionsReply([{"kernel": "k", "region": "loop", "figures": {"ms": 1.0}}]), 0),
    (
        BenchReply(
            outputs=(0,),
            samples_ms=(0.1, 0.2),
            timed_watch={"timed_calls": 3, "kernels": {"k": 3}, "outside": []},
            recorded=RECORDED,
            settled_ms=(0.3,),
            idle_ms=(0.01,),
            tail_ms=(0.05,),
            idle_tail_ms=(0.01,),
            device_note="no GPU",
            phases_s={"timed calls": 1.0},
            devices=("cpu",),
            placement_of=(0, 1),
        ),
        1,
    ),
    (BenchReply((), (0.1,), [{"$t": 0}], {"note": "no GPU"}, device_ms=(0.09, 0.1), devices=("cuda",)), 1),
    (BenchReply((), (0.1,), None, None, device_ms=(0.09, 0.1), placement_of=(1,), device_placement_of=(1, 0)), 0),
    (messages.PingReply(), 0),
    (messages.OnceReply(), 0),
    (messages.LaunchReply(), 0),
    (messages.OutsideReply(), 0),
    (messages.ForkReply(4242), 0),
    (WorkerReady(77, True, "run", ("landlock ABI 6", "seccomp"), "on", "ready", 1234.5), 0),  # a GPU worker's
    (WorkerReady(79, False, "compile", ()), 0),
    (TemplateReady(78, 0.75, True), 0),
]


def parser_of(message: Any) -> Callable[[object], object]:
    return message.parse  # type: ignore[no-any-return,unused-ignore]


def wire_form(message: Any, tensors: int) -> dict[str, Any]:
    """The frame as the judge receives it: harness.wire.frames adds the tensors' descriptions."""
    frame = json.loads(json.dumps(message.frame()))  # tuples as the JSON lists they arrive as
    devices = getattr(message, "devices", ()) or ("cpu",) * tensors
    return {**frame, "tensors": [{**SPEC, "device": d} for d in devices]} if tensors else frame


@pytest.mark.parametrize(
    ("message", "tensors"), SAMPLES, ids=lambda m: type(m).__name__ if not isinstance(m, int) else ""
)
def test_every_reply_reads_back_as_the_worker_wrote_it(message: Any, tensors: int) -> None:
    assert parser_of(message)(wire_form(message, tensors)) == message


def test_every_request_names_its_reply_and_reads_back_on_the_workers_side() -> None:
    """One definition of each message on both sides: the worker reads the judge's header into the same class."""
    samples: list[messages.Message] = [
        messages.LoadRequest("/w/inbox/v001.py", 1 << 20, ("triton",)),
        CallRequest(TREE),
        messages.CompileRequest(TREE),
        messages.PrecompileRequest((TREE, [{"$t": 0}])),
        messages.ShareRequest("cpu", 1 << 20),
        messages.PingRequest(),
        messages.OnceRequest(),
        messages.LaunchRequest([{"$t": 0}]),
        messages.OutsideRequest(TREE, "kerneltui-0a", 3),
        messages.RegionsRequest(TREE),
        messages.BenchRequest(0.5, True, same_inputs=True),
        messages.BenchRequest(1.0, False, TREE),
        messages.ExitRequest(),
    ]
    assert {type(s) for s in samples} == set(messages.REQUESTS.values())
    for sample in samples:
        header = json.loads(json.dumps(sample.header()))
        assert header["op"] == sample.op and type(sample).from_header(header) == sample
        if isinstance(sample, Request):
            (declared,) = typing.get_args(type(sample).__orig_bases__[0])  # type: ignore[attr-defined]
            assert sample.reply is declared and sample.reply.op == sample.op


def test_a_failure_is_read_as_one_type_whatever_the_request() -> None:
    for request in (CallRequest([]), messages.LoadRequest("v.py"), messages.BenchRequest()):
        assert request.read_reply({"ok": False, "err": "x", "kind": "cuda"}) == Failure("x", "cuda")
    with pytest.raises(MalformedReply, match="call reply: err: missing"):
        CallRequest([]).read_reply({"ok": False})


# Hostile frames

HUGE_TEXT = "x" * (fields.MAX_TEXT + 1)
HUGE_LIST = [0.5] * (fields.MAX_ITEMS + 1)


def nested(depth: int, leaf: Any = 0) -> Any:
    value = leaf
    for _ in range(depth):
        value = [value]
    return value


def nested_dict(depth: int) -> Any:
    value: Any = 0
    for _ in range(depth):
        value = {"k": value}
    return value


# Values an attacker puts where a field should be: each is valid for some field, and wrong for most.
HOSTILE_VALUES: dict[str, Any] = {
    "none": None,
    "true": True,
    "false": False,
    "negative": -1,
    "huge-int": 10**5000,
    "nan": math.nan,
    "inf": math.inf,
    "minus-inf": -math.inf,
    "negative-float": -0.5,
    "empty-text": "",
    "huge-text": HUGE_TEXT,
    "control-text": "\x1b]52;c;AAAA\x07\u202e",
    "empty-list": [],
    "huge-list": HUGE_LIST,
    "list-of-bools": [True, False],
    "list-of-nan": [math.nan],
    "empty-object": {},
    "sixteen-places-of-two-samples": [16, 0],  # places are 0 to MAX_PLACEMENTS - 1
    "one-place-of-two-samples": [0],
    "deep-list": nested(5000),
    "deep-object": nested_dict(5000),
    "tensor-out-of-range": {"$tuple": [{"$t": 99}]},
    "tensor-bool": {"$tuple": [{"$t": True}]},
    "tuple-of-number": {"$tuple": 3},
    "bad-dict-pairs": {"$dict": [[1, 2, 3]]},
    "bad-float": {"$float": "1e999"},
    "bad-dtype": {"$dtype": ["float32"]},
    "marker-and-more": {"$t": 0, "x": 1},
    "unknown-marker": {"$eval": "__import__('os')"},
    "wide-object": {str(i): i for i in range(fields.MAX_ITEMS + 1)},
    "object-of-lists": {"a": [[["b"]]]},
}

# Frames that are not even objects, or an object missing everything.
NOT_FRAMES: list[Any] = [None, True, 0, 1.5, "ok", [], [{"ok": True}], {}, {"ok": "true"}, {"ok": 1}, nested(5000)]

# (message, field, hostile value) -> the field the MalformedReply must name: a few the fuzz below must not excuse.
MUST_REFUSE = [
    (CallReply, "seconds", "nan", "seconds"),
    (CallReply, "seconds", "true", "seconds"),
    (CallReply, "outputs", "tensor-out-of-range", "outputs[0]"),
    (CallReply, "outputs", "tensor-bool", "outputs[0]"),
    (CallReply, "inputs_after", "deep-list", "inputs_after"),
    (CallReply, "inputs_after", "unknown-marker", "inputs_after"),
    (CallReply, "recorded", "deep-object", "recorded"),
    (CallReply, "recorded", "huge-text", "recorded"),
    (BenchReply, "samples_ms", "list-of-nan", "samples_ms[0]"),
    (BenchReply, "samples_ms", "list-of-bools", "samples_ms[0]"),
    (BenchReply, "samples_ms", "huge-list", "samples_ms"),
    (BenchReply, "device_note", "huge-text", "device_note"),
    (BenchReply, "placement_of", "list-of-bools", "placement_of[0]"),
    (BenchReply, "placement_of", "empty-object", "placement_of"),
    (BenchReply, "placement_of", "sixteen-places-of-two-samples", "placement_of[0]"),
    (BenchReply, "placement_of", "one-place-of-two-samples", "placement_of"),
    (BenchReply, "device_placement_of", "one-place-of-two-samples", "device_placement_of"),
    (messages.PrecompileReply, "kernels", "negative", "kernels"),
    (messages.PrecompileReply, "threads", "true", "threads"),
    (messages.PrecompileReply, "failed_calls", "huge-int", "failed_calls"),
    (messages.LoadReply, "kernels", "wide-object", "kernels"),
    (messages.LoadReply, "cuda", "none", "cuda"),
    (WorkerReady, "pid", "negative", "pid"),
    (WorkerReady, "sandbox", "deep-list", "sandbox[0]"),
    (Failure, "err", "huge-text", "err"),
]


def sample_of(kind: type) -> tuple[Any, int]:
    return next((m, n) for m, n in SAMPLES if type(m) is kind)


def expect_refused_or_read(parse: Callable[[object], object], raw: object) -> None:
    """The only outcomes a parser may have: a message, or MalformedReply (anything else would crash the judge)."""
    try:
        parse(raw)
    except MalformedReply as exc:
        assert exc.op and exc.field and len(str(exc)) < 500, str(exc)[:600]


@pytest.mark.parametrize(("kind", "field", "value", "named"), MUST_REFUSE, ids=lambda v: getattr(v, "__name__", v))
def test_a_hostile_field_is_refused_naming_the_op_and_the_field(kind: type, field: str, value: str, named: str) -> None:
    message, tensors = sample_of(kind)
    raw = {**wire_form(message, tensors), field: HOSTILE_VALUES[value]}
    with pytest.raises(MalformedReply) as caught:
        parser_of(message)(raw)
    assert caught.value.field == named and caught.value.op == getattr(kind, "op", "?"), caught.value


@pytest.mark.parametrize(
    ("message", "tensors"), SAMPLES, ids=lambda m: type(m).__name__ if not isinstance(m, int) else ""
)
def test_each_hostile_value_in_each_field_is_refused_or_read(message: Any, tensors: int) -> None:
    parse = parser_of(message)
    honest = wire_form(message, tensors)
    for frame in NOT_FRAMES:
        with pytest.raises(MalformedReply):
            parse(frame)
    for key in [*honest, "tensors", "extra"]:
        for value in HOSTILE_VALUES.values():
            expect_refused_or_read(parse, {**honest, key: value})
        if key in honest:
            expect_refused_or_read(parse, {k: v for k, v in honest.items() if k != key})
    with pytest.raises(MalformedReply, match="no such field"):
        parse({**honest, "status": "pass"})


def random_value(rng: random.Random, depth: int = 0) -> Any:
    """A random JSON value, or one of the hostile ones."""
    roll = rng.random()
    if roll < 0.15:
        return rng.choice(list(HOSTILE_VALUES.values()))
    if depth > 6 or roll < 0.55:
        return rng.choice([None, True, False, rng.randint(-5, 5), rng.random() * 10, rng.choice(["", "a", "$t", "ok"])])
    if roll < 0.75:
        return [random_value(rng, depth + 1) for _ in range(rng.randint(0, 4))]
    if roll < 0.85:
        marker = rng.choice(sorted(fields.TREE_MARKERS))
        return {marker: random_value(rng, depth + 1)}
    keys = ["ok", "err", "outputs", "seconds", "recorded", "samples_ms", "$t", "x", "tensors", "op", "pid"]
    return {rng.choice(keys): random_value(rng, depth + 1) for _ in range(rng.randint(0, 4))}


def mutated(rng: random.Random, frame: dict[str, Any]) -> Any:
    """`frame` with a field replaced, removed or added, or a value inside a field replaced; at times no frame."""
    out = dict(frame)
    roll = rng.random()
    if roll < 0.05:
        return random_value(rng)
    key = rng.choice([*out, "extra"]) if out else "ok"
    if roll < 0.2:
        out.pop(key, None)
    elif roll < 0.7 or not isinstance(out.get(key), (list, dict)) or not out[key]:
        out[key] = random_value(rng)
    elif isinstance(out[key], list):
        items = list(out[key])
        items[rng.randrange(len(items))] = random_value(rng)
        out[key] = items
    else:
        entries = dict(out[key])
        entries[rng.choice(list(entries))] = random_value(rng)
        out[key] = entries
    return out


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_frames_give_every_parser_a_message_or_malformed_reply_and_nothing_else(seed: int) -> None:
    rng = random.Random(seed)
    for message, tensors in SAMPLES:
        parse, honest = parser_of(message), wire_form(message, tensors)
        for _ in range(400):
            expect_refused_or_read(parse, mutated(rng, honest))
        for _ in range(100):
            expect_refused_or_read(parse, random_value(rng))


def frame_bytes(head: bytes, payload: bytes = b"") -> bytes:
    return struct.pack("!4sQQ", wire.MAGIC, len(head), len(payload)) + head + payload


def random_frame(rng: random.Random) -> bytes:
    """A frame as a forging version could write it: an honest reply's header mutated, or random JSON, or bytes."""
    message, tensors = rng.choice(SAMPLES)
    roll = rng.random()
    if roll < 0.6:
        header = mutated(rng, wire_form(message, tensors))
        return frame_bytes(
            as_json(header), b"\0" * 4 * tensors if isinstance(header, dict) and "tensors" in header else b""
        )
    if roll < 0.8:
        return frame_bytes(as_json(random_value(rng, 4))[: rng.choice([50, 50_000])])  # cut short at times
    return frame_bytes(bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 64))), b"\0" * rng.randint(0, 8))


def as_json(value: Any) -> bytes:
    """As a forging version would write it (NaN and Infinity included); a value JSON cannot write (nested too deep,
    an integer of 5000 digits) as a truncated object."""
    try:
        return json.dumps(value).encode()
    except (ValueError, RecursionError):
        return b"{"


@pytest.mark.parametrize("seed", [11, 12])
def test_random_frames_through_the_channel_are_a_channel_error_or_malformed_reply(seed: int) -> None:
    """What WorkerProcess.ask reads: a frame (harness.wire.frames) then its message; both failures are the worker's."""
    rng = random.Random(seed)
    requests: list[Request[Any]] = [CallRequest([]), messages.BenchRequest(), messages.LoadRequest("v.py")]
    for _ in range(300):
        judge, worker = socket.socketpair()  # one frame each: after a bad one the stream is out of step
        writer = threading.Thread(target=send_and_close, args=(worker, random_frame(rng)))
        writer.start()  # a frame of megabytes fills the socket's buffer before the judge reads it
        with judge:
            try:
                header, _ = wire.recv(judge, timeout=5, max_payload=1 << 20)
            except wire.ChannelError:
                continue
            finally:
                judge.shutdown(socket.SHUT_RDWR)  # a writer still sending stops
                writer.join()
            expect_refused_or_read(rng.choice(requests).read_reply, header)


def send_and_close(sock: socket.socket, data: bytes) -> None:
    with sock, contextlib.suppress(OSError):
        sock.sendall(data)


def test_a_malformed_reply_is_the_workers_failure_naming_op_and_field_and_ends_the_worker() -> None:
    """WorkerProcess.ask, with the frame a forging version sent in place of its worker's reply."""
    worker = WorkerProcess.__new__(WorkerProcess)  # no process: its channel's end is all ask uses
    killed: list[bool] = []
    forged = {"ok": True, "outputs": {"$tuple": [{"$t": 0}]}, "inputs_after": [], "seconds": "soon", "tensors": [SPEC]}
    worker.request = lambda *args, **kwargs: (forged, [torch.ones(1)])  # type: ignore[method-assign]
    worker.kill = lambda: killed.append(True)  # type: ignore[method-assign]
    with pytest.raises(WorkerFailure) as caught:
        worker.ask(CallRequest([]), [], 5.0, "in the first call")
    said = str(caught.value)
    assert said.startswith("the kernel's process sent a malformed reply in the first call"), said
    assert "call reply: seconds: a str, not a number" in said and killed == [True]
    worker.request = lambda *args, **kwargs: ({**forged, "seconds": 0.5}, [torch.ones(1)])  # type: ignore[method-assign]
    reply, got = worker.ask(CallRequest([]), [], 5.0, "")
    assert isinstance(reply, CallReply) and reply.outputs == (0,) and reply.devices == ("cpu",) and len(got) == 1


def test_a_reply_whose_inputs_hold_no_output_buffer_is_the_workers_failure_not_the_problems() -> None:
    """Inputs sent back without the buffer problem.py names were read as problem.py's fault (ProblemError): the
    evaluation refused as a broken problem, on a version's forged reply."""
    from harness.judge.outputs import returned
    from harness.problem.load import ProblemError

    problem: Any = SimpleNamespace(output_buffers=((1,),), name="scale")
    sent = (torch.ones(2), torch.zeros(2))
    reply = CallReply((), [], 0.1)
    with pytest.raises(WorkerFailure, match="do not hold the output buffers"):
        returned(problem, reply, [], sent)
    with pytest.raises(ProblemError):  # the problem's own inputs without it: problem.py is at fault
        returned(problem, reply, [], (torch.ones(2),))
    buffers = [torch.ones(2), torch.full((2,), 2.0)]
    outputs, after = returned(problem, CallReply((), [{"$t": 0}, {"$t": 1}], 0.1), buffers, sent)
    assert torch.equal(outputs[0], buffers[1]) and len(after) == 2


def test_no_judge_code_reads_a_raw_reply() -> None:
    """Every judge <-> worker exchange goes through WorkerProcess.ask and the typed messages."""
    judge = Path(__file__).resolve().parent.parent / "harness" / "judge"
    raw = re.compile(r"reply\.get\(|reply\[|loaded\.get\(|\.request\(\{|worker\.request\(")
    found = [
        f"{p.name}: {line.strip()}"
        for p in judge.rglob("*.py")
        for line in p.read_text().splitlines()
        if raw.search(line)
    ]
    assert not found, found


# The client's request to the judge


def test_a_judge_request_reads_back_and_a_bad_one_says_why() -> None:
    request = protocol.JudgeRequest("/w/vadd/v001.py", 7, {"rungs": ["load"], "best_us": {"H200": 5.0}})
    assert protocol.JudgeRequest.parse(request.line()) == request
    bad = [  # (line, what the error says, the id it names)
        ("[1, 2]", "not an object", None),
        ('{"id": 3}', "path: missing", 3),
        ('{"path": 5, "id": "a"}', "path: missing", "a"),
        ('{"path": "v.py", "id": [1]}', "id: a list", None),
        ('{"path": "v.py", "id": true}', "id: True", None),
        ('{"path": "v.py", "id": 4, "rungs": "nope"}', "rungs: unknown rung", 4),
        ('{"path": "v.py", "id": 4, "timeout": -1}', "timeout: must be", 4),
        ('{"path": "v.py", "id": 4, "shell": "rm -rf /"}', "unknown option", 4),
        ("[" * 5000, "not JSON", None),
        ('{"path": "v.py", "n": ' + "9" * 5000 + "}", "not JSON", None),
    ]
    for line, words, rid in bad:
        with pytest.raises(protocol.BadRequest, match=re.escape(words)) as caught:
            protocol.JudgeRequest.parse(line)
        assert caught.value.id == rid, (line[:40], caught.value.id)


@pytest.mark.parametrize(
    ("line", "rid", "words"),
    [
        ('{"path": "v.py", "id": 9, "rungs": ["nope"]}', 9, "bad request: rungs: unknown rung(s) nope"),
        # json.loads raised RecursionError, which the judge's loop did not catch: one line ended the judge
        ("[" * 100_000, None, "bad request: not JSON"),
    ],
    ids=["unknown-rung", "nested-past-the-recursion-limit"],
)
def test_serve_answers_a_bad_request_line_with_an_error_event_naming_its_id(line: str, rid: Any, words: str) -> None:
    from harness.judge.serve import Server

    said: list[protocol.JudgeEvent] = []
    server = Server(None, {}, said.append, None, once=False)  # type: ignore[arg-type]  # refused before they are used
    judging = server.start(line + "\n")
    assert judging is None and len(said) == 1, said
    event = said[0]
    assert isinstance(event, protocol.Failed) and event.id == rid, event
    assert event.error.startswith(words), event.error


# End to end: a real judge, real workers

SCALE_PROBLEM = '''
"""Twice x into the output buffer passed beside it."""
import torch

def reference(x, out):
    return x * 2

def make_inputs(case, seed, device):
    gen = torch.Generator().manual_seed(seed)
    return (torch.randn(case["n"], generator=gen).to(device), torch.zeros(case["n"], device=device))

cases = [{"n": 64}]
bench_cases = [{"n": 64}]
tolerance = {"atol": 1e-6, "rtol": 1e-6}
output_buffers = [1]

def cost(case):
    return {"flops": case["n"], "bytes": 8 * case["n"]}
'''

# Writes its answer into the buffer and returns None, then sends back its inputs without the buffer.
DROPS_ITS_BUFFER = """
from harness.wire import frames as wire

_send = wire.send


def _forged(sock, header, tensors=None, **kwargs):
    if header.get("ok") and "inputs_after" in header:
        header = {**header, "inputs_after": []}
    return _send(sock, header, tensors, **kwargs)


wire.send = _forged


def custom_kernel(x, out):
    out.copy_(x * 2)
"""


@pytest.mark.slow
def test_forged_replies_fail_as_the_workers_failure_and_the_judge_goes_on(tmp_path: Path) -> None:
    """A version whose call reply says `"seconds": "soon"` failed with the judge's own ValueError; one whose reply
    drops the output buffer from its inputs had its problem refused as broken. Both are now the worker's failure,
    said as a malformed reply, and the honest version judged after them passes."""
    folder = make_workspace(tmp_path / "ws")
    forged, honest = add_version(folder, "forges_malformed_reply", "v001.py"), add_version(folder, "good", "v002.py")
    scale = tmp_path / "ws" / "scale"
    scale.mkdir()
    (scale / "problem.py").write_text(SCALE_PROBLEM)
    (scale / "v001.py").write_text(DROPS_ITS_BUFFER)
    dropped = scale / "v001.py"
    results = judge_many([forged, honest, dropped], rungs=["load", "correctness"])
    for path, words in ((forged, "seconds: a str, not a number"), (dropped, "do not hold the output buffers")):
        evaluation = results[str(path)]
        assert "rungs" in evaluation, evaluation  # not refused: judged, and failed
        checked = rung(evaluation, "correctness")
        assert checked["ok"] is False and "malformed reply" in checked["err"] and words in checked["err"], checked
        assert "Traceback" not in (checked.get("log") or ""), checked["log"]
    assert results[str(honest)]["ok"] is True, results[str(honest)]
