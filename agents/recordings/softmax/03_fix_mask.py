"""Masked lanes now load -inf, so they add exp(-inf) = 0 to the sum; rows wider than 16384 fall back to an online (running max and sum) pass plus a write pass, as registers would spill."""

import torch
import triton
import triton.language as tl

MAX_REGISTER_ROW = 16384  # 16 warps x 32 lanes x 32 fp32 values: past this the row would spill


@triton.jit
def softmax_row_kernel(x_ptr, y_ptr, cols, x_row_stride, y_row_stride, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    mask = offs < cols
    x = tl.load(x_ptr + row * x_row_stride + offs, mask=mask, other=float("-inf")).to(tl.float32)
    e = tl.exp(x - tl.max(x, axis=0))  # masked lanes: exp(-inf) = 0, so they add nothing
    y = e * (1.0 / tl.sum(e, axis=0))
    tl.store(y_ptr + row * y_row_stride + offs, y.to(tl.bfloat16), mask=mask)


@triton.jit
def softmax_online_kernel(x_ptr, y_ptr, cols, x_row_stride, y_row_stride, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * x_row_stride
    y_row = y_ptr + row * y_row_stride
    offs = tl.arange(0, BLOCK)
    # Per-lane running max and sum: when a lane's max grows, rescale its sum by exp(old - new).
    m = tl.full([BLOCK], float("-inf"), tl.float32)
    s = tl.zeros([BLOCK], tl.float32)
    for start in range(0, cols, BLOCK):
        x = tl.load(x_row + start + offs, mask=start + offs < cols, other=float("-inf")).to(tl.float32)
        m_new = tl.maximum(m, x)
        # A lane that has seen only padding keeps m = -inf; guard it so -inf - -inf never makes a NaN.
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
        s = s * tl.exp(m - m_safe) + tl.exp(x - m_safe)
        m = m_new
    row_max = tl.max(m, axis=0)
    m_safe = tl.where(m == float("-inf"), row_max, m)
    inv_sum = 1.0 / tl.sum(s * tl.exp(m_safe - row_max), axis=0)
    for start in range(0, cols, BLOCK):
        mask = start + offs < cols
        x = tl.load(x_row + start + offs, mask=mask, other=float("-inf")).to(tl.float32)
        tl.store(y_row + start + offs, (tl.exp(x - row_max) * inv_sum).to(tl.bfloat16), mask=mask)


def custom_kernel(x: torch.Tensor) -> torch.Tensor:
    rows, cols = x.shape
    y = torch.empty_like(x)
    block = triton.next_power_of_2(cols)
    if block <= MAX_REGISTER_ROW:
        # About 16 values a thread: 1 warp up to 512 columns, 16 warps at 8192 and beyond.
        num_warps = min(max(block // 512, 1), 16)
        softmax_row_kernel[(rows,)](x, y, cols, x.stride(0), y.stride(0), BLOCK=block, num_warps=num_warps)
    else:
        softmax_online_kernel[(rows,)](x, y, cols, x.stride(0), y.stride(0), BLOCK=4096, num_warps=8)
    return y
