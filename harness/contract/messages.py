"""The judge <-> worker messages, one frozen dataclass each: what the judge asks (`header()`, the frame it sends)
and what the worker answers (`frame()`, built by harness.worker.main; `parse()`, the judge's one reading of it).

A reply comes from the version's own process, so `parse` checks every field once, by type and bounds
(harness.contract.fields), and raises MalformedReply naming the op and the field: judge code reads typed
fields, never a raw frame. Tensors stay out of these: a frame's trees refer to them by index (harness.wire.frames).
Nested records that have untrusted-data readers of their own (a recorded call's, the timed calls' watch, proton's
regions) stay plain JSON here, bounded in depth and size.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, ClassVar, Generic, Self, TypeVar, cast

from harness.contract.fields import MAX_NAME, Fields, Json, checked_list, checked_text, shown
from harness.contract.fields import MalformedReply as MalformedReply  # what parse raises, for the readers of replies

EVERY_REPLY = frozenset({"ok", "tensors"})  # its status, and the tensors' descriptions harness.wire.frames adds


@dataclass(frozen=True)
class Reply:
    """A request's answer when it succeeded ({"ok": true, ...})."""

    op: ClassVar[str] = "?"
    keys: ClassVar[frozenset[str]] = EVERY_REPLY

    @classmethod
    def parse(cls, raw: object) -> Self:
        fields = Fields(cls.op, raw, cls.keys)
        if fields.raw.get("ok") is not True:
            raise fields.fail("ok", f"{shown(fields.raw.get('ok'))}, not true")
        return cls.read(fields)

    @classmethod
    def read(cls, fields: Fields) -> Self:
        return cls()

    def frame(self) -> dict[str, Any]:
        """The reply as the worker sends it (fields that are None left out)."""
        values = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name in self.keys}
        return {"ok": True, **{k: v for k, v in values.items() if v is not None}}


R = TypeVar("R", bound=Reply)
R_co = TypeVar("R_co", bound=Reply, covariant=True)


@dataclass(frozen=True)
class Failure:
    """Any request's failure: the error as a person reads it, what kind (compile, cuda, oom, python; `worker`
    where the judge lost its worker), the stage it happened in, and the trace as a log."""

    err: str
    kind: str | None = None
    stage: str | None = None
    trace: str | None = None

    keys: ClassVar[frozenset[str]] = frozenset({"ok", "err", "kind", "stage", "trace", "tensors"})

    @classmethod
    def parse(cls, raw: object, op: str = "?") -> Failure:
        fields = Fields(op, raw, cls.keys)
        if fields.raw.get("ok") is not False:
            raise fields.fail("ok", f"{shown(fields.raw.get('ok'))}, not false")
        kind, stage = fields.optional_text("kind", 64), fields.optional_text("stage", 64)
        return cls(fields.text("err"), kind, stage, fields.optional_text("trace"))

    def frame(self) -> dict[str, Any]:
        optional = {"kind": self.kind, "stage": self.stage, "trace": self.trace}
        return {"ok": False, "err": self.err, **{k: v for k, v in optional.items() if v is not None}}


def read_reply(reply: type[R], raw: object) -> R | Failure:
    """A reply to a request whose answer is `reply`: that, or the failure it says."""
    if isinstance(raw, dict) and raw.get("ok") is False:
        return Failure.parse(raw, reply.op)
    return reply.parse(raw)


# Replies


@dataclass(frozen=True)
class Done(Reply):
    """An answer that says only that the request was done."""


class PingReply(Done):
    op = "ping"


class OnceReply(Done):
    """One call answered once the whole device was idle (harness.judge.confirm times it from outside)."""

    op = "once"


class LaunchReply(Done):
    """One call answered as soon as it returned: its host overhead."""

    op = "launch"


class OutsideReply(Done):
    """Calls made for a profiler outside the worker's process (harness.judge.nsight.timing)."""

    op = "outside"


