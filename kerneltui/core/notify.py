"""Telling the person when it matters, while they look elsewhere: a version beats the best, a version is flagged,
an agent waits for them (a permission, a stop on a budget or the end of its run), the queue empties, an agent
fails.

Each notice goes, where the `[notify]` table says so, to the terminal and to a command:
- inside tmux, tmux's own message (display-message) on the client's status line, with the dashboard's bell;
- otherwise a desktop notification by escape sequence where the terminal is known to take one (OSC 777 for
  foot, urxvt and Ghostty, OSC 9 for iTerm2, WezTerm, kitty, Windows Terminal, ConEmu), else the bell alone;
- `command`, run through the shell with the notice as JSON on stdin (ntfy, a webhook, notify-send), one notice
  after another in a thread of its own: a slow or failing command holds nothing up, and at most MAX_WAITING
  notices wait for it (more are dropped, and that is said).

A notice quotes what agents and versions named (a problem, a version, a permission's title): its text is cut to
printable characters before it reaches an escape sequence, and `#` is doubled for tmux, whose messages are
formats (`#(command)` would run a command)."""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import queue
import shutil
import subprocess
import threading
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from harness.contract.text import printable

NoticeKind = Literal["best", "flagged", "waiting", "queue-empty", "agent-failed"]
MAX_TEXT = 240
COMMAND_TIMEOUT_S = 20.0
MAX_WAITING = 32
OSC_777 = ("foot", "rxvt", "ghostty")  # TERM or TERM_PROGRAM, lowercased, starting with one of these
OSC_9 = ("iterm.app", "wezterm", "kitty", "xterm-kitty", "conemu")


class NotifyConfig(BaseModel):
    """`[notify]`: where notices go, and which kinds."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    terminal: bool = Field(default=True, description="tmux's message inside tmux, else OSC 9/777 where it is taken")
    command: str = Field(default="", description="run through the shell with each notice as JSON on stdin")
    best: bool = Field(default=True, description="a version beats the best")
    flagged: bool = Field(default=True, description="a passing version is flagged")
    waiting: bool = Field(default=True, description="an agent waits: a permission, a budget reached, its run ended")
    queue_empty: bool = Field(default=True, description="every version is judged")
    agent_failed: bool = Field(default=True, description="an agent stopped on an error")

    def wants(self, kind: NoticeKind) -> bool:
        return bool(getattr(self, kind.replace("-", "_")))


@dataclass(frozen=True)
class Notice:
    kind: NoticeKind
    title: str
    body: str
    problem: str | None = None
    version: str | None = None
    at: str = field(default_factory=lambda: datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"))

    def text(self) -> str:
        return plain(f"kerneltui: {self.title}: {self.body}")

    def to_json(self) -> str:
        return json.dumps(asdict(self))


def plain(text: str) -> str:
    """One line of printable characters, cut to MAX_TEXT."""
    return printable(" ".join(text.split()))[:MAX_TEXT]


def tmux_message(text: str) -> str:
    """tmux reads a message as a format: `#` doubled so none of it is one."""
    return text.replace("#", "##")


def osc_for(env: Mapping[str, str]) -> str | None:
    """The escape sequence family this terminal shows as a desktop notification ("9", "777"), None if unknown."""
    names = [env.get("TERM_PROGRAM", "").lower(), env.get("TERM", "").lower()]
    if any(n.startswith(OSC_777) for n in names if n):
        return "777"
    if any(n.startswith(OSC_9) for n in names if n) or env.get("WT_SESSION") or env.get("KITTY_WINDOW_ID"):
        return "9"
    return None


def osc_sequence(kind: str, title: str, body: str) -> str:
    if kind == "777":
        return f"\x1b]777;notify;{plain(title).replace(';', ',')};{plain(body).replace(';', ',')}\x07"
    return f"\x1b]9;{plain(f'{title}: {body}')}\x07"


class Notifier:
    """Sends notices as `config` says. `write_terminal`: writes an escape sequence to the person's terminal (the
    dashboard's driver); `bell`: rings it; `failed`: told what a failing command said."""

    def __init__(
        self,
        config: NotifyConfig,
        write_terminal: Callable[[str], None],
        bell: Callable[[], None],
        failed: Callable[[str], None],
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.config = config
        self.write_terminal = write_terminal
        self.bell = bell
        self.failed = failed  # what the command said when it failed, from its thread
        self.env = dict(os.environ if env is None else env)
        self.waiting: queue.Queue[Notice] = queue.Queue(MAX_WAITING)
        self.runner: threading.Thread | None = None
        self.lock = threading.Lock()  # a runner about to end sees a notice queued meanwhile

    def send(self, notice: Notice) -> None:
        if not self.config.wants(notice.kind):
            return
        if self.config.terminal:
            self._to_terminal(notice)
        if self.config.command.strip():
            self._queue(notice)

    def _queue(self, notice: Notice) -> None:
        try:
            self.waiting.put_nowait(notice)
        except queue.Full:
            self.failed(f"[notify] command: {MAX_WAITING} notices still wait for it; {notice.kind} dropped")
            return
        with self.lock:
            if self.runner is None:
                self.runner = threading.Thread(target=self._run_commands, name="kerneltui-notify", daemon=True)
                self.runner.start()

    def _run_commands(self) -> None:
        while True:
            try:
                notice = self.waiting.get(timeout=5)
            except queue.Empty:
                with self.lock:
                    if self.waiting.empty():
                        self.runner = None
                        return
                continue
            self._run_command(notice)

    def _to_terminal(self, notice: Notice) -> None:
        tmux = shutil.which("tmux") if self.env.get("TMUX") else None
        if tmux:
            with contextlib.suppress(OSError):
                subprocess.Popen(
                    [tmux, "display-message", "-d", "8000", tmux_message(notice.text())],
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    env=self.env,
                )
            self.bell()
            return
        kind = osc_for(self.env)
        if kind is None:
            self.bell()
            return
        self.write_terminal(osc_sequence(kind, f"kerneltui: {notice.title}", notice.body))

    def _run_command(self, notice: Notice) -> None:
        try:
            done = subprocess.run(
                self.config.command,
                shell=True,
                input=notice.to_json(),
                text=True,
                capture_output=True,
                timeout=COMMAND_TIMEOUT_S,
                env={**self.env, "KERNELTUI_NOTICE": notice.kind},
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            self.failed(plain(f"[notify] command: {exc}"))
            return
        if done.returncode != 0:
            said = (done.stderr or done.stdout or "").strip()
            self.failed(plain(f"[notify] command exited {done.returncode}: {said}"))
