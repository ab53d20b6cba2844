"""A Triton version's kernels compiled for every case at once before its first call (harness.gpu.precompile), and
versions that behave otherwise while they are: the verdict still comes from their real calls."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO, add_version, judge_many, rung

pytestmark = pytest.mark.slow  # every test here judges versions or runs the app end to end

RUNGS = ["load", "compile", "correctness", "dumps"]


def test_every_case_compiles_ahead_and_each_kernel_names_the_case_that_launched_it(workspace: Path) -> None:
    """raises_when_compiled_ahead launches BLOCK=1 for n=1 and BLOCK=1024 for the larger cases; each kernel is
    listed under the first case that launched its specialisation, not all under the case compiled first."""
    path = add_version(workspace, "raises_when_compiled_ahead", "v001.py")
    evaluation = judge_many([path], rungs=RUNGS)["v001"]
    compiled = rung(evaluation, "compile")
    ahead = compiled["metrics"]["precompile"]
    assert compiled["ok"] and ahead["kernels"] >= 2 and ahead["failed_calls"] >= 1, compiled
    by_block = {k["constexprs"]["BLOCK"]: k["case"] for k in rung(evaluation, "dumps")["metrics"]["kernels"]}
    assert by_block[1] == "n=1" and by_block[1024] in ("n=1000", "n=16777216"), by_block  # GPU; CPU: bench first
    assert rung(evaluation, "correctness")["ok"] and evaluation["status"] != "failed", evaluation


def test_a_version_that_hangs_only_while_compiled_ahead_is_judged_by_its_calls(workspace: Path) -> None:
    """The worker that hung is replaced; the version's real calls compile and pass."""
    path = add_version(workspace, "hangs_when_compiled_ahead", "v001.py")
    evaluation = judge_many([path], rungs=RUNGS, timeout=5)["v001"]
    compiled = rung(evaluation, "compile")
    assert compiled["ok"] and compiled["metrics"]["precompile"]["ok"] is False, compiled
    assert "timed out" in compiled["metrics"]["precompile"]["why"], compiled
    assert compiled["metrics"]["kernels"], compiled
    assert rung(evaluation, "correctness")["ok"], evaluation


def test_a_bench_case_too_large_for_this_machine_still_compiles_by_its_shape(workspace: Path) -> None:
    """Shape-only inputs are made under torch's meta device: a bench case of 2^40 floats (4 TiB) costs no memory
    and no time, and its kernels compile ahead of time like the others (made on the CPU first, it could not)."""
    problem = workspace / "problem.py"
    problem.write_text(problem.read_text().replace('bench_cases = [{"n": 1 << 24}]', 'bench_cases = [{"n": 1 << 40}]'))
    path = add_version(workspace, "raises_when_compiled_ahead", "v001.py")
    compiled = rung(judge_many([path], rungs=["load", "compile"])["v001"], "compile")
    assert compiled["ok"], compiled
    assert "n=1099511627776" in {k["case"] for k in compiled["metrics"]["kernels"]}, compiled


LAUNCHERS_PROBE = """
import torch
import triton
import triton.language as tl
from triton.backends.nvidia import driver as nvidia

from harness.gpu import aot, precompile

aot.install_triton(90)
built = []


class Launcher:  # what Triton up to 3.6 builds with the host's C compiler at a kernel's first launch
    def __init__(self, src, metadata):
        built.append(tuple(src.signature.values()))


nvidia.make_launcher, nvidia.CudaLauncher = (lambda *args: ""), Launcher


@triton.jit
def double(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2, mask=offs < n)


def entry(x):
    y = torch.empty_like(x)
    double[(triton.cdiv(x.numel(), 256),)](x, y, x.numel(), BLOCK=256)
    return y


cases = [(torch.ones(1000),), (torch.ones(4096),), (torch.ones(64, dtype=torch.float16),)]
done = precompile.compile_ahead(entry, cases, 2, launchers=True)
assert done["kernels"] == 3 and done["launchers"] == 2, done  # n=1000 and n=4096 differ only in specialisation
assert sorted(built) == [("*fp16", "*fp16", "i32", "constexpr"), ("*fp32", "*fp32", "i32", "constexpr")], built
built.clear()
assert precompile.compile_ahead(entry, cases, 2)["launchers"] == 0 and not built  # not asked: none
print("ok")
"""


def test_each_signatures_launcher_is_built_beside_the_compiles_not_in_the_first_call(tmp_path: Path) -> None:
    """Triton 3.6 built a kernel's launcher (C, ~0.2 s of the host compiler on an H100 box) at its first launch,
    after the compile had ended: in the version's first call. Now once per signature, beside the compiles."""
    probe = tmp_path / "probe.py"
    probe.write_text(LAUNCHERS_PROBE)
    env = {**os.environ, "TRITON_CACHE_DIR": str(tmp_path / "cache"), "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, str(probe)], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-3000:]


BENCH_SHAPES_PROBE = """
import resource
import sys

import torch
import triton
import triton.language as tl
from triton.backends.nvidia import driver as nvidia

from harness.wire import frames as wire
from harness.gpu import aot
from harness.worker.main import compile_cases

aot.install_triton(90)
nvidia.make_launcher, nvidia.CudaLauncher = (lambda *args: ""), (lambda src, metadata: None)
seen = []


@triton.jit
def double(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2, mask=offs < n)


def entry(x):
    seen.append((x.device.type, tuple(x.shape)))
    y = torch.empty_like(x)
    double[(triton.cdiv(x.numel(), 256),)](x, y, x.numel(), BLOCK=256 if x.numel() < 1 << 20 else 1024)
    return y


bench = torch.empty(1 << 28, dtype=torch.float32, device="meta")  # 1 GiB: vecadd's bench case
tensors = []
trees = [wire.encode_tree([torch.ones(1000)], tensors), wire.encode_tree([bench], tensors)]
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
reply = compile_cases(entry, trees, tensors, launchers=True)
grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
assert [len(keys) for keys in reply.keys_by_case] == [1, 1], reply
assert seen == [("cpu", (1000,)), ("cpu", (1 << 28,))], seen
assert "sympy" not in sys.modules, "torch's meta kernels were imported"
assert grown_mb < 256, grown_mb  # the bench inputs' pages were never written
print("ok")
"""


def test_on_a_gpu_the_bench_cases_compile_ahead_on_their_shapes_at_no_import(tmp_path: Path) -> None:
    """On an H100 the benchmark's first call compiled the bench case's kernels (0.125 s of its recorded call),
    and their SASS was listed after the benchmark, not while it timed. Shapes only were not sent on a GPU: the
    version's torch.empty_like on a meta tensor imported torch's symbolic shapes and sympy (a second and more,
    inside the correctness verdict). Now the worker compiles them on CPU tensors it never writes."""
    from harness.judge.rungs.compile import inputs_ahead
    from harness.problem.load import load_problem

    problem = load_problem(REPO / "tests" / "fixtures" / "vadd")
    devices = [{t.device.type for t in inputs if hasattr(t, "device")} for _, inputs in inputs_ahead(problem, [])]
    assert devices == [{"cpu"}] * len(problem.cases) + [{"meta"}] * len(problem.bench_cases)
    probe = tmp_path / "probe.py"
    probe.write_text(BENCH_SHAPES_PROBE)
    env = {**os.environ, "TRITON_CACHE_DIR": str(tmp_path / "cache"), "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, str(probe)], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-3000:]
