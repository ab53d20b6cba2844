"""The comparison: metrics, NaN/Inf rules, floors, and the first mismatching indices."""

from __future__ import annotations

import math

import torch

from harness.judge.metrics import compare
from harness.problem.load import Tolerance

TIGHT = Tolerance(atol=1e-6, rtol=1e-6)


def test_identical_outputs_are_exact() -> None:
    x = torch.randn(100)
    result = compare(x.clone(), x, TIGHT)
    assert result.ok and result.metrics["exact"] and result.metrics["max_abs"] == 0.0
    assert result.metrics["psnr"] is None and math.isclose(result.metrics["cosine"], 1.0)


def test_metrics_values() -> None:
    ref = torch.tensor([1.0, 2.0, 4.0, 0.0])
    out = torch.tensor([1.0, 2.5, 4.0, 0.0])
    m = compare(out, ref, Tolerance(atol=1.0, rtol=0.0)).metrics
    assert m["max_abs"] == 0.5 and m["max_rel"] == 0.25
    assert math.isclose(m["mse"], 0.0625) and math.isclose(m["rmse"], 0.25)
    assert math.isclose(m["psnr"], 10 * math.log10(16 / 0.0625))
    expected_cos = (1 + 5 + 16) / (math.sqrt(1 + 6.25 + 16) * math.sqrt(1 + 4 + 16))
    assert math.isclose(m["cosine"], expected_cos)


def test_mismatch_text_names_indices_in_shape() -> None:
    ref = torch.zeros(4, 8)
    out = ref.clone()
    out[2, 5] = 1.0
    out[3, 7] = -2.0
    result = compare(out, ref, TIGHT)
    assert not result.ok
    assert "2 of 32 elements" in result.err and "[2, 5] got 1 expected 0" in result.err and "[3, 7]" in result.err


def test_nan_where_reference_is_finite_fails() -> None:
    ref = torch.ones(10)
    out = ref.clone()
    out[3] = float("nan")
    out[4] = float("inf")
    result = compare(out, ref, Tolerance(atol=10, rtol=10))
    assert not result.ok and "1 NaN and 1 Inf" in result.err and "[3]" in result.err


def test_nan_in_reference_must_be_reproduced() -> None:
    ref = torch.tensor([1.0, float("nan"), float("inf")])
    assert compare(ref.clone(), ref, TIGHT).ok
    wrong = torch.tensor([1.0, 0.0, float("inf")])
    result = compare(wrong, ref, TIGHT)
    assert not result.ok and "not reproduced" in result.err


def test_cosine_and_psnr_floors() -> None:
    gen = torch.Generator().manual_seed(0)
    ref = torch.randn(1000, generator=gen)
    noisy = ref + 0.05 * torch.randn(1000, generator=gen)
    loose = Tolerance(atol=1.0, rtol=1.0, min_cosine=0.99999)
    result = compare(noisy, ref, loose)
    assert not result.ok and "cosine similarity" in result.err
    psnr_floor = Tolerance(atol=1.0, rtol=1.0, min_psnr=60.0)
    assert "PSNR" in compare(noisy, ref, psnr_floor).err


def test_bf16_compared_in_float64() -> None:
    ref = torch.randn(64, 64).to(torch.bfloat16)
    out = (ref.float() * (1 + 2**-9)).to(torch.bfloat16)
    result = compare(out, ref, Tolerance(atol=1e-2, rtol=1e-2))
    assert result.ok and result.metrics["max_abs"] >= 0


def test_empty_tensors_pass() -> None:
    assert compare(torch.empty(0), torch.empty(0), TIGHT).ok


def test_complex_outputs_compare_their_imaginary_parts() -> None:
    ref = torch.tensor([1 + 2j, 3 - 1j], dtype=torch.complex64)
    out = torch.tensor([1 + 2j, 3 + 1j], dtype=torch.complex64)
    result = compare(out, ref, TIGHT)
    assert not result.ok and "[1, 1] got 1 expected -1" in result.err
    assert compare(ref.clone(), ref, TIGHT).ok


def test_integers_under_a_zero_tolerance_match_value_for_value() -> None:
    ref = torch.tensor([2**60, 7], dtype=torch.int64)
    out = torch.tensor([2**60 + 1, 7], dtype=torch.int64)  # the same number in float64
    result = compare(out, ref, Tolerance(atol=0.0, rtol=0.0))
    assert not result.ok and "1 of 2 elements (50%) differ (compared exactly)" in result.err
