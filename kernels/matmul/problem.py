"""Matrix product C = A @ B with A (M, K) and B (K, N) in bf16, accumulated in fp32, C in bf16."""

import torch


def reference(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    # fp32 products and sums (torch does not use TF32 for fp32 matmul unless asked to).
    return torch.matmul(a.float(), b.float()).to(torch.bfloat16)


def make_inputs(case: dict, seed: int, device) -> tuple:
    gen = torch.Generator(device="cpu").manual_seed(seed)
    m, n, k = case["M"], case["N"], case["K"]
    # Each operand scaled by K^-1/4, so every C entry (a sum of K products) has variance 1.
    scale = k ** -0.25
    a = torch.randn(m, k, generator=gen, dtype=torch.float32) * scale
    b = torch.randn(k, n, generator=gen, dtype=torch.float32) * scale
    return a.to(torch.bfloat16).to(device), b.to(torch.bfloat16).to(device)


# Odd M, N and K: partial tiles in every dimension, K tails shorter than one K step, and 1x1x1.
cases = [
    {"M": 1, "N": 1, "K": 1},
    {"M": 17, "N": 33, "K": 65},
    {"M": 64, "N": 64, "K": 64},
    {"M": 128, "N": 96, "K": 200},
    {"M": 129, "N": 129, "K": 97},
    {"M": 5, "N": 300, "K": 40},
]
bench_cases = [
    {"M": 4096, "N": 4096, "K": 4096},
    {"M": 8192, "N": 8192, "K": 8192},
]
# C is O(1); bf16 rounding of C may differ by one ulp (2^-7 relative at worst), and fp32 sums in
# another order move values across a rounding boundary now and then.
tolerance = {"atol": 2e-2, "rtol": 2e-2, "min_cosine": 0.9999}


def cost(case: dict) -> dict:
    m, n, k = case["M"], case["N"], case["K"]
    return {"flops": 2 * m * n * k, "bytes": 2 * (m * k + k * n + m * n)}
