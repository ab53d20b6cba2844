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

[notify]                                    # told when it matters, away from the dashboard
terminal = true                             # tmux's message inside tmux, else OSC 9/777 where the terminal takes it
command = "curl -s -d @- ntfy.sh/my-gpu"    # gets each notice as JSON on stdin (kind, title, body, problem...)
best = true                                 # and each kind on or off: a version beats the best,
flagged = true                              # a passing version is flagged,
waiting = true                              # an agent waits for you (a permission, a budget, its run ended),
queue_empty = true                          # every version is judged,
agent_failed = true                         # an agent stopped on an error

[agent]
backend = "claude"                          # claude, acp (an agent from [acp]), or replay (a recorded session)
acp = "claude-code"                         # which [acp] agent s starts (or a command line)
permissions = "ask"                         # an ACP agent's permission requests: ask, allow or deny
model = "claude-opus-4-6"
max_versions = 20                           # pause after this many versions (+ or kerneltui grant: go on)
max_cost_usd = 10.0                         # pause once the session has cost this much
on_budget = "pause"                         # or "stop": a spent budget ends the agent
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

Each table is a pydantic model: its keys are checked as the file is read (an error names the file, the table
and the key) and as code assigns them; `kerneltui config --schema` prints the file's JSON schema.
"""

from __future__ import annotations

import argparse
import tomllib
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    WithJsonSchema,
    field_validator,
    model_validator,
)
from pydantic.json_schema import SkipJsonSchema
from pydantic_core import ErrorDetails

from agents.base import DEFAULT_MODEL
from harness.contract.options import PER_RUN, Options, by_key, config_values
from kerneltui.core.config_error import ConfigError
from kerneltui.core.locations import config_file
from kerneltui.core.notify import NotifyConfig

# The file's tables; any other top-level key is ignored (a config shared with a newer kerneltui still loads).
FILE_TABLES = ("keys", "ladder", "agent", "ui", "notify", "acp", "tmux")
KEYS_HINT = 'maps binding ids to key names, e.g. approve = "A"'
ACP_HINT = 'maps agent names to command lines, e.g. gemini = "gemini --acp"'
TMUX_HINT = 'maps problem names (or default) to tmux panes, e.g. softmax = "agents:0.1"'
PRICES_HINT = 'maps a model prefix to [input, output] USD per MTok, e.g. { "claude-opus" = [5.0, 25.0] }'
ACP_AGENTS = {
    "claude-code": "claude-agent-acp",
    "codex": "npx @zed-industries/codex-acp",
    "gemini": "gemini --acp",
    "opencode": "opencode acp",
}

NonBlank = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)]
OneOrMore = Annotated[  # TOML: "local", or a list of ssh:// targets
    list[str],
    WithJsonSchema({"anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]}),
]
Price = Annotated[list[float], Field(min_length=2, max_length=2)]


class Table(BaseModel):
    """A table of the config file: its keys checked when the file is read and when code assigns them."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)


# --- [ladder]: kerneltui's own keys, and the ladder's options (harness.contract.options) by their keys -------

# Options' field types (annotations as text) as JSON schema; the TOML takes rungs as a list or comma-separated text
OPTION_TYPES: dict[str, dict[str, Any]] = {
    "tuple[str, ...]": {"anyOf": [{"type": "array", "items": {"type": "string"}}, {"type": "string"}]},
    "str": {"type": "string"},
    "int": {"type": "integer"},
    "float": {"type": "number"},
    "float | None": {"type": "number"},
    "bool": {"type": "boolean"},
}


def option_keys_schema(schema: dict[str, Any]) -> None:
    """[ladder]'s option keys in its JSON schema, each with its type, default and `python -m harness` help."""
    defaults = Options()
    for key, spec in by_key().items():
        if key in PER_RUN:
            continue
        entry = {**OPTION_TYPES.get(str(spec.type), {}), "description": spec.metadata["help"]}
        default = getattr(defaults, spec.name)
        if default is not None:
            entry["default"] = list(default) if isinstance(default, tuple) else default
        schema["properties"][key] = entry


def option_keys() -> list[str]:
    """The option keys a config file may set (a run's own, PER_RUN, it may not)."""
    return sorted(set(by_key()) - set(PER_RUN))