@dataclass(frozen=True)
class LoadReply(Reply):
    """The version imported: whether this worker runs on the GPU, its Triton kernels by name with their source
    hashes, and its entry point (custom_kernel, or KernelBench's ModelNew)."""

    cuda: bool
    kernels: dict[str, str]
    entry: str

    op = "load"
    keys = EVERY_REPLY | {"cuda", "kernels", "entry"}

    @classmethod
    def read(cls, fields: Fields) -> Self:
        return cls(fields.flag("cuda"), fields.names("kernels"), fields.text("entry", 64))


@dataclass(frozen=True)
class CallReply(Reply):
    """One recorded call: its outputs (indices of the frame's tensors), its inputs as it left them, how long it took,
    what the recorder saw of it (harness.judge.trust reads it), and each tensor's device as the worker sent it."""

    outputs: tuple[int, ...]
    inputs_after: Json
    seconds: float
    recorded: Json = None
    phases_s: dict[str, float] = field(default_factory=dict)
    devices: tuple[str | None, ...] = ()

    op = "call"
    keys = EVERY_REPLY | {"outputs", "inputs_after", "seconds", "recorded", "phases_s"}

    @classmethod
    def read(cls, fields: Fields) -> Self:
        count = fields.tensor_count()
        return cls(
            outputs=fields.tensor_refs("outputs", count),
            inputs_after=fields.tree("inputs_after", count),
            seconds=fields.number("seconds"),
            recorded=fields.data("recorded"),
            phases_s=fields.timings("phases_s"),
            devices=fields.devices(),
        )

    def frame(self) -> dict[str, Any]:
        return {**super().frame(), "outputs": tuple_of_tensors(self.outputs), "inputs_after": self.inputs_after}


@dataclass(frozen=True)
class ProfiledReply(Reply):
    """What torch's profiler saw of each call that shared its session (harness.worker.profiled), in call order;
    harness.judge.trust reads each as a recorded call's "profiled" part."""

    records: Json

    op = "profiled"
    keys = EVERY_REPLY | {"records"}

    @classmethod
    def read(cls, fields: Fields) -> Self:
        return cls(fields.data("records"))


@dataclass(frozen=True)
class CompileReply(Reply):
    """A compile-only call (no GPU): how long it took and what it launched (compiled)."""

    seconds: float
    recorded: Json = None

    op = "compile"
    keys = EVERY_REPLY | {"seconds", "recorded"}

    @classmethod
    def read(cls, fields: Fields) -> Self:
        return cls(fields.number("seconds"), fields.data("recorded"))


@dataclass(frozen=True)
class PrecompileReply(Reply):
    """Kernels compiled ahead (harness.gpu.precompile): the Triton cache groups each set of inputs submitted."""

    seconds: float
    kernels: int
    keys_by_case: tuple[tuple[str, ...], ...]
    failed_calls: int
    threads: int
    launchers: int = 0  # launchers built beside the compiles (harness.gpu.precompile.launchers_early)

    op = "precompile"
    keys = EVERY_REPLY | {"seconds", "kernels", "keys", "failed_calls", "threads", "launchers"}

    @classmethod
    def read(cls, fields: Fields) -> Self:
        cases = checked_list(fields.raw.get("keys"), 1 << 12, lambda why: fields.fail("keys", why))
        keys = tuple(_names_of(fields, f"keys[{i}]", found) for i, found in enumerate(cases))
        counts = (fields.count(k, 1 << 30) for k in ("kernels", "failed_calls", "threads"))
        launchers = fields.count("launchers", 1 << 30, required=False)
        return cls(fields.number("seconds"), next(counts), keys, next(counts), next(counts), launchers)

    def frame(self) -> dict[str, Any]:
        return {
            "ok": True,
            "seconds": self.seconds,
            "kernels": self.kernels,
            "keys": [list(k) for k in self.keys_by_case],
            "failed_calls": self.failed_calls,
            "threads": self.threads,
            "launchers": self.launchers,
        }


@dataclass(frozen=True)
class ShareReply(Reply):
    """The shared block mapped: the bytes at its start as the worker sees them (hex)."""

    probe: str

    op = "share"
    keys = EVERY_REPLY | {"probe"}

    @classmethod
    def read(cls, fields: Fields) -> Self:
        return cls(fields.text("probe", 1024))


