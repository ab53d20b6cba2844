"""KernelBench problems judged natively: a file defining `Model`, `get_inputs()` and `get_init_inputs()`.

`kerneltui import kernelbench` writes a problem.py that loads such a file with `Source` and delegates to it.
Inputs: the forward inputs `get_inputs()` returns, then one "model input", a dict
`{"init_inputs": [...], "state_dict": {name: tensor}}`: what `Model(*init_inputs)` is built from and the
parameters and buffers of a `Model` built under the case's seed. The weights are made once per seed, by the
judge, and travel to the version's worker with the other inputs; the version never builds them itself.

A version defines `custom_kernel(*inputs, model)` (the model input last), or KernelBench's `ModelNew`: the
worker then builds `ModelNew(*init_inputs)` once per model input, loads the reference's state dict into it
(every name of the reference's must be there, with its shape) and calls `forward(*inputs)` (harness.worker.model_call).

Module constants (`batch_size = 16`) are the cases' keys: a case sets them before `get_inputs()` and
`get_init_inputs()` run, so one file gives small correctness cases and its own sizes to time.
Tolerance: KernelBench's, atol = rtol = 1e-4 for float32 outputs and 1e-2 for float16 and bfloat16.
"""

from __future__ import annotations

import ast
import contextlib
import hashlib
import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

from harness.contract.model_input import split_model_input
from harness.problem.load import ProblemError
from harness.problem.shapes_only import on_meta

TOLERANCE = {
    "float32": {"atol": 1e-4, "rtol": 1e-4},
    "float16": {"atol": 1e-2, "rtol": 1e-2},
    "bfloat16": {"atol": 1e-2, "rtol": 1e-2},
}
CONSTANT_TYPES = (bool, int, float, str)
WEIGHT_SEED_OFFSET = 1  # weights are seeded apart from the inputs: the two draws are not the same numbers


class KernelBenchError(ProblemError):
    """A KernelBench file that cannot be used as a problem; the message says what to fix."""


def is_constant(value: Any) -> bool:
    if isinstance(value, (tuple, list)):
        return all(is_constant(v) for v in value)
    return isinstance(value, CONSTANT_TYPES)


def constant_names(text: str) -> list[str]:
    """Names a file assigns at its top level (`batch_size = 16`), in order: the ones a case may set."""
    names: list[str] = []
    for node in ast.parse(text).body:
        targets = (
            node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        )
        for target in targets:
            if isinstance(target, ast.Name) and not target.id.startswith("_") and target.id not in names:
                names.append(target.id)
    return names


