"""The precision the judge computes a problem's reference at.

torch's defaults let cuDNN convolutions (and, where a program asked for it, cuBLAS matmuls) of float32 tensors round
their inputs to TF32: a "slow, obviously right" fp32 reference then differs from an honest fp32 kernel by more than
GPU MODE's 1e-3 (14% of an fp32 convolution's outputs on an H200), and an agent told so is pushed towards TF32.
So the reference runs with TF32 off in cuBLAS and cuDNN and float32 matmuls at "highest" precision, unless the
problem says `reference_precision = "tf32"` (its reference is meant to round like that). The setting is the
process's: references run one at a time under a lock, and the setting before is put back after each. Each call is
seeded the same, its random state apart from the process's.
"""

from __future__ import annotations

import contextlib
import functools
import threading
from collections.abc import Callable, Iterator
from typing import Any

# what a problem.py may set, and how it reads beside the tolerance
REFERENCE_PRECISIONS = {"highest": "fp32 reference, TF32 off", "tf32": "reference with TF32 (as problem.py asks)"}
DEFAULT = "highest"
REFERENCE_SEED = 0
_ONE_AT_A_TIME = threading.RLock()


def at_precision(reference: Callable[..., Any], precision: str) -> Callable[..., Any]:
    """`reference`, run with cuBLAS and cuDNN set for `precision` (one of REFERENCE_PRECISIONS)."""

    @functools.wraps(reference)
    def computed(*inputs: Any) -> Any:
        with _ONE_AT_A_TIME, _set(precision == "tf32"), _seeded(inputs):
            return reference(*inputs)

    return computed


def cuda_devices(values: tuple[Any, ...]) -> list[int]:
    """The CUDA devices a call's tensors are on (whose random state fork_rng keeps apart)."""
    import torch

    return sorted({t.device.index or 0 for t in values if isinstance(t, torch.Tensor) and t.device.type == "cuda"})


@contextlib.contextmanager
def _seeded(inputs: tuple[Any, ...]) -> Iterator[None]:
    """The same seed before each call (as KernelBench does), the process's random state put back after: a reference
    that draws random numbers gives the same answer on the same inputs (harness.judge.vacuous says it draws them)."""
    import torch

    with torch.random.fork_rng(devices=cuda_devices(inputs)):
        torch.manual_seed(REFERENCE_SEED)
        yield


@contextlib.contextmanager
def _set(tf32: bool) -> Iterator[None]:
    import torch

    matmul, cudnn = torch.backends.cuda.matmul, torch.backends.cudnn
    before = (torch.get_float32_matmul_precision(), matmul.allow_tf32, cudnn.allow_tf32)
    torch.set_float32_matmul_precision("high" if tf32 else "highest")
    matmul.allow_tf32, cudnn.allow_tf32 = tf32, tf32
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(before[0])
        matmul.allow_tf32, cudnn.allow_tf32 = before[1], before[2]


def tf32_hint(ops: list[str], precision: str, on_gpu: bool) -> str:
    """Words for an fp32 version that failed while torch ran a convolution for it on a GPU: cuDNN rounds it to TF32
    by torch's default (GPU MODE's own conv2d solution failed so, 1777 outputs off, against the fp32 reference)."""
    convs = sorted(op for op in ops if "conv" in op)
    if not on_gpu or precision == "tf32" or not convs:
        return ""
    return (
        f" (the version ran {convs[0]} through cuDNN, which rounds float32 to TF32 unless "
        "torch.backends.cudnn.allow_tf32 is False, as torch leaves it; the reference runs at full fp32: turn TF32 off "
        'in the version, or set reference_precision = "tf32" in problem.py to hold versions to TF32)'
    )
