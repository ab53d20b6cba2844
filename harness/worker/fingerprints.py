"""Digests of a buffer's bytes, taken while a call is recorded (harness.worker.recorder): bytes that changed
with no recorded writer were written by host code (numpy, a pointer, the CUDA driver called by hand).

On the CPU the storage is read in place. On a GPU its bytes are copied to the host after a device-wide
synchronize (the version's other streams may still be writing), for buffers up to DEVICE_MAX_BYTES: a copy is no
kernel, so the kernels the profiler records stay the version's, and the copy's op runs under the recorder's
`quiet` (not counted as the version's). A larger device buffer has no digest: what host code wrote there is not
seen (the recorder says nothing either way)."""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
from collections.abc import Callable
from typing import Any

import torch

DEVICE_MAX_BYTES = 16 << 20  # a copy of each written or launched-on buffer up to this
CALL_BUDGET_BYTES = 256 << 20  # and of this much in all, in one recorded call
# And of the version's own tensors at the call's start, on a budget apart: however much it holds, its launches'
# digests keep theirs.
HELD_BUDGET_BYTES = 64 << 20
Quiet = Callable[[], contextlib.AbstractContextManager[Any]]


class Fingerprints:
    """The digests of one recorded call: device copies within CALL_BUDGET_BYTES in all, so a call of many ops on
    large buffers is not slowed by a copy of each (past the budget, no digest: as for a larger buffer)."""

    def __init__(self, quiet: Quiet, budget: int = CALL_BUDGET_BYTES) -> None:
        self.quiet = quiet
        self.left = budget

    def of(self, tensor: torch.Tensor) -> bytes | None:
        """A digest of the bytes of the tensor's whole storage; None where none is taken (see the module's note)."""
        if tensor.device.type == "cpu":
            return host_fingerprint(tensor)
        size = tensor.untyped_storage().nbytes()
        if tensor.device.type != "cuda" or size > DEVICE_MAX_BYTES or size > self.left:
            return None
        self.left -= size
        return copied_fingerprint(tensor, self.quiet)


def host_fingerprint(tensor: torch.Tensor) -> bytes:
    """Read in place (no torch op: none is recorded)."""
    storage = tensor.untyped_storage()
    size = storage.nbytes()
    if size == 0:
        return b""
    return hashlib.blake2b(memoryview((ctypes.c_char * size).from_address(storage.data_ptr())), digest_size=16).digest()


def copied_fingerprint(tensor: torch.Tensor, quiet: Quiet) -> bytes:
    """The storage copied to the host first (a device's)."""
    storage = tensor.untyped_storage()
    if storage.nbytes() == 0:
        return b""
    with quiet():
        if tensor.is_cuda:
            torch.cuda.synchronize(tensor.device)
        whole = torch.empty(0, dtype=torch.uint8, device=tensor.device).set_(storage)
        host = whole.cpu()
    return hashlib.blake2b(host.numpy().tobytes(), digest_size=16).digest()
