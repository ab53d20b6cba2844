"""The recorder's provenance of outputs on the CPU (harness.worker.provenance) and the values a launch's kernel reads
(harness.worker.recorder.launched_globals), in a real process running Triton's interpreter: kernels that only copy
what host code computed are not the outputs' writers; kernels that read small host-built tables or the
version's own constants are."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from harness.contract.results import HOST_COPIED
from tests.conftest import REPO

pytestmark = pytest.mark.slow  # a process of its own running the interpreter

KERNELS = """
import numpy as np
import torch
import triton
import triton.language as tl

TABLE = torch.ones(8192)
SIGN: tl.constexpr = tl.constexpr(1.0)


@triton.jit
def copy(src, out, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out + offs, tl.load(src + offs, mask=mask) * SIGN, mask=mask)


@triton.jit
def combine(a, b, w, out, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(a + offs, mask=mask) * tl.load(w) + tl.load(b + offs, mask=mask) * tl.load(w + 1)
    tl.store(out + offs, x, mask=mask)


@triton.jit
def scale(a, t, out, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out + offs, tl.load(a + offs, mask=mask) * tl.load(t + offs, mask=mask), mask=mask)


@triton.jit
def fetch_atomically(src, out, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out + offs, tl.atomic_add(src + offs, 0.0, mask=mask), mask=mask)


@triton.jit
def reach(a, out, n, delta, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out + offs, tl.load(a + delta + offs, mask=mask), mask=mask)


def launder_numpy(a, b):
    out = torch.empty_like(a)
    copy[(1,)](torch.from_numpy(a.numpy() + b.numpy()), out, a.numel(), BLOCK=1024)
    return out


def launder_written(a, b):
    src, out = torch.empty_like(a), torch.empty_like(a)
    src.numpy()[:] = a.numpy() + b.numpy()
    copy[(1,)](src, out, a.numel(), BLOCK=1024)
    return out


def launder_list_twice(a, b):
    src = torch.tensor([x + y for x, y in zip(a.tolist(), b.tolist())])
    middle, out = torch.empty_like(a), torch.empty_like(a)
    copy[(1,)](src, middle, a.numel(), BLOCK=1024)
    copy[(1,)](middle, out, a.numel(), BLOCK=1024)
    return out


def launder_by_pointer(a, b):
    answer = np.ascontiguousarray(a.numpy() + b.numpy())
    out = torch.empty_like(a)
    reach[(1,)](a, out, a.numel(), (answer.ctypes.data - a.data_ptr()) // 4, BLOCK=1024)
    return out


def launder_by_atomic(a, b):
    out = torch.empty_like(a)
    fetch_atomically[(1,)](torch.from_numpy(a.numpy() + b.numpy()), out, a.numel(), BLOCK=1024)
    return out


def honest_table(a, b):
    out = torch.empty_like(a)
    combine[(1,)](a, b, torch.tensor([1.0, 1.0]), out, a.numel(), BLOCK=1024)
    return out


def honest_module_table(a, b):
    out = torch.empty_like(a)
    scale[(1,)](a, TABLE, out, a.numel(), BLOCK=1024)  # as many bytes of TABLE read as written
    return out


def copies_its_input(a, b):
    out = torch.empty_like(a)
    copy[(1,)](a, out, a.numel(), BLOCK=1024)
    return out
"""

DRIVER = """
import importlib.util, json, sys
import torch
from harness.worker.recorder import Recorder, launched_globals

spec = importlib.util.spec_from_file_location("kernels_under_test", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
recorder = Recorder()
recorder.install()
found = {}
for name in sys.argv[2:]:
    for n in (1, 1000):
        inputs = (torch.randn(n), torch.randn(n))
        with recorder.recording(inputs, held=(module,)):
            out = getattr(module, name)(*inputs)
        found[f"{name} n={n}"] = recorder.origins((out,))[0]
before = launched_globals(module.copy)
module.SIGN = module.tl.constexpr(-1.0)
found["globals"] = [before, launched_globals(module.copy)]
print(json.dumps(found))
"""

LAUNDERED = ("launder_numpy", "launder_written", "launder_list_twice", "launder_by_pointer", "launder_by_atomic")
HONEST = ("honest_table", "honest_module_table", "copies_its_input")


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> dict:
    folder = tmp_path_factory.mktemp("provenance")
    kernels = folder / "kernels_under_test.py"
    kernels.write_text(KERNELS)
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(DRIVER), str(kernels), *LAUNDERED, *HONEST],
        capture_output=True,
        text=True,
        env=env,
        cwd=Path(folder),
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("name", LAUNDERED)
def test_a_kernel_that_copies_what_host_code_computed_is_not_the_writer(recorded: dict, name: str) -> None:
    for n in (1, 1000):  # a one-element output too: its value is found in the host's buffer
        writers = recorded[f"{name} n={n}"]
        assert not any(w.startswith("kernel:") for w in writers), (n, writers)
        assert any(w.startswith(HOST_COPIED + "kernel ") for w in writers), (n, writers)


@pytest.mark.parametrize("name", HONEST)
def test_a_kernel_reading_small_host_tables_or_its_own_constants_is_the_writer(recorded: dict, name: str) -> None:
    for n in (1, 1000):
        writers = recorded[f"{name} n={n}"]
        assert any(w.startswith("kernel:") for w in writers) and not any(w.startswith(HOST_COPIED) for w in writers), (
            n,
            writers,
        )


def test_a_launch_records_the_constexpr_globals_its_kernel_reads(recorded: dict) -> None:
    before, after = recorded["globals"]
    assert before["SIGN"] == 1.0 and after["SIGN"] == -1.0
    assert before["tl"] == "module triton.language"


COMPILED = """
import json
import torch
from torch._C._dynamo.eval_frame import _debug_get_cache_entry_list
from harness.worker.recorder import Recorder


def _sort_into(data, output):  # GPU MODE's sort solution: torch computes it into the given output
    output[...] = torch.sort(data)[0]
    return output


compiled = torch.compile(_sort_into, backend="eager")
recorder = Recorder()
recorder.install()
inputs = (torch.randn(1000), torch.empty(1000))
with recorder.recording(inputs, held=()):
    out = compiled(*inputs)
origins = recorder.origins((out,))[0]
codes = {name: fn.__code__ for name, fn in vars(Recorder).items() if hasattr(fn, "__code__")}
traced = sorted(name for name, code in codes.items() if _debug_get_cache_entry_list(code))
print(json.dumps({"traced": traced, "origins": origins, "right": bool(torch.equal(out, torch.sort(inputs[0])[0]))}))
"""


def test_torch_compile_never_compiles_the_recorders_own_frames() -> None:
    """A version compiled by torch.compile runs ops eagerly at its graph breaks with Dynamo's frame hook still on:
    the recorder's frames it reaches from there (an op's writer, a buffer's digest) are not Dynamo's to compile
    (on a GPU, GPU MODE's sort failed inside the compiled made_by)."""
    done = subprocess.run(
        [sys.executable, "-c", COMPILED],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["right"] and found["traced"] == [], found
    assert "aten::sort" in found["origins"], found  # still seen: torch computed it
