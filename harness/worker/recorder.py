"""What a version really runs while it is judged: its kernel launches, the torch ops, where outputs came from.

Installed in the worker before a version is imported. During a recorded call it notes each Triton launch
(kernel, a hash of its source, its constexprs and launch options), each CuTeDSL and TileLang launch, and runs a
TorchDispatchMode that counts torch's ops and follows, storage by storage, who last wrote each buffer: a
kernel of the version, a torch op, a copy of something else, the caller's input, or nobody (host code
such as numpy leaves no trace here, which is itself telling). The judge turns this into flags: torch
computing what the kernels should (`uses-library`), outputs no kernel wrote (`no-kernel`), kernels run
under test that are not the ones compiled and shown (`kernel-mismatch`). It lives in the version's
process, so a version can tamper with it; `intact()` notices the plain ways of doing so.
"""

from __future__ import annotations

import collections
import contextlib
import hashlib
import inspect
import sys
import threading
import types
from collections.abc import Iterator
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from harness.contract.results import ALLOCATED, HOST_AFTER_KERNEL, HOST_CODE, HOST_COPIED, INPUT
from harness.worker.fingerprints import HELD_BUDGET_BYTES, Fingerprints, host_fingerprint
from harness.worker.profiled import CREATION, MOVEMENT, Profiled, call_block, call_report, session_for
from harness.worker.provenance import Accesses, Provenance, Region

REPORTING = ("report", "origins", "made_by", "intact")  # what turns the record into the report


def _key(tensor: torch.Tensor) -> tuple[str, int] | None:
    try:
        ptr = tensor.untyped_storage().data_ptr()
    except (RuntimeError, NotImplementedError):
        return None
    return (tensor.device.type, ptr) if ptr else None


