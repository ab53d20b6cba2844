"""`kerneltui agents check`: which coding agents this box can run under kerneltui, and what each still needs.

Looks for the agents' programs on PATH (the ACP adapters and the CLIs behind them), the API keys they read,
and what stops them here (running as root), and gives the config lines that select each one.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class KnownAgent:
    name: str  # the [acp] name
    command: str  # the ACP command line the config gives
    install: str  # how to get the program
    keys: tuple[str, ...]  # any one of these environment variables is enough
    login: str  # the other way in, without a key
    notes: tuple[str, ...] = ()


KNOWN = (
    KnownAgent(
        "claude-code",
        "claude-agent-acp",
        "npm install -g @zed-industries/claude-code-acp (or claude-agent-acp) and Claude Code",
        ("ANTHROPIC_API_KEY", "CLAUDE_CODE_OAUTH_TOKEN"),
        "claude, then /login",
        ("kerneltui's MCP server is handed over by kerneltui itself: no .mcp.json approval is needed",),
    ),
    KnownAgent(
        "codex",
        "codex-acp",
        "npm install -g @zed-industries/codex-acp (runs Codex)",
        ("OPENAI_API_KEY", "CODEX_API_KEY"),
        "codex login",
    ),
    KnownAgent(
        "gemini",
        "gemini --acp",
        "npm install -g @google/gemini-cli",
        ("GEMINI_API_KEY", "GOOGLE_API_KEY"),
        "gemini, then sign in with Google",
        ("Gemini CLI asks to trust a folder before it uses its tools: trust the workspace once",),
    ),
    KnownAgent(
        "opencode",
        "opencode acp",
        "npm install -g opencode-ai",
        ("ANTHROPIC_API_KEY", "OPENAI_API_KEY"),
        "opencode auth login",
    ),
)


@dataclass
class Finding:
    name: str
    command: str
    program: str | None  # where the program was found, or None
    key: str | None  # the key variable that is set, or None
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
    finding = Finding(agent.name, agent.command, program, key)
    if program is None:
        finding.needs.append(f"{agent.command.split()[0]} is not on PATH: {agent.install}")
    if key is None:
        finding.needs.append(f"a key ({' or '.join(agent.keys)}) or a login ({agent.login})")
    if root and agent.name == "claude-code":
        finding.needs.append(
            "a normal user: as root the Claude Code adapter may exit at start (Claude Code will not skip its "
            "permission prompts as root); run kerneltui as a normal user"
        )
    return finding


def report(findings: list[Finding]) -> str:
    lines = []
    for f in findings:
        mark = "✓" if f.ready else "✗"
        where = f.program or "not found"
        lines.append(f"{mark} {f.name:<12} {where}" + (f"  (key: {f.key})" if f.key else ""))
        lines += [f"    needs {need}" for need in f.needs]
        lines += [f"    note: {note}" for agent in KNOWN if agent.name == f.name for note in agent.notes]
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
