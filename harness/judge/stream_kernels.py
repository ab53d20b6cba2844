"""Triton kernels that measure the device's bandwidth ceilings beside torch's own copy, add and sum.

torch's elementwise kernels are not the fastest way to stream memory: an honest Triton or TileLang add read
0.5% above torch.add's rate on an H200, and a ceiling an honest kernel passes is no ceiling. So each
pattern (1 read : 1 write, 2 reads : 1 write, reads only) is also run as a plain wide-block Triton kernel, and
the ceiling is the fastest of them. Imported only when ceilings are measured.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import triton
import triton.language as tl

BLOCKS = ((4096, 8), (8192, 8), (16384, 16))  # (elements per program, warps): wide enough to keep HBM busy


@triton.jit
def copy_kernel(src, dst, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(dst + offs, tl.load(src + offs, mask=mask), mask=mask)


@triton.jit
def add_kernel(a, b, out, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out + offs, tl.load(a + offs, mask=mask) + tl.load(b + offs, mask=mask), mask=mask)


@triton.jit
def sum_kernel(src, partial, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    values = tl.load(src + offs, mask=offs < n, other=0.0)
    tl.store(partial + tl.program_id(0), tl.sum(values, axis=0))


def calls(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor) -> dict[str, dict[str, Callable[[], Any]]]:
    """Per pattern, the calls that run it: torch's, then each Triton block size's (labelled `triton BLOCK`)."""
    n = a.numel()
    found: dict[str, dict[str, Callable[[], Any]]] = {
        "copy": {"torch": lambda: out.copy_(a)},
        "stream": {"torch": lambda: torch.add(a, b, out=out)},
        "read": {"torch": lambda: a.sum()},
    }
    for block, warps in BLOCKS:
        grid = (triton.cdiv(n, block),)
        partial = torch.empty(grid[0], device=a.device, dtype=a.dtype)
        label = f"triton {block}"
        found["copy"][label] = _launch(copy_kernel, grid, (a, out, n), block, warps)
        found["stream"][label] = _launch(add_kernel, grid, (a, b, out, n), block, warps)
        found["read"][label] = _launch(sum_kernel, grid, (a, partial, n), block, warps)
    return found


def _launch(kernel: Any, grid: tuple[int], args: tuple[Any, ...], block: int, warps: int) -> Callable[[], Any]:
    return lambda: kernel[grid](*args, BLOCK=block, num_warps=warps)
