"""Comparing a kernel's output with the reference: error metrics and a verdict with the first mismatches."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import torch

from harness.problem import Tolerance

MAX_MISMATCHES_SHOWN = 5


@dataclass
class Comparison:
    ok: bool
    metrics: dict[str, Any] = field(default_factory=dict)
    err: str | None = None


def compare(out: torch.Tensor, ref: torch.Tensor, tol: Tolerance) -> Comparison:
    """Metrics in float64: max abs/rel error, MSE, RMSE, PSNR, cosine; NaN/Inf only where the reference has them.
    Complex tensors compare as their (real, imaginary) pairs; integers under a zero tolerance, value for value."""
    if out.is_complex() or ref.is_complex():
        out, ref = _as_real(out), _as_real(ref)
    out_d = out.detach().to(device=ref.device, dtype=torch.float64).reshape(-1)
    ref_d = ref.detach().to(dtype=torch.float64).reshape(-1)
    shape = tuple(ref.shape)
    if ref_d.numel() == 0:
        return Comparison(ok=True, metrics={"elements": 0})

    ref_finite = torch.isfinite(ref_d)
    out_finite = torch.isfinite(out_d)
    both = ref_finite & out_finite
    nonfinite_wrong = ref_finite & ~out_finite
    special_wrong = ~ref_finite & ~_same_special(out_d, ref_d)

    diff = torch.where(both, (out_d - ref_d).abs(), torch.zeros_like(ref_d))
    metrics = _error_metrics(out_d, ref_d, diff, both, tol)
    finite_bad = both & ~(diff <= tol.atol + tol.rtol * ref_d.abs())
    if tol.atol == tol.rtol == 0 and not ref.is_floating_point() and out.dtype == ref.dtype:
        finite_bad |= out.detach().to(ref.device).reshape(-1) != ref.detach().reshape(-1)  # beyond float64's 2**53
    metrics["mismatched"] = int((finite_bad | nonfinite_wrong | special_wrong).sum())
    metrics["elements"] = int(ref_d.numel())

    problems: list[str] = []
    n_nonfinite = int(nonfinite_wrong.sum())
    if n_nonfinite:
        n_nan = int((nonfinite_wrong & torch.isnan(out_d)).sum())
        first = _indices(nonfinite_wrong, shape, 3)
        problems.append(
            f"{n_nan} NaN and {n_nonfinite - n_nan} Inf in the output where the reference is finite, first at {first}"
        )
    if int(special_wrong.sum()):
        problems.append(f"NaN/Inf of the reference not reproduced at {_indices(special_wrong, shape, 3)}")
    if int(finite_bad.sum()):
        problems.append(_mismatch_text(finite_bad, out_d, ref_d, diff, shape, tol))
    problems += _floor_failures(metrics, tol)
    return Comparison(ok=not problems, metrics=metrics, err="; ".join(problems) or None)


def _as_real(t: torch.Tensor) -> torch.Tensor:
    return torch.view_as_real(t.resolve_conj()) if t.is_complex() else torch.stack([t, torch.zeros_like(t)], dim=-1)


def _same_special(out_d: torch.Tensor, ref_d: torch.Tensor) -> torch.Tensor:
    return (torch.isnan(out_d) & torch.isnan(ref_d)) | (out_d == ref_d)


def _error_metrics(
    out_d: torch.Tensor, ref_d: torch.Tensor, diff: torch.Tensor, both: torch.Tensor, tol: Tolerance
) -> dict[str, Any]:
    n = max(int(both.sum()), 1)
    ref_abs = ref_d.abs()
    significant = both & (ref_abs > max(tol.atol, 1e-30))
    max_rel = float((diff[significant] / ref_abs[significant]).max()) if int(significant.sum()) else 0.0
    mse = float((diff**2).sum()) / n
    peak = float(ref_abs[both].max()) if int(both.sum()) else 0.0
    a = torch.where(both, out_d, torch.zeros_like(out_d))
    b = torch.where(both, ref_d, torch.zeros_like(ref_d))
    norms = float(a.norm()) * float(b.norm())
    both_zero_same = 1.0 if float(a.norm()) == float(b.norm()) else 0.0
    cosine = float((a * b).sum()) / norms if norms > 0 else both_zero_same
    return {
        "max_abs": float(diff.max()),
        "max_rel": max_rel,
        "mse": mse,
        "rmse": math.sqrt(mse),
        "psnr": None if mse == 0 or peak == 0 else 10 * math.log10(peak * peak / mse),
        "exact": mse == 0,
        "cosine": cosine,
    }


def _floor_failures(metrics: dict[str, Any], tol: Tolerance) -> list[str]:
    failures = []
    if tol.min_cosine is not None and metrics["cosine"] < tol.min_cosine:
        failures.append(f"cosine similarity {metrics['cosine']:.7f} below the floor {tol.min_cosine:g}")
    psnr = metrics["psnr"]
    if tol.min_psnr is not None and psnr is not None and psnr < tol.min_psnr:
        failures.append(f"PSNR {psnr:.1f} dB below the floor {tol.min_psnr:g} dB")
    return failures


def _mismatch_text(
    bad: torch.Tensor,
    out_d: torch.Tensor,
    ref_d: torch.Tensor,
    diff: torch.Tensor,
    shape: tuple[int, ...],
    tol: Tolerance,
) -> str:
    n_bad = int(bad.sum())
    total = bad.numel()
    flat = torch.nonzero(bad).reshape(-1)[:MAX_MISMATCHES_SHOWN].tolist()
    shown = ", ".join(f"{_unravel(i, shape)} got {float(out_d[i]):.6g} expected {float(ref_d[i]):.6g}" for i in flat)
    if tol.atol == tol.rtol == 0:
        return f"{n_bad} of {total} elements ({100.0 * n_bad / total:.3g}%) differ (compared exactly); first at {shown}"
    return (
        f"{n_bad} of {total} elements ({100.0 * n_bad / total:.3g}%) outside atol {tol.atol:g} + "
        f"rtol {tol.rtol:g}·|ref| (max abs error {float(diff[bad].max()):.3g}); first at {shown}"
    )


def _indices(mask: torch.Tensor, shape: tuple[int, ...], limit: int) -> str:
    flat = torch.nonzero(mask).reshape(-1)[:limit].tolist()
    return ", ".join(_unravel(i, shape) for i in flat)


def _unravel(index: int, shape: tuple[int, ...]) -> str:
    if not shape:
        return "[]"
    coords = []
    for dim in reversed(shape):
        coords.append(index % dim if dim else 0)
        index //= dim if dim else 1
    return "[" + ", ".join(str(c) for c in reversed(coords)) + "]"
