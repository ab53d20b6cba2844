"""The ladder's options: one model read the same way from flags, a config table and a judge request."""

from __future__ import annotations

import argparse

import pytest

from harness.contract import options as ladder_options
from harness.contract.options import Options


def parsed(argv: list[str]) -> Options:
    parser = argparse.ArgumentParser()
    ladder_options.add_arguments(parser)
    return Options().updated(ladder_options.given(parser.parse_args(argv)))


def test_a_judges_command_line_gives_back_the_same_options() -> None:
    options = Options().updated(
        {"rungs": ["compile", "load"], "timeout": 7, "seeds": "3", "sandbox": False, "confirm": "false"}
    )
    assert options.rungs == ("load", "compile") and options.seeds_per_case == 3 and not options.confine
    assert parsed(options.to_argv()) == options
    assert Options().to_argv() == [] and parsed([]) == Options()


def test_best_us_by_device_survives_the_command_line() -> None:
    options = Options().updated({"best_us": {"NVIDIA H200": 12.5}, "max_memory_mb": 2048})
    assert parsed(options.to_argv()) == options


@pytest.mark.parametrize(
    ("values", "words"),
    [
        ({"timeout": 0}, "timeout: must be above 0"),
        ({"seeds": "many"}, "seeds: invalid literal"),
        ({"rungs": "load,bogus"}, "unknown rung(s) bogus"),
        ({"sandbox": "maybe"}, "sandbox: expected true or false"),
        ({"colour": "red"}, "unknown option(s) ['colour']"),
    ],
)
def test_bad_values_name_their_key(values: dict, words: str) -> None:
    with pytest.raises(ValueError, match=None) as raised:
        Options().updated(values)
    assert words in str(raised.value)