class LadderConfig(Table):
    """How kerneltui runs judges, and the ladder's options (every key of `python -m harness --help`)."""

    model_config = ConfigDict(arbitrary_types_allowed=True, json_schema_extra=option_keys_schema)

    python: str | None = Field(default=None, description="the GPU box's Python (default: kerneltui's own)")
    judges: int = Field(default=1, description="judge processes with no GPU (one per GPU otherwise)")
    debounce: float = Field(default=0.2, description="seconds a file must stay unchanged before it is judged")
    rejudge_stale: bool = Field(default=False, description="problem.py changed: judge every version again (else: on B)")
    executor: OneOrMore = Field(
        default_factory=lambda: ["local"],
        description='where judges run: "local", ssh://[user@]host[:port][?gpus=0,1&python=PATH] (a list of '
        'them), or "ray" / "ray://HOST:10001"',
    )
    ssh_options: list[str] = Field(default_factory=list, description='given to ssh before the host: ["-i", "KEY"]')
    ray_resources: dict[str, float] = Field(default_factory=dict, description="custom resources a Ray judge asks for")
    options: SkipJsonSchema[Options] = Field(default_factory=Options, exclude=True)  # from the table's option keys

    @model_validator(mode="before")
    @classmethod
    def read_option_keys(cls, table: Any) -> Any:
        """The table's option keys (timeout, rungs, ...) read by their own parsers into `options`."""
        if not isinstance(table, dict):
            return table
        if "options" in table and not isinstance(table["options"], Options):
            raise ValueError(
                f"options: not a key; the ladder's options are keys of the table: {', '.join(option_keys())}"
            )
        values = config_values(table)
        if not values:
            return table
        own = {key: value for key, value in table.items() if key not in values}
        own["options"] = own.get("options", Options()).updated(values)
        return own

    @field_validator("executor", mode="before")
    @classmethod
    def check_executors(cls, value: Any) -> list[str]:
        return executors(value)


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


# --- [agent], [ui] and the file ------------------------------------------------------------------------


class AgentConfig(Table):
    """Which agent `s` (and `kerneltui agent`) starts, and when it stops."""

    backend: Literal["claude", "acp", "replay"] = Field(
        default="claude", description="claude, acp (an agent from [acp]), or replay (a recorded session)"
    )
    model: str = DEFAULT_MODEL
    max_versions: int | None = Field(default=20, description="pause after this many versions (until granted more)")
    max_cost_usd: float | None = Field(default=None, description="pause once the session has cost this much (USD)")
    target_roofline_pct: float | None = Field(
        default=None, description="stop once a passing version reaches this % of roofline"
    )
    on_budget: Literal["pause", "stop"] = Field(
        default="pause", description="a spent budget pauses the agent until granted more, or stops it"
    )
    context: str | None = Field(default=None, description="the folder agents search (default: <workspace>/context)")
    stream: bool = True
    timeout: float = Field(default=600.0, description="seconds per API request")
    max_retries: int = Field(default=4, description="the SDK's retries of 429, 5xx and timeouts")
    retry_wait: float = Field(
        default=5.0, description="seconds before a turn that still failed is tried again (doubling)"
    )
    recording: str | None = Field(
        default=None, description="replay: a recording folder (default: the problem's shipped one)"
    )
    pace: float = Field(default=1.0, description="replay: multiplies the recorded waits")
    prices: dict[str, Price] = Field(default_factory=dict, description=PRICES_HINT)
    acp: str = Field(default="claude-code", description="acp: a name from [acp], or a command line")
    permissions: Literal["ask", "allow", "deny"] = Field(
        default="ask", description="acp: how permission requests are answered"
    )
    feedback_file: bool = Field(
        default=True, description="FEEDBACK.md in each problem folder, rewritten after each evaluation"
    )
    verdict_wait_s: float = Field(
        default=45.0, description='kerneltui mcp: a tool call waits this long for a verdict, then says "judging"'
    )
    startup_timeout_s: float = Field(
        default=180.0, description="acp: the agent answers initialize and session/new within this"
    )
    silence_timeout_s: float = Field(default=600.0, description="acp: a turn silent this long (judging aside) is ended")


class UiConfig(Table):
    """Dashboard habits."""

    model_config = ConfigDict(extra="ignore")  # as ever: a key of [ui] kerneltui does not know is ignored

    bell: bool = Field(default=True, description="ring when a version beats the best or the queue empties")


class Config(BaseModel):
    """kerneltui's config file (~/.config/kerneltui/config.toml)."""

    model_config = ConfigDict(
        extra="ignore", validate_assignment=True, validate_by_name=True, validate_by_alias=True, title="kerneltui"
    )

    keys: dict[str, str] = Field(default_factory=dict, description=KEYS_HINT)
    ladder: LadderConfig = Field(default_factory=LadderConfig)
    agent: AgentConfig = Field(default_factory=AgentConfig)
    ui: UiConfig = Field(default_factory=UiConfig)
    notify: NotifyConfig = Field(default_factory=NotifyConfig)
    acp_agents: dict[str, NonBlank] = Field(default_factory=lambda: dict(ACP_AGENTS), alias="acp", description=ACP_HINT)
    tmux_panes: dict[str, NonBlank] = Field(default_factory=dict, alias="tmux", description=TMUX_HINT)
    path: SkipJsonSchema[Path | None] = Field(default=None, exclude=True)  # the file read, not a key of it

    @field_validator("acp_agents", mode="after")
    @classmethod
    def over_shipped_agents(cls, agents: dict[str, str]) -> dict[str, str]:
        return {**ACP_AGENTS, **agents}

    @property
    def bell(self) -> bool:
        return self.ui.bell

    @bell.setter
    def bell(self, ring: bool) -> None:
        self.ui.bell = ring


