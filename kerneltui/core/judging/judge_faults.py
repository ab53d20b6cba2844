"""What the scheduler does when a judge ends or is lost with evaluations in hand. Runs on the scheduler's thread."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable

from kerneltui.core.judging.client import JudgeClient
from kerneltui.core.judging.events import SchedulerEvent
from kerneltui.core.judging.fair_queue import FairQueue
from kerneltui.history.store import Store

MAX_JUDGE_RESTARTS = 5
MAX_LOST = 3  # an evaluation whose remote judge was lost this often is recorded as not judged (an error)


class JudgeFaults:
    """The scheduler's side that answers a judge's exit or loss (the Scheduler sets these)."""

    store: Store | None
    stopped: threading.Event
    queue: FairQueue
    lost: dict[int, int]  # evaluation -> times its remote judge was lost with it
    notify: Callable[[SchedulerEvent], None]

    def _judge_exit(self, judge: JudgeClient, code: int | None) -> None:
        assert self.store is not None
        if self.stopped.is_set():
            return
        tail = judge.stderr_tail()
        waiting = [e for e in judge.in_flight if e not in judge.started]
        for evaluation_id in judge.started:  # what it was judging, or had set aside judged to its verdict
            self.store.fail_evaluation(evaluation_id, f"the judge stopped (exit {code}): {tail[-600:]}")
            self.notify(SchedulerEvent("failed", evaluation_id))
        self._queue_again(reversed(waiting))  # sent ahead and never begun: not theirs to fail
        judge.in_flight.clear()
        judge.started.clear()
        judge.ready = False
        self._restart(judge, tail[-300:])

    def _judge_lost(self, judge: JudgeClient, reason: str) -> None:
        """A remote judge lost with evaluations in hand: each is queued again (a lost machine is not the
        version's failure) unless its judges were lost MAX_LOST times; the judge is started again."""
        assert self.store is not None
        if self.stopped.is_set():
            return
        lost, judge.ready = list(judge.in_flight), False
        judge.in_flight.clear()
        judge.started.clear()
        for evaluation_id in reversed(lost):
            self.lost[evaluation_id] = self.lost.get(evaluation_id, 0) + 1
            if self.lost[evaluation_id] >= MAX_LOST:
                said = f"not judged: its judge was lost {MAX_LOST} times (last: {reason})"
                self.store.fail_evaluation(evaluation_id, said, status="error")
                self.notify(SchedulerEvent("failed", evaluation_id, data={"error": said}))
            else:
                self._queue_again([evaluation_id])
                self.notify(SchedulerEvent("warning", data={"message": f"{reason}: judging it again"}))
        self._restart(judge, reason)

    def _queue_again(self, evaluation_ids: Iterable[int]) -> None:
        """Each back at the queue's head (given last first, they keep the order they were sent in)."""
        assert self.store is not None
        for evaluation_id in evaluation_ids:
            self.store.requeue(evaluation_id)
            row = self.store.evaluation(evaluation_id) or {}
            self.queue.appendleft(evaluation_id, str(row.get("problem", "")))

    def _restart(self, judge: JudgeClient, reason: str) -> None:
        if judge.restarts < MAX_JUDGE_RESTARTS:
            judge.restarts += 1
            time.sleep(min(2.0, 0.2 * judge.restarts))
            judge.start()
        else:
            self.notify(SchedulerEvent("warning", data={"message": f"judge {judge.index} keeps stopping: {reason}"}))
