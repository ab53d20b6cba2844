"""A digest of a tensor's bytes that both sides of the shared block take (harness.wire.shared_block, frames)."""

from __future__ import annotations

import torch

CHUNK = 1 << 24  # words summed at a time: a 64-bit copy of each chunk, not of the whole tensor


def digest_of(data: torch.Tensor) -> str:
    """A digest of bytes (a 1-D uint8 tensor, on the CPU or a GPU), taken by the sender as it places a tensor and by
    the receiver on its copy: bytes changed in between (a thread of the version's still writing an output the worker
    reported) do not match. Two sums over 32-bit words, one weighted by position, in wrapping 64-bit arithmetic:
    the same on both sides whatever the order of summation."""
    whole = data.numel() // 4 * 4
    words = data[:whole].view(torch.int32)
    total = weighted = torch.zeros((), dtype=torch.int64, device=data.device)
    for start in range(0, words.numel(), CHUNK):
        part = words[start : start + CHUNK].to(torch.int64)
        place = torch.arange(start + 1, start + 1 + part.numel(), dtype=torch.int64, device=data.device)
        total = total + part.sum()
        weighted = weighted + (part * place).sum()
    tail = bytes(data[whole:].cpu().tolist()).hex()
    return f"{int(total) & (2**64 - 1):x}.{int(weighted) & (2**64 - 1):x}.{tail}"
