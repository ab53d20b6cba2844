"""What a judge and a worker inherit, and the folder that lets another Python import this harness: the named
entry point kerneltui uses to start a judge (it imports nothing else of the workers)."""

from __future__ import annotations

import compileall
import contextlib
import os
import sys
from pathlib import Path

from harness import PACKAGE_DIR

SECRET_MARKERS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "CREDENTIAL")
PASSED_ENV = (
    "PATH",
    "HOME",
    "LANG",
    "LC_ALL",
    "TERM",
    "USER",
    "LD_LIBRARY_PATH",
    "PYTHONPATH",
    "VIRTUAL_ENV",
    "CUDA_VISIBLE_DEVICES",
    "CUDA_HOME",
    "CUDA_PATH",
    "NVIDIA_VISIBLE_DEVICES",
    "NVIDIA_DRIVER_CAPABILITIES",
    "NCCL_NVLS_ENABLE",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST",
    "NVSHMEM_DISABLE_NVLS",
)


def link_harness(folder: Path) -> str:
    """A folder holding only a link to this harness package: the worker's PYTHONPATH entry.

    Pointing PYTHONPATH at the harness's parent instead could put a whole site-packages (and its
    torch) in front of the worker Python's own, and would let the worker read kerneltui's checkout.
    """
    folder.mkdir(parents=True, exist_ok=True)
    compiled_once()
    link, target = folder / "harness", PACKAGE_DIR
    if link.is_symlink() and link.resolve() != target:  # left by another checkout or install
        link.unlink()
    if not link.exists():
        link.symlink_to(target, target_is_directory=True)
    return str(folder)


_COMPILED: list[bool] = []


def compiled_once() -> None:
    """The harness's modules compiled to bytecode in their __pycache__, once a process, where the folder is writable
    (a checkout; pip compiled an installed one) and this Python writes bytecode at all. Workers write none
    (PYTHONDONTWRITEBYTECODE, and could not): a module only workers import was compiled from its source at every
    worker's start, a third of a forked worker's (benchmarks/worker_start.py: p50 0.25 s, 0.17 s compiled)."""
    if _COMPILED or sys.dont_write_bytecode:
        return
    _COMPILED.append(True)
    with contextlib.suppress(OSError):
        compileall.compile_dir(str(PACKAGE_DIR), quiet=2)


def passed_env(extra_prefixes: tuple[str, ...] = ()) -> dict[str, str]:
    """The variables a judge or worker may inherit: a fixed list and tool prefixes, never a secret."""
    prefixes = ("TRITON_", "CUTE_DSL_", *extra_prefixes)
    env = {k: v for k, v in os.environ.items() if k in PASSED_ENV or k.startswith(prefixes)}
    return {k: v for k, v in env.items() if not any(m in k.upper() for m in SECRET_MARKERS)}


def judge_env() -> dict[str, str]:
    """What a judge inherits from kerneltui: what the ladder, CUDA and the tools read, and no secret."""
    env = passed_env(("KERNELTUI_", "CUDA_", "NVIDIA_", "NCCL_", "TORCH_", "PYTORCH_"))
    if "TMPDIR" in os.environ:
        env["TMPDIR"] = os.environ["TMPDIR"]
    return env


def worker_env(root: Path, mode: str, interpret: bool, cute_arch: str, pkg: Path | None = None) -> dict[str, str]:
    """The worker's whole environment; `pkg`: the folder linking this harness (root/pkg where not given)."""
    scratch = root / "scratch"
    env = passed_env()
    env.update(
        HOME=str(scratch),
        PYTHONPATH=os.pathsep.join(p for p in (link_harness(pkg or root / "pkg"), env.get("PYTHONPATH")) if p),
        PYTHONDONTWRITEBYTECODE="1",
        PYTHONUNBUFFERED="1",
        TMPDIR=str(scratch / "tmp"),
        TRITON_CACHE_DIR=str(scratch / "triton"),
        TRITON_HOME=str(scratch),
        CUDA_CACHE_PATH=str(scratch / "nv"),
        CUTE_DSL_KEEP="ptx,cubin",
        CUTE_DSL_DUMP_DIR=str(scratch / "cute"),
        CUTE_DSL_CACHE_DIR=str(scratch / "cute-cache"),
    )
    env.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
    env.pop("TRITON_INTERPRET", None)
    if interpret:
        env["KERNELTUI_INTERPRET_IF_NO_GPU"] = "1"
    if mode == "compile":
        env["CUTE_DSL_ARCH"] = cute_arch
        env["CUDA_VISIBLE_DEVICES"] = ""
    return env
