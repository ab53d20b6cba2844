"""Compiling a version's kernels for a GPU that is not there (ahead of time, e.g. sm_90).

Triton: a stand-in driver reports the target, and every launch becomes a compile-only warm-up,
so calling custom_kernel on CPU tensors compiles each kernel it would launch, with the launch's
real signature, constexprs, num_warps and num_stages; artifacts land in TRITON_CACHE_DIR. Autotuned
kernels compile every config instead of timing them. CuTeDSL: CUTE_DSL_ARCH names the target and
compiled functions are not run. TileLang: harness.worker.tilelang_hooks.
"""

from __future__ import annotations

import re
from typing import Any

MAX_AUTOTUNE_CONFIGS = 16


def parse_arch(arch: str) -> tuple[int, str]:
    """'sm_90' -> (90, 'sm_90a' for CuTeDSL); 'sm_80' -> (80, 'sm_80')."""
    match = re.fullmatch(r"sm_(\d+)([af]?)", arch.strip())
    if not match:
        raise ValueError(f"bad --arch {arch!r}: expected e.g. sm_90, sm_90a, sm_100a")
    capability = int(match.group(1))
    suffix = match.group(2) or ("a" if capability >= 90 else "")
    return capability, f"sm_{capability}{suffix}"


class NoGPUError(RuntimeError):
    """Raised where the version asks the absent GPU for something at compile time."""


def install_triton(capability: int) -> None:
    import torch
    from triton.backends.compiler import GPUTarget
    from triton.runtime import driver
    from triton.runtime.autotuner import Autotuner
    from triton.runtime.jit import JITFunction

    class CompileOnlyDriver:
        def __init__(self) -> None:
            self.target = GPUTarget("cuda", capability, 32)

        def get_current_target(self) -> Any:
            return self.target

        def get_current_device(self) -> int:
            return 0

        def get_current_stream(self, device: int | None = None) -> int:
            return 0

        def get_active_torch_device(self) -> Any:
            return torch.device("cpu")

        def __getattr__(self, name: str) -> Any:
            raise NoGPUError(f"no GPU: triton driver.{name} is unavailable when compiling ahead of time")

    driver.set_active(CompileOnlyDriver())
    JITFunction.run, Autotuner.run = compile_only_methods(JITFunction.run)


def compile_only_methods(run: Any) -> tuple[Any, Any]:
    """Stand-ins for JITFunction.run (given as `run`) and Autotuner.run under which a launch compiles its kernel
    (with the launch's real signature and constexprs) and returns it without running, and an autotuned kernel
    compiles each of its configs (up to MAX_AUTOTUNE_CONFIGS) instead of timing them."""

    def compile_only(self: Any, *args: Any, grid: Any, warmup: bool, **kwargs: Any) -> Any:
        return run(self, *args, grid=grid, warmup=True, **kwargs)

    def compile_every_config(self: Any, *args: Any, **kwargs: Any) -> Any:
        kernel = None
        for config in self.configs[:MAX_AUTOTUNE_CONFIGS]:
            merged = dict(kwargs, **config.all_kwargs())
            kernel = self.fn.run(*args, **merged)
        return kernel

    return compile_only, compile_every_config


def install_cutedsl() -> None:
    """Compiled CuTeDSL functions return at once instead of launching (there is nothing to run on)."""
    try:
        from cutlass.base_dsl import jit_executor
    except ImportError:
        return

    def skip_run(self: Any, *args: Any, **kwargs: Any) -> None:
        return None

    for cls_name in ("JitCompiledFunction", "JitExecutor"):
        cls = getattr(jit_executor, cls_name, None)
        if cls is not None:
            cls.__call__ = skip_run
            if hasattr(cls, "run_compiled_program"):
                cls.run_compiled_program = skip_run
    try:
        from cutlass.cutlass_dsl import cuda_jit_executor

        cuda_jit_executor.CudaDialectJitCompiledFunction.__call__ = skip_run
    except (ImportError, AttributeError):
        pass
