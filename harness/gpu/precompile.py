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
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from harness.gpu import aot

MAX_THREADS = 8


def threads() -> int:
    """As many compiles at once as this process may run on CPUs, up to MAX_THREADS."""
    return max(1, min(MAX_THREADS, len(os.sched_getaffinity(0))))


def compile_ahead(entry: Callable[..., Any], input_sets: Sequence[tuple[Any, ...]], workers: int) -> dict[str, Any]:
    """Calls `entry` on each set of inputs with every Triton launch compiled on `workers` threads and not run.
    Returns what it did: the Triton cache groups each set's calls submitted (the first set to launch a
    specialisation has it), how many calls raised, and the seconds it took; or why it did nothing."""
    try:
        from triton.runtime._async_compile import AsyncCompileMode
    except ImportError:
        return {"ok": False, "why": "this Triton cannot compile in the background (no AsyncCompileMode)"}
    start = time.perf_counter()
    keys: list[list[str]] = []
    failed_calls = 0
    with ThreadPoolExecutor(workers, thread_name_prefix="precompile") as pool:
        mode = _async_mode(AsyncCompileMode, pool)
        with contextlib.suppress(Exception), launches_compile(), mode:  # a compile error: the real call reports it
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
    }


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
