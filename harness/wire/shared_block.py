"""Memory the judge shares with one worker: large inputs and outputs without copies through the socket.

A bench case of hundreds of megabytes went through the socket as bytes both ways: a copy to the host, two through
the kernel, one back to the device, ~0.1 s a 128 MiB tensor each way. The judge instead makes one block both
processes map and hands its file descriptor to the worker over their socket (SCM_RIGHTS); a frame then names
where in the block each large tensor lies (harness.wire.frames). On the GPU the block is device memory from CUDA's
virtual memory API (cuMemCreate, exportable as a POSIX descriptor: legacy CUDA IPC handles need both processes
in one PID namespace, which the sandbox does not give); on the CPU it is a sealed memfd, which the worker can
neither shrink nor grow under the judge's mapping.

The block holds only what is copied into it for the other side: the judge's tensors stay in allocations of its
own, and whatever the worker leaves in the block is its claim, copied out and then checked like a reply's bytes.
Anything that fails here leaves the socket to carry the bytes, as it did before.
"""

from __future__ import annotations

import array
import contextlib
import ctypes
import fcntl
import functools
import mmap
import os
import secrets
import socket
from typing import Any, Protocol

import torch

from harness.wire.digest import digest_of

ALIGN = 512  # each tensor placed at a multiple of this many bytes in a block
MIN_BYTES = 1 << 20  # smaller tensors go through the socket: a copy into the block would cost as much
PROBE_BYTES = 32  # the judge writes this many random bytes at the block's start; the worker reads them back
_POSIX_FD, _PINNED, _ON_DEVICE, _READ_WRITE = 1, 1, 1, 3
_SEALS = fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL


class ShareError(Exception):
    """Sharing memory is not possible here; the socket carries the bytes instead."""


class Block(Protocol):
    kind: str  # "cuda" or "cpu": which tensors it takes
    size: int
    view: torch.Tensor  # its bytes, a uint8 tensor on its device

    def export(self) -> int: ...

    def close(self) -> None: ...


def allocate(kind: str, nbytes: int) -> Block:
    """A new block of at least nbytes for tensors on `kind` (the judge's side)."""
    return DeviceBlock.allocate(nbytes) if kind == "cuda" else HostBlock.allocate(nbytes)


def adopt(kind: str, fd: int, size: int) -> Block:
    """The block behind a descriptor the judge sent (the worker's side); the caller closes fd."""
    if kind == "cuda":
        return DeviceBlock.adopt(fd, size)
    if kind == "cpu":
        return HostBlock.adopt(fd, size)
    raise ShareError(f"unknown kind of block {kind!r}")


def accept(sock: socket.socket, kind: str, size: Any) -> Block:
    """The worker's side of the handshake: the descriptor that follows the judge's frame, mapped."""
    try:
        fd = receive_fd(sock)
    except OSError as exc:
        raise ShareError(f"no descriptor: {exc}") from None
    try:
        if type(size) is not int or size <= 0:
            raise ShareError(f"a block of {str(size)[:40]} bytes")
        return adopt(kind, fd, size)
    except (RuntimeError, ValueError, TypeError) as exc:
        raise ShareError(f"{type(exc).__name__}: {str(exc)[:300]}") from None
    finally:
        os.close(fd)


def bytes_to_share(tensors: list[torch.Tensor]) -> tuple[str, int] | None:
    """The kind and size of block that would take `tensors`' large ones, with as much again for the reply's
    outputs; None when none is large enough to be worth it."""
    need: dict[str, int] = {}
    for t in tensors:
        nbytes = t.numel() * t.element_size()
        if t.device.type in ("cuda", "cpu") and nbytes >= MIN_BYTES:
            need[t.device.type] = aligned(need.get(t.device.type, 0)) + nbytes
    if not need:
        return None
    kind = max(need, key=lambda k: need[k])
    return kind, 2 * aligned(need[kind]) + ALIGN


def fits(kind: str, size: int) -> bool:
    """Whether `size` bytes would take at most a quarter of the free memory of `kind` (the device's, or the
    host's): a block, or the next bench case's inputs made ahead."""
    try:
        if kind == "cuda":
            free, _ = torch.cuda.mem_get_info()
        else:
            free = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (RuntimeError, ValueError, OSError):
        return False
    return 4 * size <= free


def write_probe(block: Block) -> str:
    """Random bytes at the block's start: the worker reads them back, proving it maps the same memory."""
    probe = secrets.token_bytes(PROBE_BYTES)
    block.view[:PROBE_BYTES].copy_(torch.frombuffer(bytearray(probe), dtype=torch.uint8))
    _settle(block)
    return probe.hex()


def read_probe(block: Block) -> str:
    return bytes(block.view[:PROBE_BYTES].cpu().tolist()).hex()


def _settle(block: Block) -> None:
    if block.kind == "cuda":
        torch.cuda.synchronize(block.view.device)


