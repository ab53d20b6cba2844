"""Starting, talking to, and ending kernel worker processes (the judge's side of harness.worker).

Each worker is a fresh Python process in its own session (so it and anything it starts can be
killed together), with a scratch folder, a log file for whatever the version prints, a minimal
environment (no API keys), and one socket to the judge. A pool keeps one started ahead of need.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.sandbox import FILE_LIMIT_HINT  # ctypes and the standard library only

if TYPE_CHECKING:
    import torch

# No torch or wire import at module level: the judge starts its workers before it imports torch
# itself, so that both imports overlap.

READY_TIMEOUT_S = 180.0
LOG_TAIL_CHARS = 1500
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


class WorkerFailure(Exception):
    """The worker died, hung, or sent garbage; the message is the plain reason."""


def link_harness(folder: Path) -> str:
    """A folder holding only a link to this harness package: the worker's PYTHONPATH entry.

    Pointing PYTHONPATH at the harness's parent instead could put a whole site-packages (and its
    torch) in front of the worker Python's own.
    """
    folder.mkdir(parents=True, exist_ok=True)
    link = folder / "harness"
    if not link.exists():
        link.symlink_to(Path(__file__).resolve().parent, target_is_directory=True)
    return str(folder)


def worker_env(scratch: Path, mode: str, interpret: bool, cute_arch: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k in PASSED_ENV or k.startswith(("TRITON_", "CUTE_DSL_"))}
    env = {k: v for k, v in env.items() if not any(m in k.upper() for m in SECRET_MARKERS)}
    env.update(
        PYTHONPATH=os.pathsep.join(p for p in (link_harness(scratch / "pkg"), env.get("PYTHONPATH")) if p),
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


class WorkerProcess:
    def __init__(self, mode: str, python: str, arch: str, cute_arch: str, interpret: bool) -> None:
        self.mode = mode
        self.scratch = Path(tempfile.mkdtemp(prefix=f"kerneltui-{mode}-"))
        for sub in ("tmp", "triton", "nv", "cute", "cute-cache"):
            (self.scratch / sub).mkdir()
        self.log_path = self.scratch / "worker.log"
        parent, child = socket.socketpair()
        self.sock = parent
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(
                [python, "-m", "harness.worker", "--fd", str(child.fileno()), "--mode", mode, "--arch", arch],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                pass_fds=(child.fileno(),),
                start_new_session=True,
                env=worker_env(self.scratch, mode, interpret, cute_arch),
                cwd=self.scratch,
            )
        child.close()
        self.ready: dict[str, Any] | None = None
        self.started = time.monotonic()

    def wait_ready(self) -> dict[str, Any]:
        if self.ready is None:
            header, _ = self._recv(READY_TIMEOUT_S, "starting")
            if header.get("op") != "ready":
                raise WorkerFailure("the worker did not start properly")
            self.ready = header
        return self.ready

    def request(
        self,
        header: dict[str, Any],
        tensors: list[torch.Tensor] | None,
        timeout: float,
        what: str,
        max_payload: int = 1 << 36,
    ) -> tuple[dict[str, Any], list[torch.Tensor]]:
        from harness import wire

        self.wait_ready()
        try:
            wire.send(self.sock, header, tensors)
        except OSError:
            raise WorkerFailure(self.death_reason(what)) from None
        return self._recv(timeout, what, max_payload)

    def _recv(self, timeout: float, what: str, max_payload: int = 1 << 36) -> tuple[dict[str, Any], list[torch.Tensor]]:
        from harness import wire

        try:
            return wire.recv(self.sock, timeout=timeout, max_payload=max_payload)
        except wire.ChannelTimeout:
            self.kill()
            raise WorkerFailure(_joined(f"timed out after {timeout:g} s", what)) from None
        except wire.ChannelClosed:
            raise WorkerFailure(self.death_reason(what)) from None
        except (wire.ChannelError, OSError) as exc:
            self.kill()
            raise WorkerFailure(
                _joined("malformed reply from the kernel's process", what) + f" ({exc}); "
                "a version that writes to inherited file descriptors looks like this"
            ) from None

    def death_reason(self, what: str) -> str:
        try:
            code = self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.kill()
            return _joined("the kernel's process stopped answering", what)
        if code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = f"signal {-code}"
            reason = _joined(f"crashed: {name}", what)
            if name == "SIGXFSZ":
                reason += f" ({FILE_LIMIT_HINT})"
        else:
            reason = _joined(f"the kernel's process exited early (code {code})", what) + ", without answering"
        tail = self.log_tail()
        return f"{reason}\n{tail}" if tail else reason

    def log_tail(self) -> str:
        try:
            with open(self.log_path, "rb") as log:  # the end only: a log can be hundreds of MiB
                log.seek(max(0, log.seek(0, os.SEEK_END) - 4 * LOG_TAIL_CHARS))
                text = log.read().decode(errors="replace")
        except OSError:
            return ""
        text = text.strip()
        return text[-LOG_TAIL_CHARS:] if text else ""

    def kill(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=10)
        else:
            # the worker is gone; anything it started in its session goes too
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, signal.SIGKILL)

    def close(self, grace: float = 2.0) -> None:
        if self.proc.poll() is None:
            from harness import wire

            with contextlib.suppress(OSError):
                wire.send(self.sock, {"op": "exit"})
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=grace)
        self.kill()
        self.sock.close()

    def remove_scratch(self) -> None:
        shutil.rmtree(self.scratch, ignore_errors=True)


def _joined(text: str, what: str) -> str:
    return f"{text} {what}" if what else text


def cuda_device_count() -> int:
    """GPUs the CUDA driver sees, asked through libcuda (no torch import, a few milliseconds)."""
    import ctypes

    try:
        libcuda = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return 0
    count = ctypes.c_int(0)
    if libcuda.cuInit(0) != 0 or libcuda.cuDeviceGetCount(ctypes.byref(count)) != 0:
        return 0
    return count.value


class WorkerPool:
    """Hands out workers started ahead of need; each serves one version, then is thrown away."""

    def __init__(
        self,
        python: str = sys.executable,
        arch: str = "sm_90",
        cute_arch: str = "sm_90a",
        keep_spare: bool = False,
    ) -> None:
        self.python = python
        self.arch = arch
        self.cute_arch = cute_arch
        self.keep_spare = keep_spare
        self.cuda = cuda_device_count() > 0
        self.spares: dict[str, WorkerProcess] = {}

    def modes(self) -> list[str]:
        """GPU: one worker runs everything. No GPU: one interprets, another compiles ahead of time."""
        return ["run"] if self.cuda else ["run", "compile"]

    def prestart(self) -> None:
        for mode in self.modes():
            if mode not in self.spares:
                self.spares[mode] = self._spawn(mode)

    def take(self, mode: str) -> WorkerProcess:
        worker = self.spares.pop(mode, None) or self._spawn(mode)
        if self.keep_spare:
            self.spares[mode] = self._spawn(mode)
        return worker

    def _spawn(self, mode: str) -> WorkerProcess:
        return WorkerProcess(mode, self.python, self.arch, self.cute_arch, interpret=mode == "run")

    def close(self) -> None:
        for worker in self.spares.values():
            worker.close(grace=0.5)
            worker.remove_scratch()
        self.spares.clear()
