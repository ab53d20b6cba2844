"""The part of an import that runs the imported problem's own code, in a contained process (formats.contained
starts it under harness.containment.sandbox, and bubblewrap where there is one): `python -m THIS TASK FOLDER`.

TASK: `load` (problem.py loads), `gpumode` (it loads, and the tensors of `data` ref_kernel writes its output
into, on the first test's inputs), `kernelbench` (it loads, every case's inputs and weights build on the meta
device, the bench cases' cost counts, and the forward pass runs on each correctness case, on the CPU).
The answer is one JSON object on what was stdout when it started: {"error": message} or what the task found.
This file imports only the harness and torch: it runs where kerneltui is not readable.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any


def main(argv: list[str]) -> None:
    answer_fd = os.dup(1)
    os.dup2(2, 1)  # what the problem's code prints goes to stderr: stdout is the answer's alone
    task, folder = argv[0], Path(argv[1])
    try:
        answer = TASKS[task](folder)
    except Exception as exc:  # the problem's own code fails in any way it likes: said, not raised
        answer = {"error": _said(exc)}
    with os.fdopen(answer_fd, "w") as out:
        out.write(json.dumps(answer) + "\n")
    sys.stderr.flush()
    os._exit(0)  # answered: a thread or an exit handler the problem's code left behind does not hold the import


def _said(exc: BaseException) -> str:
    from harness.problem.load import ProblemError

    if isinstance(exc, ProblemError):
        return str(exc)
    text = str(exc).splitlines()[0] if str(exc) else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _load(folder: Path) -> Any:
    from harness.problem.load import load_problem

    return load_problem(folder)


def load(folder: Path) -> dict[str, Any]:
    _load(folder)
    return {}


def kernelbench(folder: Path) -> dict[str, Any]:
    import torch

    problem = _load(folder)
    elements = []  # each correctness case's floating-point input elements (the interpreter's work grows with them)
    for case in problem.cases:
        made = problem.make_inputs(dict(case), 0, torch.device("meta"))
        elements.append(sum(t.numel() for _, t in _leaves(made, ()) if t.is_floating_point()))
    for case in problem.bench_cases:
        problem.make_inputs(dict(case), 0, torch.device("meta"))
        problem.cost_of(case)
    with torch.no_grad():
        for case in problem.cases:
            problem.reference(*problem.make_inputs(dict(case), 0, torch.device("cpu")))
    return {"case_elements": elements}


def gpumode(folder: Path) -> dict[str, Any]:
    """{"buffers": [[0, ...], ...], "note": str | None}: see output_buffers."""
    buffers, note = output_buffers(_load(folder))
    return {"buffers": [list(b) for b in buffers], "note": note}


def output_buffers(problem: Any) -> tuple[list[tuple[int | str, ...]], str | None]:
    """The tensors of `data` that ref_kernel returns or writes into (where it writes its output), on the first
    test's inputs made here; with a note where they could not be made (a problem that needs a GPU)."""
    import torch

    from harness.problem.load import ProblemError

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        (data,) = problem.make_inputs(dict(problem.cases[0]), 1, device)
        before = [(path, leaf.clone()) for path, leaf in _leaves(data, ())]
        output = problem.reference(data)
    except Exception as exc:
        text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        if device.type != "cuda" and "cuda" in text.lower():  # made here with no GPU, or its reference needs one
            return [], f"it needs a GPU ({text}); its output buffers were not probed: name them with --output-buffer"
        raise ProblemError(f"{problem.name}: the first test's inputs and reference failed here: {text}") from None
    outputs = output if isinstance(output, (tuple, list)) else (output,)
    pointers = {t.data_ptr() for t in outputs if isinstance(t, torch.Tensor) and t.numel()}
    found = []
    for (path, leaf), (_, was) in zip(_leaves(data, ()), before, strict=True):
        written = bool(leaf.numel()) and not torch.equal(_bytes(leaf), _bytes(was))
        if written or (leaf.numel() and leaf.data_ptr() in pointers):
            found.append((0, *path))
    shapes = {tuple(t.shape) for t in outputs if isinstance(t, torch.Tensor)}
    alike = [path for path, leaf in _leaves(data, ()) if tuple(leaf.shape) in shapes] if not found else []
    alike = [p for p in alike if not _read_by_reference(problem, device, p, tuple(outputs))]  # inputs, no buffers
    if alike and len(list(_leaves(data, ()))) > 1:  # a buffer the reference leaves alone, perhaps: asked, not guessed
        named = " or ".join(".".join(str(step) for step in path) for path in alike)
        return found, (
            f"ref_kernel returns a new tensor, and data holds tensors of its shape ({named}): submissions may write "
            "their output into one ref_kernel never reads and return it; for ones that return None, import again "
            f"with --output-buffer {named.split(' or ')[-1]} (or the one it is)"
        )
    return found, None


def _read_by_reference(problem: Any, device: Any, path: tuple[int | str, ...], expected: tuple[Any, ...]) -> bool:
    """Whether ref_kernel's output changes when the tensor at `path` of fresh inputs holds other values: one it
    reads is an input, no buffer for the output."""
    import torch

    (data,) = problem.make_inputs(dict(problem.cases[0]), 1, device)
    leaf = dict(_leaves(data, ()))[path]
    leaf.copy_(torch.full_like(leaf, 3))
    output = problem.reference(data)
    outputs = output if isinstance(output, (tuple, list)) else (output,)
    if len(outputs) != len(expected):
        return True
    return not all(
        isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.shape == b.shape
        and torch.equal(_bytes(a), _bytes(b))
        for a, b in zip(outputs, expected, strict=True)
    )  # fmt: skip


def _bytes(tensor: Any) -> Any:
    import torch

    return tensor.detach().contiguous().view(-1).view(torch.uint8)


def _leaves(value: Any, path: tuple[int | str, ...]) -> list[tuple[tuple[int | str, ...], Any]]:
    import torch

    if isinstance(value, torch.Tensor):
        return [(path, value)]
    if isinstance(value, (list, tuple)):
        return [leaf for i, item in enumerate(value) for leaf in _leaves(item, (*path, i))]
    if isinstance(value, dict):
        return [leaf for key, item in value.items() for leaf in _leaves(item, (*path, str(key)))]
    return []


TASKS = {"load": load, "gpumode": gpumode, "kernelbench": kernelbench}

if __name__ == "__main__":
    main(sys.argv[1:])
