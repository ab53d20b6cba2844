"""Loading and checking a problem folder's problem.py (the native format of DESIGN.md).

A problem defines `reference(*inputs)`, `make_inputs(case, seed, device)`, `cases`, `bench_cases`,
`tolerance` (atol/rtol, optional min_cosine/min_psnr, optionally per output dtype) and
`cost(case) -> {"flops", "bytes"}`, and may define rungs of their own (harness.problem.rung.rung), a `check(inputs,
output)` of their own (the verdict beside the tolerance, or in its place where there is none) and
`output_buffers` (the input leaves a version writes its outputs into) and `version_files` (files of the
problem folder that versions import, copied beside each version in its worker). Rungs get a case's inputs
through Problem.inputs_for, which holds make_inputs to returning a tuple the worker can be sent. Problems are
written by people and trusted: they run in the judge's process. Anything missing or malformed raises
ProblemError naming the file and the fix.
"""

from __future__ import annotations

import importlib.util
import inspect
import sys
import threading
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from harness.contract import problem_files
from harness.contract.results import RUNG_ORDER
from harness.problem import precision
from harness.problem.rung import Rung, defined_in

REQUIRED = ("reference", "make_inputs", "cases", "bench_cases", "tolerance", "cost")  # tolerance: or a check
TOLERANCE_KEYS = ("atol", "rtol", "min_cosine", "min_psnr")


class ProblemError(Exception):
    """A problem folder that cannot be judged against; the message says what to fix."""


@dataclass
class Tolerance:
    atol: float
    rtol: float
    min_cosine: float | None = None
    min_psnr: float | None = None

    def describe(self) -> str:
        parts = [f"atol {self.atol:g}", f"rtol {self.rtol:g}"]
        if self.min_cosine is not None:
            parts.append(f"cosine ≥ {self.min_cosine:g}")
        if self.min_psnr is not None:
            parts.append(f"PSNR ≥ {self.min_psnr:g} dB")
        return ", ".join(parts)


EXACT = Tolerance(atol=0.0, rtol=0.0)
# One make_inputs at a time in a judge: a problem may seed torch's global generator, and the next bench case's
# inputs are made on a thread while another version's verdict makes its own (harness.judge.serve's interludes).
_MAKING_INPUTS = threading.Lock()
EXACT_DTYPES = frozenset({"bool", "uint8", "int8", "int16", "int32", "int64", "uint16", "uint32", "uint64"})