@dataclass(frozen=True)
class RegionsReply(Reply):
    """What proton timed of the regions a version marks (read by harness.worker.regions.regions_from)."""

    regions: Json

    op = "regions"
    keys = EVERY_REPLY | {"regions"}

    @classmethod
    def read(cls, fields: Fields) -> Self:
        return cls(fields.data("regions"))


MAX_PLACEMENTS = 16  # places in device memory one bench case's calls rotate over (harness.gpu.timing.placed_copies)


def places_of(fields: Fields, key: str, samples: tuple[float, ...]) -> tuple[int, ...]:
    """Each sample's place: none, or one for every sample."""
    places = fields.indices(key, MAX_PLACEMENTS - 1)
    if places and len(places) != len(samples):
        raise fields.fail(key, f"{len(places)} places for {len(samples)} samples")
    return places


@dataclass(frozen=True)
class BenchReply(Reply):
    """Calls timed on a bench case (ms). `recorded` and the settled timings are absent in a race round; the
    device times are CUPTI's, or `device_note` says why there are none; `timed_watch` is what CUPTI saw of the
    timed calls (harness.judge.timed_kernels reads it)."""

    outputs: tuple[int, ...]
    samples_ms: tuple[float, ...]
    inputs_after: Json = None
    timed_watch: Json = None
    recorded: Json = None
    settled_ms: tuple[float, ...] | None = None
    idle_ms: tuple[float, ...] | None = None
    tail_ms: tuple[float, ...] | None = None
    idle_tail_ms: tuple[float, ...] | None = None
    device_ms: tuple[float, ...] | None = None
    device_note: str | None = None
    phases_s: dict[str, float] = field(default_factory=dict)
    devices: tuple[str | None, ...] = ()
    placement_of: tuple[int, ...] = ()  # each sample's place in device memory (harness.gpu.timing.placed_copies)
    device_placement_of: tuple[int, ...] = ()  # each device time's

    op = "bench"
    settled: ClassVar[tuple[str, ...]] = ("settled_ms", "idle_ms", "tail_ms", "idle_tail_ms")
    keys = EVERY_REPLY | {"outputs", "samples_ms", "inputs_after", "timed_watch", "recorded", *settled}
    keys |= {"device_ms", "device_note", "phases_s", "placement_of", "device_placement_of"}

    @classmethod
    def read(cls, fields: Fields) -> Self:
        count = fields.tensor_count()
        settled = {name: fields.figures(name, required=False) for name in cls.settled}
        samples = fields.figures("samples_ms") or ()
        device = fields.figures("device_ms", required=False)
        return cls(
            outputs=fields.tensor_refs("outputs", count),
            samples_ms=samples,
            placement_of=places_of(fields, "placement_of", samples),
            device_placement_of=places_of(fields, "device_placement_of", device or ()),
            inputs_after=fields.tree("inputs_after", count, required=False),
            timed_watch=fields.data("timed_watch"),
            recorded=fields.data("recorded"),
            **settled,
            device_ms=device,
            device_note=fields.optional_text("device_note"),
            phases_s=fields.timings("phases_s"),
            devices=fields.devices(),
        )

    def frame(self) -> dict[str, Any]:
        return {**super().frame(), "outputs": tuple_of_tensors(self.outputs)}


@dataclass(frozen=True)
class WorkerReady:
    """What a worker says once it started, before it reads any version: its pid, whether it sees the GPU, its
    mode, what confines it (harness.containment.sandbox), whether its recorded calls run under torch's profiler
    ("on", or why not), Triton's warm-up, and its CLOCK_MONOTONIC as it said so."""

    pid: int
    cuda: bool
    mode: str
    sandbox: tuple[str, ...] = ()
    profiler: str | None = None
    triton: str | None = None
    monotonic: float = 0.0

    op: ClassVar[str] = "ready"
    keys: ClassVar[frozenset[str]] = frozenset(
        {"op", "pid", "cuda", "mode", "sandbox", "profiler", "triton", "monotonic", "tensors"}
    )

    @classmethod
    def parse(cls, raw: object) -> WorkerReady:
        fields = Fields("ready", raw, cls.keys)
        if fields.raw.get("op") != "ready":
            raise fields.fail("op", f"{shown(fields.raw.get('op'))}, not 'ready'")
        sandbox = fields.texts("sandbox", items=64) if "sandbox" in fields.raw else ()
        return cls(
            pid=fields.count("pid"),
            cuda=fields.flag("cuda"),
            mode=fields.text("mode", 64),
            sandbox=sandbox,
            profiler=fields.optional_text("profiler", MAX_NAME),
            triton=fields.optional_text("triton", MAX_NAME),
            monotonic=fields.number("monotonic", required=False),
        )

    def frame(self) -> dict[str, Any]:
        values = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        return {"op": "ready", **{k: v for k, v in values.items() if v is not None}}


