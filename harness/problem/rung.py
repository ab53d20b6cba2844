"""Rungs: each a function the `@rung` decorator names, with what it needs of the rungs before it.

The ladder's own rungs live one to a module here (load, compile, correctness, benchmark, roofline, dumps;
harness.judge.rungs.builtin gathers them). A problem.py may define rungs of its own with the same decorator
(harness.judge.rungs.problem_defined runs them). Kept free of torch: problem files and the CLI import it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from types import ModuleType
from typing import Any


@dataclass(frozen=True)
class Rung:
    """A named step of the ladder. `run` is the ladder's (ladder, run) -> RungResult for a built-in rung,
    the problem's (inputs, output) check for a problem-defined one."""

    name: str
    run: Callable[..., Any]
    needs: tuple[str, ...] = ()  # rungs that must have passed first
    after: tuple[str, ...] = ()  # rungs that must not have failed (one not asked: what it comes after)
    shares_skip: bool = False  # a need skipped for its own reason: this rung is skipped with that reason

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.run(*args, **kwargs)


@dataclass(frozen=True)
class RungSet:
    """The rungs a ladder climbs (harness.judge.rungs.builtin.LADDER): the built-in ones by name, and how a problem.py's
    own rung is climbed. Handed to the ladder, which imports no rung: the rungs use the ladder, not the reverse."""

    builtin: Mapping[str, Rung]
    problem_rung: Callable[[Rung], Rung]


def rung(
    name: str, needs: Iterable[str] = (), after: Iterable[str] = (), shares_skip: bool = False
) -> Callable[[Callable[..., Any]], Rung]:
    """Defines a rung named `name`; its module's rungs are found by `defined_in`.

    A skipped or failed rung skips the rungs that need it, saying why: `needs` names rungs that must
    have passed, `after` rungs that must only not have failed (an `after` rung that was not asked
    stands in by the rungs it comes after itself, so correctness runs without compile, never without load).

    In a problem.py, a rung checks what a version returned beyond matching the reference:

        from harness.problem.rung import rung
        @rung("orthogonality")
        def orthogonality(inputs, output):
            q = output.double()
            err = (q.T @ q - torch.eye(q.shape[1], dtype=q.dtype, device=q.device)).abs().max().item()
            return {"max_err": err, "err": f"Q^T Q is {err:.2g} from I" if err > 1e-4 else None}

    It runs after the correctness rung passed, on every case of `cases` with a fresh seed: the version
    computes `output` in its worker from `inputs` (make_inputs' tuple, the judge's own copy), the output is
    held to the reference's tolerance, then the check runs in the judge. It returns None (passed), a string
    (why the output fails), or a dict of figures recorded with the case, failing when its "err" is set.
    `needs` may name rungs defined above it in the same problem.py.
    """

    def define(run: Callable[..., Any]) -> Rung:
        return Rung(name=name, run=run, needs=tuple(needs), after=tuple(after), shares_skip=shares_skip)

    return define


def defined_in(module: ModuleType) -> list[Rung]:
    """The rungs a module defines, in the order it defines them (not those it imports from elsewhere)."""
    found = [v for v in vars(module).values() if isinstance(v, Rung)]
    return [r for r in found if getattr(r.run, "__module__", None) == module.__name__]