@dataclass
class Problem:
    name: str
    path: Path
    module: ModuleType
    reference: Callable[..., Any]
    make_inputs: Callable[..., Any]
    cases: list[dict[str, Any]]
    bench_cases: list[dict[str, Any]]
    cost: Callable[[dict[str, Any]], dict[str, Any]]
    tolerances: dict[str, Tolerance] = field(default_factory=dict)
    description: str = ""
    hash: str = ""
    allowed_ops: frozenset[str] = frozenset()  # torch ops a version may use without a uses-library flag
    rungs: list[Rung] = field(default_factory=list)  # the problem's own rungs, run after correctness
    check: Callable[[tuple[Any, ...], Any], Any] | None = None  # check(inputs, output): None/"" passes
    output_buffers: tuple[tuple[int | str, ...], ...] = ()  # paths into make_inputs' tuple: written, not inputs
    version_files: tuple[str, ...] = ()  # files of the problem folder copied beside each version (task.py)
    reference_precision: str = precision.DEFAULT  # harness.problem.precision: TF32 off unless the problem asks
    nondeterministic: bool = False  # outputs may differ between calls within the tolerance (atomics)

    def inputs_for(self, case: dict[str, Any], seed: int, device: Any) -> tuple[Any, ...]:
        """make_inputs' inputs for one case and seed, as every rung sends them to the version. A ProblemError
        naming the fix where make_inputs needs a GPU this machine lacks, or returns what is not a tuple of
        inputs the judge can send: a bare tensor iterated would be rows, a dict its keys, and the version blamed."""
        try:
            with _MAKING_INPUTS:
                made = self.make_inputs(dict(case), seed, device)
        except Exception as exc:
            if _needs_missing_gpu(exc, device):
                raise ProblemError(self._needs_gpu_message(exc, device)) from exc
            raise
        return _as_inputs(made, self.name)

    def _needs_gpu_message(self, exc: Exception, device: Any) -> str:
        lines = [f.lineno for f in traceback.extract_tb(exc.__traceback__) if Path(f.filename) == self.path]
        where = f"{self.name}/problem.py:{lines[-1]}" if lines else f"{self.name}/problem.py"
        said = (str(exc).splitlines() or [""])[0].split(". ")[0]
        return (
            f"{self.name}: make_inputs in problem.py needs a GPU to make its inputs ({where}: "
            f"{type(exc).__name__}: {said}), and this machine has none: judge it on a machine with a GPU, or "
            f"make the inputs on the device make_inputs is given ({getattr(device, 'type', device)} here)"
        )

    def version_file_bytes(self) -> dict[str, bytes]:
        """version_files as they are now; a ProblemError where one is gone."""
        found: dict[str, bytes] = {}
        for name in self.version_files:
            try:
                found[name] = (self.path.parent / name).read_bytes()
            except OSError as exc:
                raise ProblemError(f"{self.name}: version_files in problem.py names {name}: {exc.strerror}") from None
        return found

    @property
    def has_tolerance(self) -> bool:
        return bool(self.tolerances)

    def held_to(self) -> str:
        """What outputs are held to, in words: the tolerance (per output dtype where it differs), the problem's own
        check, and the precision the reference is computed at."""
        tolerances = dict(self.tolerances)
        shared = tolerances.pop("*", None)
        parts = [f"{dtype}: {t.describe()}" for dtype, t in sorted(tolerances.items())]
        if shared is not None and not parts:
            parts.append(shared.describe())
        if self.check is not None:
            parts.append("the problem's check")
        return "; ".join(parts) + " · " + precision.REFERENCE_PRECISIONS[self.reference_precision]

    def allows(self, op: str) -> bool:
        """'aten::mm' is allowed by "aten::mm" or "mm" in the problem's allowed_ops."""
        return op in self.allowed_ops or op.removeprefix("aten::") in self.allowed_ops

    def tolerance_for(self, dtype_name: str) -> Tolerance:
        """The tolerance for an output of this dtype ("float32", "bfloat16", ...). Integer and bool outputs
        (indices, counts, masks) must match exactly unless the problem gives a tolerance for their dtype."""
        if dtype_name in self.tolerances:
            return self.tolerances[dtype_name]
        if dtype_name in EXACT_DTYPES or "*" not in self.tolerances:  # no tolerance: the check is the verdict
            return EXACT
        return self.tolerances["*"]

    def cost_of(self, case: dict[str, Any]) -> dict[str, float]:
        raw = self.cost(dict(case))
        if not isinstance(raw, dict) or not {"flops", "bytes"} <= raw.keys():
            raise ProblemError(f"{self.path}: cost(case) must return a dict with 'flops' and 'bytes'")
        return {k: float(v) for k, v in raw.items() if isinstance(v, (int, float))}


def case_label(case: dict[str, Any]) -> str:
    """Short, stable text for a case: 'rows=37 cols=1000'."""
    return " ".join(f"{k}={v}" for k, v in case.items())


def folder_digest(folder: Path) -> str:
    """The problem's digest (harness.contract.problem_files): the same the history keeps for the accepted files."""
    try:
        return problem_files.problem_digest(folder)
    except (problem_files.ProblemFilesError, OSError) as exc:
        raise ProblemError(str(exc)) from None


