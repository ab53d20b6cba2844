"""TileLang in a version's worker: every kernel it compiles is written out for the dumps, and with no GPU it
compiles for the target arch instead of running.

Imported only for versions that import tilelang. Each JITKernel TileLang builds leaves, in the worker's
scratch folder (its HOME), `<kernel>-<n>.tl` (the TileLang program), `.tir` (the lowered device IR), `.cu`
(the CUDA source TileLang generates) and, where nvcc is found, `.ptx` and `.cubin` compiled from that source
with TileLang's own flags. With no GPU a JITKernel is lowered for the arch only: nothing is built for the
host and its calls return at once (placeholder outputs), since there is no device to run it on.
"""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path
from typing import Any

from harness.contract.kernel_names import CUDA_KERNEL

INSTALL_HINT = "pip install 'kerneltui[tilelang]'"
DUMP_SUBDIR = "tilelang"
_serial = itertools.count(1)


class TileLangMissing(ImportError):
    """The version imports tilelang and this Python has none: a setup problem, said as such."""


class CompilationError(RuntimeError):
    """TileLang could not lower a kernel, or nvcc refused the CUDA it generated: the kernel does not build
    (named so that the worker reports it as a compile error, as it does Triton's)."""


def _compile_error(kernel: Any, stage: str, exc: BaseException) -> CompilationError:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return CompilationError(f"{stage} {kernel_name(kernel)}: {(lines or [type(exc).__name__])[-1][:500]}")


def dump_dir() -> Path:
    """Where the judge collects TileLang kernels from: a worker's HOME is its scratch folder."""
    return Path.home() / DUMP_SUBDIR


def install(aot_arch: str | None) -> None:
    """Before the version is imported. `aot_arch` (e.g. 'sm_90a'): no GPU here, compile for it only."""
    try:
        from tilelang.jit.kernel import JITKernel
    except ImportError as exc:
        raise TileLangMissing(f"the version uses TileLang, which this Python does not have: {INSTALL_HINT}") from exc
    if aot_arch:
        _compile_for(JITKernel, aot_arch)
    else:
        _dump_after_compile(JITKernel)


def kernel_symbols(kernel: Any) -> list[str]:
    """The CUDA names of the kernels a JITKernel launches, from the source TileLang generated for it."""
    artifact = getattr(kernel, "artifact", None)
    source = getattr(artifact, "kernel_source", None)
    if not isinstance(source, str):
        return []
    return list(dict.fromkeys(CUDA_KERNEL.findall(source)))[:16]


def kernel_name(kernel: Any) -> str:
    func = getattr(kernel, "prim_func", None)
    attrs = getattr(func, "attrs", None)
    symbol = attrs.get("global_symbol") if attrs is not None else None
    return str(symbol) if symbol is not None else type(kernel).__name__


def _dump_after_compile(cls: type) -> None:
    """On a GPU TileLang compiles and runs as it always does; what it compiled is written out beside."""
    original = cls._compile_and_create_adapter  # type: ignore[attr-defined]

    def compile_and_dump(self: Any, tilelang_func: Any, out_idx: Any) -> Any:
        try:
            adapter = original(self, tilelang_func, out_idx)
        except Exception as exc:
            raise _compile_error(self, "TileLang could not compile", exc) from exc
        _write(self, tilelang_func, must_compile=False)  # TileLang built it already: a copy for the dumps
        return adapter

    cls._compile_and_create_adapter = compile_and_dump  # type: ignore[attr-defined]


def _compile_for(cls: type, arch: str) -> None:
    """No GPU: "auto" targets the arch (TileLang asks its detectors, ours last), and lowering stops before
    anything needs a device."""
    import tilelang
    from tilelang.backend.target import list_target_detectors, register_target_detector

    tilelang.disable_cache()  # its disk cache would store (and later load) kernels built for no host
    if "kerneltui-aot" not in list_target_detectors():
        register_target_detector("kerneltui-aot", lambda: {"kind": "cuda", "arch": arch})

    def lower_only(self: Any, tilelang_func: Any, out_idx: Any) -> Any:
        import tvm
        from tilelang.engine.lower import lower_with_context

        try:
            with tvm.transform.PassContext(opt_level=3, config=dict(self.pass_configs or {})), self.target:
                self.artifact = lower_with_context(tilelang_func, self.backend_context)
        except Exception as exc:
            raise _compile_error(self, "TileLang could not lower", exc) from exc
        _write(self, tilelang_func, must_compile=True)
        return _CompiledOnly(out_idx)

    cls._compile_and_create_adapter = lower_only  # type: ignore[attr-defined]


