"""The judge <-> worker channel: length-prefixed frames of a JSON header plus raw tensor bytes.

No pickle crosses the channel: the worker runs untrusted code, so everything the judge reads from
it is parsed as data (JSON, then bytes of a whitelisted dtype and a checked size), never executed.
"""

from __future__ import annotations

import contextlib
import json
import math
import select
import socket
import struct
import time
from typing import Any, TypeGuard

import torch

from harness.wire.digest import digest_of

MAGIC = b"KTUI"
_PREFIX = struct.Struct("!4sQQ")
MAX_HEADER_BYTES = 16 << 20
MAX_DIMS, MAX_ELEMENTS = 64, 1 << 62  # a tensor's: no honest one comes near, and torch's sizes overflow past them

DTYPES: dict[str, torch.dtype] = {
    "float64": torch.float64,
    "float32": torch.float32,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "int64": torch.int64,
    "int32": torch.int32,
    "int16": torch.int16,
    "int8": torch.int8,
    "uint8": torch.uint8,
    "bool": torch.bool,
    "complex64": torch.complex64,
}
# Low-precision formats travel as their bytes (GPU MODE's fp8 and nvfp4 problems); where this torch lacks one,
# a problem that makes it cannot run here anyway.
for _name in (
    "float8_e4m3fn",
    "float8_e5m2",
    "float8_e4m3fnuz",
    "float8_e5m2fnuz",
    "float8_e8m0fnu",
    "float4_e2m1fn_x2",
    "complex128",
    "uint16",
    "uint32",
    "uint64",
):
    if hasattr(torch, _name):
        DTYPES[_name] = getattr(torch, _name)
DTYPE_NAMES = {v: k for k, v in DTYPES.items()}


class ChannelError(Exception):
    """The other side sent something that is not a well-formed frame, or went away."""


class ChannelClosed(ChannelError):
    """End of stream: the other process exited or closed its end."""


class ChannelTimeout(ChannelError):
    """No complete frame arrived in time."""


def dtype_name(dtype: torch.dtype) -> str:
    try:
        return DTYPE_NAMES[dtype]
    except KeyError:
        raise ChannelError(f"unsupported dtype {dtype}") from None


def encode_tree(value: Any, tensors: list[torch.Tensor]) -> Any:
    """JSON-able form of inputs/outputs; tensors are replaced by {"$t": index} and collected."""
    if isinstance(value, torch.Tensor):
        tensors.append(value)
        return {"$t": len(tensors) - 1}
    if isinstance(value, tuple):
        return {"$tuple": [encode_tree(v, tensors) for v in value]}
    if isinstance(value, list):
        return [encode_tree(v, tensors) for v in value]
    if isinstance(value, dict):
        return {"$dict": [[str(k), encode_tree(v, tensors)] for k, v in value.items()]}
    if isinstance(value, float) and not math.isfinite(value):
        return {"$float": repr(value)}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, torch.dtype):
        return {"$dtype": dtype_name(value)}
    raise ChannelError(f"cannot send a value of type {type(value).__name__}")


def decode_tree(value: Any, tensors: list[torch.Tensor]) -> Any:
    """encode_tree's form back as values; ChannelError for anything it would not have written."""
    try:
        return _decoded(value, tensors)
    except (TypeError, ValueError, RecursionError) as exc:  # a $tuple of a number, a $dict of triples, deep nesting
        raise ChannelError(f"malformed tree of values: {str(exc)[:200]}") from None


def _decoded(value: Any, tensors: list[torch.Tensor]) -> Any:
    if isinstance(value, list):
        return [_decoded(v, tensors) for v in value]
    if isinstance(value, dict):
        if "$t" in value:
            index = value["$t"]
            if type(index) is not int or not 0 <= index < len(tensors):
                raise ChannelError(f"bad tensor reference {index!r}")
            return tensors[index]
        if "$tuple" in value:
            return tuple(_decoded(v, tensors) for v in value["$tuple"])
        if "$dict" in value:
            return {str(k): _decoded(v, tensors) for k, v in value["$dict"]}
        if "$float" in value:
            return float(value["$float"])
        if "$dtype" in value:
            if value["$dtype"] not in DTYPES:
                raise ChannelError(f"unknown dtype {str(value['$dtype'])[:40]!r}")
            return DTYPES[value["$dtype"]]
        raise ChannelError("unknown value in message")
    return value


