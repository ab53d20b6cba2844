"""What kerneltui knows of the coding agents people run under it: how to get each, the keys it reads, how
to log in without one, and the environment it needs to work under kerneltui. `kerneltui agents check`
reports from this; the ACP client uses it for the flags it sets and the hints it gives."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class KnownAgent:
    name: str  # the [acp] name
    command: str  # the ACP command line the config gives
    install: str  # how to get the program
    keys: tuple[str, ...]  # any one of these environment variables is enough
    login: str  # the other way in, without a key
    notes: tuple[str, ...] = ()
    logins: tuple[str, ...] = ()  # where a stored login lives, under the home folder
    env: dict[str, str] = field(default_factory=dict)  # set for it by kerneltui, said in the transcript
    root_env: dict[str, str] = field(default_factory=dict)  # set for it when kerneltui runs as root


KNOWN = (
    KnownAgent(
        "claude-code",
        "claude-agent-acp",
        "npm install -g @agentclientprotocol/claude-agent-acp (it carries Claude Code)",
        ("ANTHROPIC_API_KEY", "CLAUDE_CODE_OAUTH_TOKEN"),
        "run claude, then /login",
        ("kerneltui's MCP server is handed over by kerneltui itself: no .mcp.json approval is needed",),
        logins=(".claude/.credentials.json",),
        root_env={"IS_SANDBOX": "1"},  # Claude Code will not skip its permission prompts as root without it
    ),
    KnownAgent(
        "codex",
        "codex-acp",
        "npm install -g @zed-industries/codex-acp (it runs Codex)",
        ("OPENAI_API_KEY", "CODEX_API_KEY"),
        "run codex login",
        ("Codex keeps a key it was given in ~/.codex/auth.json and uses it on later runs",),
        logins=(".codex/auth.json",),
    ),
    KnownAgent(
        "gemini",
        "gemini --acp",
        "npm install -g @google/gemini-cli",
        ("GEMINI_API_KEY", "GOOGLE_API_KEY"),
        "run gemini, then sign in with Google",
        ("Gemini CLI starts no MCP server in a folder it does not trust: kerneltui trusts the workspace for it",),
        logins=(".gemini/oauth_creds.json",),
        env={"GEMINI_CLI_TRUST_WORKSPACE": "true"},  # else kerneltui's ladder never reaches it
    ),
    KnownAgent(
        "opencode",
        "opencode acp",
        "npm install -g opencode-ai",
        ("ANTHROPIC_API_KEY", "OPENAI_API_KEY"),
        "run opencode auth login",
        logins=(".local/share/opencode/auth.json",),
    ),
)


def known_for(command: list[str]) -> KnownAgent | None:
    """The known agent a command line runs (by its programs' names: claude-agent-acp, codex-acp, gemini...)."""
    names = " ".join(Path(part).name for part in command)
    for agent in KNOWN:
        program = agent.command.split()[0]
        if program in names or (agent.name == "claude-code" and "claude" in names):
            return agent
    return None
