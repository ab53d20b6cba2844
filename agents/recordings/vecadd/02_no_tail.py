"""4096 elements per program and no mask at all: full blocks only, so every access is 16 bytes wide."""

import torch
import triton
import triton.language as tl


@triton.jit
def add_kernel(a_ptr, b_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(a_ptr + offs) + tl.load(b_ptr + offs))


def custom_kernel(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(a)
    BLOCK = 4096
    add_kernel[(a.numel() // BLOCK,)](a, b, out, BLOCK=BLOCK, num_warps=8)
    return out
