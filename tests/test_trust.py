"""What keeps a verdict believable outside the judge: flagged versions are not "best" until approved, no
secret reaches a judge, no agent tool opens the history, an agent's processes end with its session, a
huge version is refused unread, control characters never reach the terminal raw."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import torch

from agents.tools import Toolbox
from harness.contract.results import Evaluation, Flag
from harness.contract.text import printable
from harness.judge import confirm
from harness.problem.load import load_problem
from kerneltui.core.agents.host import StoreHost, problem_info
from kerneltui.core.judging import client as judge
from kerneltui.core.judging import runner
from kerneltui.core.locations import CHECKOUT
from kerneltui.core.workspace import Workspace
from kerneltui.history.store import Store
from tests import dashboard_fixtures
from tests.conftest import FIXTURES, REPO, kerneltui, make_workspace


def flagged_fastest(workspace_root: Path) -> Store:
    """The dashboard fixture (v002 best at 52 µs) plus v005 at 30 µs that torch computed (flagged)."""
    workspace = dashboard_fixtures.build(workspace_root)
    store = Store(workspace.db_path)
    path = workspace.root / "vadd" / "v005.py"
    path.write_text("def custom_kernel(a, b):\n    return a + b\n")
    version_id, digest, problem = runner.record_version(store, workspace, path)
    evaluation_id = store.start_evaluation(version_id, problem, "v005", digest)
    rungs = dashboard_fixtures.rungs_for("pass", 30.0, workspace.state)
    ev = Evaluation(problem="vadd", version="v005", path=str(path), hash=digest, rungs=rungs)
    ev.device = {"kind": "cuda", "name": "NVIDIA H200", "arch": "sm_90"}
    ev.flags = [Flag("uses-library", "torch computes under test what the kernels should: aten::add ×9")]
    ev.finish()
    store.finish_evaluation(evaluation_id, ev)
    return store


def test_a_flagged_version_is_never_best_until_approved(tmp_path: Path) -> None:
    store = flagged_fastest(tmp_path / "ws")
    assert store.best_passing("vadd")["version"] == "v002"  # 52 µs, not the flagged 30 µs
    assert store.best_medians("vadd") == {"NVIDIA H200": 52.0}
    assert next(r for r in store.problem_rows() if r["name"] == "vadd")["best_us"] == 52.0
    rows = {r["name"]: r for r in store.version_rows("vadd")}
    from kerneltui.ui.widgets.versions import best_median

    assert best_median(list(rows.values())) == {"NVIDIA H200": 52.0}
    history = {h["version"]: h for h in store.history("vadd")}
    assert history["v005"]["flags"][0]["name"] == "uses-library"
    store.add_verdict(rows["v005"]["version_id"], "approved", "torch's add is the point here", "me")
    assert store.best_passing("vadd")["version"] == "v005"
    assert best_median(store.version_rows("vadd")) == {"NVIDIA H200": 30.0}


def test_history_shows_flags(tmp_path: Path) -> None:
    flagged_fastest(tmp_path / "ws").close()
    done = kerneltui("history", "vadd", "--workspace", str(tmp_path / "ws"))
    assert done.returncode == 0, done.stderr
    line = next(line for line in done.stdout.splitlines() if " v005 " in line)
    assert "pass ⚑" in line


def test_the_judge_gets_no_secret(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY", "HF_TOKEN", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.setenv(name, "sk-secret")
    monkeypatch.setenv("DATABASE_URL", "postgres://me:pw@db/x")  # no marker in its name: not passed either
    monkeypatch.setenv("TRITON_CACHE_DIR", "/tmp/t")
    env = judge.harness_env(tmp_path)
    assert "sk-secret" not in env.values() and "DATABASE_URL" not in env
    assert env["TRITON_CACHE_DIR"] == "/tmp/t" and env["PATH"] == os.environ["PATH"]


def test_the_judge_finds_the_harness_without_an_install(tmp_path: Path) -> None:
    # kerneltui run from a checkout it was not installed from found harness through its working folder; the judge,
    # started in its state folder, did not ("No module named harness"). -S: no site-packages, no editable install.
    env = judge.harness_env(tmp_path)
    found = subprocess.run(
        [sys.executable, "-S", "-c", "import harness.contract.options, sys; print(sys.modules['harness'].__file__)"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert found.returncode == 0, found.stderr
    assert Path(found.stdout.strip()).resolve() == CHECKOUT / "harness" / "__init__.py"


def test_no_agent_tool_opens_the_history(tmp_path: Path) -> None:
    workspace = dashboard_fixtures.build(tmp_path / "ws")
    store = Store(workspace.db_path)
    session = store.start_agent_session("vadd", "test", "test", os.getpid())
    info = problem_info(workspace, "vadd", None)
    host = StoreHost(workspace, info, store, session, None, threading.Event())
    toolbox = Toolbox(host, author="test")
    for path in (".kerneltui/history.db", "vadd/../.kerneltui/history.db-wal", str(workspace.db_path), ".kerneltui"):
        output, ok = toolbox.call("read_file", {"path": path})
        assert not ok and "kerneltui's own state" in output, (path, output)
    output, ok = toolbox.call("read_dump", {"version": "v002", "kind": "sass"})
    assert ok, output  # dumps still reach agents, through the tool made for them


def sleeper(pids: Path) -> str:
    """A shell command: a process that notes its pid in `pids`, then sleeps."""
    code = f"import os, time; open({str(pids)!r}, 'a').write(f'{{os.getpid()}}\\n'); time.sleep(300)"
    return f'{sys.executable} -c "{code}"'


def alive(pids: Path) -> list[int]:
    noted = [int(p) for p in pids.read_text().split()] if pids.exists() else []
    return [p for p in noted if Path(f"/proc/{p}").exists() and "Z" not in Path(f"/proc/{p}/stat").read_text()[-60:]]


def test_an_agents_processes_end_with_it(tmp_path: Path) -> None:
    """The agent exits, leaving a daemon (new session), an orphan and a child behind: the reaper ends them."""
    pids = tmp_path / "pids"
    script = tmp_path / "agent.sh"
    line = sleeper(pids)
    script.write_text(f"#!/bin/sh\nsetsid {line} &\n({line} &)\n{line} &\nsleep 1\nexit 3\n")
    script.chmod(0o755)
    done = subprocess.run([sys.executable, "-m", "agents.reaper", str(script)], cwd=REPO, timeout=60)
    assert done.returncode == 3  # the agent's own status
    assert len(pids.read_text().split()) == 3  # all three had started
    assert alive(pids) == []


@pytest.mark.slow
def test_an_agent_told_to_stop_is_ended_with_its_tree(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    script = tmp_path / "agent.sh"
    script.write_text(f"#!/bin/sh\ntrap '' TERM\n{sleeper(pids)} &\nwhile true; do sleep 1; done\n")
    script.chmod(0o755)
    proc = subprocess.Popen([sys.executable, "-m", "agents.reaper", str(script)], cwd=REPO)
    deadline = time.monotonic() + 60
    while not alive(pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert alive(pids), "the agent's child never started"
    proc.terminate()  # what the ACP transport does at the end of a session
    proc.wait(timeout=30)
    assert alive(pids) == []


def test_a_huge_version_is_refused_and_not_stored(tmp_path: Path) -> None:
    folder = make_workspace(tmp_path / "ws")
    huge = folder / "v001.py"
    huge.write_text("PADDING = '" + "x" * (2 << 20) + "'\n\ndef custom_kernel(a, b):\n    return a + b\n")
    done = kerneltui("eval", str(huge))
    assert done.returncode == 2 and "refused" in done.stderr, done.stderr
    db = tmp_path / "ws" / ".kerneltui" / "history.db"
    assert not db.exists() or db.stat().st_size < 1 << 20


def test_control_characters_are_written_out() -> None:
    assert printable("ok\x1b]0;title\x07\x1b[2J\u202e\n\t") == "ok\\x1b]0;title\\x07\\x1b[2J\\u202e\n\t"


def test_variations_of_a_bench_case_keep_alignment_and_differ() -> None:
    problem = load_problem(FIXTURES / "vadd")
    case = {"n": 1 << 24}
    for seed in range(6):
        varied = confirm.vary(problem, case, seed)
        assert varied["n"] != case["n"] and varied["n"] % 16 == 0 and varied["n"] > case["n"] - 64
    assert confirm.vary(problem, {"rows": 3, "cols": 17, "scale": 8.0}, 1) == {"rows": 3, "cols": 17, "scale": 8.0}


def test_a_median_far_below_what_the_judge_saw_is_flagged() -> None:
    assert confirm.outside_flag(700.0, 740.0, "n=268435456") is None  # launch overhead and noise
    assert confirm.outside_flag(5.0, 40.0, "n=4096") is None  # small kernels: the bound is all overhead
    assert confirm.outside_flag(88.0, 181.0, "n=16777216") is None  # seen on the H200: an honest add
    flag = confirm.outside_flag(400.0, 740.0, "n=268435456")
    assert flag is not None and flag.name == "timing-mismatch" and "740.0 µs" in flag.reason


def test_a_refused_version_is_recorded_without_its_text(tmp_path: Path) -> None:
    """What the dashboard's scheduler records for a version past the limit: a failed load, and no source."""
    from harness.contract.source import VersionTooLarge

    folder = make_workspace(tmp_path / "ws")
    huge = folder / "v009.py"
    huge.write_text("# " + "x" * (2 << 20) + "\ndef custom_kernel(a, b):\n    return a + b\n")
    workspace = Workspace(tmp_path / "ws")
    store = Store(workspace.db_path)
    with pytest.raises(VersionTooLarge) as refused:
        runner.record_version(store, workspace, huge)
    runner.record_refusal(store, huge, str(refused.value))
    row = next(r for r in store.version_rows("vadd") if r["name"] == "v009")
    assert row["status"] == "fail" and row["failed_rung"] == "load"
    assert store.rows("SELECT source FROM versions WHERE name = 'v009'")[0]["source"] is None
    err = store.rows("SELECT err FROM rungs WHERE evaluation_id = ?", [row["evaluation_id"]])[0]["err"]
    assert "refused" in err and "1024 KiB" in err


