"""What a judge (`python -m harness serve`, or `--stream`) prints: one JSON object per line, typed here.

The judge writes these with `line()`; its clients (the dashboard's scheduler, `kerneltui eval`) read
them with `parse()`, so the event names and fields live in one place. Requests stay plain JSON objects:
{"path": ..., "id": ..., "rungs": [...], "best_us": ...}.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from harness.contract.results import Evaluation, RungResult


@dataclass(frozen=True)
class Ready:
    """The judge is up, its workers started: the device it judges on."""

    device: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Started:
    id: Any
    path: str


@dataclass(frozen=True)
class RungFinished:
    rung: RungResult
    id: Any = None


@dataclass(frozen=True)
class Finished:
    evaluation: Evaluation
    id: Any = None


@dataclass(frozen=True)
class Failed:
    """The judge could not judge it (`problem`: problem.py is at fault, not the version)."""

    error: str
    problem: bool = False
    id: Any = None


JudgeEvent = Ready | Started | RungFinished | Finished | Failed


def to_json(event: JudgeEvent) -> dict[str, Any]:
    if isinstance(event, Ready):
        return {"event": "ready", "device": event.device}
    if isinstance(event, Started):
        return {"event": "start", "id": event.id, "path": event.path}
    body: dict[str, Any]
    if isinstance(event, RungFinished):
        body = {"event": "rung", "rung": event.rung.to_json()}
    elif isinstance(event, Finished):
        body = {"event": "done", "evaluation": event.evaluation.to_json()}
    else:
        body = {"event": "error", "error": event.error, "problem": event.problem}
    return body if event.id is None else {**body, "id": event.id}


def line(event: JudgeEvent) -> str:
    return json.dumps(to_json(event), default=str)  # a figure of a type JSON lacks is written as text


def parse(text: str) -> JudgeEvent | None:
    """One line of a judge's output; None for anything that is not one of its events (noise on stdout)."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        return None
    if not isinstance(data, dict):
        return None
    kind, rid = data.get("event"), data.get("id")
    if kind == "ready":
        device = data.get("device")
        return Ready(device if isinstance(device, dict) else {})
    if kind == "start":
        return Started(rid, str(data.get("path", "")))
    if kind == "rung" and isinstance(data.get("rung"), dict):
        return RungFinished(RungResult.from_json(data["rung"]), rid)
    if kind == "done" and isinstance(data.get("evaluation"), dict):
        return Finished(Evaluation.from_json(data["evaluation"]), rid)
    if kind == "error":
        return Failed(str(data.get("error") or "error"), bool(data.get("problem")), rid)
    return None