def tuple_of_tensors(indices: tuple[int, ...]) -> dict[str, Any]:
    """encode_tree's form of a tuple of the frame's tensors."""
    return {"$tuple": [{"$t": i} for i in indices]}


def _names_of(fields: Fields, where: str, value: Any) -> tuple[str, ...]:
    items = checked_list(value, 1 << 12, lambda why: fields.fail(where, why))
    return tuple(checked_text(v, MAX_NAME, lambda why: fields.fail(where, why)) for v in items)


# Requests


@dataclass(frozen=True)
class Message:
    """A frame the judge sends: `header()` is what goes on the wire."""

    op: ClassVar[str]

    def header(self) -> dict[str, Any]:
        values = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        return {"op": self.op, **{k: v for k, v in values.items() if v is not None}}

    @classmethod
    def from_header(cls, header: dict[str, Any]) -> Self:
        """The message as the worker reads it (from the judge, trusted: a field missing raises TypeError)."""
        given = {f.name: header[f.name] for f in dataclasses.fields(cls) if f.name in header}
        tuples = {f.name for f in dataclasses.fields(cls) if str(f.type).startswith("tuple")}
        return cls(**{k: tuple(v) if k in tuples and isinstance(v, list) else v for k, v in given.items()})


@dataclass(frozen=True)
class Request(Message, Generic[R_co]):
    """A frame the worker answers with `reply` (or a Failure)."""

    reply: ClassVar[type[Reply]] = Reply

    def read_reply(self, raw: object) -> R_co | Failure:
        return cast("R_co | Failure", read_reply(self.reply, raw))


@dataclass(frozen=True)
class LoadRequest(Request[LoadReply]):
    """Import the version at `path` (in the worker's inbox), its file writes limited to `max_file_bytes`."""

    path: str
    max_file_bytes: int = 0
    dsls: tuple[str, ...] = ()

    op = "load"
    reply = LoadReply


@dataclass(frozen=True)
class CallRequest(Request[CallReply]):
    """One recorded call on `inputs` (an encoded tree), the memory it may allocate first filled with `poison`
    (a byte: a call made twice with two poisons shows an output that depends on memory it never wrote).
    `shared_profile`: under one session of torch's profiler with the shared calls before and after it, whose
    records ProfiledRequest collects (the call's own record then says {"pending": ...})."""

    inputs: Json
    poison: int = 0xFF
    shared_profile: bool = False

    op = "call"
    reply = CallReply


@dataclass(frozen=True)
class CompileRequest(Request[CompileReply]):
    inputs: Json

    op = "compile"
    reply = CompileReply


@dataclass(frozen=True)
class PrecompileRequest(Request[PrecompileReply]):
    """Compile ahead what the version launches on each of `cases` (encoded trees over one list of tensors)."""

    cases: tuple[Json, ...]

    op = "precompile"
    reply = PrecompileReply


@dataclass(frozen=True)
class ShareRequest(Request[ShareReply]):
    """Map the block of shared memory whose descriptor follows this frame."""

    kind: str
    size: int

    op = "share"
    reply = ShareReply


@dataclass(frozen=True)
class PingRequest(Request[PingReply]):
    op = "ping"
    reply = PingReply


@dataclass(frozen=True)
class OnceRequest(Request[OnceReply]):
    """One call, on `inputs` or (None) the last bench inputs."""

    inputs: Json = None

    op = "once"
    reply = OnceReply


@dataclass(frozen=True)
class LaunchRequest(Request[LaunchReply]):
    inputs: Json = None

    op = "launch"
    reply = LaunchReply