def load(path: str | Path | None = None) -> Config:
    path = Path(path) if path else config_file()
    if not path.is_file():
        return Config(path=path)
    try:
        data = tomllib.loads(path.read_text())
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: {exc}") from None
    try:
        config = Config.model_validate({name: table for name, table in data.items() if name in FILE_TABLES})
    except ValidationError as exc:
        raise ConfigError("\n".join(f"{path}: {said}" for said in problems(exc))) from None
    config.path = path
    return config


def in_effect(config: Config) -> dict[str, Any]:
    """The settings in the file's layout, the ladder's options by their keys (`kerneltui config`)."""
    tables = config.model_dump(mode="json", by_alias=True)
    options = config.ladder.options
    for key in option_keys():
        value = getattr(options, by_key()[key].name)
        tables["ladder"][key] = list(value) if isinstance(value, tuple) else value
    return tables


def json_schema() -> dict[str, Any]:
    """The config file's layout as JSON Schema (`kerneltui config --schema`)."""
    return Config.model_json_schema(by_alias=True)


# --- what is wrong, said as `[table]: key: problem, not VALUE` ----------------------------------------

EXPECTED = {
    "int_type": "expected an integer",
    "int_parsing": "expected an integer",
    "int_from_float": "expected an integer",
    "float_type": "expected a number",
    "float_parsing": "expected a number",
    "bool_type": "expected true or false",
    "bool_parsing": "expected true or false",
    "string_type": "expected a string",
    "string_too_short": "must not be blank",
    "list_type": "expected a list",
    "too_short": "expected 2 numbers",
    "too_long": "expected 2 numbers",
    "dict_type": "expected a table",
    "model_type": "expected a table",
}
HINTS = {  # said with an error in a table of free keys
    ("keys",): f"[keys] {KEYS_HINT}",
    ("acp",): f"[acp] {ACP_HINT}",
    ("tmux",): f"[tmux] {TMUX_HINT}",
    ("agent", "prices"): f"[agent] prices {PRICES_HINT}",
}


def problems(exc: ValidationError) -> list[str]:
    """Each error on a line of its own; a table's unknown keys on one, with the keys it knows."""
    said: list[str] = []
    unknown: dict[str, list[str]] = {}
    for error in exc.errors():
        if error["type"] == "extra_forbidden":
            unknown.setdefault(str(error["loc"][0]), []).append(str(error["loc"][-1]))
        else:
            said.append(problem(error))
    for table, keys in unknown.items():
        said.append(f"[{table}]: unknown key(s) {', '.join(keys)}; known: {', '.join(known_keys(table))}")
    return said


def known_keys(table: str) -> list[str]:
    """The keys [ladder] or [agent] takes (the tables whose unknown keys are errors)."""
    if table == "ladder":
        return sorted(set(LadderConfig.model_fields) - {"options"} | set(option_keys()))
    return sorted(AgentConfig.model_fields)


def problem(error: ErrorDetails) -> str:
    """One validation error: where (the table, then the key), what is wrong, and the value given."""
    table, *keys = error["loc"]
    wrong = what_is_wrong(error)
    if keys and wrong.startswith(str(keys[-1])):  # a message that names its key itself
        keys.pop()
    where = f"[{table}]" + "".join(f"[{k}]" if isinstance(k, int) else f": {k}" for k in keys)
    said = f"{where}: {wrong}"
    hint = next((text for at, text in HINTS.items() if tuple(error["loc"][: len(at)]) == at), None)
    return f"{said}; {hint}" if hint else said


def what_is_wrong(error: ErrorDetails) -> str:
    kind, ctx = error["type"], error.get("ctx", {})
    if kind == "value_error":
        return str(ctx["error"])
    text = f"must be {ctx['expected']}" if kind == "literal_error" else EXPECTED.get(kind, error["msg"])
    value = error["input"]
    return f"{text}, not {value!r}" if isinstance(value, str | int | float) else text


# --- the config as a command line names it (its options are kerneltui.cli.options') ---------------------


def load_for(args: argparse.Namespace) -> Config:
    """The config file a command line names (--config), with its --executor over the [ladder] executor."""
    config = load(args.config)
    if getattr(args, "executor", None):
        try:
            config.ladder.executor = executors(args.executor)
        except ValueError as exc:
            raise ConfigError(f"--executor: {exc}") from None
    return config
