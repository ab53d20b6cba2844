"""The ladder's own rungs by name: the registry the ladder climbs in RUNG_ORDER."""

from __future__ import annotations

from harness.judge.rungs import benchmark as benchmark_rung
from harness.judge.rungs import compile as compile_rung
from harness.judge.rungs import correctness as correctness_rung
from harness.judge.rungs import dumps as dumps_rung
from harness.judge.rungs import load as load_rung
from harness.judge.rungs import problem_defined
from harness.judge.rungs import profile as profile_rung
from harness.judge.rungs import roofline as roofline_rung
from harness.judge.rungs import sanitize as sanitize_rung
from harness.problem.rung import Rung, RungSet, defined_in

MODULES = (
    load_rung,
    compile_rung,
    correctness_rung,
    benchmark_rung,
    roofline_rung,
    dumps_rung,
    sanitize_rung,
    profile_rung,
)
BUILTIN: dict[str, Rung] = {r.name: r for module in MODULES for r in defined_in(module)}
LADDER = RungSet(BUILTIN, problem_defined.on_ladder)