def _tensors(value: Any) -> Iterator[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _tensors(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _tensors(item)
    elif _is_tensor_descriptor(value):  # a TMA descriptor: the kernel reads and writes the tensor it describes
        yield value.base


def _is_tensor_descriptor(value: Any) -> bool:
    return type(value).__name__ == "TensorDescriptor" and isinstance(getattr(value, "base", None), torch.Tensor)


class _Ops(TorchDispatchMode):
    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        """torch.compile never traces the recorder. Skipping Dynamo (the default) wraps __torch_dispatch__ in a
        function whose first call imports torch._dynamo: over a second of the first recorded call, every worker."""
        return False

    def __init__(self, recorder: Recorder) -> None:
        super().__init__()
        self.recorder = recorder

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        if "torch._dynamo" in sys.modules:  # torch.compile in use: its frame hook would compile the recorder
            return _dispatch_untraced(self, func, args, kwargs or {})
        return self.dispatch(func, args, kwargs or {})

    def dispatch(self, func: Any, args: Any, kwargs: dict[str, Any]) -> Any:
        out = func(*args, **kwargs)
        # mode None: a thread started in a recorded call, still running after it (its ops are no call's)
        if self.recorder.mode is not None and not self.recorder.paused:
            self.recorder.saw_op(func, args, kwargs, out)
        return out


# Where a version compiled with torch.compile runs ops eagerly (a graph break, its guards), Dynamo's frame hook
# is still on and would compile the recorder's own frames, failing inside them on GPU MODE's sort. Disabled for
# them recursively, only once Dynamo is loaded: its first use imports it (over a second a worker).
_dispatch_untraced = torch._disable_dynamo(_Ops.dispatch, recursive=True)


class Recorder:
    def __init__(self) -> None:
        self.local = threading.local()  # per thread: a launch in one thread sets aside none of another's ops
        self.mode: _Ops | None = None
        self.installed: dict[str, Any] = {}
        self.stores = Accesses()
        self.provenance = Provenance()
        self.reset()

    @property
    def paused(self) -> int:
        """How deep in launches this thread is: their own data movement is not the version's work."""
        return int(getattr(self.local, "paused", 0))

    @paused.setter
    def paused(self, depth: int) -> None:
        self.local.paused = depth

    def reset(self) -> None:
        self.launches: list[dict[str, Any]] = []
        self.ops: collections.Counter[str] = collections.Counter()
        self.writers: dict[tuple[str, int], set[str]] = {}
        # A CPU buffer's bytes as its last kernel left them (no op wrote it since): bytes changed when the
        # report is made were written by host code (numpy, a pointer) no hook sees, over the kernel's output.
        self.after_kernel: dict[tuple[str, int], bytes] = {}
        self.before_launch: dict[tuple[str, int], bytes] = {}  # the buffers a launch got, as they were (digests)
        self.host_regions: list[Region] = []  # those of them host code filled during the call
        self.handed: list[tuple[int, int]] = []  # the spans of every buffer a launch got
        self.dlpacked: list[torch.Tensor] = []
        self.popped = False
        self.profiled: Profiled | None = None
        self.profile_report: dict[str, Any] | None = None
        self.fingerprints = Fingerprints(self._quiet)

    # --- hooks -------------------------------------------------------------------------------

    def install(self) -> None:
        """Wraps Triton's launch paths (JIT, interpreter, autotuner's inner calls go through them) and CuTeDSL's
        compiled-function calls. Before any version is imported."""
        for name in REPORTING:
            self.installed[f"{Recorder.__module__}.Recorder.{name}"] = (Recorder, name, getattr(Recorder, name))
        _record_new_threads(self)
        _IMPORTED.update({name: module for name, module in list(sys.modules.items()) if name.startswith("triton")})
        self.stores.install(self.installed)
        try:
            from triton.runtime.jit import JITFunction

            self._wrap(JITFunction, "run", self._triton_launch)
        except ImportError:
            pass
        with contextlib.suppress(ImportError):
            from triton.runtime.interpreter import InterpretedFunction

            self._wrap(InterpretedFunction, "run", self._triton_launch)

    def install_cutedsl(self) -> None:
        """Imports CuTeDSL and wraps its compiled functions' calls and from_dlpack: before a CuTeDSL version is
        imported, so the names it imports are the wrapped ones."""
        with contextlib.suppress(ImportError):
            from cutlass.base_dsl import jit_executor
            from cutlass.cute import runtime

            for name in ("JitCompiledFunction", "JitExecutor"):
                cls = getattr(jit_executor, name, None)
                if cls is not None and "__call__" in vars(cls):
                    self._wrap(cls, "__call__", self._cute_launch)
            original = runtime.from_dlpack
            recorder = self

            def from_dlpack(tensor: Any, *args: Any, **kwargs: Any) -> Any:
                if isinstance(tensor, torch.Tensor) and recorder.mode is not None:
                    recorder.dlpacked.append(tensor)
                return original(tensor, *args, **kwargs)

            runtime.from_dlpack = from_dlpack

    def install_tilelang(self) -> None:
        """Wraps TileLang's compiled kernels' calls (JITKernel.__call__): before a TileLang version is imported."""
        with contextlib.suppress(ImportError):
            from tilelang.jit.kernel import JITKernel

            self._wrap(JITKernel, "__call__", self._tilelang_launch)

    def _wrap(self, cls: type, name: str, hook: Any) -> None:
        original = getattr(cls, name)
        recorder = self

        def wrapper(fn_self: Any, *args: Any, **kwargs: Any) -> Any:
            if recorder.mode is None:  # not a recorded call (a timed one): nothing added to the launch
                return original(fn_self, *args, **kwargs)
            recorder.paused += 1  # the launch's own data movement (the interpreter copies) is not the version's
            result = None
            recorder.note_handed(list(_tensors([*args, *kwargs.values()])))
            recorder.stores.clear()
            recorder.stores.on = True
            try:
                with _version_code_seen(recorder, fn_self, kwargs) as seen_kwargs:
                    if recorder.profiled is None:
                        result = original(fn_self, *args, **seen_kwargs)
                    else:
                        with recorder.profiled.launching():
                            result = original(fn_self, *args, **seen_kwargs)
                return result
            finally:
                recorder.paused -= 1
                recorder.stores.on = False
                hook(fn_self, args, kwargs, result)

        setattr(cls, name, wrapper)
        self.installed[f"{cls.__module__}.{cls.__qualname__}.{name}"] = (cls, name, wrapper)

    def intact(self) -> list[str]:
        """Hooks the version replaced or removed, by name (empty: as installed)."""
        broken = [label for label, (cls, name, wrapper) in self.installed.items() if getattr(cls, name) is not wrapper]
        if self.popped:
            broken.append("the torch op recorder (a TorchDispatchMode)")
        return broken

    # --- recording -----------------------------------------------------------------------------

    @contextlib.contextmanager
    def recording(
        self, inputs: tuple[Any, ...], profile: bool | Profiled = False, held: tuple[Any, ...] = ()
    ) -> Iterator[None]:
        """Records one call. `profile`: under torch's profiler too, for calls on real data (True: a session of its
        own; a Profiled: one it shares, harness.worker.profiled.SharedProfile). `held`: the version's module and
        entry point, whose tensors from before the call are its own (harness.worker.provenance)."""
        self.reset()
        self.provenance.start(held, Fingerprints(self._quiet, HELD_BUDGET_BYTES).of, _key)
        self.profiled, self.profile_report = session_for(profile)
        for tensor in _tensors(inputs):
            key = _key(tensor)
            if key:
                self.writers[key] = {INPUT}
                self._left_by_writer(key, tensor)
        mode = self.mode = _Ops(self)
        mode.__enter__()
        try:
            with call_block(self.profiled):
                yield
        finally:
            from torch.utils._python_dispatch import _get_current_dispatch_mode_stack

            if mode in _get_current_dispatch_mode_stack():
                mode.__exit__(None, None, None)
            else:
                self.popped = True  # the version took it off the stack itself
            self.mode = None
            if self.profiled is not None:
                self.profile_report = call_report(self.profiled, shared=isinstance(profile, Profiled))
                self.profiled = None

    def saw_op(self, func: Any, args: Any, kwargs: dict[str, Any], out: Any) -> None:
        if getattr(func, "is_view", False):
            return  # a view shares its base's storage: nothing new was written
        name = getattr(getattr(func, "overloadpacket", None), "__name__", str(func))
        if name in MOVEMENT:
            copied = args[1] if name.startswith(("copy_", "_copy_from")) and len(args) > 1 else args
            made_by = self.made_by(next(_tensors(copied), None))
        elif name == "lift_fresh":  # torch.tensor, as_tensor, from_numpy: the data came from the host
            made_by = {HOST_CODE}
        elif name in CREATION:
            made_by = {ALLOCATED}
        else:
            self.ops[f"aten::{name}"] += 1
            made_by = {f"aten::{name}"}
        written = _written_args(getattr(func, "_schema", None), args, kwargs)
        for tensor in written:  # in place, perhaps in part: earlier writers may still own some of it
            key = _key(tensor)
            if key:
                self.writers[key] = self.writers.get(key, set()) - {ALLOCATED} | made_by
                self.after_kernel.pop(key, None)
                self._left_by_writer(key, tensor)
        for tensor in _tensors(out):
            key = _key(tensor)
            if key and not any(tensor is w for w in written):
                self.writers[key] = set(made_by)
                self.after_kernel.pop(key, None)
                self._left_by_writer(key, tensor)

    def _left_by_writer(self, key: tuple[str, int], tensor: torch.Tensor) -> None:
        """A buffer's bytes as a recorded writer left them: changed later, host code wrote them."""
        digest = self._fingerprint(tensor)
        if digest is not None:
            self.provenance.left(key, digest)

    def _fingerprint(self, tensor: torch.Tensor) -> bytes | None:
        """None while torch.compile traces the call (its trace reaching a device copy failed GPU MODE's sort)."""
        return None if torch.compiler.is_compiling() else self.fingerprints.of(tensor)

    @contextlib.contextmanager
    def _quiet(self) -> Iterator[None]:
        """The recorder's own torch ops (a device buffer's copy for its digest): not the version's."""
        self.paused += 1
        try:
            with contextlib.nullcontext() if self.profiled is None else self.profiled.launching():
                yield
        finally:
            self.paused -= 1

    def note_handed(self, tensors: list[torch.Tensor]) -> None:
        """Before a launch: the buffers it gets as they are, and which of them host code filled."""
        self.before_launch = {}
        for tensor in tensors:
            key = _key(tensor)
            if key and key not in self.before_launch and (digest := self._fingerprint(tensor)) is not None:
                self.before_launch[key] = digest
        keyed = [(key, tensor) for tensor in tensors if (key := _key(tensor))]
        self.host_regions, self.handed = self.provenance.handed(keyed, self.writers, self.before_launch)

    def _triton_launch(self, fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any], result: Any = None) -> None:
        name = str(getattr(fn, "__name__", "?"))
        launch = {"dsl": "triton", "name": name, **_triton_signature(fn, args, kwargs)}
        compiled = getattr(result, "hash", None)  # the compiled kernel launched: its metadata's hash names it
        if isinstance(compiled, str) and len(compiled) <= 128:
            launch["hash"] = compiled
        self.launches.append(launch)
        self._mark_written(f"kernel:{name}", _tensors(list(args) + list(kwargs.values())))

    def _cute_launch(self, fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any], result: Any = None) -> None:
        name = str(getattr(fn, "function_name", None) or getattr(fn, "__name__", None) or type(fn).__name__)
        self.launches.append({"dsl": "cutedsl", "name": name, "kernels": _cute_kernel_symbols(fn)})
        # cute tensors hide the torch tensors they view: from_dlpack noted those as they were wrapped
        self._mark_written(f"kernel:{name}", iter(self.dlpacked))

    def _tilelang_launch(self, fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any], result: Any = None) -> None:
        from harness.worker import tilelang_hooks

        name = tilelang_hooks.kernel_name(fn)
        self.launches.append({"dsl": "tilelang", "name": name, "kernels": tilelang_hooks.kernel_symbols(fn)})
        # it writes what it was passed and the outputs it allocated (out_idx)
        self._mark_written(f"kernel:{name}", _tensors([*args, *kwargs.values(), result]))

    def _mark_written(self, label: str, tensors: Iterator[torch.Tensor]) -> None:
        """A kernel got these buffers: it may have written any of them (which, only its code says)."""
        for tensor in tensors:
            key = _key(tensor)
            if not key:
                continue
            if tensor.device.type == "cpu":  # a launch there has finished when it returns
                after = host_fingerprint(tensor)
                if self.before_launch.get(key) == after and not self.stores.wrote(tensor):
                    continue  # not stored to, not a byte changed: the kernel only read it (or never ran)
                self.after_kernel[key] = after
                self.provenance.left(key, after)
                seen = self.stores
                copied = bool(seen.loads) and self.provenance.copied(tensor, self.host_regions, seen, self.handed)
            else:  # a device's launch: which buffers it read and wrote, only its code says
                if self._left_as_host_made_it(key, tensor):
                    continue
                copied = self.provenance.outweighed(tensor, self.writers.get(key, set()), self.host_regions)
            if copied:
                kept = {w for w in self.writers.get(key, set()) if not w.startswith("kernel:")} - {ALLOCATED}
                self.writers[key] = kept | {HOST_COPIED + label.replace("kernel:", "kernel ", 1)}
                continue
            self.writers[key] = self.writers.get(key, set()) - {ALLOCATED} | {label}

    def _left_as_host_made_it(self, key: tuple[str, int], tensor: torch.Tensor) -> bool:
        """A device buffer host code filled before the launch, its bytes the same after it: the launch only read
        it. (One a recorded writer left that is the same after: the kernel may have stored the same bytes, and
        is taken for its writer, as stores are not seen on a device.) Otherwise its digest is kept as left."""
        after = self._fingerprint(tensor)
        if after is None:
            return False
        host_made = any(_key(region.tensor) == key for region in self.host_regions)
        if host_made and self.before_launch.get(key) == after:
            return True
        self.after_kernel[key] = after
        self.provenance.left(key, after)
        return False

    # --- the report ------------------------------------------------------------------------------

    def made_by(self, tensor: torch.Tensor | None) -> set[str]:
        """Who wrote this tensor's storage: kernel:<name>, aten::<op>, input, allocated, or host code (a buffer
        no op or kernel made under the recorder: numpy's, a pointer's)."""
        if tensor is None:
            return {ALLOCATED}
        key = _key(tensor)
        if key is None:
            return {ALLOCATED}
        left = self.after_kernel.get(key)
        if left is not None and self._fingerprint(tensor) not in (left, None):
            return {HOST_AFTER_KERNEL}
        if key not in self.writers and key in self.provenance.held:
            return {ALLOCATED}  # the version's own from before the call (a constant, a weight): no host code's
        return set(self.writers.get(key, {HOST_CODE}))

    def origins(self, outputs: tuple[torch.Tensor, ...]) -> list[list[str]]:
        return [sorted(self.made_by(t)) for t in outputs]

    def report(self, outputs: tuple[torch.Tensor, ...]) -> dict[str, Any]:
        return {
            "launches": _distinct(self.launches),
            "ops": dict(self.ops),
            "origins": self.origins(outputs),
            "tampered": self.intact(),
            **({"profiled": self.profile_report} if self.profile_report is not None else {}),
        }


