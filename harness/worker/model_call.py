"""A KernelBench version's `ModelNew`, called in the worker as `custom_kernel(*inputs, model)` would be."""

from __future__ import annotations

from typing import Any

import torch

from harness.contract.model_input import split_model_input


class ModelCall:
    """A version's `ModelNew` called as `custom_kernel(*inputs, model)` is: built from the model input's
    init_inputs once per model input, given the reference's weights, then `forward(*inputs)` with no grad.
    `prepare` builds it ahead of a recorded call, so that building and loading weights are not the version's
    compute under test."""

    def __init__(self, cls: type, device: torch.device) -> None:
        self.cls = cls
        self.device = device
        self.model_input: dict[str, Any] | None = None
        self.model: Any = None

    def prepare(self, inputs: tuple[Any, ...]) -> None:
        _, model_input = split_model_input(inputs)
        if model_input is None:
            raise TypeError(
                "ModelNew needs a KernelBench problem's inputs (the model input last, as `kerneltui import "
                "kernelbench` makes them); this problem's version defines custom_kernel(*inputs)"
            )
        if model_input is self.model_input:
            return
        model = self.cls(*model_input["init_inputs"])
        if not isinstance(model, torch.nn.Module):
            raise TypeError(f"ModelNew(...) made a {type(model).__name__}, not a torch.nn.Module")
        model = model.to(self.device)
        load_weights(model, model_input["state_dict"])
        self.model_input, self.model = model_input, model

    def __call__(self, *inputs: Any) -> Any:
        self.prepare(inputs)
        args, _ = split_model_input(inputs)
        with torch.no_grad():
            return self.model(*args)


def load_weights(model: torch.nn.Module, state: dict[str, torch.Tensor]) -> None:
    """The reference's parameters and buffers into ModelNew, by name; ModelNew may hold more of its own."""
    own = model.state_dict()
    missing = [k for k in state if k not in own]
    if missing:
        raise TypeError(
            f"ModelNew has no {', '.join(missing[:4])}{' ...' if len(missing) > 4 else ''} of the reference Model's "
            f"weights (it has: {', '.join(list(own)[:6]) or 'none'}); keep Model's parameter names "
            "(e.g. self.linear = nn.Linear(...)) so the reference's weights load into it"
        )
    wrong = [
        f"{k} {tuple(own[k].shape)} (the reference's: {tuple(v.shape)})"
        for k, v in state.items()
        if own[k].shape != v.shape
    ]
    if wrong:
        raise TypeError(f"ModelNew's weights have other shapes than the reference Model's: {'; '.join(wrong[:3])}")
    assign = any(v.device.type == "meta" for v in state.values())  # shape-only weights (compile-only calls)
    model.load_state_dict(state, strict=False, assign=assign)
