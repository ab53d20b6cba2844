"""Inputs beyond the problem's own distribution, for a version that passed: a check can be too narrow to fail
anything (a ReLU computing |x| passes on torch.rand inputs, a LayerNorm that ignores its affine parameters passes
while they start at 1 and 0). After correctness passes, the judge calls the version on variants of a case and
compares with the reference; a difference is flagged `narrow-inputs` with where, not failed: the problem defines
correctness, the flag says its inputs may not show it.

Variants of one case's inputs: "signed" (floating inputs that are never negative, given random signs), "scaled"
(floating inputs times 4), "affine" (floating tensors that are all one value, such as fresh weights, drawn at
random around it; a KernelBench model's parameters included), and "size" (the case with its sizes moved next to
the case's own, as the confirmation does).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch

SCALE = 4.0


@dataclass(frozen=True)
class Variant:
    name: str  # signed, scaled, affine, size
    inputs: tuple[Any, ...]
    case: dict[str, Any]


Moved = Callable[[], tuple[dict[str, Any], tuple[Any, ...]]]
Change = Callable[[torch.Tensor, torch.Generator], "torch.Tensor | None"]


def variants(inputs: tuple[Any, ...], case: dict[str, Any], seed: int, moved: Moved) -> Iterator[Variant]:
    """The variants that change something of these inputs. `moved`: the case with its sizes moved and fresh
    inputs for it (called last, only if the others were all judged)."""
    generator = torch.Generator().manual_seed(seed)
    changes: tuple[tuple[str, Change], ...] = (("signed", _signed), ("scaled", _scaled), ("affine", _affine))
    for name, change in changes:
        changed, any_changed = _mapped(inputs, change, generator)
        if any_changed:
            yield Variant(name, changed, case)
    moved_case, moved_inputs = moved()
    if moved_case != case:
        yield Variant("size", moved_inputs, moved_case)


def _signed(t: torch.Tensor, generator: torch.Generator) -> torch.Tensor | None:
    if not _floating(t) or t.numel() < 2 or bool((t < 0).any()):
        return None
    signs = torch.randint(0, 2, t.shape, generator=generator).to(t.device, t.dtype) * 2 - 1
    return t * signs


def _scaled(t: torch.Tensor, generator: torch.Generator) -> torch.Tensor | None:
    if not _floating(t) or t.numel() < 2 or _constant(t):
        return None
    return t * SCALE


def _affine(t: torch.Tensor, generator: torch.Generator) -> torch.Tensor | None:
    if not _floating(t) or t.numel() < 2 or not _constant(t):
        return None
    spread = torch.randn(t.shape, generator=generator).to(t.device, t.dtype)
    value = float(t.reshape(-1)[0])
    return t + spread * (abs(value) * 0.5 if value else 0.5)


def _floating(t: Any) -> bool:
    """A float tensor torch can compare and draw: not fp8 or fp4 (one byte or less an element), not shape-only."""
    return isinstance(t, torch.Tensor) and t.is_floating_point() and t.element_size() >= 2 and t.device.type != "meta"


def _constant(t: torch.Tensor) -> bool:
    flat = t.reshape(-1)
    return bool((flat == flat[0]).all())


def _mapped(value: Any, change: Change, generator: torch.Generator) -> tuple[Any, bool]:
    """`value` with each tensor changed where `change` changes it (nested lists, tuples and dicts: a KernelBench
    model input's state dict), and whether any was."""
    if isinstance(value, torch.Tensor):
        changed = change(value, generator)
        return (value, False) if changed is None else (changed, True)
    if type(value) in (list, tuple):
        pairs = [_mapped(v, change, generator) for v in value]
        return type(value)(p[0] for p in pairs), any(p[1] for p in pairs)
    if isinstance(value, dict):
        pairs_by_key = {k: _mapped(v, change, generator) for k, v in value.items()}
        return {k: p[0] for k, p in pairs_by_key.items()}, any(p[1] for p in pairs_by_key.values())
    return value, False
