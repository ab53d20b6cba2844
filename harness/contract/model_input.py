"""A KernelBench problem's "model input": the last input, `{"init_inputs": [...], "state_dict": {name: tensor}}`,
what `Model(*init_inputs)` is built from and the weights it is given. The judge makes it; the worker builds ModelNew
from it."""

from __future__ import annotations

from typing import Any

MODEL_KEYS = frozenset({"init_inputs", "state_dict"})


def split_model_input(inputs: tuple[Any, ...] | list[Any]) -> tuple[tuple[Any, ...], dict[str, Any] | None]:
    """(forward inputs, model input) where the last input is a model input, else (inputs, None)."""
    if inputs and isinstance(inputs[-1], dict) and set(inputs[-1]) == MODEL_KEYS:
        return tuple(inputs[:-1]), inputs[-1]
    return tuple(inputs), None
