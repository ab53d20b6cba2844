"""`kerneltui agents check`: which coding agents this box can run under kerneltui, and what each still needs.

Looks for the agents' programs on PATH (the ACP adapters and the CLIs behind them), the API keys they read,
and what stops them here (running as root), and gives the config lines that select each one.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agents.known import KNOWN, KnownAgent


@dataclass
class Finding:
    name: str
    command: str
    program: str | None  # where the program was found, or None
    key: str | None  # the key variable that is set, or None
    login: str | None = None  # a stored login found instead (its file), or None
    needs: list[str] = field(default_factory=list)

    @property
    def ready(self) -> bool:
        return self.program is not None and not self.needs

    def to_json(self) -> dict[str, Any]:
        return {**self.__dict__, "ready": self.ready}


def check(environ: dict[str, str] | None = None, root: bool | None = None) -> list[Finding]:
    environ = dict(os.environ) if environ is None else environ
    root = (os.geteuid() == 0) if root is None else root
    return [_check_one(agent, environ, root) for agent in KNOWN]


def _check_one(agent: KnownAgent, environ: dict[str, str], root: bool) -> Finding:
    program = shutil.which(agent.command.split()[0], path=environ.get("PATH"))
    key = next((k for k in agent.keys if environ.get(k)), None)
    home = Path(environ.get("HOME") or Path.home())
    login = next((f"~/{name}" for name in agent.logins if (home / name).is_file()), None)
    finding = Finding(agent.name, agent.command, program, key, login)
    if program is None:
        finding.needs.append(f"its program, {agent.command.split()[0]}, on PATH: {agent.install}")
    if key is None and login is None:
        finding.needs.append(f"a key ({' or '.join(agent.keys)}) or a login ({agent.login})")
    return finding


def report(findings: list[Finding], root: bool | None = None) -> str:
    root = (os.geteuid() == 0) if root is None else root
    lines = []
    for f in findings:
        mark = "✓" if f.ready else "✗"
        where = f.program or "not found"
        how = f"  (key: {f.key})" if f.key else f"  (logged in: {f.login})" if f.login else ""
        lines.append(f"{mark} {f.name:<12} {where}{how}")
        lines += [f"    needs {need}" for need in f.needs]
        for agent in (a for a in KNOWN if a.name == f.name):
            lines += [f"    note: {note}" for note in agent.notes]
            if root and agent.root_env:
                flags = " ".join(f"{k}={v}" for k, v in agent.root_env.items())
                lines.append(f"    note: as root, kerneltui starts it with {flags} (it refuses root otherwise)")
    ready = [f for f in findings if f.ready] or [f for f in findings if f.program]
    if ready:
        chosen = ready[0]
        lines += [
            "",
            "to use it (config.toml):",
            f'  [agent]\n  backend = "acp"\n  acp = "{chosen.name}"',
            f'  [acp]\n  {chosen.name} = "{chosen.command}"',
        ]
    return "\n".join(lines)
