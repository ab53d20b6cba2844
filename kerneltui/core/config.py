"""The TOML configuration: key bindings, how the ladder runs, and dashboard habits.

# ~/.config/kerneltui/config.toml
[keys]            # binding id = key(s), comma-separated; ids are listed by `?` in the dashboard
approve = "A"
reject = "R,ctrl+r"

[ladder]
python = "/opt/torch/.venv/bin/python3"   # the GPU box's Python (default: kerneltui's own)
judges = 1                                  # judge processes with no GPU (one per GPU otherwise)
debounce = 0.2                              # seconds a file must stay unchanged before it is judged
rejudge_stale = false                       # problem.py changed: judge every version again (else: B)
timeout = 60                                # and every option of `python -m harness --help`, by its name:
arch = "sm_90"                              # compile target with no GPU
seeds = 2                                   # seeds per correctness case
rungs = ["load", "compile", "correctness", "benchmark", "roofline", "dumps"]  # or a subset
executor = "local"                          # or ssh://[user@]host[:port][?gpus=0,1&python=PATH] (a list of
                                            # them), or "ray" / "ray://HOST:10001" (pip install kerneltui[ray])
ssh_options = ["-i", "~/.ssh/gpu_key"]      # given to ssh before the host
sandbox = true                              # false: workers unconfined
fork = true                                 # false: every worker started afresh (seconds each), not forked
spare_idle_s = 120                          # no version this long: the judge ends its spare workers and their
                                            # templates (0: keeps them)

[ui]
bell = true                                 # ring when a version beats the best or the queue empties

[agent]
backend = "claude"                          # claude, acp (an agent from [acp]), or replay (a recorded session)
acp = "claude-code"                         # which [acp] agent s starts (or a command line)
permissions = "ask"                         # an ACP agent's permission requests: ask, allow or deny
model = "claude-opus-4-6"
max_versions = 20                           # stop after this many versions
max_cost_usd = 10.0                         # stop once the session has cost this much
target_roofline_pct = 85                    # stop once a passing version reaches this % of roofline
context = "~/kernel-context"                # the folder agents search (default: <workspace>/context)
prices = { "claude-opus" = [5.0, 25.0] }    # USD per million input, output tokens, by model prefix
verdict_wait_s = 45                         # kerneltui mcp: a call waits this long for a verdict (clients stop
                                            # at 60 s), then answers "judging"; wait_for_verdict waits on
startup_timeout_s = 180                     # acp: an agent that has not started a session by then is stopped
silence_timeout_s = 600                     # acp: a turn silent this long (judging aside) is ended

[tmux]                                      # an agent that speaks neither ACP nor MCP, in a tmux pane:
softmax = "agents:0.1"                      # guidance for softmax is typed into that pane
default = "agents:0.0"                      # and for every other problem into this one

[acp]                                       # agents that speak the Agent Client Protocol, by name
claude-code = "claude-agent-acp"
codex = "npx @zed-industries/codex-acp"
gemini = "gemini --acp"
opencode = "opencode acp"
"""

from __future__ import annotations

import argparse
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agents.base import DEFAULT_MODEL
from harness.options import PER_RUN, Options, by_key, config_values
from kerneltui.core.locations import config_file


class ConfigError(Exception):
    """The config file is not valid; the message names the file and the key."""


@dataclass
class LadderConfig:
    """How kerneltui runs judges (python, judges, debounce, rejudge_stale) and the ladder's own options."""

    python: str | None = None
    judges: int = 1
    debounce: float = 0.2
    rejudge_stale: bool = False  # problem.py changed: judge every version again, not only on `B`
    options: Options = field(default_factory=Options)
    # where judges run: "local", ssh://[user@]host[:port][?gpus=0,1&python=PATH] (several), "ray" or "ray://..."
    executor: list[str] = field(default_factory=lambda: ["local"])
    ssh_options: list[str] = field(default_factory=list)  # e.g. ["-i", "~/.ssh/gpu_key"]
    ray_resources: dict[str, float] = field(default_factory=dict)  # custom resources each Ray judge asks for


