"""Whether a kernel computed what it wrote, or copied what host code computed (on the CPU, through the interpreter).

A kernel that only copies a buffer numpy filled into the output has written the output, but did none of the
work. Here, for each interpreted launch, the addresses it loaded from and stored to are noted (the
interpreter's masked loads and stores, through which all go), and each buffer it was handed is sorted: filled by
host code during the call (memory no op made: numpy's; a tensor made from host data, torch.tensor, as_tensor,
from_numpy, a Python list; bytes changed since the last recorded writer left them, or since the call began for
the inputs and the version's own tensors; a copy a kernel made of such a buffer), or not. A buffer the launch
wrote counts as copied from the host when the launch read at least as many bytes of host-filled buffers as it
wrote there (or, for a written buffer too small for that to say much, when every nonzero value it holds is found
in one of them): small tables built on the host (offsets, a few weights) stay the kernel's inputs.
"""

from __future__ import annotations

import builtins
import contextlib
import ctypes
import gc
import types
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from harness.contract.results import HOST_AFTER_KERNEL, HOST_CODE, HOST_COPIED, INPUT

MIN_CARRIED = 16  # elements written: below this, bytes read say little (a 2-entry table for a 1-element output)
MAX_LOAD_ARRAYS = 1024  # loads noted one by one before they are merged into distinct addresses
MAX_HELD_VISITS = 20000  # objects looked through for the tensors a version holds before a call
NUMPY_DTYPES = {torch.float16: np.float16, torch.float32: np.float32, torch.float64: np.float64}
Key = tuple[str, int]


def is_host_label(writers: set[str]) -> bool:
    return any(w in (HOST_CODE, HOST_AFTER_KERNEL) or w.startswith(HOST_COPIED) for w in writers)