@contextlib.contextmanager
def _version_code_seen(recorder: Recorder, fn: Any, kwargs: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The version's own code that a launch runs (a grid callable, Triton's pre-run hooks) recorded as the
    version's, not set aside with the launch's own data movement: torch computing the answer there went
    unseen, and a kernel that only read the output was taken for its writer."""
    grid = kwargs.get("grid")
    if callable(grid):
        kwargs = {**kwargs, "grid": _as_version(recorder, grid)}
    hooks = getattr(fn, "pre_run_hooks", None)
    own: list[Any] | None = hooks if isinstance(hooks, list) and hooks else None
    if own is not None:
        fn.pre_run_hooks = [_as_version(recorder, h) for h in own]
    try:
        yield kwargs
    finally:
        if own is not None:
            fn.pre_run_hooks = own


def _as_version(recorder: Recorder, code: Any) -> Any:
    def seen(*args: Any, **kwargs: Any) -> Any:
        recorder.paused -= 1
        try:
            if recorder.profiled is None:
                return code(*args, **kwargs)
            with recorder.profiled.as_version():
                return code(*args, **kwargs)
        finally:
            recorder.paused += 1

    return seen


def _record_new_threads(recorder: Recorder) -> None:
    """Threads started during a recorded call run under an op recorder of their own: a TorchDispatchMode is
    per thread, and torch computing the answer on another thread went unseen."""
    import _thread

    def in_thread(function: Any) -> Any:
        def recorded(*args: Any, **kwargs: Any) -> Any:
            with _Ops(recorder):
                return function(*args, **kwargs)

        return recorded

    def hooked(start: Any) -> Any:
        def start_thread(function: Any, *args: Any, **kwargs: Any) -> Any:
            return start(in_thread(function) if recorder.mode is not None else function, *args, **kwargs)

        return start_thread

    for module in (threading, _thread):  # threading keeps its own reference to _thread's
        for name in ("_start_new_thread", "_start_joinable_thread", "start_new_thread", "start_joinable_thread"):
            original = vars(module).get(name)
            if callable(original):
                wrapper = hooked(original)
                setattr(module, name, wrapper)
                recorder.installed[f"{module.__name__}.{name}"] = (module, name, wrapper)


def _writes_arg(schema: Any, args: Any, tensor: torch.Tensor) -> bool:
    return any(t is tensor for t in _written_args(schema, args, {}))


def _written_args(schema: Any, args: Any, kwargs: dict[str, Any]) -> list[torch.Tensor]:
    """The tensors an op writes in place (self of add_, the out= of an out variant)."""
    if schema is None:
        return []
    written = []
    for index, argument in enumerate(schema.arguments):
        info = argument.alias_info
        if info is None or not info.is_write:
            continue
        value = args[index] if index < len(args) else kwargs.get(argument.name)
        written += list(_tensors(value))
    return written


_SOURCE_HASHES: dict[int, tuple[Any, str]] = {}


def source_hash(fn: Any) -> str:
    """A short hash of a Triton kernel's Python source (the same in the interpreter and the compiler)."""
    target = getattr(fn, "fn", fn)
    known = _SOURCE_HASHES.get(id(target))
    if known is not None and known[0] is target:
        return known[1]
    try:
        text = inspect.getsource(target)
    except (OSError, TypeError):
        text = getattr(fn, "src", "") or repr(target)
    digest = hashlib.sha256(text.encode()).hexdigest()[:12]
    _SOURCE_HASHES[id(target)] = (target, digest)  # holds the function: its id is never reused
    return digest