def load_problem(folder: Path) -> Problem:
    folder = folder.resolve()
    path = folder / "problem.py"
    if not path.is_file():
        raise ProblemError(f"{folder.name}: no problem.py in {folder}")
    module = _import_problem(path, folder.name)
    missing = [name for name in REQUIRED if not hasattr(module, name)]
    if "tolerance" in missing and hasattr(module, "check"):
        missing.remove("tolerance")  # the problem's check is the verdict
    if missing:
        raise ProblemError(
            f"{folder.name}: problem.py is missing {', '.join(missing)}; a problem defines "
            "reference(*inputs), make_inputs(case, seed, device), cases, bench_cases, tolerance (or "
            "check(inputs, output)), cost(case)"
        )
    if hasattr(module, "check"):
        _check_signature(module.check, "check", ("inputs", "output"), path)
    _check_callable(module, "reference", path)
    _check_signature(module.make_inputs, "make_inputs", ("case", "seed", "device"), path)
    _check_signature(module.cost, "cost", ("case",), path)
    reference_precision = _check_precision(getattr(module, "reference_precision", precision.DEFAULT), path)
    problem = Problem(
        name=folder.name,
        path=path,
        module=module,
        reference=precision.at_precision(module.reference, reference_precision),
        make_inputs=module.make_inputs,
        cases=_check_cases(module.cases, "cases", path, allow_empty=False),
        bench_cases=_check_cases(module.bench_cases, "bench_cases", path, allow_empty=True),
        cost=module.cost,
        tolerances=parse_tolerance(module.tolerance, path) if hasattr(module, "tolerance") else {},
        description=(inspect.getdoc(module) or "").strip(),
        hash=folder_digest(folder),
        allowed_ops=_check_allowed_ops(getattr(module, "allowed_ops", ()), path),
        rungs=_check_rungs(module, path),
        check=getattr(module, "check", None),
        output_buffers=_check_output_buffers(getattr(module, "output_buffers", ()), path),
        version_files=_check_version_files(getattr(module, "version_files", ()), path),
        reference_precision=reference_precision,
        nondeterministic=_check_flag(getattr(module, "nondeterministic", False), "nondeterministic", path),
    )
    return problem


def _check_version_files(value: Any, path: Path) -> tuple[str, ...]:
    """`version_files`: names of regular files in the problem folder (no folders, no links), not versions."""
    problem = path.parent.name
    if isinstance(value, str) or not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise ProblemError(f"{problem}: version_files in problem.py must be a list of file names, e.g. ['task.py']")
    for name in value:
        where = path.parent / name
        if Path(name).name != name or name in (".", "..") or where.is_symlink() or not where.is_file():
            raise ProblemError(f"{problem}: version_files in problem.py names {name!r}, not a file of {path.parent}")
        if name.startswith("v") and name.removesuffix(".py")[1:].isdigit():
            raise ProblemError(f"{problem}: version_files in problem.py names {name!r}, a version")
    return tuple(value)


def _check_output_buffers(value: Any, path: Path) -> tuple[tuple[int | str, ...], ...]:
    """`output_buffers`: where in make_inputs' tuple the version writes its outputs, each an index (2: the
    third input) or a path of indices and keys ((0, "out"): the "out" entry of the first input, a dict)."""
    problem = path.parent.name
    usage = (
        f"{problem}: output_buffers in problem.py must be a list of input indices or paths into the inputs, "
        "e.g. [2] or [(0, 'out')]"
    )
    if isinstance(value, (str, int)) or not isinstance(value, (list, tuple)):
        raise ProblemError(usage)
    paths: list[tuple[int | str, ...]] = []
    for item in value:
        steps = (item,) if isinstance(item, int) else item
        if not isinstance(steps, (list, tuple)) or not steps:
            raise ProblemError(usage)
        if not isinstance(steps[0], int) or not all(isinstance(s, (int, str)) for s in steps):
            raise ProblemError(usage)
        paths.append(tuple(steps))
    return tuple(paths)


def leaf_at(inputs: Any, where: tuple[int | str, ...], problem: str) -> Any:
    """The input leaf at a path of output_buffers; a ProblemError when make_inputs' inputs have none there."""
    value = inputs
    for step in where:
        try:
            value = value[step]
        except (KeyError, IndexError, TypeError):
            raise ProblemError(
                f"{problem}: output_buffers in problem.py names {list(where)}, which make_inputs' inputs do not have"
            ) from None
    return value


def _needs_missing_gpu(exc: Exception, device: Any) -> bool:
    """make_inputs asked for CUDA (a generator, a tensor on "cuda") where there is none."""
    import torch

    if torch.cuda.is_available() or getattr(device, "type", device) == "cuda":
        return False
    text = f"{type(exc).__name__}: {exc}".lower()
    return "cuda" in text or "nvidia" in text