def test_agents_are_told_why_a_version_is_flagged(tmp_path: Path) -> None:
    from kerneltui.core.agents.host import judged_from

    store = flagged_fastest(tmp_path / "ws")
    row = next(r for r in store.history("vadd") if r["version"] == "v005")
    judged = judged_from(store, store.evaluation(row["id"]) or {})
    assert "⚑ uses-library: torch computes under test" in judged.summary
    assert judged.flags[0].name == "uses-library"
    assert "best passing so far: v002" in judged.summary


@pytest.mark.slow
def test_the_cli_never_prints_a_raw_control_character(tmp_path: Path) -> None:
    """A problem folder whose name retitles the terminal (ESC ] 0 ; ... BEL) is shown written out."""
    folder = tmp_path / "ws" / "ev\x1b]0;pwned\x07il"
    folder.mkdir(parents=True)
    (folder / "problem.py").write_text((FIXTURES / "vadd" / "problem.py").read_text())
    (folder / "v001.py").write_text("def custom_kernel(a, b):\n    raise RuntimeError('\\x1b[2J cleared')\n")
    done = kerneltui("eval", str(folder / "v001.py"), "--rungs", "load")
    shown = kerneltui("history", "--workspace", str(tmp_path / "ws"))
    for output in (done.stdout + done.stderr, shown.stdout + shown.stderr):
        assert "\x1b" not in output and "\x07" not in output, output
    assert "ev\\x1b]0;pwned\\x07il" in shown.stdout