def launched_source(fn: Any, depth: int = 4) -> str:
    """The kernel's source hash with those of the JIT functions it calls as its globals name them now: a helper
    rebound between the compile and the call (the interpreter looks it up as it runs) changes it. Read without
    running any of the version's code (no getattr on its objects: this runs while the recorder looks away)."""
    own = source_hash(fn)
    target = getattr(fn, "fn", fn)
    code, scope = getattr(target, "__code__", None), getattr(target, "__globals__", None)
    if depth == 0 or not isinstance(code, types.CodeType) or type(scope) is not dict:
        return own
    names = code.co_names
    found = [dict.get(scope, name) for name in names]
    found += [dict.get(vars(mod), name) for mod in found if type(mod) is types.ModuleType for name in names]
    called = sorted({launched_source(f, depth - 1) for f in found if _is_jit(f) and f is not fn})
    return hashlib.sha256(" ".join([own, *called]).encode()).hexdigest()[:12] if called else own


MAX_GLOBALS, MAX_GLOBAL_CHARS = 32, 80


def launched_globals(fn: Any, depth: int = 4) -> dict[str, Any]:
    """The values a launch's kernel takes from outside its arguments, as it is launched: the plain globals and
    closure values it and its JIT helpers name (constexprs, numbers, strings, dtypes, which module a name binds),
    module attributes it names, and its helpers' default arguments. The compiler bakes these into the binary;
    the interpreter reads them live: a version that sets them by a tell of the interpreter runs one kernel and
    shows another. Read without running the version's code, like launched_source."""
    found: dict[str, Any] = {}
    _read_globals(fn, "", depth, found)
    kept = dict(sorted(found.items())[:MAX_GLOBALS])
    if len(found) > MAX_GLOBALS:  # those left out still count: a digest of them all
        kept["(all, digest)"] = hashlib.sha256(repr(sorted(found.items())).encode()).hexdigest()[:16]
    return kept


