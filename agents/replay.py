"""The replay agent: plays a recorded session into a workspace, version by version, at its pace.

A recording is a folder: `session.json` ({"problem", "model", "steps": [{"file", "say", "after_s",
"notes"?}]}), the step files (whole version modules) and, for the demo, the `problem.py` it was
recorded on. Each step waits `after_s` (scaled by `pace`), says its text, and writes its file
through the host like a live agent would, waiting for the ladder. Guidance and verdicts that arrive
are acknowledged in the transcript; a recording cannot change course.
"""

from __future__ import annotations

import importlib.util
import json
import threading
from dataclasses import dataclass, field
from pathlib import Path

from agents.base import Budget, Host, best_roofline, go_on, render_feedback
from agents.tools import Toolbox
from harness.contract import source

RECORDINGS = Path(__file__).parent / "recordings"


class RecordingError(Exception):
    """A recording that cannot be played; the message names the file and what is wrong."""


@dataclass
class Step:
    code: str
    say: str = ""
    after_s: float = 3.0
    notes: str | None = None
    file: str = ""


@dataclass
class Recording:
    folder: Path
    problem: str
    model: str
    steps: list[Step]
    about: str = ""

    @property
    def problem_file(self) -> Path:
        return self.folder / "problem.py"

    def missing_dsls(self) -> list[str]:
        """Kernel languages its versions import that this Python cannot (a CuTeDSL session where
        nvidia-cutlass-dsl has no wheel): each of those versions would only fail to load."""
        used = {dsl for step in self.steps for dsl in source.dsls(step.code)}
        return [dsl for module, dsl in source.DSL_MODULES if dsl in used and importlib.util.find_spec(module) is None]


def load_recording(folder: Path) -> Recording:
    index = folder / "session.json"
    try:
        data = json.loads(index.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise RecordingError(f"{index}: {exc}") from None
    steps = []
    for number, raw in enumerate(data.get("steps") or [], 1):
        if not isinstance(raw, dict) or not raw.get("file"):
            raise RecordingError(f"{index}: step {number} needs a file")
        try:
            code = (folder / raw["file"]).read_text()
        except OSError as exc:
            raise RecordingError(f"{index}: step {number}: {exc}") from None
        steps.append(Step(code, str(raw.get("say", "")), float(raw.get("after_s", 3.0)), raw.get("notes"), raw["file"]))
    if not steps:
        raise RecordingError(f"{index}: no steps")
    return Recording(
        folder,
        str(data.get("problem") or folder.name),
        str(data.get("model") or "?"),
        steps,
        str(data.get("about", "")),
    )


def builtin_recordings() -> dict[str, Path]:
    """The sessions shipped for the demo, by problem name."""
    return {p.parent.name: p.parent for p in sorted(RECORDINGS.glob("*/session.json"))}


@dataclass
class ReplayAgent:
    recording: Recording
    pace: float = 1.0  # multiplies every step's wait: 0 plays as fast as the judge allows
    backend: str = "replay"
    model: str = field(init=False)

    def __post_init__(self) -> None:
        self.model = f"{self.recording.model} (recorded)"
        self._cancel = threading.Event()

    def cancel(self) -> None:
        self._cancel.set()

    def run(self, host: Host, budget: Budget) -> str:
        toolbox = Toolbox(host, author=f"replay:{self.recording.model}")
        host.record(
            "start",
            f"replaying {self.recording.folder.name}: {len(self.recording.steps)} versions",
            model=self.model,
            backend=self.backend,
        )
        reason = "the recording is finished"
        for turn, step in enumerate(self.recording.steps, 1):
            best = best_roofline(toolbox.written)
            stop = self._stopped(host)
            if not stop:
                budget, stop = go_on(host, budget, len(toolbox.written), 0.0, best)
            if stop or self._cancel.wait(max(0.0, step.after_s * self.pace)) or host.stop_requested():
                reason = stop or "stopped by the person"
                break
            self._acknowledge(host)
            host.record("turn", f"turn {turn}", turn=turn)
            if step.say:
                host.record("text", step.say)
            self._write(toolbox, step)
        host.record("stop", reason, versions=len(toolbox.written), turns=len(toolbox.written))
        return reason

    def _stopped(self, host: Host) -> str | None:
        return "stopped by the person" if self._cancel.is_set() or host.stop_requested() else None

    def _acknowledge(self, host: Host) -> None:
        feedback = host.feedback()
        if feedback:
            host.record("feedback", render_feedback(feedback), count=len(feedback))
            host.record("text", "(a recorded session cannot change course: noted, and playing on)")

    def _write(self, toolbox: Toolbox, step: Step) -> None:
        notes = (step.notes or first_line(step.code)).strip()
        toolbox.use("write_version", {"code": step.code, "notes": notes})


def first_line(code: str) -> str:
    from ast import get_docstring, parse

    try:
        doc = get_docstring(parse(code)) or ""
    except SyntaxError:
        doc = ""
    return doc.splitlines()[0] if doc else ""
