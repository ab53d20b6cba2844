"""Comparing a kernel's output with the reference: error metrics and a verdict with the first mismatches."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import torch

from harness.problem.load import Tolerance

MAX_MISMATCHES_SHOWN = 5
MAX_INDICES_SHOWN = 3
# Elements compared at a time: a few float64 temporaries of a chunk (128 MB each) instead of an output's several
# whole float64 copies, which for a multi-GB output exhaust the GPU's memory.
CHUNK_ELEMENTS = 1 << 24


@dataclass
class Comparison:
    ok: bool
    metrics: dict[str, Any] = field(default_factory=dict)
    err: str | None = None


@dataclass
class _Totals:
    """What the chunks add up to: sums, maxima, counts, and the first offending flat indices."""

    finite: int = 0  # elements finite in both tensors
    max_abs: float = 0.0
    max_rel: float = 0.0
    max_bad: float = 0.0  # the largest error among the mismatches
    peak: float = 0.0
    squares: float = 0.0
    out_squares: float = 0.0
    ref_squares: float = 0.0
    dot: float = 0.0
    bad: int = 0
    nonfinite: int = 0
    nan: int = 0
    special: int = 0
    first_bad: list[tuple[int, float, float]] = field(default_factory=list)  # index, got, expected
    first_nonfinite: list[int] = field(default_factory=list)
    first_special: list[int] = field(default_factory=list)

    def add(self, stats: dict[str, torch.Tensor]) -> dict[str, float]:
        """Adds a chunk's scalars, named as the fields; they come off the device in one transfer."""
        values = dict(zip(stats, torch.stack([v.to(torch.float64) for v in stats.values()]).tolist(), strict=True))
        for name, value in values.items():
            old = getattr(self, name)
            setattr(self, name, max(old, value) if name in _MAXIMA else old + type(old)(value))
        return values


_MAXIMA = frozenset({"max_abs", "max_rel", "max_bad", "peak"})


def compare(out: torch.Tensor, ref: torch.Tensor, tol: Tolerance) -> Comparison:
    """Metrics in float64: max abs/rel error, MSE, RMSE, PSNR, cosine; NaN/Inf only where the reference has them.
    Complex tensors compare as their (real, imaginary) pairs; integers under a zero tolerance, value for value."""
    if out.is_complex() or ref.is_complex():
        out, ref = _as_real(out), _as_real(ref)
    out_flat, ref_flat = out.detach().reshape(-1), ref.detach().reshape(-1)
    shape = tuple(ref.shape)
    if ref_flat.numel() == 0:
        return Comparison(ok=True, metrics={"elements": 0})

    exact_ints = tol.atol == tol.rtol == 0 and not ref.is_floating_point() and out.dtype == ref.dtype
    totals = _Totals()
    for start in range(0, ref_flat.numel(), CHUNK_ELEMENTS):
        stop = start + CHUNK_ELEMENTS
        _scan_chunk(totals, out_flat[start:stop].to(ref.device), ref_flat[start:stop], start, tol, exact_ints)
    metrics = _error_metrics(totals)
    metrics["mismatched"] = totals.bad + totals.nonfinite + totals.special
    metrics["elements"] = int(ref_flat.numel())
    problems = _problems(totals, shape, tol) + _floor_failures(metrics, tol)
    return Comparison(ok=not problems, metrics=metrics, err="; ".join(problems) or None)


def _as_real(t: torch.Tensor) -> torch.Tensor:
    return torch.view_as_real(t.resolve_conj()) if t.is_complex() else torch.stack([t, torch.zeros_like(t)], dim=-1)


