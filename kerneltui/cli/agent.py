"""`kerneltui agent PROBLEM`: the headless agent front end. An agent works on one problem with no dashboard,
its transcript on the terminal (kerneltui.cli.transcript); its versions are judged here, or by the kerneltui
already judging the workspace. Ctrl-C or SIGTERM asks it to stop, and waits a bounded time."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from typing import TYPE_CHECKING, Any

from kerneltui.cli.options import EXIT_FAILED, EXIT_OK, EXIT_USAGE, Subparsers, add_config, add_executor, add_workspace
from kerneltui.cli.transcript import print_event, say_headless
from kerneltui.core.workspace import resolve

if TYPE_CHECKING:
    from kerneltui.core.config import Config

CANCEL_WAIT_S = 15.0  # how long Ctrl-C or SIGTERM waits for an agent to stop before recording it stopped
# the [agent] settings the command line may set, each by the option of its name
AGENT_OVERRIDES = (
    "backend",
    "model",
    "max_versions",
    "max_cost_usd",
    "target_roofline_pct",
    "on_budget",
    "recording",
    "pace",
    "acp",
    "permissions",
)


def cmd_agent(args: argparse.Namespace) -> int:
    """An agent on one problem, headless: judged here (or by the kerneltui already judging the workspace)."""
    from kerneltui.core.config import load_for
    from kerneltui.core.session import Session, SessionRefused

    workspace = resolve(args.workspace)
    workspace.problem_dir(args.problem)
    config = load_for(args)
    override_agent_settings(config, args)
    session = Session(workspace, config, lambda event: say_headless(session, event), echo=print_event)
    try:
        run = session.start_agent(args.problem)
    except SessionRefused as exc:
        print(f"error: {exc}", file=sys.stderr)
        session.close()
        return EXIT_USAGE
    # An event, not Thread.join: a join cut short by Ctrl-C can leave is_alive() saying False while it runs
    finished = threading.Event()

    def work() -> None:
        try:
            session.run_agent(run)
        finally:
            finished.set()

    thread = threading.Thread(target=work, name="kerneltui-agent", daemon=True)
    stopped_by: list[int] = []

    def interrupted(signum: int, frame: Any) -> None:
        stopped_by.append(signum)
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, interrupted)
    try:
        session.start_scheduler(wait_s=120)
        thread.start()
        while not finished.wait(0.2):
            pass
    except KeyboardInterrupt:
        stop_agent_within(session, run, finished, CANCEL_WAIT_S)
        return 128 + (stopped_by[0] if stopped_by else signal.SIGINT)
    finally:
        session.close()
    return EXIT_FAILED if run.failed else EXIT_OK


def override_agent_settings(config: Config, args: argparse.Namespace) -> None:
    """The command line's agent options over the config file's [agent] table (--acp picks the ACP backend)."""
    for name in AGENT_OVERRIDES:
        if getattr(args, name) is not None:
            setattr(config.agent, name, getattr(args, name))
    if args.acp:
        config.agent.backend = "acp"


def stop_agent_within(session: Any, run: Any, finished: Any, seconds: float) -> None:
    """Asks the agent to stop and waits a bounded time (a second Ctrl-C cuts it short); an agent still
    running then is recorded as stopped, so its session never stays open in the history."""
    print(f"stopping the agent (waiting up to {seconds:.0f} s; Ctrl-C again to quit at once)…", file=sys.stderr)
    run.request_stop()
    try:
        finished.wait(seconds)
    except KeyboardInterrupt:
        pass
    if not finished.is_set():
        reason = f"interrupted: the agent did not stop within {seconds:.0f} s of being asked"
        session.abandon_agent(run, reason)
        print(f"■ stopped: {reason}", file=sys.stderr)


def cmd_grant(args: argparse.Namespace) -> int:
    """More budget for the problem's agent paused on a spent one, wherever it runs (its host reads the history)."""
    from kerneltui.cli.workspace import open_store
    from kerneltui.core.agents.host import grant_budget
    from kerneltui.core.config import load_for

    workspace = resolve(args.workspace)
    workspace.problem_dir(args.problem)
    grant = grant_budget(load_for(args).agent)
    grant.update({k: v for k, v in (("versions", args.versions), ("cost_usd", args.cost_usd)) if v is not None})
    store = open_store(workspace)
    try:
        session = store.open_agent_session(args.problem)
        granted = store.grant(int(session["id"]), args.problem, grant) if session else None
    finally:
        store.close()
    if session is None or granted is None:
        print(f"error: no agent on {args.problem} is paused on a spent budget", file=sys.stderr)
        return EXIT_FAILED
    print(f"granted {granted} to the agent on {args.problem} (session {session['id']}): it goes on")
    return EXIT_OK


def add_grant(commands: Subparsers) -> None:
    grant = commands.add_parser("grant", help="more budget for a problem's agent paused on a spent one")
    grant.add_argument("problem")
    add_workspace(grant, None)
    grant.add_argument("--versions", type=int, help="this many more versions (default: the config's max_versions)")
    grant.add_argument("--cost", type=float, dest="cost_usd", help="this many more USD (default: max_cost_usd)")
    add_config(grant)
    grant.set_defaults(func=cmd_grant)


def add_agent(commands: Subparsers) -> None:
    agent = commands.add_parser("agent", help="run an agent on a problem, headless (guidance from `kerneltui guide`)")
    agent.add_argument("problem")
    add_workspace(agent, None)
    agent.add_argument("--backend", choices=("claude", "acp", "replay"), help="default: the config's, else claude")
    agent.add_argument("--acp", help='an ACP agent: a name from [acp] or a command line, e.g. "gemini --acp"')
    agent.add_argument(
        "--permissions",
        choices=("ask", "allow", "deny"),
        help="an ACP agent's permission requests (ask: on the terminal, denied without one)",
    )
    agent.add_argument("--model", help="Claude model (default: the config's, else claude-opus-4-6)")
    agent.add_argument(
        "--max-versions", type=int, dest="max_versions", help="pause after N versions (kerneltui grant: go on)"
    )
    agent.add_argument(
        "--max-cost", type=float, dest="max_cost_usd", help="pause once the session cost this much (USD)"
    )
    agent.add_argument(
        "--target-roofline",
        type=float,
        dest="target_roofline_pct",
        help="stop once a passing version reaches this %% of roofline",
    )
    agent.add_argument(
        "--on-budget",
        choices=("pause", "stop"),
        dest="on_budget",
        help="a spent budget pauses the agent until `kerneltui grant` (the default), or stops it",
    )
    agent.add_argument("--recording", help="replay: a recording folder (default: the one shipped for the problem)")
    agent.add_argument("--pace", type=float, help="replay: multiply the recorded waits (0: no waits)")
    add_config(agent)
    add_executor(agent)
    agent.set_defaults(func=cmd_agent)