def test_torchs_profiler_sees_ops_run_with_the_recorder_set_aside() -> None:
    """The record of a real profiled call: ops below the dispatch modes, none of a DSL launch's own, and a
    profiler stopped by the version is a tamper."""
    from torch.profiler import record_function
    from torch.utils._python_dispatch import _disable_current_modes

    from harness.judge.trust import Observed
    from harness.worker.recorder import Recorder

    recorder, a = Recorder(), torch.ones(64)
    with recorder.recording((a,), profile=True):
        out = torch.empty_like(a)
        with _disable_current_modes():
            torch.add(a, a, out=out)
        with record_function("aten::mm"):  # a record_function named like an op is not an op
            torch.softmax(a, 0)
        with recorder.profiled.launching():  # type: ignore[union-attr]
            torch.exp(a)  # a launch's own work (the interpreter's) is not the version's
    report = recorder.report((out,))
    assert report["profiled"]["ops"] == {"aten::add": 1, "aten::_softmax": 1}
    assert "aten::add" not in report["ops"]  # the dispatch mode was set aside
    seen = Observed()
    seen.add(report, "run", "n=64")
    flag = {f.name: f.reason for f in seen.flags(load_problem(FIXTURES / "vadd"), None)}
    assert "aten::add out of the op recorder's sight" in flag["uses-library"]

    with recorder.recording((a,), profile=True):
        torch.autograd._disable_profiler()
    seen = Observed()
    seen.add(recorder.report(()), "run", "n=64")
    assert (
        "stopped or restarted"
        in {f.name: f.reason for f in seen.flags(load_problem(FIXTURES / "vadd"), None)}["tampered"]
    )