@dataclass
class AgentConfig:
    backend: str = "claude"
    model: str = DEFAULT_MODEL
    max_versions: int | None = 20
    max_cost_usd: float | None = None
    target_roofline_pct: float | None = None
    context: str | None = None
    stream: bool = True
    timeout: float = 600.0  # seconds per API request
    max_retries: int = 4  # the SDK's retries of 429, 5xx and timeouts
    retry_wait: float = 5.0  # seconds before a turn that still failed is tried again (doubling)
    recording: str | None = None  # replay: a recording folder (default: the one shipped for the problem)
    pace: float = 1.0  # replay: multiplies the recorded waits
    prices: dict[str, list[float]] = field(default_factory=dict)
    acp: str = "claude-code"  # acp: a name from [acp], or a command line
    permissions: str = "ask"  # acp: how permission requests are answered: ask, allow, deny
    feedback_file: bool = True  # FEEDBACK.md in each problem folder, rewritten after each evaluation
    verdict_wait_s: float = 45.0  # kerneltui mcp: a tool call waits this long for a verdict, then says "judging"
    startup_timeout_s: float = 180.0  # acp: the agent answers initialize and session/new within this
    silence_timeout_s: float = 600.0  # acp: a turn with nothing from the agent this long (judging aside) ends it


ACP_AGENTS = {
    "claude-code": "claude-agent-acp",
    "codex": "npx @zed-industries/codex-acp",
    "gemini": "gemini --acp",
    "opencode": "opencode acp",
}


@dataclass
class Config:
    keys: dict[str, str] = field(default_factory=dict)
    ladder: LadderConfig = field(default_factory=LadderConfig)
    agent: AgentConfig = field(default_factory=AgentConfig)
    acp_agents: dict[str, str] = field(default_factory=lambda: dict(ACP_AGENTS))
    tmux_panes: dict[str, str] = field(default_factory=dict)  # problem (or "default") -> tmux pane
    bell: bool = True
    path: Path | None = None


def load(path: str | Path | None = None) -> Config:
    path = Path(path) if path else config_file()
    if not path.is_file():
        return Config(path=path)
    try:
        data = tomllib.loads(path.read_text())
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: {exc}") from None
    return Config(
        keys=_keys(data.get("keys", {}), path),
        ladder=_ladder(data.get("ladder", {}), path),
        agent=_agent(data.get("agent", {}), path),
        acp_agents=_acp(data.get("acp", {}), path),
        tmux_panes=_tmux(data.get("tmux", {}), path),
        bell=bool(data.get("ui", {}).get("bell", True)),
        path=path,
    )


def _keys(section: Any, path: Path) -> dict[str, str]:
    if not isinstance(section, dict) or not all(isinstance(v, str) for v in section.values()):
        raise ConfigError(f'{path}: [keys] maps binding ids to key names, e.g. approve = "A"')
    return {str(k): v for k, v in section.items()}


def _check_table(section: Any, fields: Any, name: str, path: Path) -> None:
    """A TOML table whose keys are all fields of its dataclass; else ConfigError naming the strays."""
    if not isinstance(section, dict):
        raise ConfigError(f"{path}: [{name}] must be a table")
    unknown = sorted(set(section) - set(fields))
    if unknown:
        raise ConfigError(f"{path}: [{name}] has unknown keys {unknown}; known: {sorted(fields)}")


def _ladder(section: Any, path: Path) -> LadderConfig:
    own = {"python", "judges", "debounce", "rejudge_stale", "executor", "ssh_options", "ray_resources"}
    _check_table(section, own | (set(by_key()) - set(PER_RUN)), "ladder", path)
    try:
        config = LadderConfig(**{k: v for k, v in section.items() if k in own})
        config.judges, config.debounce = int(config.judges), float(config.debounce)
        config.executor = executors(config.executor)
        config.ssh_options = [str(o) for o in config.ssh_options]
        config.ray_resources = {str(k): float(v) for k, v in dict(config.ray_resources).items()}
        if not isinstance(config.rejudge_stale, bool):
            raise ValueError(f"rejudge_stale must be true or false, not {config.rejudge_stale!r}")
        config.options = Options().updated(config_values(section), "[ladder]")
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{path}: [ladder]: {str(exc).removeprefix('[ladder]: ')}") from None
    return config