class _CompiledOnly:
    """A JITKernel's adapter with no GPU: calling it launches nothing (there is nothing to launch on)."""

    def __init__(self, out_idx: Any) -> None:
        self.result_idx = [out_idx] if isinstance(out_idx, int) else list(out_idx or [])

    def func(self, *args: Any, **kwargs: Any) -> Any:
        import torch

        outputs = [torch.empty(0) for _ in self.result_idx]  # shapes are a GPU run's business
        return outputs[0] if len(outputs) == 1 else (outputs or None)


def _write(kernel: Any, tilelang_func: Any, must_compile: bool) -> None:
    """The kernel's program, IR and CUDA source, then PTX and cubin where nvcc is found. `must_compile`: nvcc
    refusing the source is the kernel's compile error (ahead of time, nothing else compiles it)."""
    artifact: Any = getattr(kernel, "artifact", None)
    source = getattr(artifact, "kernel_source", None)
    if not isinstance(source, str):
        return
    folder = dump_dir()
    folder.mkdir(parents=True, exist_ok=True)
    stem = f"{re.sub(r'[^A-Za-z0-9_]', '_', kernel_name(kernel))}-{next(_serial)}"
    (folder / f"{stem}.tl").write_text(tilelang_func.script())
    (folder / f"{stem}.tir").write_text(artifact.device_mod.script())
    (folder / f"{stem}.cu").write_text(source)
    meta = {"name": kernel_name(kernel), "shared": _dynamic_shared_bytes(artifact.device_mod)}
    (folder / f"{stem}.json").write_text(json.dumps(meta))
    from tilelang.env import CUDA_HOME

    if not CUDA_HOME:  # TileLang finds nvcc through CUDA_HOME, PATH or the nvidia-cuda-nvcc wheel
        (folder / f"{stem}.nvcc.txt").write_text("no nvcc here: PTX, cubin and SASS need the CUDA toolkit's nvcc")
        return
    try:
        for kind in ("ptx", "cubin"):
            (folder / f"{stem}.{kind}").write_bytes(bytes(_nvcc(source, kind, kernel)))
    except Exception as exc:
        if must_compile:
            raise _compile_error(kernel, "nvcc refused the CUDA source TileLang generated for", exc) from exc
        (folder / f"{stem}.nvcc.txt").write_text(f"{type(exc).__name__}: {exc}"[-4000:])


def _dynamic_shared_bytes(device_mod: Any) -> int:
    """The shared memory TileLang's kernels ask for at launch (the cubin lists only the static part), the
    largest of them: what the judge holds to the arch's limit per block."""
    sizes = [0]
    for func in device_mod.functions.values():
        size = getattr((func.attrs or {}).get("dyn_shared_memory_buf"), "value", None)  # an IntImm, or none
        if isinstance(size, int):
            sizes.append(size)
    return max(sizes)


def _nvcc(source: str, kind: str, kernel: Any) -> bytes:
    """nvcc on the generated source with the flags TileLang compiles it with (fast math where asked for)."""
    from tilelang.contrib import nvcc
    from tilelang.env import CUTLASS_INCLUDE_DIR, TILELANG_TEMPLATE_PATH
    from tilelang.transform import PassConfigKey

    arch, _ = nvcc.get_target_arch_and_code(kernel.target)
    options = ["-std=c++20", "-I" + TILELANG_TEMPLATE_PATH, "-I" + CUTLASS_INCLUDE_DIR]
    if (kernel.pass_configs or {}).get(PassConfigKey.TL_ENABLE_FAST_MATH):
        options.append("--use_fast_math")
    options += list(kernel.compile_flags or [])
    return nvcc.compile_cuda(source, kind, [f"-arch=sm_{arch}"], options=options)