def _read_globals(fn: Any, prefix: str, depth: int, found: dict[str, Any]) -> None:
    target = getattr(fn, "fn", fn)
    code, scope = getattr(target, "__code__", None), getattr(target, "__globals__", None)
    if not isinstance(code, types.CodeType) or type(scope) is not dict:
        return
    names = code.co_names
    bound = [(name, dict.get(scope, name)) for name in names if name in scope]
    cells = getattr(target, "__closure__", None) or ()
    with contextlib.suppress(ValueError):  # an empty cell
        bound += [(name, cell.cell_contents) for name, cell in zip(code.co_freevars, cells, strict=False)]
    for name, value in bound:
        if type(value) is types.ModuleType:
            found[prefix + name] = _module_text(value)
            for attr in names:
                _note_plain(found, f"{prefix}{name}.{attr}", dict.get(vars(value), attr, _MISSING))
        elif _is_jit(value):
            if value is not fn and depth > 0:
                _helper_defaults(value, f"{prefix}{name}.", found)
                _read_globals(value, f"{prefix}{name}.", depth - 1, found)
        elif not _note_plain(found, prefix + name, value):
            kind = type(value)  # what else the kernel names (its code runs, interpreted): by its type
            found[prefix + name] = (
                f"{type.__getattribute__(kind, '__module__')}.{type.__getattribute__(kind, '__qualname__')}"
            )


