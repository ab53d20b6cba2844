"""The queue of evaluations, fair across problems: each problem's versions wait in order, and the problems take
turns. One agent writing 40 versions in a burst puts another problem's one version second, not 41st."""

from __future__ import annotations

from collections import OrderedDict, deque


class FairQueue:
    """Evaluation ids by problem, handed out round-robin between problems, first in first out within one."""

    def __init__(self) -> None:
        self.lanes: OrderedDict[str, deque[int]] = OrderedDict()  # in the order the problems take their turns

    def append(self, evaluation_id: int, problem: str) -> None:
        self.lanes.setdefault(problem, deque()).append(evaluation_id)

    def appendleft(self, evaluation_id: int, problem: str) -> None:
        """Back at the head, its problem's turn next (handed out, then not judged: a judge gone, a judge lost)."""
        self.lanes.setdefault(problem, deque()).appendleft(evaluation_id)
        self.lanes.move_to_end(problem, last=False)

    def popleft(self) -> int:
        """The next problem's oldest evaluation; that problem then waits behind the others. IndexError when empty."""
        if not self.lanes:
            raise IndexError("pop from an empty queue")
        problem, lane = next(iter(self.lanes.items()))
        evaluation_id = lane.popleft()
        if lane:
            self.lanes.move_to_end(problem)
        else:
            del self.lanes[problem]
        return evaluation_id

    def __len__(self) -> int:
        return sum(len(lane) for lane in self.lanes.values())

    def __bool__(self) -> bool:
        return bool(self.lanes)