def _shared_calls(entry: object, calls: int, between: object = None) -> tuple[list[dict], list]:
    """`calls` recorded calls of `entry` in a real (in-process) Worker, sharing one profiler session, then its
    records collected: each call's own record, and the records the collection gave back."""
    import socket

    import harness.worker.main as worker_mod
    from harness.contract.messages import CallRequest, ProfiledReply, ProfiledRequest
    from harness.wire import frames as wire

    recorded = []
    ours, theirs = socket.socketpair()
    with ours, theirs:
        worker = worker_mod.Worker(ours, "run", "sm_90")
        worker.entry = entry
        for index in range(calls):
            tensors: list[torch.Tensor] = []
            request = CallRequest(wire.encode_tree([torch.ones(64)], tensors), shared_profile=True)
            worker.do_call(request.header(), tensors)
            header, _ = wire.recv(theirs, timeout=30)
            assert header["ok"], header
            recorded.append(header["recorded"])
            if between is not None and index == 0:
                between()  # the worker's own work between two calls, inside the session but in no call's block
        worker.do_profiled(ProfiledRequest().header(), [])
        header, _ = wire.recv(theirs, timeout=30)
    reply = ProfiledRequest().read_reply(header)
    assert isinstance(reply, ProfiledReply), reply
    return recorded, reply.records


def test_calls_that_share_a_profiler_session_each_get_their_own_record() -> None:
    """A rung's calls share one session of torch's profiler (starting and stopping CUPTI cost most of a small call
    on an H100): what it saw comes back call by call, the worker's own work between calls in none of them."""
    from torch.utils._python_dispatch import _disable_current_modes

    from harness.judge.trust import Observed

    hidden = [torch.add, torch.mul, None]

    def entry(x: torch.Tensor) -> torch.Tensor:
        op = hidden.pop(0)
        out = x.clone()
        if op is not None:
            with _disable_current_modes():
                out = op(x, x)
        return out

    recorded, records = _shared_calls(entry, 3, between=lambda: torch.sub(torch.ones(8), 1))
    assert [r["profiled"] for r in recorded] == [{"pending": 0}, {"pending": 1}, {"pending": 2}]
    assert [r["ops"] for r in records] == [{"aten::add": 1}, {"aten::mul": 1}, {}]
    # between the shared calls this thread's ops went unrecorded; collected, they are recorded again (the timed
    # calls' watch runs on the same profiler)
    with torch.autograd.profiler.profile() as after:
        torch.sub(torch.ones(8), 1)
    assert any(e.name == "aten::sub" for e in after.function_events)
    seen = Observed()
    for record in recorded:
        seen.add(record, "run", "n=64", profiled=True)
    assert seen.pending == 3
    seen.add_shared_profiles(records)
    flags = {f.name: f.reason for f in seen.flags(load_problem(FIXTURES / "vadd"), None)}
    assert seen.pending == 0 and "tampered" not in flags, flags
    assert "aten::add ×1, aten::mul ×1 (aten::add, aten::mul out of the op recorder's sight" in flags["uses-library"]


def test_a_version_that_stops_the_shared_profiler_is_flagged() -> None:
    """Stopped in the second of three shared calls: the session's records are lost, a tamper, not a clean slate."""
    stops = [False, True, False]

    def entry(x: torch.Tensor) -> torch.Tensor:
        if stops.pop(0):
            torch.autograd._disable_profiler()
        return x + 1

    from harness.judge.trust import Observed

    recorded, records = _shared_calls(entry, 3)
    seen = Observed()
    for record in recorded:
        seen.add(record, "run", "n=64", profiled=True)
    seen.add_shared_profiles(records)
    assert (
        "torch's profiler" in {f.name: f.reason for f in seen.flags(load_problem(FIXTURES / "vadd"), None)}["tampered"]
    )
    seen = Observed()  # records the worker kept back count as lost too
    for record in recorded:
        seen.add(record, "run", "n=64", profiled=True)
    seen.add_shared_profiles(records[:1])
    assert "gave back 1 records of 3 shared calls" in str(seen.flags(load_problem(FIXTURES / "vadd"), None))