class Source:
    """One KernelBench file, imported once; cases set its module constants."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        text = self.path.read_text()
        try:
            names = constant_names(text)
        except SyntaxError as exc:
            raise KernelBenchError(f"{self.path.name}:{exc.lineno}: SyntaxError: {exc.msg}") from None
        digest = hashlib.sha256(str(self.path.resolve()).encode()).hexdigest()[:12]
        name = f"_kerneltui_kernelbench_{digest}"
        spec = importlib.util.spec_from_file_location(name, self.path)
        if spec is None or spec.loader is None:
            raise KernelBenchError(f"cannot import {self.path}")
        self.module = importlib.util.module_from_spec(spec)
        sys.modules[name] = self.module
        try:
            spec.loader.exec_module(self.module)
        except Exception as exc:
            raise KernelBenchError(f"{self.path.name}: importing it raised {type(exc).__name__}: {exc}") from None
        missing = [n for n in ("Model", "get_inputs", "get_init_inputs") if not callable(getattr(self.module, n, None))]
        if missing:
            raise KernelBenchError(
                f"{self.path.name} defines no {', '.join(missing)}; a KernelBench problem defines class Model "
                "(a torch.nn.Module), get_inputs() and get_init_inputs()"
            )
        self.constants = {n: getattr(self.module, n) for n in names if is_constant(getattr(self.module, n, None))}
        self._model: tuple[dict[str, Any], torch.nn.Module] | None = None  # the last model input's Model
        self._costs: dict[str, dict[str, int]] = {}

    def apply(self, case: dict[str, Any]) -> None:
        """The file's constants as written, then the case's."""
        unknown = sorted(set(case) - set(self.constants))
        if unknown:
            raise KernelBenchError(
                f"{self.path.name} has no module constant {', '.join(unknown)} (it has: {', '.join(self.constants)})"
            )
        vars(self.module).update(self.constants)
        vars(self.module).update(case)

    def _call(self, name: str) -> list[Any]:
        try:
            value = getattr(self.module, name)()
        except Exception as exc:
            raise KernelBenchError(f"{self.path.name}: {name}() raised {type(exc).__name__}: {exc}") from exc
        if not isinstance(value, (list, tuple)):
            raise KernelBenchError(
                f"{self.path.name}: {name}() returned a {type(value).__name__}; it must return a list"
            )
        return list(value)

    def build(self, init_inputs: list[Any]) -> torch.nn.Module:
        try:
            model = self.module.Model(*init_inputs)
        except Exception as exc:
            raise KernelBenchError(
                f"{self.path.name}: Model(*get_init_inputs()) raised {type(exc).__name__}: {exc}"
            ) from exc
        if not isinstance(model, torch.nn.Module):
            raise KernelBenchError(f"{self.path.name}: Model is not a torch.nn.Module")
        return model

    def build_on_meta(self, init_inputs: list[Any]) -> torch.nn.Module:
        """Model with shape-only weights, or on the CPU where its __init__ needs values (`.item()`)."""
        try:
            with on_meta():
                return self.build(init_inputs)
        except KernelBenchError:
            return self.build(init_inputs).to("meta")

    def make_inputs(self, case: dict[str, Any], seed: int, device: Any) -> tuple[Any, ...]:
        """get_inputs() under `seed`; the weights of a Model built under a seed of their own, made here once."""
        self.apply(case)
        # shape-only (meta) inputs are made on the meta device: no data, whatever the sizes
        shapes_only = on_meta() if torch.device(device).type == "meta" else contextlib.nullcontext()
        with torch.random.fork_rng(devices=[]):
            with shapes_only:
                torch.manual_seed(seed)
                inputs = self._call("get_inputs")
                torch.manual_seed(seed + WEIGHT_SEED_OFFSET)
                init_inputs = self._call("get_init_inputs")
            model = self.build_on_meta(init_inputs) if torch.device(device).type == "meta" else self.build(init_inputs)
        state = {k: v.detach().clone() for k, v in model.state_dict().items()}
        model_input = {"init_inputs": _to(init_inputs, device), "state_dict": _to(state, device)}
        return (*_to(inputs, device), model_input)

    def model_for(self, model_input: dict[str, Any], device: torch.device) -> torch.nn.Module:
        """The reference Model holding `model_input`'s weights, built once for it (kept while it is the last)."""
        if self._model is not None and self._model[0] is model_input:
            return self._model[1]
        with torch.random.fork_rng(devices=[]):
            model = self.build(list(model_input["init_inputs"]))
        model = model.to(device)
        model.load_state_dict(model_input["state_dict"], strict=True)
        self._model = (model_input, model)
        return model

    def reference(self, *inputs: Any) -> Any:
        args, model_input = split_model_input(inputs)
        if model_input is None:
            raise KernelBenchError("the inputs end with no model input ({'init_inputs', 'state_dict'})")
        with torch.no_grad():
            return self.model_for(model_input, _device_of(args, model_input))(*args)

    def cost(self, case: dict[str, Any]) -> dict[str, int]:
        """Bytes of the inputs, weights and outputs; FLOPs as torch's flop counter sees them (matmuls,
        convolutions, attention; elementwise work counts none). Worked out on the meta device: no data."""
        key = repr(sorted(case.items()))
        if key not in self._costs:  # kept: counting an RNN's steps on the meta device takes seconds
            self._costs[key] = self._count(case)
        return dict(self._costs[key])

    def _count(self, case: dict[str, Any]) -> dict[str, int]:
        from torch.utils.flop_counter import FlopCounterMode

        self.apply(case)
        with torch.random.fork_rng(devices=[]):
            with on_meta():
                inputs = self._call("get_inputs")
                init_inputs = self._call("get_init_inputs")
            model = self.build_on_meta(init_inputs)
            counted = sum(_nbytes(t) for t in _tensors([inputs, model.state_dict()]))
            try:
                with torch.no_grad(), FlopCounterMode(display=False) as counter, torch.device("meta"):
                    out = model(*inputs)
            except Exception:  # an op with no meta kernel, weights that are not on meta: inputs and weights only
                return {"flops": 0, "bytes": counted}
        return {"flops": int(counter.get_total_flops()), "bytes": counted + sum(_nbytes(t) for t in _tensors(out))}


def _to(value: Any, device: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.to(device)
    if isinstance(value, (list, tuple)):
        return type(value)(_to(v, device) for v in value)
    if isinstance(value, dict):
        return {k: _to(v, device) for k, v in value.items()}
    return value


def _tensors(value: Any) -> Iterator[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _tensors(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from _tensors(v)


def _nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


def _device_of(args: tuple[Any, ...], model_input: dict[str, Any]) -> torch.device:
    first = next(_tensors([args, model_input]), None)
    return first.device if first is not None else torch.device("cpu")