class Accesses:
    """The addresses one interpreted launch loaded from and stored to, with their element sizes."""

    # InterpreterBuilder's methods: (kind, position of the pointers, of the mask or None) among their arguments
    METHODS = {
        "create_masked_store": ("store", 0, 2),
        "create_atomic_rmw": ("both", 1, 3),  # an atomic reads what it returns, and writes
        "create_atomic_cas": ("both", 0, None),
        "create_masked_load": ("load", 0, 1),
    }

    def __init__(self) -> None:
        self.addresses: list[np.ndarray] = []  # stored to, this launch
        self.loads: list[tuple[np.ndarray, int]] = []  # loaded from, with each element's size
        self.on = False

    def clear(self) -> None:
        self.addresses, self.loads = [], []

    def install(self, installed: dict[str, tuple[type, str, Any]]) -> None:
        with contextlib.suppress(ImportError):
            from triton.runtime.interpreter import InterpreterBuilder

            for name, (kind, at, mask_at) in self.METHODS.items():
                if hasattr(InterpreterBuilder, name):
                    wrapper = self._noting(getattr(InterpreterBuilder, name), kind, at, mask_at)
                    setattr(InterpreterBuilder, name, wrapper)
                    label = f"{InterpreterBuilder.__module__}.InterpreterBuilder.{name}"
                    installed[label] = (InterpreterBuilder, name, wrapper)

    def _noting(self, original: Any, kind: str, at: int, mask_at: int | None) -> Any:
        accesses = self

        def wrapper(builder: Any, *args: Any, **kwargs: Any) -> Any:
            if accesses.on and len(args) > at:
                with contextlib.suppress(Exception):  # a malformed call fails in the interpreter, as it would
                    pointers = np.asarray(args[at].data, dtype=np.uint64).reshape(-1)
                    if mask_at is not None and len(args) > mask_at:
                        pointers = pointers[np.asarray(args[mask_at].data, dtype=bool).reshape(-1)]
                    if kind != "load":
                        accesses.addresses.append(pointers)
                    if kind != "store":
                        bits = getattr(args[at].get_element_ty(), "primitive_bitwidth", 8)
                        accesses.note_load(pointers, max(1, int(bits) // 8))
            return original(builder, *args, **kwargs)

        return wrapper

    def note_load(self, pointers: np.ndarray, width: int) -> None:
        self.loads.append((pointers, width))
        if len(self.loads) > MAX_LOAD_ARRAYS:  # a long kernel (a loop over tiles): its addresses, once each
            widths = {w for _, w in self.loads}
            self.loads = [(np.unique(np.concatenate([a for a, w in self.loads if w == x])), x) for x in widths]

    def wrote(self, tensor: torch.Tensor) -> bool:
        """Whether this launch stored to an address of the tensor's storage."""
        low, high = span(tensor)
        return any(bool(((a >= low) & (a < high)).any()) for a in self.addresses)

    def stored_bytes(self, tensor: torch.Tensor) -> int:
        low, high = span(tensor)
        inside = [a[(a >= low) & (a < high)] for a in self.addresses]
        count = len(np.unique(np.concatenate(inside))) if inside else 0
        return count * tensor.element_size() if count else tensor.untyped_storage().nbytes()

    def loaded_bytes(self, low: int, high: int, size: int) -> int:
        """Distinct bytes loaded in [low, high), counted by elements of `size` bytes."""
        inside = [a[(a >= low) & (a < high)] for a, _ in self.loads]
        return len(np.unique(np.concatenate(inside))) * size if inside else 0

    def loaded_outside(self, spans: list[tuple[int, int]]) -> int:
        """Distinct bytes loaded from no buffer the launch was handed (pointer arithmetic into other memory)."""
        total = 0
        for addresses, width in self.loads:
            outside = np.ones(addresses.shape, dtype=bool)
            for low, high in spans:
                outside &= (addresses < low) | (addresses >= high)
            total += len(np.unique(addresses[outside])) * width
        return total


def span(tensor: torch.Tensor) -> tuple[int, int]:
    storage = tensor.untyped_storage()
    return storage.data_ptr(), storage.data_ptr() + storage.nbytes()


@dataclass
class Region:
    """A buffer host code filled during the call, as a launch was handed it."""

    tensor: torch.Tensor
    low: int
    high: int


class Provenance:
    """What host code filled during one call, and whether a launch only copied it."""

    def __init__(self) -> None:
        self.held: dict[Key, bytes | None] = {}  # the version's tensors before the call (CPU: their digest)
        self.as_left: dict[Key, bytes] = {}  # a CPU buffer's digest as its last recorded writer left it

    def start(self, roots: tuple[Any, ...], fingerprint: Any, key: Any) -> None:
        """`fingerprint`: a tensor's digest, or None where it takes none (a device buffer too large to copy)."""
        self.held, self.as_left = {}, {}
        for tensor in held_tensors(roots):
            found = key(tensor)
            if found:
                self.held[found] = fingerprint(tensor)

    def left(self, key: Key, digest: bytes) -> None:
        self.as_left[key] = digest

    def host_filled(self, key: Key, writers: set[str] | None, digest: bytes | None) -> bool:
        """Whether host code filled this buffer during the call. `digest`: its bytes now (CPU), else None."""
        if writers is None:  # no op made it during the call: the version's own from before, unchanged, or host's
            if key not in self.held:
                return True
            before = self.held[key]  # None: no digest at the start, so no change can be seen (nor said)
            return digest is not None and before is not None and before != digest
        if is_host_label(writers):
            return True
        left = self.as_left.get(key)
        return digest is not None and left is not None and left != digest

    def handed(
        self, keyed: list[tuple[Key, torch.Tensor]], writers: dict[Key, set[str]], digests: dict[Key, bytes]
    ) -> tuple[list[Region], list[tuple[int, int]]]:
        """A launch's buffers (by key): those host code filled during the call (CPU ones, whose `digests` are
        their bytes now), and the spans of them all."""
        regions = [
            Region(tensor, *span(tensor))
            for key, tensor in keyed
            if self.host_filled(key, writers.get(key), digests.get(key)) and (key in digests or key[0] != "cpu")
        ]
        return regions, [span(tensor) for _, tensor in keyed]

    def outweighed(self, tensor: torch.Tensor, writers: set[str], regions: list[Region]) -> bool:
        """On a device, where a launch's loads are not seen: whether the host-filled buffers it was handed hold
        as many bytes as this buffer it may have written (not an input, not one of them, not a small one)."""
        low, high = span(tensor)
        sources = [r for r in regions if not (r.low == low and r.high == high)]
        if not sources or INPUT in writers or tensor.numel() < MIN_CARRIED:
            return False
        return sum(r.high - r.low for r in sources) >= high - low

    def copied(self, written: torch.Tensor, regions: list[Region], accesses: Accesses, spans: list[Any]) -> bool:
        """Whether a launch's store into `written` carries what host code computed (see the module's note)."""
        low, high = span(written)
        stored = accesses.stored_bytes(written)
        sources = [r for r in regions if not (r.low == low and r.high == high)]
        outside = accesses.loaded_outside(spans)  # memory no buffer handed to it covers: no input of the problem's
        if outside >= stored:
            return True
        read = outside + sum(accesses.loaded_bytes(r.low, r.high, r.tensor.element_size()) for r in sources)
        if stored >= MIN_CARRIED * written.element_size():
            return read >= stored
        return any(_values_within(written, r.tensor) for r in sources)


def _values_within(written: torch.Tensor, source: torch.Tensor) -> bool:
    """Every nonzero value of a small written buffer is among a host-filled buffer's (floating point alike)."""
    dtype = NUMPY_DTYPES.get(written.dtype)
    if dtype is None or written.dtype != source.dtype:
        return False
    values, pool = _as_array(written, dtype), _as_array(source, dtype)
    nonzero = values[values != 0]
    return bool(nonzero.size) and bool(np.isin(nonzero, pool).all())


def _as_array(tensor: torch.Tensor, dtype: Any) -> np.ndarray:
    """The storage's bytes as numpy sees them, read in place (no torch op: none is recorded)."""
    low, high = span(tensor)
    if high <= low:
        return np.zeros(0, dtype=dtype)
    raw = np.frombuffer(memoryview((ctypes.c_char * (high - low)).from_address(low)), dtype=np.uint8)
    return raw[: (high - low) // np.dtype(dtype).itemsize * np.dtype(dtype).itemsize].view(dtype)


def held_tensors(roots: tuple[Any, ...]) -> list[torch.Tensor]:
    """The tensors reachable from the version's module and entry point (its constants, a model's weights),
    through containers, instances, functions' closures and defaults; not into other modules or their classes.
    Walked with gc.get_referents, which runs none of the version's code; bounded."""
    root_modules = {id(r) for r in roots if isinstance(r, types.ModuleType)}
    names = {getattr(r, "__name__", None) for r in roots if isinstance(r, types.ModuleType)}
    namespaces = {id(vars(r)) for r in roots if isinstance(r, types.ModuleType)}
    seen: set[int] = set()
    queue, found = list(roots), []
    while queue and len(seen) < MAX_HELD_VISITS:
        item = queue.pop()
        if id(item) in seen:
            continue
        seen.add(id(item))
        if isinstance(item, torch.Tensor):
            found.append(item)
            continue
        if (isinstance(item, types.ModuleType) and id(item) not in root_modules) or item is vars(builtins):
            continue
        if isinstance(item, types.FunctionType) and id(item.__globals__) not in namespaces:
            continue  # another library's function: not into its module
        if isinstance(item, (type, types.CodeType, types.BuiltinFunctionType)) and (
            not isinstance(item, type) or item.__module__ not in names
        ):
            continue
        queue.extend(gc.get_referents(item))
    return found