def _tensor_bytes(t: torch.Tensor) -> memoryview:
    if t.device.type == "meta":
        return memoryview(b"")  # shape and dtype only: compile-only calls need no data
    flat = t.detach().contiguous().cpu()
    if flat.numel() == 0:
        return memoryview(b"")
    return memoryview(flat.view(-1).view(torch.uint8).numpy())  # type: ignore[arg-type]


def _describe(t: torch.Tensor) -> dict[str, Any]:
    return {
        "dtype": dtype_name(t.dtype),
        "shape": list(t.shape),
        "stride": list(t.stride()),
        "device": t.device.type,
        "nbytes": 0 if t.device.type == "meta" else t.numel() * t.element_size(),
    }


def send(
    sock: socket.socket,
    header: dict[str, Any],
    tensors: list[torch.Tensor] | None = None,
    share: Any = None,
    deadline: float | None = None,
) -> None:
    """One frame. With `share` (a harness.wire.shared_block Placement), the large tensors that fit go through the
    block both processes map instead of the socket. With `deadline` (time.monotonic()), ChannelTimeout once it
    passes with the frame not yet sent: the judge's frames to a worker, which may stop reading at any time."""
    tensors = tensors or []
    specs = [_describe(t) for t in tensors]
    payload = []
    for t, spec in zip(tensors, specs, strict=True):
        placed = share.place(t) if share is not None and t.device.type != "meta" else None
        if placed is None:
            payload.append(_tensor_bytes(t))
        else:
            spec["shared"], spec["digest"] = placed
    if share is not None:
        share.done()
    header = dict(header, tensors=specs)
    head = json.dumps(header).encode()
    total = sum(p.nbytes for p in payload)
    send_all(sock, memoryview(_PREFIX.pack(MAGIC, len(head), total) + head), deadline)
    for part in payload:
        if part.nbytes:
            send_all(sock, part, deadline)


def send_all(sock: socket.socket, data: memoryview, deadline: float | None) -> None:
    """sendall, but never past `deadline`: a full buffer the other side does not read fails in time."""
    if deadline is None:
        sock.sendall(data)
        return
    view = data.cast("B")
    sent = 0
    while sent < len(view):
        wait_writable(sock, deadline)
        with contextlib.suppress(BlockingIOError):  # writable, yet no room for even a part: wait again
            sent += sock.send(view[sent : sent + (1 << 24)], socket.MSG_DONTWAIT)


def wait_writable(sock: socket.socket, deadline: float) -> None:
    """Returns once the socket has room to send; ChannelTimeout where `deadline` passes first."""
    left = deadline - time.monotonic()
    if left <= 0 or not select.select([], [sock], [], left)[1]:
        raise ChannelTimeout("timed out sending")


def _recv_exact(sock: socket.socket, n: int, deadline: float | None) -> bytearray:
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([sock], [], [], left)[0]:
                raise ChannelTimeout("timed out")
        count = sock.recv_into(view[got:], min(n - got, 1 << 24))
        if count == 0:
            raise ChannelClosed("the other side closed the channel")
        got += count
    return buf


def recv(
    sock: socket.socket, timeout: float | None = None, max_payload: int = 1 << 36, block: Any = None
) -> tuple[dict[str, Any], list[torch.Tensor]]:
    """Reads one frame; tensors come back as CPU tensors with the declared dtype, shape and stride, but those
    sent through `block` (a harness.wire.shared_block block this process maps), copied out of it onto its device."""
    deadline = None if timeout is None else time.monotonic() + timeout
    magic, head_len, total = _PREFIX.unpack(_recv_exact(sock, _PREFIX.size, deadline))
    if magic != MAGIC or head_len > MAX_HEADER_BYTES or total > max_payload:
        raise ChannelError("malformed frame (bad magic or size)")
    try:
        header = json.loads(bytes(_recv_exact(sock, head_len, deadline)))
    except (ValueError, RecursionError) as exc:  # bad UTF-8 or JSON, an integer of 5000 digits, deep nesting
        raise ChannelError(f"malformed frame header: {str(exc)[:200]}") from None
    if not isinstance(header, dict):
        raise ChannelError("malformed frame header: not an object")
    specs = header.get("tensors", [])
    if not isinstance(specs, list) or sum(_checked_nbytes(s) for s in specs if not _is_shared(s)) != total:
        raise ChannelError("frame's tensor sizes do not add up to its payload")
    if sum(_checked_nbytes(s) for s in specs if _is_shared(s)) > (block.size if block is not None else 0):
        raise ChannelError("a frame's tensors in shared memory add up to more than the block")  # each is copied out
    tensors = [
        _shared_tensor(block, spec) if _is_shared(spec) else _read_tensor(sock, spec, deadline) for spec in specs
    ]
    return header, tensors


