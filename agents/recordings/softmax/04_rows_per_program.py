"""Rows of up to 1024 columns: several rows per program, the tile sized from the row width."""

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


@triton.jit
def softmax_rows_kernel(x_ptr, y_ptr, rows, cols, x_row_stride, y_row_stride, ROWS: tl.constexpr, BLOCK: tl.constexpr):
    r = tl.program_id(0).to(tl.int64) * ROWS + tl.arange(0, ROWS)[:, None]
    c = tl.arange(0, cols)[None, :]
    mask = (r < rows) & (c < cols)
    x = tl.load(x_ptr + r * x_row_stride + c, mask=mask, other=float("-inf")).to(tl.float32)
    row_max = tl.max(x, axis=1)[:, None]
    row_max = tl.where(row_max == float("-inf"), 0.0, row_max)  # rows past the end: no -inf - -inf
    e = tl.exp(x - row_max)
    total = tl.sum(e, axis=1)[:, None]
    y = e / tl.where(total == 0.0, 1.0, total)
    tl.store(y_ptr + r * y_row_stride + c, y.to(tl.bfloat16), mask=mask)


def custom_kernel(x: torch.Tensor) -> torch.Tensor:
    rows, cols = x.shape
    y = torch.empty_like(x)
    block = triton.next_power_of_2(cols)
    if block <= 1024:
        # Narrow rows: a 4096-value tile of several rows per program, so each program has work for 4 warps.
        per_program = max(1, min(64, 4096 // block))
        softmax_rows_kernel[(triton.cdiv(rows, per_program),)](
            x, y, rows, cols, x.stride(0), y.stride(0), ROWS=per_program, BLOCK=block, num_warps=4
        )
    elif block <= MAX_REGISTER_ROW:
        num_warps = min(max(block // 512, 1), 16)
        softmax_row_kernel[(rows,)](x, y, cols, x.stride(0), y.stride(0), BLOCK=block, num_warps=num_warps)
    else:
        softmax_online_kernel[(rows,)](x, y, cols, x.stride(0), y.stride(0), BLOCK=4096, num_warps=8)
    return y
