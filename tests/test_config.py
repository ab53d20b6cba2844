"""The config file: its tables as pydantic models, errors that name the file, the table and the key, and the
schema `kerneltui config --schema` prints."""

from __future__ import annotations

import json
import sys
import tomllib
from pathlib import Path

import jsonschema
import pydantic
import pytest

from harness.contract.options import PER_RUN, Options, by_key
from kerneltui import cli
from kerneltui.core import config as config_mod
from kerneltui.core.config import ACP_AGENTS, Config, ConfigError, LadderConfig, load


def written(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "kerneltui.toml"
    path.write_text(text)
    return path


def documented_example() -> str:
    """The config file the module's docstring shows."""
    doc = config_mod.__doc__ or ""
    return doc.split("\n\n", 1)[1].split("\n\nEach table")[0]


def test_the_documented_example_loads(tmp_path: Path) -> None:
    config = load(written(tmp_path, documented_example()))
    assert config.keys == {"approve": "A", "reject": "R,ctrl+r"}
    assert (config.ladder.python, config.ladder.judges, config.ladder.debounce) == (
        "/opt/torch/.venv/bin/python3",
        1,
        0.2,
    )
    assert config.ladder.options.seeds_per_case == 2 and config.ladder.options.spare_idle_s == 120
    assert config.ladder.ssh_options == ["-i", "~/.ssh/gpu_key"] and config.ladder.executor == ["local"]
    assert config.agent.prices == {"claude-opus": [5.0, 25.0]} and config.agent.max_cost_usd == 10.0
    assert config.tmux_panes == {"softmax": "agents:0.1", "default": "agents:0.0"} and config.bell is True
    assert config.acp_agents == ACP_AGENTS and config.path == tmp_path / "kerneltui.toml"


def test_no_file_gives_the_defaults(tmp_path: Path) -> None:
    config = load(tmp_path / "absent.toml")
    assert config.ladder.options == Options() and config.ladder.executor == ["local"] and config.ladder.judges == 1
    assert config.agent.backend == "claude" and config.agent.max_versions == 20 and config.acp_agents == ACP_AGENTS
    assert config.path == tmp_path / "absent.toml"


def test_ladder_options_are_read_by_their_own_parsers(tmp_path: Path) -> None:
    text = '[ladder]\ntimeout = 30\nrungs = "compile,load"\nsandbox = false\nseeds = 1\nexecutor = ["ssh://a", "ssh://b"]\n'
    ladder = load(written(tmp_path, text)).ladder
    assert ladder.options == Options(timeout=30.0, rungs=("load", "compile"), confine=False, seeds_per_case=1)
    assert ladder.executor == ["ssh://a", "ssh://b"]


def test_code_sets_the_config_as_before_and_is_checked_too() -> None:
    config = Config(ladder=LadderConfig(judges=2, options=Options(timeout=4)))
    config.ladder.judges = 1
    config.ladder.options = config.ladder.options.updated({"rungs": "load"})
    config.agent.backend, config.agent.pace = "replay", 0.05
    config.ladder.ray_resources = {"judge": 1}
    config.tmux_panes = {}
    config.bell = False
    assert (config.ladder.judges, config.ladder.options.rungs, config.ladder.options.timeout) == (1, ("load",), 4.0)
    assert config.ladder.ray_resources == {"judge": 1.0} and config.ui.bell is False
    for wrong in (lambda: setattr(config.ladder, "judges", "x"), lambda: setattr(config.agent, "backend", "gpt")):
        with pytest.raises(pydantic.ValidationError):
            wrong()
    with pytest.raises(pydantic.ValidationError, match="executor"):
        config.ladder.executor = ["slurm"]
    copied = config.ladder.model_copy(update={"options": Options(timeout=9)})
    assert copied.options.timeout == 9 and config.ladder.options.timeout == 4


@pytest.mark.parametrize(
    ("text", "said"),
    [
        # what the hand-written loader said without naming the key ("invalid literal for int()"), or took
        ('[ladder]\njudges = "x"\n', "[ladder]: judges: expected an integer, not 'x'"),
        ('[ladder]\nssh_options = "-i key"\n', "[ladder]: ssh_options: expected a list, not '-i key'"),
        ("[agent]\nmax_versions = 2.5\n", "[agent]: max_versions: expected an integer, not 2.5"),
        ("[agent]\nmodel = 5\n", "[agent]: model: expected a string, not 5"),
        ('ui = "loud"\n', "[ui]: expected a table, not 'loud'"),
        # as before
        ("[ladder]\ntimeout = -1\n", "[ladder]: timeout: must be above 0, not -1"),
        ('[ladder]\nrungs = ["load", "nope"]\n', "[ladder]: rungs: unknown rung(s) nope"),
        ('[ladder]\nexecutor = "slurm"\n', "[ladder]: executor 'slurm': expected local, ssh://"),
        ('[ladder]\nrejudge_stale = "maybe"\n', "[ladder]: rejudge_stale: expected true or false, not 'maybe'"),
        ('[agent]\nbackend = "gpt"\n', "[agent]: backend: must be 'claude', 'acp' or 'replay', not 'gpt'"),
        ("[agent]\nprices = { x = [1] }\n", "[agent]: prices: x: expected 2 numbers; [agent] prices maps a model"),
        ("[keys]\napprove = 1\n", "[keys]: approve: expected a string, not 1; [keys] maps binding ids"),
        ('[acp]\ngemini = " "\n', "[acp]: gemini: must not be blank"),
        ("[tmux]\ndefault = 3\n", "[tmux]: default: expected a string, not 3; [tmux] maps problem names"),
        ("ladder = 3\n", "[ladder]: expected a table, not 3"),
        ("[ladder\n", "Expected ']'"),
    ],
)
def test_errors_name_the_file_the_table_and_the_key(tmp_path: Path, text: str, said: str) -> None:
    path = written(tmp_path, text)
    with pytest.raises(ConfigError) as raised:
        load(path)
    assert str(raised.value).startswith(f"{path}: ") and said in str(raised.value), str(raised.value)


def test_unknown_keys_of_ladder_and_agent_are_errors_elsewhere_ignored(tmp_path: Path) -> None:
    for table, keys in (("ladder", ("bogus", "state_dir")), ("agent", ("bogus",))):
        text = f"[{table}]\n" + "".join(f"{key} = 1\n" for key in keys)
        with pytest.raises(ConfigError, match=rf"\[{table}\]: unknown key\(s\) {', '.join(keys)}; known: ") as raised:
            load(written(tmp_path, text))
        assert "timeout" in str(raised.value)  # the ladder's options, and [agent]'s own timeout
    config = load(written(tmp_path, "future = 1\n[other]\nx = 1\n[ui]\nbell = false\nshiny = true\n"))
    assert config.bell is False


def test_bell_reads_true_and_false_as_such(tmp_path: Path) -> None:
    """bool("no") was True: a bell turned off in words rang on."""
    assert load(written(tmp_path, '[ui]\nbell = "no"\n')).bell is False


def test_acp_agents_add_to_the_shipped_ones_and_panes_are_stripped(tmp_path: Path) -> None:
    config = load(
        written(tmp_path, '[acp]\nmine = "my-agent --acp"\ngemini = "gemini2 --acp"\n[tmux]\nx = " a:0.1 "\n')
    )
    assert config.acp_agents == {**ACP_AGENTS, "mine": "my-agent --acp", "gemini": "gemini2 --acp"}
    assert config.tmux_panes == {"x": "a:0.1"}


def test_the_schema_describes_the_file(tmp_path: Path) -> None:
    schema = config_mod.json_schema()
    assert set(schema["properties"]) == {"keys", "ladder", "agent", "ui", "notify", "acp", "tmux"}
    ladder = schema["$defs"]["LadderConfig"]["properties"]
    for key in by_key():
        assert (key in ladder) == (key not in PER_RUN), key
        assert key in PER_RUN or ("type" in ladder[key] or "anyOf" in ladder[key]), key
    assert ladder["timeout"] == {"type": "number", "default": 60.0, "description": by_key()["timeout"].metadata["help"]}
    jsonschema.validate(tomllib.loads(documented_example()), schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"ladder": {"bogus": 1}}, schema)


def test_kerneltui_config_prints_the_schema_and_the_settings(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "stdout", sys.stdout)  # main() wraps them; put back after the test
    monkeypatch.setattr(sys, "stderr", sys.stderr)
    assert cli.main(["config", "--schema"]) == cli.EXIT_OK
    assert json.loads(capsys.readouterr().out) == config_mod.json_schema()
    path = written(tmp_path, '[ladder]\ntimeout = 30\nrungs = "load"\n[ui]\nbell = false\n')
    assert cli.main(["config", "--config", str(path)]) == cli.EXIT_OK
    settings = json.loads(capsys.readouterr().out)
    assert settings["ladder"]["timeout"] == 30.0 and settings["ladder"]["rungs"] == ["load"]
    assert "options" not in settings["ladder"] and settings["ui"] == {"bell": False} and "path" not in settings
    path.write_text("[ladder]\njudges = 'x'\n")
    assert cli.main(["config", "--config", str(path)]) == cli.EXIT_USAGE
    assert "[ladder]: judges: expected an integer" in capsys.readouterr().err
