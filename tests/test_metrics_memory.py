"""compare() in bounded memory: a big output is compared chunk by chunk, with the same results as in one piece."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from harness.judge import metrics
from harness.judge.metrics import compare
from harness.problem.load import Tolerance

TIGHT = Tolerance(atol=1e-6, rtol=1e-6)

# 12M float32 elements (48 MB a tensor) compared in chunks of 1M with 256 MB of address space to spare: float64
# copies of the whole tensors (96 MB each, and the temporaries beside them) do not fit, chunks (8 MB each) do.
# A multi-GB output against the real chunk size, scaled down (62 s of a loaded CI machine at 100M elements).
_CAPPED_COMPARE = """
import json, resource, sys, torch
from harness.judge import metrics
from harness.judge.metrics import compare
from harness.problem.load import Tolerance

metrics.CHUNK_ELEMENTS = int(sys.argv[1])
torch.set_num_threads(2)
ref = torch.linspace(-1.0, 1.0, 12_000_000).reshape(4_000, 3_000)
out = ref.clone()
out[0, 3] += 0.25
out[2_000, 0] -= 0.25
out[3_999, 2_999] += 0.25
out[2_800, 1] = float("nan")
out.sum()  # the thread pool started before the cap is measured
vm_kb = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmSize:"))
resource.setrlimit(resource.RLIMIT_AS, (vm_kb * 1024 + 256 * 2**20, resource.RLIM_INFINITY))
result = compare(out, ref, Tolerance(atol=1e-6, rtol=1e-6))
print(json.dumps({"ok": result.ok, "err": result.err, "metrics": result.metrics}))
"""


@pytest.mark.slow
def test_a_big_output_is_compared_under_a_memory_cap() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", _CAPPED_COMPARE, str(1 << 20)],
        cwd=Path(__file__).resolve().parent.parent,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    m = result["metrics"]
    assert not result["ok"] and m["elements"] == 12_000_000 and m["mismatched"] == 4
    assert m["max_abs"] == pytest.approx(0.25, abs=1e-6)
    err = result["err"]
    assert "1 NaN and 0 Inf in the output where the reference is finite, first at [2800, 1]" in err
    assert "3 of 12000000 elements" in err
    assert err.index("[0, 3] got") < err.index("[2000, 0] got") < err.index("[3999, 2999] got")


def _assert_same(chunked: metrics.Comparison, whole: metrics.Comparison) -> None:
    assert chunked.ok == whole.ok and chunked.err == whole.err
    assert chunked.metrics.keys() == whole.metrics.keys()
    for key, value in whole.metrics.items():
        got = chunked.metrics[key]
        if isinstance(value, float):
            assert math.isclose(got, value, rel_tol=1e-12, abs_tol=1e-300), key
        else:
            assert got == value, key


def _compare_both_ways(
    monkeypatch: pytest.MonkeyPatch, out: torch.Tensor, ref: torch.Tensor, tol: Tolerance
) -> metrics.Comparison:
    whole = compare(out, ref, tol)  # small: one chunk
    monkeypatch.setattr(metrics, "CHUNK_ELEMENTS", 7)
    chunked = compare(out, ref, tol)
    _assert_same(chunked, whole)
    return chunked


def test_chunks_keep_nan_and_inf_rules(monkeypatch: pytest.MonkeyPatch) -> None:
    gen = torch.Generator().manual_seed(1)
    ref = torch.randn(5, 9, generator=gen)
    ref[0, 8] = float("nan")
    ref[2, 3] = float("inf")
    ref[4, 0] = float("-inf")
    out = ref + 1e-8
    out[2, 3] = 0.0  # the reference's Inf not reproduced
    out[1, 1] = float("inf")
    out[3, 6] = float("nan")
    result = _compare_both_ways(monkeypatch, out, ref, TIGHT)
    assert "1 NaN and 1 Inf in the output where the reference is finite, first at [1, 1], [3, 6]" in result.err
    assert "NaN/Inf of the reference not reproduced at [2, 3]" in result.err
    assert result.metrics["mismatched"] == 3
    assert _compare_both_ways(monkeypatch, ref.clone(), ref, TIGHT).ok


def test_chunks_show_the_first_mismatches_in_order(monkeypatch: pytest.MonkeyPatch) -> None:
    ref = torch.linspace(-3.0, 3.0, 60).reshape(6, 10)
    out = ref.clone()
    for i, (row, col) in enumerate([(0, 6), (0, 7), (2, 1), (3, 9), (4, 0), (5, 2), (5, 9)]):
        out[row, col] += 0.1 * (i + 1)
    result = _compare_both_ways(monkeypatch, out, ref, Tolerance(atol=1e-3, rtol=1e-3, min_cosine=0.9999999))
    assert result.metrics["mismatched"] == 7 and "7 of 60 elements" in result.err
    shown = [result.err.index(f"[{r}, {c}] got") for r, c in [(0, 6), (0, 7), (2, 1), (3, 9), (4, 0)]]
    assert shown == sorted(shown) and "[5, 2] got" not in result.err and "cosine similarity" in result.err
    _compare_both_ways(monkeypatch, out, ref, Tolerance(atol=1e-3, rtol=1e-3, min_psnr=80.0))


def test_chunks_compare_integers_exactly(monkeypatch: pytest.MonkeyPatch) -> None:
    ref = torch.arange(2**60, 2**60 + 30, dtype=torch.int64)
    out = ref.clone()
    out[9] += 1  # the same number in float64
    out[20] += 1
    result = _compare_both_ways(monkeypatch, out, ref, Tolerance(atol=0.0, rtol=0.0))
    assert "2 of 30 elements" in result.err and result.metrics["mismatched"] == 2


def test_chunks_compare_complex_pairs(monkeypatch: pytest.MonkeyPatch) -> None:
    gen = torch.Generator().manual_seed(2)
    ref = torch.randn(4, 5, dtype=torch.complex64, generator=gen)
    out = ref.clone()
    out[1, 2] += 1j
    out[3, 4] += 2
    result = _compare_both_ways(monkeypatch, out, ref, TIGHT)
    assert "[1, 2, 1] got" in result.err and "[3, 4, 0] got" in result.err
    _compare_both_ways(monkeypatch, ref.real.contiguous(), ref, Tolerance(atol=1e-3, rtol=1e-3))
