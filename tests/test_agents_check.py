"""`kerneltui agents check`: the agents found on PATH, what each still needs, and the config that picks one."""

from __future__ import annotations

import json
import os
from pathlib import Path

from kerneltui.core.agents.check import check, report
from tests.conftest import run


def programs(folder: Path, *names: str) -> str:
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        (folder / name).write_text("#!/bin/sh\nexit 0\n")
        (folder / name).chmod(0o755)
    return str(folder)


def test_found_agents_with_a_key_are_ready_and_the_rest_say_what_they_need(tmp_path: Path) -> None:
    path = programs(tmp_path / "bin", "codex-acp", "gemini")
    findings = {f.name: f for f in check({"PATH": path, "OPENAI_API_KEY": "sk-x"}, root=True)}
    assert findings["codex"].ready and findings["codex"].key == "OPENAI_API_KEY"
    assert not findings["gemini"].ready and "GEMINI_API_KEY" in findings["gemini"].needs[0]
    claude = findings["claude-code"]
    assert claude.program is None and any("claude-agent-acp, on PATH" in n for n in claude.needs)
    assert "@agentclientprotocol/claude-agent-acp" in claude.needs[0]  # the package that installs that program
    # As root it runs (kerneltui sets IS_SANDBOX=1 for it): said as a note, never as something it needs.
    assert not any("root" in n or "normal user" in n for n in claude.needs)
    text = report(list(findings.values()), root=True)
    assert "✓ codex" in text and 'acp = "codex"' in text and "kerneltui trusts the workspace" in text
    assert "as root, kerneltui starts it with IS_SANDBOX=1" in text


def test_the_command_prints_json(tmp_path: Path) -> None:
    path = programs(tmp_path / "bin", "gemini")
    env = {"PATH": f"{path}{os.pathsep}{os.environ['PATH']}", "GEMINI_API_KEY": "g"}
    done = run(["-m", "kerneltui", "agents", "check", "--json"], env=env)
    found = {f["name"]: f for f in json.loads(done.stdout)}
    assert found["gemini"]["program"].endswith("/gemini") and found["gemini"]["key"] == "GEMINI_API_KEY"
    assert done.returncode == 0, done.stderr


def test_a_stored_login_is_as_good_as_a_key(tmp_path: Path) -> None:
    """With ~/.codex/auth.json present Codex runs, yet the check said it needed a key or a login."""
    path = programs(tmp_path / "bin", "codex-acp")
    home = tmp_path / "home"
    (home / ".codex").mkdir(parents=True)
    (home / ".codex" / "auth.json").write_text("{}")
    codex = next(f for f in check({"PATH": path, "HOME": str(home)}, root=False) if f.name == "codex")
    assert codex.ready and codex.login == "~/.codex/auth.json", codex
    assert "(logged in: ~/.codex/auth.json)" in report([codex], root=False)
