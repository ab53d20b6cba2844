"""What a judge (`python -m harness serve`, or `--stream`) prints: one JSON object per line, typed here.

The judge writes these with `line()`; its clients (the dashboard's scheduler, `kerneltui eval`) read
them with `parse()`, so the event names and fields live in one place. A request is one JSON object a line,
a JudgeRequest: {"path": ..., "id": ..., and any option by its key: "rungs": [...], "best_us": ..., ...}.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from harness.contract.fields import shown
from harness.contract.options import Options
from harness.contract.results import Evaluation, RungResult

MAX_PATH_CHARS, MAX_ID_CHARS = 4096, 200
# Evaluations a judge sets aside after their verdicts while later requests wait (harness.judge.serve): each holds
# its workers, a CUDA context each. A client sends a judge up to this many requests more than one to judge and one
# waiting, so that they are seen.
MAX_PARKED = 8


class BadRequest(ValueError):
    """A request line the judge cannot take; `id`: the request's, where it could be read."""

    def __init__(self, why: str, id: Any = None) -> None:
        super().__init__(why)
        self.id = id


@dataclass(frozen=True)
class JudgeRequest:
    """Judge the version at `path` (`id`: the client's, echoed on every event about it), with `options` (by key,
    harness.contract.options: rungs, confirm, best_us, race_with, timeout, ...) over those the judge started with."""

    path: str
    id: int | str | None = None
    options: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {**self.options, "id": self.id, "path": self.path}

    def line(self) -> str:
        return json.dumps(self.to_json())

    @classmethod
    def parse(cls, text: str) -> JudgeRequest:
        """One request line, checked once: a JSON object with a path, an id that is a number or short text, and
        options each known and valid (Options.updated's check); else BadRequest saying what is wrong."""
        try:
            data = json.loads(text)
        except (ValueError, RecursionError) as exc:
            raise BadRequest(f"not JSON ({str(exc)[:200]})") from None
        if not isinstance(data, dict):
            raise BadRequest(f"a JSON {type(data).__name__}, not an object")
        rid = data.get("id")
        if not (rid is None or type(rid) is int or (isinstance(rid, str) and len(rid) <= MAX_ID_CHARS)):
            raise BadRequest(f"id: {shown(rid)} is not a number or a short text")
        path = data.get("path")
        if not isinstance(path, str) or not path or len(path) > MAX_PATH_CHARS:
            raise BadRequest("path: missing, or not the text of a path", rid)
        options = {k: v for k, v in data.items() if k not in ("id", "path")}
        try:
            Options().updated(options)
        except ValueError as exc:
            raise BadRequest(str(exc), rid) from None
        return cls(path, rid, options)


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