def _as_inputs(made: Any, problem: str) -> tuple[Any, ...]:
    """make_inputs' return as the tuple of inputs; a ProblemError naming the fix where it is something else."""
    if not isinstance(made, (tuple, list)):
        import torch

        what = "None" if made is None else f"a {type(made).__name__}"
        fix = "`return (x, y)`, one item per argument of reference and custom_kernel"
        if isinstance(made, torch.Tensor):
            fix = "`return (x,)`"
        elif isinstance(made, dict):
            fix = "`return (d,)`, and custom_kernel(d) gets the dict"
        raise ProblemError(f"{problem}: make_inputs in problem.py returned {what}; return a tuple of inputs: {fix}")
    for i, item in enumerate(made):
        _check_sendable(item, f"input {i}", problem)
    return tuple(made)


def _check_sendable(value: Any, where: str, problem: str) -> None:
    """What the judge can send to a version's worker and get back the same: tensors of the channel's dtypes,
    numbers, strings, dtypes and None, in tuples, lists and dicts with string keys."""
    import torch

    from harness.wire.frames import DTYPE_NAMES

    said = f"{problem}: make_inputs in problem.py returned"
    if isinstance(value, (tuple, list)):
        for j, item in enumerate(value):
            _check_sendable(item, f"{where}[{j}]", problem)
    elif isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise ProblemError(
                    f"{said} a dict with the key {key!r} (of type {type(key).__name__}) as {where}; keys must be "
                    "strings, as the version's worker gets them"
                )
            _check_sendable(item, f"{where}[{key!r}]", problem)
    elif isinstance(value, torch.Tensor):
        if value.dtype not in DTYPE_NAMES:
            raise ProblemError(
                f"{said} a tensor of dtype {value.dtype} as {where}; the judge sends tensors of "
                f"{', '.join(str(d).removeprefix('torch.') for d in DTYPE_NAMES)}"
            )
    elif not (value is None or isinstance(value, (bool, int, float, str, torch.dtype))):
        raise ProblemError(
            f"{said} `{type(value).__name__}` as {where}, which cannot be sent to a version's worker: inputs are "
            "tensors, numbers, strings, dtypes and None, in tuples, lists and dicts (a module's weights go as "
            "tensors, or its state_dict())"
        )


def check_answer(answer: Any, problem: str) -> str | None:
    """A problem's check(inputs, output) answered: None, "" or True pass; a string says why the output fails;
    a pair (ok, message), as GPU MODE's checks return, passes when ok is true."""
    if answer is None or answer is True:
        return None
    if answer is False:
        return "the problem's check failed"
    if isinstance(answer, str):
        return answer or None
    if isinstance(answer, tuple) and len(answer) == 2 and isinstance(answer[1], str):
        ok, message = answer  # ok: a bool, or what stands for one (numpy's, a one-element tensor)
        return None if bool(ok) else (message or "the problem's check failed")
    raise ProblemError(
        f"{problem}: check in problem.py returned a {type(answer).__name__}; it must return None or '' "
        "(passed), a string (why the output fails) or a pair (ok, message)"
    )


def _check_allowed_ops(value: Any, path: Path) -> frozenset[str]:
    if isinstance(value, str) or not isinstance(value, (list, tuple, set, frozenset)):
        raise ProblemError(f"{path.parent.name}: allowed_ops in problem.py must be a list of torch op names")
    return frozenset(str(op) for op in value)


def _check_rungs(module: ModuleType, path: Path) -> list[Rung]:
    """The rungs problem.py defines: new names, checks taking (inputs, output), needing only rungs before them."""
    problem, known = path.parent.name, {"correctness"}
    rungs = defined_in(module)
    for defined in rungs:
        if defined.name in RUNG_ORDER or defined.name in known:
            taken = "a built-in rung's" if defined.name in RUNG_ORDER else "another of its rungs'"
            raise ProblemError(f"{problem}: rung {defined.name!r} in problem.py has {taken} name")
        _check_signature(defined.run, f"rung {defined.name!r}", ("inputs", "output"), path)
        unknown = [n for n in (*defined.needs, *defined.after) if n not in known]
        if unknown:
            raise ProblemError(
                f"{problem}: rung {defined.name!r} in problem.py needs {', '.join(unknown)}; it may need only "
                "correctness and the rungs defined above it"
            )
        known.add(defined.name)
    return rungs