class Placement:
    """Where one frame's tensors go in a block: from the start, each at a multiple of ALIGN, while they fit
    (wire.send). done() waits for the copies: the other process reads the block once it has the frame."""

    def __init__(self, block: Block) -> None:
        self.block, self.end, self.copied = block, 0, False

    def place(self, tensor: torch.Tensor) -> tuple[int, str] | None:
        """The offset `tensor` was copied to and a digest of its bytes there, or None where it does not fit, is
        small or lies elsewhere."""
        nbytes = tensor.numel() * tensor.element_size()
        if nbytes < MIN_BYTES or tensor.device != self.block.view.device or self.end + nbytes > self.block.size:
            return None
        offset = self.end
        placed = self.block.view[offset : offset + nbytes]
        placed.copy_(tensor.detach().contiguous().view(-1).view(torch.uint8))
        self.end, self.copied = aligned(offset + nbytes), True
        return offset, digest_of(placed)

    def done(self) -> None:
        if self.copied:
            _settle(self.block)


def aligned(offset: int) -> int:
    return -(-offset // ALIGN) * ALIGN


def send_fd(sock: socket.socket, fd: int, deadline: float | None = None) -> None:
    """`fd` with one byte; with `deadline`, a ChannelTimeout where the socket has no room before it."""
    from harness.wire import frames as wire

    if deadline is not None:
        wire.wait_writable(sock, deadline)
    flags = socket.MSG_DONTWAIT if deadline is not None else 0
    try:
        sock.sendmsg([b"F"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [fd]))], flags)
    except BlockingIOError:
        raise wire.ChannelTimeout("timed out sending") from None


def receive_fd(sock: socket.socket) -> int:
    """The descriptor sent with send_fd; a ShareError where none came with the byte."""
    data, ancillary, _, _ = sock.recvmsg(1, socket.CMSG_SPACE(array.array("i").itemsize))
    fds = [
        fd
        for level, kind, payload in ancillary
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS
        for fd in array.array("i", payload[: len(payload) - len(payload) % 4])
    ]
    for extra in fds[1:]:
        os.close(extra)
    if not fds:
        raise ShareError(f"no descriptor came with {data!r}")
    return fds[0]


