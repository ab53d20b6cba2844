"""A version's Triton kernels compiled for every correctness case at once, on a thread pool, before its first call.

Each worker has a Triton cache of its own (a version must not plant binaries for another), so every new version
pays Triton's JIT for each specialisation its correctness cases launch, one after another inside the calls: on
a GPU most of the correctness verdict. Here the version is called once per case with launches turned into
compile-only warm-ups inside Triton's AsyncCompileMode, so those compiles overlap (ptxas and much of the
compiler run outside the GIL); the real calls then find their kernels compiled.

The inputs are on the CPU, also in a GPU worker: no kernel runs, so the version's own torch work runs on
outputs that were never written, and on the CPU that cannot leave the device in an error state that the real
calls would inherit. Nothing here decides a verdict: whatever fails (a version that wants CUDA tensors, a
compile error) is left for the real calls to meet and report.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import time
import types
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from harness.gpu import aot

MAX_THREADS = 8
UNTOUCHED_MAX_BYTES = 32 << 30  # address space only: empty_strided maps pages it does not write


def untouched(meta: Any) -> Any:
    """A meta tensor's like on the CPU, its pages never written (so, at most UNTOUCHED_MAX_BYTES, none resident):
    what a bench case's shapes compile on. The meta tensor itself where no such allocation is had."""
    import torch

    nbytes = meta.untyped_storage().nbytes()
    if nbytes > UNTOUCHED_MAX_BYTES:
        return meta
    try:
        return torch.empty_strided(meta.shape, meta.stride(), dtype=meta.dtype, device="cpu")
    except (RuntimeError, MemoryError):
        return meta


def threads() -> int:
    """As many compiles at once as this process may run on CPUs, up to MAX_THREADS."""
    return max(1, min(MAX_THREADS, len(os.sched_getaffinity(0))))


def compile_ahead(
    entry: Callable[..., Any], input_sets: Sequence[tuple[Any, ...]], workers: int, launchers: bool = False
) -> dict[str, Any]:
    """Calls `entry` on each set of inputs with every Triton launch compiled on `workers` threads and not run
    (`launchers`: on a GPU, each kernel's launcher built beside its compile, launchers_early).
    Returns what it did: the Triton cache groups each set's calls submitted (the first set to launch a
    specialisation has it), how many calls raised, and the seconds it took; or why it did nothing."""
    try:
        from triton.runtime._async_compile import AsyncCompileMode
    except ImportError:
        return {"ok": False, "why": "this Triton cannot compile in the background (no AsyncCompileMode)"}
    start = time.perf_counter()
    keys: list[list[str]] = []
    failed_calls = 0
    built: set[str] = set()
    with ThreadPoolExecutor(workers, thread_name_prefix="precompile") as pool:
        mode = _async_mode(AsyncCompileMode, pool)
        early = launchers_early(pool, built) if launchers else contextlib.nullcontext()
        with contextlib.suppress(Exception), launches_compile(), early, mode:  # a compile error: the real call meets it
            for inputs in input_sets:
                before = set(mode.future_kernels)
                try:
                    entry(*inputs)
                except BaseException:  # sys.exit too: the real call meets it again and reports it
                    failed_calls += 1
                keys.append(sorted(cache_group(str(k)) for k in set(mode.future_kernels) - before))
    return {
        "ok": True,
        "seconds": round(time.perf_counter() - start, 4),
        "kernels": sum(len(k) for k in keys),
        "keys": keys,
        "failed_calls": failed_calls,
        "threads": workers,
        "launchers": len(built),
    }


@contextlib.contextmanager
def launchers_early(pool: ThreadPoolExecutor, built: set[str]) -> Iterator[None]:
    """Triton up to 3.6 builds each kernel's launcher (C, by the host compiler: ~0.2 s on an H100 box) at its first
    launch, after its compile: inside the version's first call, one after another. Inside, a launcher is built on
    `pool` as soon as a compile is asked for, beside it, once per signature (added to `built`); the first launch
    finds it in this worker's Triton cache. Nothing where Triton's launcher has no C of its own."""
    try:
        from triton.backends.nvidia import driver as nvidia
        from triton.runtime.jit import JITFunction
    except ImportError:
        nvidia = None
    if nvidia is None or not hasattr(nvidia, "make_launcher"):
        yield
        return
    original = JITFunction._do_compile

    def do_compile(self: Any, key: Any, signature: Any, device: Any, constexprs: Any, *rest: Any) -> Any:
        with contextlib.suppress(Exception):  # whatever fails here, the first launch builds it as ever
            src = self.ASTSource(self, signature, constexprs, *rest[1:2])
            ident = repr((sorted(src.signature.items()), sorted(src.constants.items(), key=repr)))
            if ident not in built:
                built.add(ident)
                pool.submit(_build_launcher, nvidia, src)
        return original(self, key, signature, device, constexprs, *rest)

    JITFunction._do_compile = do_compile
    try:
        yield
    finally:
        JITFunction._do_compile = original


# What CudaLauncher reads of a kernel's metadata once its C is built: the defaults of a kernel with no tensor
# descriptors, no scratch, one CTA (a kernel with more gets its own launcher at its first launch)
_PLAIN_KERNEL = types.SimpleNamespace(
    tensordesc_meta=None, num_ctas=1, global_scratch_size=0, global_scratch_align=1, profile_scratch_size=0,
    profile_scratch_align=1, launch_cooperative_grid=False, launch_pdl=False,
)  # fmt: skip


def _build_launcher(nvidia: Any, src: Any) -> None:
    with contextlib.suppress(Exception):
        nvidia.CudaLauncher(src, _PLAIN_KERNEL)


def cache_group(key: str) -> str:
    """The folder of Triton's cache that holds the kernel compiled under `key` (as triton.compiler.compile names
    it: the key's sha256, in base32 where this Triton's cache does so)."""
    digest = hashlib.sha256(key.encode("utf-8")).hexdigest()
    try:
        from triton.runtime.cache import _base32
    except ImportError:
        return digest
    return str(_base32(digest))


@contextlib.contextmanager
def launches_compile() -> Iterator[None]:
    """Inside, a Triton launch compiles its kernel and returns without running it (harness.gpu.aot's stand-ins)."""
    from triton.runtime.autotuner import Autotuner
    from triton.runtime.jit import JITFunction

    saved = JITFunction.run, Autotuner.run
    JITFunction.run, Autotuner.run = aot.compile_only_methods(JITFunction.run)
    try:
        yield
    finally:
        JITFunction.run, Autotuner.run = saved


def _async_mode(mode_class: Any, pool: ThreadPoolExecutor) -> Any:
    """Triton 3.6's AsyncCompileMode takes only the executor; later ones can drop a failed compile's future."""
    try:
        return mode_class(pool, ignore_errors=True)
    except TypeError:
        return mode_class(pool)
