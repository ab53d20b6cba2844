"""`kerneltui agents check` and `kerneltui doctor`: what this box can run, and what each thing still needs."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from kerneltui.cli.options import EXIT_FAILED, EXIT_OK, Subparsers, add_json


def cmd_agents(args: argparse.Namespace) -> int:
    """Which coding agents this box can run under kerneltui, and what each still needs."""
    from kerneltui.core.agents.check import check, report

    findings = check()
    if args.json:
        print(json.dumps([f.to_json() for f in findings]))
    else:
        print(report(findings))
    return EXIT_OK if any(f.ready for f in findings) else EXIT_FAILED


def cmd_doctor(args: argparse.Namespace) -> int:
    """What containing versions can use on this box, asked of the ladder's own Python (KERNELTUI_PYTHON)."""
    import subprocess
    import tempfile

    from kerneltui.core.judging.client import harness_env, harness_python

    python = harness_python()
    with tempfile.TemporaryDirectory() as state:
        argv = [python, "-m", "harness", "doctor", *(["--json"] if args.json else [])]
        done = subprocess.run(argv, env=harness_env(Path(state)), cwd=state)
    return done.returncode


def add_agents(commands: Subparsers) -> None:
    agents = commands.add_parser("agents", help="the coding agents this box can run, and what each needs")
    agents.add_argument("action", choices=["check"], help="check: look for them")
    add_json(agents, "print one JSON array")
    agents.set_defaults(func=cmd_agents)


def add_doctor(commands: Subparsers) -> None:
    doctor = commands.add_parser("doctor", help="how kernel versions are contained on this box, and how to get more")
    add_json(doctor, "print one JSON object")
    doctor.set_defaults(func=cmd_doctor)