def _helper_defaults(helper: Any, prefix: str, found: dict[str, Any]) -> None:
    target = getattr(helper, "fn", helper)
    code, defaults = getattr(target, "__code__", None), getattr(target, "__defaults__", None)
    if isinstance(code, types.CodeType) and type(defaults) is tuple and defaults:
        params = code.co_varnames[: code.co_argcount][-len(defaults) :]
        for param, value in zip(params, defaults, strict=False):
            _note_plain(found, prefix + param, value)


_MISSING = object()
_IMPORTED: dict[str, Any] = {}  # Triton's modules as imported before the version (Recorder.install)


def _module_text(module: types.ModuleType) -> str:
    """'module triton.language', or where the module bound is not the one imported under its name (a stand-in
    the version made, whose functions the interpreted kernel would call): '... (a stand-in ...)'."""
    name = dict.get(vars(module), "__name__")
    stand_in = name in _IMPORTED and _IMPORTED[name] is not module
    return f"module {name}" + (" (a stand-in for the one imported)" if stand_in else "")


def _note_plain(found: dict[str, Any], name: str, value: Any) -> bool:
    """Notes a value the compiler would bake in: a constexpr's, a number, a string, None, a Triton dtype; says
    whether it was one."""
    if type(value).__name__ == "constexpr" and type(value).__module__.startswith("triton."):
        value = vars(value).get("value")
    if value is None or type(value) in (int, float, bool, str):
        found[name] = value[:MAX_GLOBAL_CHARS] if isinstance(value, str) else value
    elif type(value).__module__.startswith("triton.language") and "dtype" in type(value).__name__:
        found[name] = f"dtype {value!s}"[:MAX_GLOBAL_CHARS]  # Triton's own type: its __str__ is Triton's
    else:
        return False
    return True