@dataclass(frozen=True)
class OutsideRequest(Request[OutsideReply]):
    """One call to compile, then `calls` calls each in an NVTX range named `range`."""

    inputs: Json
    range: str
    calls: int

    op = "outside"
    reply = OutsideReply


@dataclass(frozen=True)
class RegionsRequest(Request[RegionsReply]):
    inputs: Json

    op = "regions"
    reply = RegionsReply


@dataclass(frozen=True)
class BenchRequest(Request[BenchReply]):
    """Calls timed for about `budget_s`, on `inputs` or (`same_inputs`) on those of the last bench request;
    `race`: a race round, timed calls only."""

    budget_s: float = 1.0
    race: bool = False
    inputs: Json = None
    same_inputs: bool | None = None

    op = "bench"
    reply = BenchReply


@dataclass(frozen=True)
class ProfiledRequest(Request[ProfiledReply]):
    """Stop the profiler session the shared calls ran under: their records, in call order."""

    op = "profiled"
    reply = ProfiledReply


@dataclass(frozen=True)
class ExitRequest(Message):
    """Exit (no answer)."""

    op = "exit"


# The worker template's channel (harness.workers.forks, harness.worker.template): JSON datagrams, no tensors.


@dataclass(frozen=True)
class TemplateReady:
    """What a template says once it imported torch and Triton: its pid, how long that took, and whether its
    forks can have pid namespaces of their own."""

    pid: int
    import_s: float
    pid_namespace: bool

    keys: ClassVar[frozenset[str]] = frozenset({"op", "pid", "import_s", "pid_namespace"})

    @classmethod
    def parse(cls, raw: object) -> TemplateReady:
        fields = Fields("ready", raw, cls.keys)
        if fields.raw.get("op") != "ready":
            raise fields.fail("op", f"{shown(fields.raw.get('op'))}, not 'ready'")
        return cls(fields.count("pid"), fields.number("import_s"), fields.flag("pid_namespace"))

    def frame(self) -> dict[str, Any]:
        return {"op": "ready", **dataclasses.asdict(self)}


@dataclass(frozen=True)
class PidReply(Reply):
    """A process started: its pid."""

    pid: int

    keys = EVERY_REPLY | {"pid"}

    @classmethod
    def read(cls, fields: Fields) -> Self:
        return cls(fields.count("pid"))


class ForkReply(PidReply):
    """The template forked a worker: its outer process's pid, as the template sees it."""

    op = "fork"


@dataclass(frozen=True)
class ForkRequest(Request[ForkReply]):
    """Fork a worker (its socket, log and status pipe go with this datagram): its mode and compile target, its
    whole environment, its folders (`root`, `scratch`, `inbox`, and `cover`: what hides every other worker's),
    what it may read, its file size limit, whether it confines itself, and whether it starts CUDA first."""

    mode: str
    arch: str
    env: dict[str, str]
    root: str
    scratch: str
    inbox: str
    cover: str
    reads: tuple[str, ...]
    max_file_bytes: int
    confine: bool
    cuda_first: bool

    op = "fork"
    reply = ForkReply


class TemplateStarted(PidReply):
    """The judge's fork server started a template: its pid, as the judge sees it."""

    op = "template"


@dataclass(frozen=True)
class TemplateRequest(Request[TemplateStarted]):
    """Start a template (its control socket and log go with this datagram) in the sandbox `sandbox` sets up
    (bubblewrap's argv up to its command, ending with "--"; empty: none), started by `python`, with the whole
    environment `env`, its workers' folders in `slots`."""

    sandbox: tuple[str, ...]
    python: str
    env: dict[str, str]
    slots: str

    op = "template"
    reply = TemplateStarted


REQUESTS: dict[str, type[Message]] = {
    cls.op: cls
    for cls in (
        LoadRequest,
        CallRequest,
        CompileRequest,
        PrecompileRequest,
        ShareRequest,
        PingRequest,
        OnceRequest,
        LaunchRequest,
        OutsideRequest,
        RegionsRequest,
        BenchRequest,
        ExitRequest,
    )
}