def _import_problem(path: Path, name: str) -> ModuleType:
    module_name = f"_kerneltui_problem_{name}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise ProblemError(f"{name}: cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except SyntaxError as exc:
        raise ProblemError(f"{name}: {path}:{exc.lineno}:{exc.offset or 0}: SyntaxError: {exc.msg}") from None
    except Exception as exc:
        where = _innermost_frame_in(exc, path)
        raise ProblemError(f"{name}: importing {where}: {type(exc).__name__}: {exc}") from None
    return module


def _innermost_frame_in(exc: BaseException, path: Path) -> str:
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if Path(f.filename) == path]
    return f"{path}:{frames[-1].lineno}" if frames else str(path)


def _check_callable(module: ModuleType, name: str, path: Path) -> None:
    if not callable(getattr(module, name)):
        raise ProblemError(f"{path.parent.name}: {name} in problem.py must be a function")


def _check_signature(fn: Any, name: str, params: tuple[str, ...], path: Path) -> None:
    problem = path.parent.name
    if not callable(fn):
        raise ProblemError(f"{problem}: {name} in problem.py must be a function {name}({', '.join(params)})")
    try:
        sig = inspect.signature(fn)
        sig.bind(*params)
    except (TypeError, ValueError):
        taken = ", ".join(inspect.signature(fn).parameters) if _has_signature(fn) else "?"
        raise ProblemError(f"{problem}: {name} must take ({', '.join(params)}); problem.py's takes ({taken})") from None


def _has_signature(fn: Any) -> bool:
    try:
        inspect.signature(fn)
    except (TypeError, ValueError):
        return False
    return True


def _check_cases(value: Any, name: str, path: Path, allow_empty: bool) -> list[dict[str, Any]]:
    problem = path.parent.name
    if not isinstance(value, (list, tuple)) or not all(isinstance(c, dict) for c in value):
        raise ProblemError(f"{problem}: {name} in problem.py must be a list of dicts, e.g. [{{'n': 1024}}]")
    if not value and not allow_empty:
        raise ProblemError(f"{problem}: {name} in problem.py is empty; correctness needs at least one case")
    return [dict(c) for c in value]


def _check_flag(value: Any, name: str, path: Path) -> bool:
    if not isinstance(value, bool):
        raise ProblemError(f"{path.parent.name}: {name} in problem.py must be True or False, not {value!r}")
    return value


def _check_precision(value: Any, path: Path) -> str:
    if value not in precision.REFERENCE_PRECISIONS:
        raise ProblemError(
            f"{path.parent.name}: reference_precision in problem.py is {value!r}; it is one of "
            f'{", ".join(repr(k) for k in precision.REFERENCE_PRECISIONS)} ("highest": TF32 off, the default)'
        )
    return str(value)


def parse_tolerance(value: Any, path: Path) -> dict[str, Tolerance]:
    """A flat {atol, rtol, ...} applies to every dtype ("*"); {dtype: {...}} sets them per output dtype."""
    problem = path.parent.name
    if not isinstance(value, dict):
        raise ProblemError(f"{problem}: tolerance in problem.py must be a dict with atol and rtol")
    if "atol" in value or "rtol" in value:
        return {"*": _one_tolerance(value, problem, "tolerance")}
    per_dtype = {str(k): _one_tolerance(v, problem, f"tolerance[{k!r}]") for k, v in value.items()}
    if not per_dtype:
        raise ProblemError(f"{problem}: tolerance in problem.py is empty; give atol and rtol")
    per_dtype.setdefault("*", min(per_dtype.values(), key=lambda t: t.atol + t.rtol))
    return per_dtype


def _one_tolerance(value: Any, problem: str, where: str) -> Tolerance:
    if not isinstance(value, dict):
        raise ProblemError(f"{problem}: {where} must be a dict with atol and rtol")
    unknown = set(value) - set(TOLERANCE_KEYS)
    if unknown:
        raise ProblemError(f"{problem}: {where} has unknown keys {sorted(unknown)}; known: {TOLERANCE_KEYS}")
    missing = [k for k in ("atol", "rtol") if k not in value]
    if missing:
        raise ProblemError(f"{problem}: {where} is missing {' and '.join(missing)}")
    try:
        floors = {k: None if value.get(k) is None else float(value[k]) for k in ("min_cosine", "min_psnr")}
        return Tolerance(atol=float(value["atol"]), rtol=float(value["rtol"]), **floors)
    except (TypeError, ValueError):
        raise ProblemError(f"{problem}: {where} values must be numbers") from None