class HostBlock:
    """Host memory in a memfd sealed at its size: the worker maps it too, and cannot truncate it under the
    judge (which would make the judge's next read of the mapping a SIGBUS)."""

    kind = "cpu"

    def __init__(self, fd: int, size: int) -> None:
        self.fd, self.size = fd, size
        self.map = mmap.mmap(fd, size)
        self.view = torch.frombuffer(self.map, dtype=torch.uint8)

    @classmethod
    def allocate(cls, nbytes: int) -> HostBlock:
        size = aligned(max(nbytes, ALIGN))
        fd = os.memfd_create("kerneltui-share", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
        try:
            os.ftruncate(fd, size)
            fcntl.fcntl(fd, fcntl.F_ADD_SEALS, _SEALS)
            return cls(fd, size)
        except OSError as exc:
            os.close(fd)
            raise ShareError(f"shared host memory: {exc}") from None

    @classmethod
    def adopt(cls, fd: int, size: int) -> HostBlock:
        try:
            if os.fstat(fd).st_size != size:
                raise ShareError("the shared descriptor's size is not the one announced")
            return cls(os.dup(fd), size)
        except (OSError, ValueError) as exc:
            raise ShareError(f"mapping shared host memory: {exc}") from None

    def export(self) -> int:
        return os.dup(self.fd)

    def close(self) -> None:
        if self.fd < 0:
            return
        self.view = torch.empty(0, dtype=torch.uint8)  # it held the map's buffer: the map closes once it is gone
        with contextlib.suppress(BufferError):
            self.map.close()
        os.close(self.fd)
        self.fd = -1


class _Location(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("id", ctypes.c_int)]


class _AllocFlags(ctypes.Structure):
    _fields_ = [
        ("compressionType", ctypes.c_ubyte),
        ("gpuDirectRDMACapable", ctypes.c_ubyte),
        ("usage", ctypes.c_ushort),
        ("reserved", ctypes.c_ubyte * 4),
    ]


class _AllocProp(ctypes.Structure):
    _fields_ = [
        ("type", ctypes.c_int),
        ("requestedHandleTypes", ctypes.c_int),
        ("location", _Location),
        ("win32HandleMetaData", ctypes.c_void_p),
        ("allocFlags", _AllocFlags),
    ]


class _AccessDesc(ctypes.Structure):
    _fields_ = [("location", _Location), ("flags", ctypes.c_int)]


_U64, _SIZE, _PTR, _INT = ctypes.c_uint64, ctypes.c_size_t, ctypes.c_void_p, ctypes.c_int
_SIGNATURES: dict[str, list[Any]] = {  # every argument typed: an untyped int would go as a 32-bit C int
    "cuMemGetAllocationGranularity": [_PTR, _PTR, _INT],
    "cuMemCreate": [_PTR, _SIZE, _PTR, _U64],
    "cuMemImportFromShareableHandle": [_PTR, _PTR, _INT],
    "cuMemExportToShareableHandle": [_PTR, _U64, _INT, _U64],
    "cuMemAddressReserve": [_PTR, _SIZE, _SIZE, _U64, _U64],
    "cuMemMap": [_U64, _SIZE, _SIZE, _U64, _U64],
    "cuMemSetAccess": [_U64, _SIZE, _PTR, _SIZE],
    "cuMemUnmap": [_U64, _SIZE],
    "cuMemAddressFree": [_U64, _SIZE],
    "cuMemRelease": [_U64],
    "cuGetErrorString": [_INT, _PTR],
}


@functools.cache
def _driver() -> Any:
    try:
        lib = ctypes.CDLL("libcuda.so.1")
    except OSError as exc:
        raise ShareError(f"no CUDA driver library: {exc}") from None
    for name, argtypes in _SIGNATURES.items():
        function = getattr(lib, name)
        function.argtypes, function.restype = argtypes, _INT
    return lib


def _call(name: str, *args: Any) -> None:
    result = getattr(_driver(), name)(*args)
    if result != 0:
        text = ctypes.c_char_p()
        _driver().cuGetErrorString(result, ctypes.byref(text))
        raise ShareError(f"{name}: CUDA error {result} ({(text.value or b'?').decode(errors='replace')})")


def _prop(device: int) -> _AllocProp:
    prop = _AllocProp()
    prop.type, prop.requestedHandleTypes, prop.location = _PINNED, _POSIX_FD, _Location(_ON_DEVICE, device)
    return prop


def _current_device() -> int:
    """This thread's device, its primary context made current (the driver calls below need one)."""
    if not torch.cuda.is_available():
        raise ShareError("no CUDA device")
    device = torch.cuda.current_device()
    torch.cuda.synchronize(device)
    return device


class _ArrayView:
    """A CUDA array interface over mapped bytes, for torch.as_tensor (which keeps this object alive)."""

    def __init__(self, pointer: int, nbytes: int) -> None:
        self.__cuda_array_interface__ = {
            "shape": (nbytes,),
            "typestr": "|u1",
            "data": (pointer, False),
            "version": 3,
            "strides": None,
        }


class DeviceBlock:
    """One allocation of device memory mapped into this process: `view` is its bytes as a uint8 CUDA tensor."""

    kind = "cuda"

    def __init__(self, handle: int, size: int, device: int) -> None:
        self.handle, self.size, self.device = handle, size, device
        self.pointer = 0
        try:
            self.pointer = self._map()
        except ShareError:
            _driver().cuMemRelease(handle)
            raise
        self.view = torch.as_tensor(_ArrayView(self.pointer, size), device=f"cuda:{device}")

    @classmethod
    def allocate(cls, nbytes: int) -> DeviceBlock:
        """A new block of at least nbytes on this thread's device (the judge's side)."""
        device = _current_device()
        step = ctypes.c_size_t()
        _call("cuMemGetAllocationGranularity", ctypes.byref(step), ctypes.byref(_prop(device)), 0)
        size = -(-max(nbytes, 1) // step.value) * step.value
        handle = ctypes.c_uint64()
        _call("cuMemCreate", ctypes.byref(handle), size, ctypes.byref(_prop(device)), 0)
        return cls(int(handle.value), size, device)

    @classmethod
    def adopt(cls, fd: int, size: int) -> DeviceBlock:
        """The block behind a descriptor the judge sent (the worker's side)."""
        device = _current_device()
        handle = ctypes.c_uint64()
        _call("cuMemImportFromShareableHandle", ctypes.byref(handle), ctypes.c_void_p(fd), _POSIX_FD)
        return cls(int(handle.value), size, device)

    def _map(self) -> int:
        pointer = ctypes.c_uint64()
        _call("cuMemAddressReserve", ctypes.byref(pointer), self.size, 0, 0, 0)
        try:
            _call("cuMemMap", pointer.value, self.size, 0, self.handle, 0)
        except ShareError:
            _driver().cuMemAddressFree(pointer.value, self.size)
            raise
        access = _AccessDesc(_Location(_ON_DEVICE, self.device), _READ_WRITE)
        try:
            _call("cuMemSetAccess", pointer.value, self.size, ctypes.byref(access), 1)
        except ShareError:
            _driver().cuMemUnmap(pointer.value, self.size)
            _driver().cuMemAddressFree(pointer.value, self.size)
            raise
        return int(pointer.value)

    def export(self) -> int:
        """A new file descriptor for this block (the caller closes it once sent)."""
        fd = ctypes.c_int()
        _call("cuMemExportToShareableHandle", ctypes.byref(fd), self.handle, _POSIX_FD, 0)
        return int(fd.value)

    def close(self) -> None:
        """Unmaps and releases this process's hold on the block (the memory goes once no process maps it)."""
        if self.pointer:
            torch.cuda.synchronize(self.device)
            lib = _driver()
            lib.cuMemUnmap(self.pointer, self.size)
            lib.cuMemAddressFree(self.pointer, self.size)
            lib.cuMemRelease(self.handle)
            self.pointer = 0
