"""Faster than the best, decided fairly: the new version and the best raced back to back.

Medians taken hours apart differ by more than two versions do: clocks drift with load and temperature,
another process held the GPU, the driver changed. So a passing version is timed against the current best
in the same minute, on the same inputs, in two workers side by side, in the order new, best, best, new
(a drift that is linear in time then weighs on both alike; the first round is the benchmark's own timing of
the bench case, on the inputs the new version's worker keeps), and labelled:

- faster / slower: both pairs of rounds (first new against first best, last new against last best) agree,
  each beyond the tolerance: the largest of SAME_PCT, how far either version's own two rounds differ and how far
  either's figure could move with its inputs elsewhere in memory (placement_pct);
- same: both pairs within SAME_PCT, or that placement figure where larger;
- ambiguous: anything else (the pairs disagree, or the noise is larger than the difference).
"""

from __future__ import annotations

import hashlib
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.contract import source
from harness.contract.messages import BenchReply, Failure
from harness.gpu import timing
from harness.judge.bench_calls import BenchInputs, checked_samples, timed_calls
from harness.wire import scratch
from harness.workers.process import WorkerFailure, WorkerProcess

if TYPE_CHECKING:
    from harness.judge.context import JudgeContext, VersionRun

ROUNDS = ("new", "best", "best", "new")
# a round's figures, as _figures gives them (event timings: a race round takes no CUPTI device times)
FIGURES = ("median_us", "noise_pct", "n", "placement_pct")
# Two processes timing the very same kernel on the same inputs differ steadily by up to ~1.6% (an H200, vecadd
# on 16M floats: each process's buffers sit in other pages): below that, no race can tell two versions apart.
SAME_PCT = 2.0


def race(
    judge: JudgeContext,
    run: VersionRun,
    worker: WorkerProcess,
    bench: BenchInputs,
    first: dict[str, Any],
) -> dict[str, Any] | None:
    """The race against the best on this device (None: no best to race, or it is this very file). It follows
    the benchmark's timing of one bench case in `worker` (on `bench`, whose inputs the worker keeps), which is
    its first round (`first`: that timing's figures); the rest are timed here, the best's in a worker of its
    own."""
    target = judge.options.race_for(str(judge.device_info.get("name")))
    if target is None or target["hash"] == run.ev.hash:
        return None
    against = {"against": target.get("version") or Path(target["path"]).stem}
    rival, note = _rival(judge, run, target)
    if rival is None:
        return {**against, "label": None, "note": note}
    budget = judge.options.bench_budget_s / 2
    rounds: list[dict[str, Any]] = [{"who": "new", **{k: first[k] for k in FIGURES if first.get(k) is not None}}]
    for i, who in enumerate(ROUNDS[1:], start=1):
        sent = who in ROUNDS[:i]  # each worker keeps the inputs of its first round (the new one, the benchmark's)
        judge.between(run)
        reply, err = timed_calls(judge, run, worker if who == "new" else rival, bench, budget, sent, race=True)
        if err is not None or reply is None:
            if who == "new":
                raise WorkerFailure(f"while racing the best: {err}")
            judge.pool.drop(rival)
            return {**against, "label": None, "note": f"the best failed in the race: {err}"[:300]}
        if who == "new":
            run.timed.add(reply.timed_watch, f"bench case {bench.label}", None, run.problem.allows)
        rounds.append({"who": who, **_figures(reply)})
    return {**against, "case": bench.label, **decide(rounds), "rounds": rounds}


def _rival(judge: JudgeContext, run: VersionRun, target: dict[str, str]) -> tuple[WorkerProcess | None, str | None]:
    """A worker with the best version loaded, from its file as it was judged (a file changed since is no rival)."""
    path = Path(target["path"])
    if path.parent.resolve() != run.path.parent:
        return None, f"the best ({path}) is not in this problem's folder"
    try:  # no links, no FIFO: the agent may have put anything at that name since
        data = scratch.read_file(path.parent, path.name, judge.options.max_version_bytes)
    except scratch.Untrusted as exc:
        return None, f"the best's file could not be read: {exc}"[:300]
    if hashlib.sha256(data).hexdigest() != target["hash"]:
        return None, "the best's file changed since it was judged"
    key = f"{target['hash']}|{run.problem.hash}"
    held = judge.pool.held_for(key)
    if held is not None:  # loaded for an earlier race: started and loaded again, it kept the next verdict waiting
        return held, None
    rival = judge.pool.take("run")
    loaded = judge.load_source(rival, data, path.name, source.dsls(data.decode(errors="replace")), run.problem)
    if isinstance(loaded, Failure):
        run.workers["race"] = rival  # released with the others when the evaluation ends
        return None, f"the best did not load: {loaded.err}"[:300]
    judge.pool.hold(key, rival)
    return rival, None


def _figures(reply: BenchReply) -> dict[str, Any]:
    """One round's event median and noise (checked as the benchmark rung checks a worker's samples)."""
    event = timing.summarize(checked_samples(reply.samples_ms), reply.placement_of)
    out: dict[str, Any] = {"median_us": event.median_us, "noise_pct": event.noise_pct, "n": event.n}
    out["placement_pct"] = event.placement_pct
    return out


def decide(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """The label from rounds new, best, best, new: `ratio` is the new version's time over the best's."""
    new = [r["median_us"] for r in rounds if r["who"] == "new"]
    best = [r["median_us"] for r in rounds if r["who"] == "best"]
    pairs = [new[0] / best[0], new[1] / best[1]]
    spread = max(_apart_pct(*new), _apart_pct(*best))
    # each worker's inputs lie elsewhere in memory: a kernel whose time follows placement differs by that much
    placed = max(float(r.get("placement_pct") or 0.0) for r in rounds)
    same = max(SAME_PCT, placed)
    tolerance = max(same, spread)
    if all(r < 1 - tolerance / 100 for r in pairs):
        label = "faster"
    elif all(r > 1 + tolerance / 100 for r in pairs):
        label = "slower"
    elif all(abs(r - 1) <= same / 100 for r in pairs):
        label = "same"
    else:
        label = "ambiguous"
    return {"label": label, "ratio": math.sqrt(pairs[0] * pairs[1]), "tolerance_pct": tolerance}


def _apart_pct(a: float, b: float) -> float:
    return 100.0 * (max(a, b) / min(a, b) - 1.0)