def test_a_cuda_kernel_launched_past_torch_must_be_the_versions_own() -> None:
    from harness.judge.trust import Observed

    problem = load_problem(FIXTURES / "vadd")
    launch = {"dsl": "triton", "name": "add_kernel", "source": "s"}
    honest = {"launches": [launch], "ops": {}, "origins": [["kernel:add_kernel"]], "tampered": []}
    seen = Observed()
    seen.add({**honest, "profiled": {"ops": {}, "kernels": {"add_kernel": 1}}}, "run", "n=1")
    assert seen.flags(problem, {"add_kernel"}) == []
    seen.add({**honest, "profiled": {"ops": {}, "kernels": {"sm90_xmma_gemm_f32f32_tf32": 2}}}, "run", "n=2")
    reason = {f.name: f.reason for f in seen.flags(problem, {"add_kernel"})}["kernel-mismatch"]
    assert "sm90_xmma_gemm_f32f32_tf32 ran under test ×2, launched by no torch op" in reason
    # built and launched past the recorder: dumped (it sits in the worker's cache) yet never recorded
    seen = Observed()
    seen.add({**honest, "profiled": {"ops": {}, "kernels": {"add_kernel": 1, "hidden_kernel": 1}}}, "run", "n=1")
    reason = {f.name: f.reason for f in seen.flags(problem, {"add_kernel", "hidden_kernel"})}["kernel-mismatch"]
    assert "CUDA kernel hidden_kernel ran under test" in reason


def test_nsight_computes_report_gives_a_per_call_floor(tmp_path: Path) -> None:
    """The timing check reads its report with the profile rung's reader: two launches of add_kernel, 45.3 µs each
    in the report's own unit (ns), over two calls."""
    from harness.judge.nsight import timing as nsight
    from harness.judge.nsight.report import read_report
    from tests.test_profile import fake_nsight_compute

    kernels = read_report(tmp_path / "nsight.ncu-rep", fake_nsight_compute(tmp_path), nsight.METRICS)
    outside = nsight.per_call(kernels, calls=2)
    assert outside.per_call_us == pytest.approx(45.3) and outside.kernels == {"add_kernel": 1.0}
    case = {"n": 1 << 20}
    assert nsight.outside_flag(50.0, outside, case) is None  # an honest median sits above its kernels' time
    assert "Nsight Compute timed its kernels at 45.3 µs" in nsight.outside_flag(3.0, outside, case).reason  # type: ignore[union-attr]
    hid = nsight.per_call([], calls=3, log="==PROF== Disconnected from process 1\n")
    assert "saw no kernel inside" in nsight.outside_flag(1.5, hid, case).reason  # type: ignore[union-attr]
    refused = nsight.per_call([], calls=3, log="==ERROR== ERR_NVGPUCTRPERM - no permission\n")
    assert refused.note is not None and nsight.outside_flag(1.5, refused, case) is None
    missing = nsight.Outside(note="Nsight Compute (ncu) not found")
    assert nsight.outside_flag(1.5, missing, case) is None


def test_a_cutedsl_kernel_is_known_by_the_cuda_name_its_compiler_gave_it() -> None:
    """CuTeDSL names the CUDA kernel `kernel_cutlass_<kernel>_<types>_0` and the launch after the host function:
    with no dumps to read (rungs without `dumps`), the names its compiler listed are what make it the version's."""
    from harness.judge.trust import Observed

    problem = load_problem(FIXTURES / "vadd")
    symbol = "kernel_cutlass_add_kernel_tensorptrf32gmemo1_tensorptrf32gmemo1_tensorptrf32gmemo1__0"
    launch = {"dsl": "cutedsl", "name": "cutlass_add_FakeTensorFloat32div11__FakeStream", "kernels": [symbol]}
    record = {"launches": [launch], "ops": {}, "origins": [["kernel:x"]], "tampered": []}
    seen = Observed()
    seen.add({**record, "profiled": {"ops": {}, "kernels": {symbol: 1}}}, "run", "n=1")
    assert seen.flags(problem, None) == []
    # a library's kernel listed as the version's own is still a stranger
    forged = {**launch, "kernels": [symbol, "sm90_xmma_gemm_f32f32_tf32"]}
    seen = Observed()
    library = {"ops": {}, "kernels": {"sm90_xmma_gemm_f32f32_tf32": 1}}
    seen.add({**record, "launches": [forged], "profiled": library}, "run", "n=1")
    assert "kernel-mismatch" in {f.name for f in seen.flags(problem, None)}


