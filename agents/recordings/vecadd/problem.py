"""Vector add: c = a + b for two 1-D fp32 tensors of n elements (memory-bound: 12 bytes per element)."""

import torch


def reference(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return a + b


def make_inputs(case: dict, seed: int, device) -> tuple:
    gen = torch.Generator(device="cpu").manual_seed(seed)
    n = case["n"]
    a = torch.randn(n, generator=gen, dtype=torch.float32)
    b = torch.randn(n, generator=gen, dtype=torch.float32)
    return a.to(device), b.to(device)


# 1 and 7: less than one block; 4097 and 65539: one element past a power-of-two block boundary.
cases = [{"n": 1}, {"n": 7}, {"n": 1000}, {"n": 4096}, {"n": 4097}, {"n": 65536 + 3}]
# 1<<28 fp32: 1 GiB per tensor, 3 GiB moved; the odd size checks the tail costs nothing at scale.
bench_cases = [{"n": 1 << 28}, {"n": (1 << 24) + 3}]
# An fp32 add is correctly rounded on any IEEE device, so outputs should match bit for bit;
# the tolerance is only slack, far below anything a wrong kernel produces.
tolerance = {"atol": 1e-6, "rtol": 1e-6}


def cost(case: dict) -> dict:
    n = case["n"]
    return {"flops": n, "bytes": 3 * 4 * n}
