"""Judges on other machines: `python -m harness remote` over SSH, or in Ray actors, fed by the same scheduler.

A remote judge gets each version with the files it needs (its problem folder, the best it races) and answers with
the local judge's lines, its paths mapped onto this workspace, and the evaluation's dumps, written into this
workspace's state before the line that ends the evaluation is passed on. A judge lost with an evaluation in
hand (the connection dropped, a Ray node died) is said as "judge-lost": the scheduler queues the evaluation
again rather than recording it as the version's failure.
"""

from __future__ import annotations

import base64
import json
import threading
from pathlib import Path
from typing import Any

from harness.judge.remote import BundleError, inside
from kerneltui.core.judging.client import Heard
from kerneltui.core.workspace import VERSION_RE

MAX_BUNDLE_BYTES = 256 << 20
SKIPPED = {"__pycache__", ".kerneltui", "FEEDBACK.md"}


class RemoteError(Exception):
    """A remote judge that cannot be set up as configured; the message says what to fix."""


def problem_files(folder: Path, wanted: set[Path]) -> dict[Path, bytes]:
    """The problem folder's files (data, task.py, references...) with only the versions in `wanted`."""
    found: dict[Path, bytes] = {}
    total = 0
    for path in sorted(folder.rglob("*")):
        relative = path.relative_to(folder)
        if any(part in SKIPPED or part.startswith(".") for part in relative.parts) or not path.is_file():
            continue
        if VERSION_RE.match(path.name) and path.parent == folder and path.resolve() not in wanted:
            continue
        total += path.stat().st_size
        if total > MAX_BUNDLE_BYTES:
            raise RemoteError(f"{folder} holds over {MAX_BUNDLE_BYTES >> 20} MiB: too much to send to a remote judge")
        found[path] = path.read_bytes()
    return found


def bundle_for(root: Path, request: dict[str, Any]) -> dict[str, Any]:
    """A judge's request (paths of this machine) as a remote request: paths relative to the workspace root and the
    files they need. A raced best outside the workspace is left out (the version is then not raced)."""
    request = json.loads(json.dumps(request))
    path = Path(request["path"]).resolve()
    race = request.get("race_with") or {}
    for device, best in list(race.items()):
        best_path = Path(best["path"]).resolve()
        if not best_path.is_relative_to(root) or not best_path.is_file():
            race.pop(device)
            continue
        best["path"] = str(best_path.relative_to(root))
    wanted = {path, *((root / b["path"]).resolve() for b in race.values())}
    files: dict[str, str] = {}
    for folder in {p.parent for p in wanted}:
        for found, data in problem_files(folder, wanted).items():
            files[str(found.relative_to(root))] = base64.b64encode(data).decode()
    request["path"] = str(path.relative_to(root))
    return {"request": request, "files": files}


class RemoteRelay:
    """What every transport to a judge elsewhere does alike: a request sent as a bundle of the files it needs, and
    the judge's lines relayed with its paths mapped onto this workspace and its dumps written here first."""

    def __init__(self, where: str, workspace_root: Path, state: Path) -> None:
        self.where, self.root, self.state = where, workspace_root, state
        self.remote_ws: str | None = None
        self.remote_state: str | None = None
        self.ready = False  # the judge there said it was ready (since the last begin)
        self.said: list[str] = []  # what went wrong lately, for the tail

    def begin(self) -> None:
        """A new start of the judge: nothing known of it yet."""
        self.remote_ws = self.remote_state = None
        self.ready = False

    def bundle(self, request: dict[str, Any], heard: Heard) -> dict[str, Any] | None:
        """The request with its files; None (said as the judge would, for that evaluation) where the problem folder
        cannot be sent."""
        try:
            return bundle_for(self.root, request)
        except (RemoteError, OSError, ValueError) as exc:
            said = {
                "event": "error",
                "id": request.get("id"),
                "error": f"not sent to {self.where}: {exc}",
                "problem": True,
            }
            heard.said(json.dumps(said))
            return None

    def relay(self, line: str, heard: Heard) -> None:
        """One line of the remote judge: its paths made this machine's, its files written here, then passed on."""
        try:
            event = json.loads(line)
        except json.JSONDecodeError:
            return
        kind = event.get("event") if isinstance(event, dict) else None
        if kind == "remote":
            self.remote_ws, self.remote_state = str(event.get("ws")), str(event.get("state"))
            return
        if kind == "remote-files":
            self._write_dumps(event.get("files") or {})
            return
        if kind == "error" and event.get("id") is None and not self.ready:  # it never started: said, started again
            heard.lost(self.lose(f"{self.where}: {event.get('error')}"))
            return
        self.ready = self.ready or kind == "ready"
        for remote, local in ((self.remote_ws, self.root), (self.remote_state, self.state)):
            if remote:
                line = line.replace(json.dumps(remote)[1:-1], json.dumps(str(local))[1:-1])
        heard.said(line)

    def lose(self, reason: str) -> str:
        self.said.append(reason)
        self.ready = False
        return reason

    def _write_dumps(self, files: dict[str, str]) -> None:
        for relative, data in files.items():
            try:
                target = inside(self.state, relative)
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(base64.b64decode(data, validate=True))
            except (BundleError, OSError, ValueError) as exc:
                self.said.append(f"dump {relative} not written: {exc}")

    def tail(self, chars: int) -> str:
        return "\n".join(self.said)[-chars:]


def spawn(name: str, target: Any, *args: Any) -> None:
    threading.Thread(target=target, args=args, name=name, daemon=True).start()
