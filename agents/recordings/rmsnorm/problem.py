"""RMSNorm over the last dim: y = x / sqrt(mean(x^2) + 1e-6) * w, x bf16 (rows, cols), w bf16 (cols,); fp32 (or better) math, bf16 output. eps is fixed at 1e-6, not an input."""

import torch

EPS = 1e-6


def reference(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    xd = x.double()
    rstd = torch.rsqrt(xd.pow(2).mean(dim=-1, keepdim=True) + EPS)
    return (xd * rstd * w.double()).to(torch.bfloat16)


def make_inputs(case: dict, seed: int, device) -> tuple:
    gen = torch.Generator(device="cpu").manual_seed(seed)
    x = torch.randn(case["rows"], case["cols"], generator=gen, dtype=torch.float32) * case.get("scale", 1.0)
    w = 1.0 + 0.5 * torch.randn(case["cols"], generator=gen, dtype=torch.float32)  # a trained gain: near 1, either sign
    return x.to(torch.bfloat16).to(device), w.to(torch.bfloat16).to(device)


# scale 30 and 1e-3: the result is scale-free, but a kernel that accumulates x^2 in bf16 or
# drops eps at the wrong place shows it; 1e-3 puts mean(x^2) at 1e-6, the size of eps itself.
cases = [
    {"rows": 1, "cols": 1},
    {"rows": 3, "cols": 17},
    {"rows": 37, "cols": 1000, "scale": 30.0},
    {"rows": 8, "cols": 4097},
    {"rows": 16, "cols": 2048},
    {"rows": 8, "cols": 768, "scale": 1e-3},
    {"rows": 3, "cols": 20001},  # wider than one register-resident row
]
bench_cases = [
    {"rows": 16384, "cols": 4096},
    {"rows": 8192, "cols": 8192},
]
# Outputs are O(1) up to |w| ~ 3; bf16 rounding may differ by one ulp (2^-7 relative at worst).
tolerance = {"atol": 1e-3, "rtol": 1e-2, "min_cosine": 0.9999}


def cost(case: dict) -> dict:
    rows, cols = case["rows"], case["cols"]
    # Per element: square, add, multiply by rstd, multiply by w; per row: one rsqrt.
    return {"flops": 4 * rows * cols + rows, "bytes": 2 * rows * cols + 2 * cols + 2 * rows * cols}