def _checked_nbytes(spec: Any) -> int:
    if not isinstance(spec, dict) or not isinstance(spec.get("dtype"), str) or spec["dtype"] not in DTYPES:
        raise ChannelError(f"bad tensor description {str(spec)[:80]}")
    shape = spec.get("shape")
    if not _dims(shape) or math.prod(shape) > MAX_ELEMENTS:
        raise ChannelError(f"bad tensor shape {str(shape)[:80]}")
    itemsize = torch.empty((), dtype=DTYPES[spec["dtype"]]).element_size()
    nbytes = 0 if spec.get("device") == "meta" else math.prod(shape) * itemsize
    if spec.get("nbytes") != nbytes:
        raise ChannelError("tensor byte count does not match its shape and dtype")
    return nbytes


def _dims(values: Any, count: int | None = None) -> TypeGuard[list[int]]:
    """A list of sizes (or strides): whole numbers (not bools) from 0 to MAX_ELEMENTS, at most MAX_DIMS of them
    (`count` exactly, where given)."""
    if not isinstance(values, list) or len(values) > MAX_DIMS or count not in (None, len(values)):
        return False
    return all(type(d) is int and 0 <= d <= MAX_ELEMENTS for d in values)


def _read_tensor(sock: socket.socket, spec: dict[str, Any], deadline: float | None) -> torch.Tensor:
    dtype = DTYPES[spec["dtype"]]
    shape = spec["shape"]
    if spec.get("device") == "meta":
        stride = spec.get("stride") if _dims(spec.get("stride"), len(shape)) else None
        try:
            return torch.empty_strided(shape, stride or _contiguous_stride(shape), dtype=dtype, device="meta")
        except RuntimeError as exc:  # sizes and strides whose extent overflows
            raise ChannelError(f"bad meta tensor: {str(exc)[:80]}") from None
    raw = _recv_exact(sock, spec["nbytes"], deadline)
    flat = torch.frombuffer(raw, dtype=torch.uint8) if raw else torch.empty(0, dtype=torch.uint8)
    return _shaped(flat, spec)


def _is_shared(spec: Any) -> bool:
    return isinstance(spec, dict) and "shared" in spec


def _shared_tensor(block: Any, spec: dict[str, Any]) -> torch.Tensor:
    """A tensor the other side put in the shared block: checked to lie inside it, then copied out."""
    offset, nbytes = spec["shared"], _checked_nbytes(spec)
    if block is None or spec.get("device") == "meta" or type(offset) is not int:
        raise ChannelError("a tensor said to be in shared memory when none is shared, or with no place in it")
    if offset < 0 or offset + nbytes > block.size:
        raise ChannelError("a tensor said to be in shared memory lies outside it")
    copy = block.view[offset : offset + nbytes].clone()
    if spec.get("digest") != digest_of(copy):
        raise ChannelError(
            "a tensor in shared memory changed after it was sent (a thread still writing what was reported?)"
        )
    return _shaped(copy, spec)


def _shaped(flat: torch.Tensor, spec: dict[str, Any]) -> torch.Tensor:
    """Bytes as the tensor `spec` describes: its dtype, shape and (where it can be kept) stride."""
    shape = spec["shape"]
    tensor = flat.view(DTYPES[spec["dtype"]]).reshape(shape)
    stride = spec.get("stride")
    if isinstance(stride, list) and len(stride) == len(shape) and list(tensor.stride()) != stride:
        tensor = _restride(tensor, stride)
    return tensor


def _contiguous_stride(shape: list[int]) -> list[int]:
    stride, step = [], 1
    for dim in reversed(shape):
        stride.append(step)
        step *= max(dim, 1)
    return list(reversed(stride))


def _restride(tensor: torch.Tensor, stride: list[Any]) -> torch.Tensor:
    """Rebuilds a dense permuted layout (e.g. a transposed input) so kernels see real strides."""
    if not all(isinstance(s, int) and s >= 0 for s in stride):
        return tensor
    try:
        out = torch.empty_strided(tensor.shape, stride, dtype=tensor.dtype, device=tensor.device)
    except RuntimeError:
        return tensor
    dense = out.untyped_storage().nbytes() == tensor.numel() * tensor.element_size()
    return out.copy_(tensor) if dense else tensor