def _scan_chunk(
    totals: _Totals, out: torch.Tensor, ref: torch.Tensor, start: int, tol: Tolerance, exact_ints: bool
) -> None:
    """Adds one chunk, the flat elements from start, to the totals."""
    out_d = out.to(torch.float64, copy=True)  # copies: zeroed in place below
    ref_d = ref.to(torch.float64, copy=True)
    ref_finite, out_finite = torch.isfinite(ref_d), torch.isfinite(out_d)
    both = ref_finite & out_finite
    nonfinite = ref_finite & ~out_finite
    special = ~ref_finite & ~((torch.isnan(out_d) & torch.isnan(ref_d)) | (out_d == ref_d))
    stats = {"nonfinite": nonfinite.sum(), "nan": (nonfinite & torch.isnan(out_d)).sum(), "special": special.sum()}
    # Zeroed where either is not finite, the sums and maxima below need no masks of their own.
    out_d.masked_fill_(~both, 0.0)
    ref_d.masked_fill_(~both, 0.0)
    diff = (out_d - ref_d).abs_()
    ref_abs = ref_d.abs()
    bad = both & ~(diff <= ref_abs.mul(tol.rtol).add_(tol.atol))  # in place: one float64 temporary, not two
    if exact_ints:
        bad |= out != ref  # beyond float64's 2**53
    significant = ref_abs > max(tol.atol, 1e-30)
    stats |= {"finite": both.sum(), "bad": bad.sum(), "max_abs": diff.max(), "peak": ref_abs.max()}
    stats |= {"max_rel": diff.div(ref_abs).masked_fill_(~significant, 0.0).max()}
    stats |= {"max_bad": torch.where(bad, diff, 0.0).max(), "squares": diff.dot(diff), "dot": out_d.dot(ref_d)}
    stats |= {"out_squares": out_d.dot(out_d), "ref_squares": ref_d.dot(ref_d)}
    counts = totals.add(stats)
    for i in _first(bad, counts["bad"], MAX_MISMATCHES_SHOWN - len(totals.first_bad)):
        totals.first_bad.append((start + i, float(out_d[i]), float(ref_d[i])))
    shown = MAX_INDICES_SHOWN - len(totals.first_nonfinite)
    totals.first_nonfinite += [start + i for i in _first(nonfinite, counts["nonfinite"], shown)]
    shown = MAX_INDICES_SHOWN - len(totals.first_special)
    totals.first_special += [start + i for i in _first(special, counts["special"], shown)]


def _first(mask: torch.Tensor, count: float, limit: int) -> list[int]:
    """The first indices set in a chunk's mask, up to limit; searched only where set and while more are wanted."""
    return torch.nonzero(mask).reshape(-1)[:limit].tolist() if count and limit > 0 else []


def _error_metrics(totals: _Totals) -> dict[str, Any]:
    mse = totals.squares / max(totals.finite, 1)
    out_norm, ref_norm = math.sqrt(totals.out_squares), math.sqrt(totals.ref_squares)
    norms = out_norm * ref_norm
    cosine = totals.dot / norms if norms > 0 else (1.0 if out_norm == ref_norm else 0.0)
    return {
        "max_abs": totals.max_abs,
        "max_rel": totals.max_rel,
        "mse": mse,
        "rmse": math.sqrt(mse),
        "psnr": None if mse == 0 or totals.peak == 0 else 10 * math.log10(totals.peak * totals.peak / mse),
        "exact": mse == 0,
        "cosine": cosine,
    }


def _problems(totals: _Totals, shape: tuple[int, ...], tol: Tolerance) -> list[str]:
    problems = []
    if totals.nonfinite:
        n_inf = totals.nonfinite - totals.nan
        first = _indices(totals.first_nonfinite, shape)
        problems.append(
            f"{totals.nan} NaN and {n_inf} Inf in the output where the reference is finite, first at {first}"
        )
    if totals.special:
        problems.append(f"NaN/Inf of the reference not reproduced at {_indices(totals.first_special, shape)}")
    if totals.bad:
        problems.append(_mismatch_text(totals, shape, tol))
    return problems


def _floor_failures(metrics: dict[str, Any], tol: Tolerance) -> list[str]:
    failures = []
    if tol.min_cosine is not None and metrics["cosine"] < tol.min_cosine:
        failures.append(f"cosine similarity {metrics['cosine']:.7f} below the floor {tol.min_cosine:g}")
    psnr = metrics["psnr"]
    if tol.min_psnr is not None and psnr is not None and psnr < tol.min_psnr:
        failures.append(f"PSNR {psnr:.1f} dB below the floor {tol.min_psnr:g} dB")
    return failures


def _mismatch_text(totals: _Totals, shape: tuple[int, ...], tol: Tolerance) -> str:
    n_bad, total = totals.bad, math.prod(shape)
    shown = ", ".join(f"{_unravel(i, shape)} got {o:.6g} expected {r:.6g}" for i, o, r in totals.first_bad)
    if tol.atol == tol.rtol == 0:
        return f"{n_bad} of {total} elements ({100.0 * n_bad / total:.3g}%) differ (compared exactly); first at {shown}"
    return (
        f"{n_bad} of {total} elements ({100.0 * n_bad / total:.3g}%) outside atol {tol.atol:g} + "
        f"rtol {tol.rtol:g}·|ref| (max abs error {totals.max_bad:.3g}); first at {shown}"
    )


def _indices(flat: list[int], shape: tuple[int, ...]) -> str:
    return ", ".join(_unravel(i, shape) for i in flat[:MAX_INDICES_SHOWN])


def _unravel(index: int, shape: tuple[int, ...]) -> str:
    if not shape:
        return "[]"
    coords = []
    for dim in reversed(shape):
        coords.append(index % dim if dim else 0)
        index //= dim if dim else 1
    return "[" + ", ".join(str(c) for c in reversed(coords)) + "]"
