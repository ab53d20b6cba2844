"""Told when it matters (kerneltui.core.notify): the terminal's way of showing a notice, the `[notify]` command
fed each notice as JSON, each kind on or off, and text from versions and agents kept from becoming escape
sequences or tmux formats; then the real dashboard judging a flagged version and emptying its queue."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from harness.contract.options import Options
from kerneltui.core.config import Config, LadderConfig
from kerneltui.core.judging.events import SchedulerEvent
from kerneltui.core.notify import Notice, Notifier, NotifyConfig, osc_for, osc_sequence, plain, tmux_message
from kerneltui.core.workspace import Workspace
from kerneltui.ui.app import KernelTUI
from kerneltui.ui.messages import SchedulerChanged
from tests.conftest import VERDICT_RUNGS, add_version, make_workspace


class Heard:
    """What a Notifier wrote to the terminal, rang, and said failed."""

    def __init__(self) -> None:
        self.written: list[str] = []
        self.rings = 0
        self.failures: list[str] = []
        self.failed = threading.Event()

    def notifier(self, config: NotifyConfig, env: dict[str, str]) -> Notifier:
        return Notifier(config, self.written.append, self.ring, self.fail, env)

    def ring(self) -> None:
        self.rings += 1

    def fail(self, said: str) -> None:
        self.failures.append(said)
        self.failed.set()


def wait_for_lines(path: Path, count: int, timeout: float = 30.0) -> list[dict]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        lines = path.read_text().splitlines() if path.exists() else []
        if len(lines) >= count:
            return [json.loads(line) for line in lines]
        time.sleep(0.05)
    raise AssertionError(f"{count} notices never reached {path}: {path.read_text() if path.exists() else ''}")


def test_the_terminal_gets_the_sequence_it_shows() -> None:
    assert osc_for({"TERM": "foot"}) == "777" and osc_for({"TERM_PROGRAM": "ghostty"}) == "777"
    assert osc_for({"TERM_PROGRAM": "iTerm.app"}) == "9" and osc_for({"WT_SESSION": "x", "TERM": "xterm"}) == "9"
    assert osc_for({"TERM": "xterm-256color"}) is None  # unknown: the bell alone
    heard = Heard()
    heard.notifier(NotifyConfig(), {"TERM": "foot"}).send(Notice("best", "v002 beats the best", "1.4× faster"))
    assert heard.written == ["\x1b]777;notify;kerneltui: v002 beats the best;1.4× faster\x07"] and heard.rings == 0
    heard.notifier(NotifyConfig(), {"TERM": "xterm"}).send(Notice("best", "v002", "faster"))
    assert heard.rings == 1 and len(heard.written) == 1


def test_text_from_a_version_or_an_agent_stays_text() -> None:
    hostile = "v9\x1b]0;pwned\x07 #(touch /tmp/x) \n\u202e"
    sequence = osc_sequence("9", "agent asks", hostile)
    assert sequence.count("\x1b") == 1 and sequence.count("\x07") == 1  # only the notice's own
    assert "\u202e" not in sequence and "\n" not in sequence
    assert "##(touch" in tmux_message(plain(hostile)) and "#(" not in tmux_message(plain(hostile)).replace("##", "")
    assert ";" not in osc_sequence("777", "a;b", "c;d").split("notify;", 1)[1].rstrip("\x07").replace(";", "", 1)


def test_the_command_gets_each_notice_as_json_and_kinds_turn_off(tmp_path: Path) -> None:
    got = tmp_path / "notices.jsonl"
    config = NotifyConfig(terminal=False, command=f"cat >> {got}; echo >> {got}", flagged=False)
    heard = Heard()
    notifier = heard.notifier(config, {"PATH": "/usr/bin:/bin"})
    notifier.send(Notice("flagged", "v003 passes, flagged", "uses-library"))  # off
    notifier.send(Notice("waiting", "agent on softmax asks", "run a shell command", problem="softmax"))
    [said] = wait_for_lines(got, 1)
    assert said["kind"] == "waiting" and said["problem"] == "softmax" and said["body"] == "run a shell command"
    assert said["at"] and heard.written == [] and heard.rings == 0


def test_a_failing_command_is_said() -> None:
    heard = Heard()
    heard.notifier(NotifyConfig(terminal=False, command="echo no route >&2; exit 3"), {"PATH": "/usr/bin:/bin"}).send(
        Notice("queue-empty", "queue empty", "every version is judged")
    )
    assert heard.failed.wait(30) and heard.failures == ["[notify] command exited 3: no route"]


@pytest.mark.slow
async def test_the_dashboard_tells_of_a_flagged_version_an_empty_queue_and_a_new_best(tmp_path: Path) -> None:
    folder = make_workspace(tmp_path / "ws")
    add_version(folder, "pure_torch", "v001.py")  # passes on torch's add: flagged
    got = tmp_path / "notices.jsonl"
    config = Config(
        ladder=LadderConfig(debounce=0.2, options=Options(timeout=30, rungs=VERDICT_RUNGS)),
        notify=NotifyConfig(terminal=False, command=f"cat >> {got}; echo >> {got}"),
    )
    app = KernelTUI(Workspace(folder.parent), config)
    async with app.run_test(size=(160, 48)) as pilot:

        async def lines(count: int, timeout: float) -> None:
            deadline = time.monotonic() + timeout
            while len(got.read_text().splitlines() if got.exists() else []) < count and time.monotonic() < deadline:
                await pilot.pause(0.1)

        await lines(2, 240)
        # a new best needs a GPU's timings: the scheduler's word for one, as it sends it
        best = SchedulerEvent("finished", 7, "vadd", "v001", {"status": "pass", "beat_best": True, "vs_best": 1.5})
        app.post_message(SchedulerChanged(best))
        await lines(3, 30)
    notices = wait_for_lines(got, 3, timeout=1)
    kinds = [n["kind"] for n in notices]
    assert kinds[:2] == ["flagged", "queue-empty"] and kinds[2] == "best", notices
    assert "uses-library" in notices[0]["body"] and notices[0]["version"] == "v001"
    assert notices[2]["title"] == "vadd v001 beats the best" and "1.50× faster (by event time)" in notices[2]["body"]