def executors(value: Any) -> list[str]:
    """`executor`: one or several of local, ssh://..., ray, ray://... (ValueError naming what is wrong)."""
    given = [value] if isinstance(value, str) else list(value) if isinstance(value, list) else None
    if not given or not all(isinstance(v, str) for v in given):
        raise ValueError(f"executor must be a string or a list of them, not {value!r}")
    for one in given:
        if one not in ("local", "ray") and not one.startswith(("ssh://", "ray://", "ray:")):
            raise ValueError(f"executor {one!r}: expected local, ssh://[user@]host[:port], ray or ray://ADDRESS")
    if len(given) > 1 and any(not g.startswith("ssh://") for g in given):
        raise ValueError("several executors are ssh:// targets only")
    return given


def _agent(section: Any, path: Path) -> AgentConfig:
    _check_table(section, AgentConfig.__dataclass_fields__, "agent", path)
    config = AgentConfig(**section)
    if config.backend not in ("claude", "acp", "replay"):
        raise ConfigError(f"{path}: [agent] backend must be claude, acp or replay, not {config.backend!r}")
    if config.permissions not in ("ask", "allow", "deny"):
        raise ConfigError(f"{path}: [agent] permissions must be ask, allow or deny, not {config.permissions!r}")
    prices = config.prices
    if not isinstance(prices, dict) or not all(
        isinstance(v, list) and len(v) == 2 and all(isinstance(x, int | float) for x in v) for v in prices.values()
    ):
        raise ConfigError(
            f"{path}: [agent] prices maps a model prefix to [input, output] USD per MTok, e.g. "
            f'{{ "claude-opus" = [5.0, 25.0] }}'
        )
    try:
        for name in ("max_cost_usd", "target_roofline_pct"):
            value = getattr(config, name)
            setattr(config, name, None if value is None else float(value))
        config.max_versions = None if config.max_versions is None else int(config.max_versions)
        config.timeout, config.pace = float(config.timeout), float(config.pace)
        config.verdict_wait_s = float(config.verdict_wait_s)
        config.startup_timeout_s, config.silence_timeout_s = (
            float(config.startup_timeout_s),
            float(config.silence_timeout_s),
        )
        config.max_retries, config.retry_wait = int(config.max_retries), float(config.retry_wait)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{path}: [agent]: {exc}") from None
    return config


def _acp(section: Any, path: Path) -> dict[str, str]:
    if not isinstance(section, dict) or not all(isinstance(v, str) and v.strip() for v in section.values()):
        raise ConfigError(f'{path}: [acp] maps agent names to command lines, e.g. gemini = "gemini --acp"')
    return {**ACP_AGENTS, **{str(k): v for k, v in section.items()}}


def _tmux(section: Any, path: Path) -> dict[str, str]:
    if not isinstance(section, dict) or not all(isinstance(v, str) and v.strip() for v in section.values()):
        raise ConfigError(f'{path}: [tmux] maps problem names (or default) to tmux panes, e.g. softmax = "agents:0.1"')
    return {str(k): v.strip() for k, v in section.items()}


# --- the options every command that runs judges shares -----------------------------------------------


def add_executor_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--executor",
        action="append",
        help="where judges run (the config's [ladder] executor): local, ssh://[user@]host[:port][?gpus=0,1] "
        "(repeat for several), ray or ray://ADDRESS",
    )


def load_for(args: argparse.Namespace) -> Config:
    """The config file a command line names (--config), with its --executor over the [ladder] executor."""
    config = load(args.config)
    if getattr(args, "executor", None):
        try:
            config.ladder.executor = executors(args.executor)
        except ValueError as exc:
            raise ConfigError(f"--executor: {exc}") from None
    return config