def _is_jit(value: Any) -> bool:
    """A Triton JIT function exactly (a subclass of the version's could run its code when read)."""
    from triton.runtime.jit import JITFunction

    kinds: list[type] = [JITFunction]
    with contextlib.suppress(ImportError):
        from triton.runtime.interpreter import InterpretedFunction

        kinds.append(InterpretedFunction)
    return type(value) in kinds


def _triton_signature(fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    """The kernel's identity as compiled: source hash, constexpr values, launch options."""
    target = getattr(fn, "fn", fn)
    constexprs: dict[str, Any] = {}
    try:
        signature = inspect.signature(target)
        bound = signature.bind_partial(*args, **{k: v for k, v in kwargs.items() if k in signature.parameters})
        bound.apply_defaults()
        for name, param in signature.parameters.items():
            if "constexpr" in str(param.annotation) and name in bound.arguments:
                value = bound.arguments[name]
                constexprs[name] = value if isinstance(value, (int, float, bool, str)) or value is None else repr(value)
    except (TypeError, ValueError):
        pass
    options = {k: kwargs[k] for k in ("num_warps", "num_stages", "num_ctas") if isinstance(kwargs.get(k), int)}
    read = launched_globals(fn)
    return {"source": launched_source(fn), "constexprs": constexprs, **options, **({"globals": read} if read else {})}


def _distinct(launches: list[dict[str, Any]]) -> list[dict[str, Any]]:
    seen, out = set(), []
    for launch in launches:
        key = repr(sorted(launch.items()))
        if key not in seen:
            seen.add(key)
            out.append(launch)
    return out


def kernel_sources(module: Any) -> dict[str, str]:
    """Every Triton kernel a version module defines, by name, with its source hash."""
    found = {}
    for name, value in vars(module).items():
        kind = type(value).__name__
        if kind in ("JITFunction", "InterpretedFunction", "Autotuner", "Heuristics"):
            inner = value
            while hasattr(inner, "fn") and type(inner).__name__ in ("Autotuner", "Heuristics"):
                inner = inner.fn
            found[name] = source_hash(inner)
    return found


def _cute_kernel_symbols(compiled: Any) -> list[str]:
    """The CUDA names of the kernels a compiled CuTeDSL function launches (`kernel_cutlass_<name>_<types>_0`),
    as its compiler listed them. Only CuTeDSL's own `kernel_` names count: a library's kernel can't be passed
    off as the version's by listing it here."""
    info = getattr(compiled, "kernel_info", None)
    if not isinstance(info, dict):
        return []
    return [key for key in list(info)[:16] if isinstance(key, str) and key.startswith("kernel_") and len(key) < 400]