def test_the_recorder_takes_kernel_names_from_a_real_cutedsl_compile() -> None:
    """The CuTeDSL example compiled as its first call compiles it (no GPU needed to compile)."""
    pytest.importorskip("cutlass.cute")
    import importlib.util

    import cutlass
    import cutlass.cute as cute
    from cutlass.cute.runtime import make_fake_compact_tensor, make_fake_stream

    from harness.worker.recorder import _cute_kernel_symbols

    spec = importlib.util.spec_from_file_location("cute_vecadd", REPO / "kernels" / "vecadd" / "v003.py")
    assert spec is not None and spec.loader is not None
    version = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(version)
    fake = [make_fake_compact_tensor(cutlass.Float32, (cute.sym_int32(),)) for _ in range(3)]
    compiled = version.cute.compile(version.add, *fake, cutlass.Int32(0), make_fake_stream())
    symbols = _cute_kernel_symbols(compiled)
    assert len(symbols) == 1 and symbols[0].startswith("kernel_cutlass_add_kernel_"), symbols


def test_a_kernel_writing_through_a_tma_descriptor_wrote_that_tensor() -> None:
    """Hopper kernels take host-side TensorDescriptors, not tensors: the tensor a descriptor describes
    is the kernel's to write, so an output stored through TMA is not 'never written by a kernel'."""
    from triton.tools.tensor_descriptor import TensorDescriptor

    from harness.worker.recorder import Recorder

    def store_kernel() -> None: ...

    out = torch.empty(64, 64)
    recorder = Recorder()
    recorder._triton_launch(store_kernel, (TensorDescriptor.from_tensor(out, [16, 16]), 64), {})
    assert recorder.made_by(out) == {"kernel:store_kernel"}
    assert recorder.made_by(torch.empty(4)) == {"host code"}


NEGATIVE_RELU = '''"""relu of inputs that are all negative: every output is 0."""

import torch


def reference(x):
    return torch.relu(x)


def make_inputs(case, seed, device):
    gen = torch.Generator().manual_seed(seed)
    return (-1.0 - torch.rand(case["n"], generator=gen).to(device),)


cases = [{"n": 1}, {"n": 1000}]
bench_cases = [{"n": 1 << 20}]
tolerance = {"atol": 0.0, "rtol": 0.0}


def cost(case):
    return {"flops": case["n"], "bytes": 8 * case["n"]}
'''

RELU_VERSION = '''"""relu with a Triton kernel, into an output made by {made}."""

import torch
import triton
import triton.language as tl


@triton.jit
def relu_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=mask), 0.0), mask=mask)


def custom_kernel(x):
    out = torch.{made}(x)
    relu_kernel[(triton.cdiv(x.numel(), 1024),)](x, out, x.numel(), BLOCK=1024)
    return out
'''


@pytest.mark.slow
def test_a_kernel_that_stores_the_bytes_its_output_already_held_wrote_it(tmp_path: Path) -> None:
    """On the CPU a buffer counted as the kernel's only where its bytes changed across the launch: an honest relu
    storing zeros (negative inputs) into memory that already held zeros (zeros_like, or an empty_like that happened
    to) was flagged no-kernel, at random in a bench (seeds decide the signs)."""
    from tests.conftest import judge_many

    folder = tmp_path / "ws" / "relu"
    folder.mkdir(parents=True)
    (folder / "problem.py").write_text(NEGATIVE_RELU)
    (folder / "v001.py").write_text(RELU_VERSION.format(made="zeros_like"))
    (folder / "v002.py").write_text(RELU_VERSION.format(made="empty_like"))
    judged = judge_many([folder / "v001.py", folder / "v002.py"], rungs=["load", "correctness"])
    for name in ("v001", "v002"):
        evaluation = judged[name]
        assert evaluation.get("status") == "pass" and evaluation["flags"] == [], (name, evaluation)
