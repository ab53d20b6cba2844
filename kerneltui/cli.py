"""The `kerneltui` command: the dashboard by default, and headless subcommands for scripts.

Exit status of eval: 0 every rung passed (skips allowed), 1 a rung failed, 2 bad usage or a bad problem.
"""

from __future__ import annotations

import argparse
import getpass
import io
import json
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO, cast

from harness.contract import options as ladder_options
from harness.contract.report import rung_line, trust_lines
from harness.contract.results import PROFILE_RUNGS, RungResult
from harness.contract.source import VersionTooLarge
from harness.contract.text import printable
from kerneltui.core import config as config_mod
from kerneltui.core import runner
from kerneltui.core.judge import harness_env, harness_python
from kerneltui.core.verdicts import approval_doubt
from kerneltui.core.workspace import Workspace, WorkspaceError, for_version, resolve
from kerneltui.history.store import HistoryTooNew, Store

if TYPE_CHECKING:
    from kerneltui.core.session import SessionEvent

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
CANCEL_WAIT_S = 15.0  # how long Ctrl-C or SIGTERM waits for an agent to stop before recording it stopped
CONFIG_HELP = "a config file (default: $XDG_CONFIG_HOME/kerneltui/config.toml)"


def open_store(workspace: Workspace) -> Store:
    opened = Store.open(workspace.db_path)
    if opened.warning:
        print(f"warning: {opened.warning}", file=sys.stderr)
    return opened.store


def cmd_eval(args: argparse.Namespace, kind: str | None = None) -> int:
    workspace, _, _ = for_version(Path(args.version))
    if args.workspace and Path(args.workspace).resolve() != workspace.root:
        print(f"note: {args.version} belongs to workspace {workspace.root}; recording it there", file=sys.stderr)
    config = config_mod.load_for(args)
    try:  # the config file's [ladder] options, then the command line's
        options = config.ladder.options.updated(ladder_options.given(args), "kerneltui eval")
    except ValueError as exc:
        raise WorkspaceError(str(exc)) from None
    store = open_store(workspace)

    def show(rung: RungResult) -> None:
        if not args.json:
            print(rung_line(rung), flush=True)

    try:
        outcome = runner.evaluate(
            store, workspace, Path(args.version), options, config.ladder.python, show, kind, config.ladder
        )
    except VersionTooLarge as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    finally:
        store.close()
    if outcome.note:
        print(f"note: {outcome.note}", file=sys.stderr)
    if outcome.problem_error:
        print(f"error: {outcome.problem_error}", file=sys.stderr)
        return EXIT_USAGE
    if outcome.evaluation is None:
        print(f"error: {outcome.error}", file=sys.stderr)
        return EXIT_FAILED
    ev = outcome.evaluation
    if args.json:
        print(json.dumps(eval_json(ev.to_json(), outcome.evaluation_id), default=str))
    else:
        for line in trust_lines(ev):
            print(line)
        print(
            f"{ev.problem} {ev.version}: {ev.status} ({ev.device.get('name')}; {ev.seconds:.1f} s; "
            f"recorded as evaluation {outcome.evaluation_id} in {workspace.db_path})"
        )
    return EXIT_OK if ev.ok else EXIT_FAILED


def eval_json(data: dict[str, Any], evaluation_id: int) -> dict[str, Any]:
    """DESIGN.md's object first (problem, version, ok, device, rungs), then the rest."""
    ordered = {k: data[k] for k in ("problem", "version", "ok", "device", "rungs")}
    ordered.update({k: v for k, v in data.items() if k not in ordered})
    ordered["evaluation_id"] = evaluation_id
    return ordered


def cmd_history(args: argparse.Namespace) -> int:
    workspace = resolve(args.workspace)
    store = open_store(workspace)
    try:
        rows = store.history(args.problem, limit=args.limit)
    finally:
        store.close()
    if args.json:
        print(json.dumps(rows, default=str))
        return EXIT_OK
    if not rows:
        print(f"no evaluations yet in {workspace.root}" + (f" for {args.problem}" if args.problem else ""))
        return EXIT_OK
    print(
        f"{'problem':<12} {'ver':<6} {'hash':<8} {'status':<10} {'failed at':<12} {'max err':>9} "
        f"{'median':>10} {'vs ref':>7} {'roofline':>8}  {'verdict':<9} time"
    )
    for row in rows:
        print(history_line(row))
    return EXIT_OK


def history_line(row: dict[str, Any]) -> str:
    from harness.contract.report import duration_us, sig

    m = row["metrics"]
    speedup = f"{m['speedup']:.2f}×" if m.get("speedup") else "·"
    roof = f"{m['roofline_pct']:.0f}%" if m.get("roofline_pct") is not None else "·"
    status = row["status"] + (" ⚑" if row.get("flags") else "")  # flagged: --json says which and why
    status += " ↻" if row.get("stale") else ""  # judged against an older problem.py
    status += " ✂" if row.get("dumps") == "pruned" else ""  # its dumps were pruned (kerneltui gc)
    return (
        f"{row['problem']:<12} {row['version']:<6} {row['hash'][:8]:<8} {status:<10} "
        f"{row['failed_rung'] or '·':<12} {sig(m.get('max_abs')):>9} {duration_us(m.get('median_us')):>10} "
        f"{speedup:>7} {roof:>8}  {row['verdict'] or '·':<9} {(row['time'] or '')[:19]}"
    )


def version_for_verdict(store: Store, workspace: Workspace, path: Path) -> tuple[int, str]:
    """The history's row for this file as it is now (recorded if it was never judged)."""
    version_id, _, problem = runner.record_version(store, workspace, path)
    return version_id, problem


def cmd_verdict(args: argparse.Namespace) -> int:
    workspace, _, name = for_version(Path(args.version))
    path = Path(args.version).resolve()
    verdict = "approved" if args.command == "approve" else "rejected"
    from kerneltui.core.session import Session  # the agents it runs are imported only by commands that run them

    session = Session(workspace, config_mod.load(args.config), say_on_terminal, run_scheduler=False)
    try:
        store = session.open_writer()
        version_id, problem = version_for_verdict(store, workspace, path)
        doubt = approval_doubt(store.latest_evaluation(version_id=version_id)) if verdict == "approved" else None
        if doubt and not args.force:
            print(f"error: {problem} {name} {doubt}: approve it anyway with --force", file=sys.stderr)
            return EXIT_USAGE
        row = {"version_id": version_id, "name": name, "path": str(path)}
        session.record_verdict(row, verdict, args.reason, args.who)
    finally:
        session.close()
    print(f"{problem} {name}: {verdict}" + (f" ({args.reason})" if args.reason else ""))
    return EXIT_OK


def say_on_terminal(event: SessionEvent) -> None:
    """What the session says beyond the command's own line: a tmux delivery, a warning, a history moved aside."""
    from kerneltui.core.session import Recorded

    if isinstance(event, Recorded) and event.what == "delivery":
        print(event.text)
    elif isinstance(event, Recorded) and event.what in ("warning", "history"):
        print(f"warning: {event.text}", file=sys.stderr)


def cmd_guide(args: argparse.Namespace) -> int:
    workspace = resolve(args.workspace)
    workspace.problem_dir(args.problem)
    text = " ".join(args.text).strip()
    if not text:
        raise WorkspaceError("guidance is empty: kerneltui guide PROBLEM TEXT")
    from kerneltui.core.session import Session

    session = Session(workspace, config_mod.load(args.config), say_on_terminal, run_scheduler=False)
    try:
        session.record_guidance(args.problem, text, args.who)
    finally:
        session.close()
    print(f"{args.problem}: guidance recorded")
    return EXIT_OK


def cmd_agent(args: argparse.Namespace) -> int:
    """An agent on one problem, headless: judged here (or by the kerneltui already judging the workspace)."""
    import threading

    from kerneltui.core.session import Session, SessionRefused

    workspace = resolve(args.workspace)
    workspace.problem_dir(args.problem)
    config = config_mod.load_for(args)
    agent_config = config.agent
    for name in (
        "backend",
        "model",
        "max_versions",
        "max_cost_usd",
        "target_roofline_pct",
        "recording",
        "pace",
        "acp",
        "permissions",
    ):
        if getattr(args, name) is not None:
            setattr(agent_config, name, getattr(args, name))
    if args.acp:
        agent_config.backend = "acp"
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


def say_headless(session: Any, event: Any) -> None:
    """What a headless agent's session says on the terminal: judging elsewhere, warnings, permission asks."""
    from kerneltui.core.scheduler import SchedulerEvent
    from kerneltui.core.session import PermissionWaiting

    if isinstance(event, SchedulerEvent) and event.kind == "deferred":
        print(f"note: kerneltui pid {event.data.get('pid')} judges this workspace; its results are used")
    elif isinstance(event, SchedulerEvent) and event.kind == "warning":
        print(f"warning: {event.data.get('message')}", file=sys.stderr)
    elif isinstance(event, SchedulerEvent) and event.kind == "finished":
        print(verdict_line(event), flush=True)
    elif isinstance(event, PermissionWaiting):
        ask_on_terminal(session, event.problem, event.ask)


def verdict_line(event: Any) -> str:
    """A verdict as it lands, in the headless transcript: the version, its status, its time and against the best."""
    data = event.data
    line = f"  ◆ judged {event.problem}/{event.version}: {data.get('status')}"
    if data.get("median_us"):
        line += f" · {data['median_us']:.1f} µs"
    if data.get("race") and data.get("vs_best"):
        line += f" · raced against the best back to back: {data['race']} ({data['vs_best']:.2f}×)"
    elif data.get("vs_best"):
        line += f" · {data['vs_best']:.2f}× the best"
    return line


def ask_on_terminal(session: Any, problem: str, ask: Any) -> None:
    """Headless permission requests: asked on the terminal when there is one, else denied."""
    import threading

    if not sys.stdin.isatty():
        print(f"  ? denied (no terminal to ask): {ask.title}", flush=True)
        session.answer_permission(problem, "reject")
        return

    def prompt() -> None:
        reply = input(f"  ? the agent wants to run: {ask.title}  [y] allow once [a] always [n] deny: ").strip()
        kind = {"y": "allow_once", "a": "allow_always"}.get(reply.lower(), "reject")
        session.answer_permission(problem, kind)

    threading.Thread(target=prompt, daemon=True).start()


LAST_ERROR = [""]  # the error print_event printed last, so the stop that repeats it is not printed again


def print_event(kind: str, text: str, data: dict[str, Any]) -> None:
    """The transcript as it happens, for a terminal or a log."""
    first = text.strip().splitlines()[0] if text.strip() else ""
    if kind == "start":
        line = f"● {text}"
    elif kind == "text":
        line = f"agent: {text.strip()}"
    elif kind == "tool_call":
        line = f"  ⚙ {text}"
    elif kind == "tool_result":
        line = f"    {'→' if data.get('ok') else '✗'} {first}"
    elif kind == "feedback":
        line = f"  ▸ delivered: {text.strip()}"
    elif kind == "turn":
        cost = data.get("total_cost_usd")
        tokens = (
            f"in {data.get('input_tokens', 0)} · cache read {data.get('cache_read_tokens', 0)} · "
            f"out {data.get('output_tokens', 0)}"
            if "input_tokens" in data
            else ""
        )
        line = f"— {text}" + (f" · {tokens}" if tokens else "") + (f" · ${cost:.4f} so far" if cost else "")
    elif kind == "stop" and text == LAST_ERROR[0]:
        line = "■ stopped by the error above"  # said once, not twice
    elif kind == "stop":
        line = f"■ stopped: {text}"
    elif kind == "thought":
        line = f"  (thinks) {first}"
    elif kind == "prompt":
        line = f"kerneltui → agent: {first}"
    elif kind == "silent":
        line = f"  … {text} (still waiting)"
    else:
        line = f"{kind}: {text}"
    LAST_ERROR[0] = text if kind == "error" else ""
    print(line, flush=True)


def cmd_init(args: argparse.Namespace) -> int:
    from kerneltui.core.scaffold import init_problem

    root = Path(args.workspace) if args.workspace else Path.cwd()
    written = init_problem(Workspace(root.resolve()), args.name)
    for path in written:
        print(f"wrote {path}")
    print(f"edit {written[0].name} for your kernel, then run: kerneltui {root}")
    return EXIT_OK


def cmd_dashboard(args: argparse.Namespace) -> int:
    from kerneltui.ui.app import KernelTUI

    workspace = resolve(args.workspace)
    config = config_mod.load_for(args)
    Store.refuse_if_newer(workspace.db_path)
    KernelTUI(workspace, config, run_judges=not args.no_judge).run()
    return EXIT_OK


def cmd_serve_web(args: argparse.Namespace) -> int:
    """The dashboard in a browser: each connection runs `kerneltui dashboard` for the workspace."""
    from kerneltui.web import serve

    workspace = resolve(args.workspace)
    config_mod.load(args.config)  # a bad config (or a newer kerneltui's history) is said here, not in each browser
    Store.refuse_if_newer(workspace.db_path)
    extra = ["--config", str(Path(args.config).resolve())] if args.config else []
    return serve(workspace.root, args.host, args.port, extra + (["--no-judge"] if args.no_judge else []))


def cmd_profile(args: argparse.Namespace) -> int:
    """The version loaded, compiled and checked, then its kernels under Nsight Compute (the profile rung)."""
    args.rungs = ",".join(PROFILE_RUNGS)
    return cmd_eval(args, kind="profile")


def cmd_agents(args: argparse.Namespace) -> int:
    """Which coding agents this box can run under kerneltui, and what each still needs."""
    from kerneltui.core.agents_check import check, report

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

    python = harness_python()
    with tempfile.TemporaryDirectory() as state:
        argv = [python, "-m", "harness", "doctor", *(["--json"] if args.json else [])]
        done = subprocess.run(argv, env=harness_env(Path(state)), cwd=state)
    return done.returncode


def cmd_demo(args: argparse.Namespace) -> int:
    from kerneltui.demo import run_demo

    return run_demo(pace=args.pace, keep=args.keep)


def cmd_config(args: argparse.Namespace) -> int:
    """The settings in effect (the config file checked), or with --schema the file's JSON schema."""
    shown = config_mod.json_schema() if args.schema else config_mod.in_effect(config_mod.load(args.config))
    print(json.dumps(shown, indent=2))
    return EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kerneltui", description="Supervise agents writing GPU kernels.")
    sub = parser.add_subparsers(dest="command")

    ev = sub.add_parser("eval", help="run the ladder on a version file and record it")
    ev.add_argument("version", help="kernels/<problem>/vNNN.py")
    ev.add_argument("--workspace", help="ignored: the workspace is the version's grandparent folder")
    ev.add_argument("--json", action="store_true", help="print one JSON object")
    ev.add_argument("--config", help=CONFIG_HELP + "; its [ladder] options apply, flags win")
    ladder_options.add_arguments(ev, leave_out=ladder_options.PER_RUN)  # the history gives both
    config_mod.add_executor_argument(ev)
    ev.set_defaults(func=cmd_eval)

    prof = sub.add_parser("profile", help="profile a version's kernels with Nsight Compute and record it")
    prof.add_argument("version", help="kernels/<problem>/vNNN.py")
    prof.add_argument("--workspace", help="ignored: the workspace is the version's grandparent folder")
    prof.add_argument("--json", action="store_true", help="print one JSON object")
    prof.add_argument("--config", help=CONFIG_HELP)
    config_mod.add_executor_argument(prof)
    prof.set_defaults(func=cmd_profile)

    agents = sub.add_parser("agents", help="the coding agents this box can run, and what each needs")
    agents.add_argument("action", choices=["check"], help="check: look for them")
    agents.add_argument("--json", action="store_true", help="print one JSON array")
    agents.set_defaults(func=cmd_agents)

    doctor = sub.add_parser("doctor", help="how kernel versions are contained on this box, and how to get more")
    doctor.add_argument("--json", action="store_true", help="print one JSON object")
    doctor.set_defaults(func=cmd_doctor)

    hist = sub.add_parser("history", help="evaluations, newest first")
    hist.add_argument("problem", nargs="?")
    hist.add_argument("--workspace")
    hist.add_argument("--json", action="store_true")
    hist.add_argument("--limit", type=int)
    hist.set_defaults(func=cmd_history)

    who = getpass.getuser()
    for verb, helptext in (
        ("approve", "approve a version, as the dashboard's a does"),
        ("reject", "reject a version with a reason, as the dashboard's r does"),
    ):
        verdict = sub.add_parser(verb, help=helptext)
        verdict.add_argument("version", help="kernels/<problem>/vNNN.py")
        verdict.add_argument("--reason", required=verb == "reject", help="why (shown to the agent)")
        verdict.add_argument("--who", default=who)
        if verb == "approve":
            verdict.add_argument("--force", action="store_true", help="approve a version not judged, or failed")
        verdict.add_argument("--config", help=CONFIG_HELP)
        verdict.add_argument("--workspace", help="ignored: the workspace is the version's grandparent folder")
        verdict.set_defaults(func=cmd_verdict)

    guide = sub.add_parser("guide", help="send guidance for a problem's agent, as the dashboard's box does")
    guide.add_argument("problem")
    guide.add_argument("text", nargs="+")
    guide.add_argument("--workspace")
    guide.add_argument("--who", default=who)
    guide.add_argument("--config", help=CONFIG_HELP)
    guide.set_defaults(func=cmd_guide)

    agent = sub.add_parser("agent", help="run an agent on a problem, headless (guidance from `kerneltui guide`)")
    agent.add_argument("problem")
    agent.add_argument("--workspace")
    agent.add_argument("--backend", choices=("claude", "acp", "replay"), help="default: the config's, else claude")
    agent.add_argument("--acp", help='an ACP agent: a name from [acp] or a command line, e.g. "gemini --acp"')
    agent.add_argument(
        "--permissions",
        choices=("ask", "allow", "deny"),
        help="an ACP agent's permission requests (ask: on the terminal, denied without one)",
    )
    agent.add_argument("--model", help="Claude model (default: the config's, else claude-opus-4-6)")
    agent.add_argument("--max-versions", type=int, dest="max_versions", help="stop after N versions")
    agent.add_argument("--max-cost", type=float, dest="max_cost_usd", help="stop once the session cost this much (USD)")
    agent.add_argument(
        "--target-roofline",
        type=float,
        dest="target_roofline_pct",
        help="stop once a passing version reaches this %% of roofline",
    )
    agent.add_argument("--recording", help="replay: a recording folder (default: the one shipped for the problem)")
    agent.add_argument("--pace", type=float, help="replay: multiply the recorded waits (0: no waits)")
    agent.add_argument("--config", help=CONFIG_HELP)
    config_mod.add_executor_argument(agent)
    agent.set_defaults(func=cmd_agent)

    from kerneltui.mcp_server import add_parser as add_mcp_parser

    add_mcp_parser(sub)

    from kerneltui.context_cli import add_parser as add_context_parser

    add_context_parser(sub)

    from kerneltui.import_cli import add_parser as add_import_parser

    add_import_parser(sub)

    from kerneltui.bench_cli import add_parser as add_bench_parser

    add_bench_parser(sub)

    from kerneltui.export_cli import add_parser as add_export_parser

    add_export_parser(sub)

    from kerneltui.custody_cli import add_parser as add_custody_parser

    add_custody_parser(sub)

    from kerneltui.gc_cli import add_parser as add_gc_parser

    add_gc_parser(sub)

    init = sub.add_parser("init", help="a new problem folder: a commented problem.py and a first version")
    init.add_argument("name", help="the problem's folder name, e.g. softmax")
    init.add_argument("--workspace", help="the folder of problem folders (default: the current folder)")
    init.set_defaults(func=cmd_init)
    demo = sub.add_parser("demo", help="the whole loop on example problems with a replayed agent: no GPU, no API key")
    demo.add_argument("--pace", type=float, default=1.0, help="multiply the recorded waits (default 1)")
    demo.add_argument("--keep", action="store_true", help="keep the demo workspace afterwards")
    demo.set_defaults(func=cmd_demo)

    conf = sub.add_parser("config", help="the settings in effect, as JSON (the config file checked)")
    conf.add_argument("--config", help=CONFIG_HELP)
    conf.add_argument("--schema", action="store_true", help="the config file's JSON schema instead")
    conf.set_defaults(func=cmd_config)

    dash = sub.add_parser("dashboard", help="the dashboard (what `kerneltui [WORKSPACE]` opens)")
    dash.add_argument("workspace", nargs="?")
    dash.add_argument("--config", help=CONFIG_HELP)
    dash.add_argument("--no-judge", action="store_true", help="show the history without judging anything")
    config_mod.add_executor_argument(dash)
    dash.set_defaults(func=cmd_dashboard)

    web = sub.add_parser("serve-web", help="the dashboard in a browser, behind a token printed at start")
    web.add_argument("workspace", nargs="?")
    web.add_argument("--host", default="127.0.0.1", help="the address to listen on (default: 127.0.0.1, this box only)")
    web.add_argument("--port", type=int, default=0, help="the port (default 0: a free one, printed)")
    web.add_argument("--config", help=CONFIG_HELP)
    web.add_argument("--no-judge", action="store_true", help="show the history without judging anything")
    web.set_defaults(func=cmd_serve_web)
    return parser


# Commands whose output is not plain text for a person: the dashboard and the demo draw on the terminal,
# mcp speaks JSON-RPC on stdout.
PLAIN_TEXT_EXEMPT = ("dashboard", "demo", "mcp")


class PrintableStream(io.TextIOBase):
    """stdout or stderr with every control character written out (\\x1b): names, errors, an agent's text and
    what a version printed come from elsewhere, and must not retitle, clear or type into the terminal."""

    def __init__(self, stream: TextIO) -> None:
        super().__init__()
        self._stream = stream

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return self._stream.encoding

    def write(self, text: str) -> int:
        self._stream.write(printable(text))
        return len(text)

    def flush(self) -> None:
        self._stream.flush()

    def fileno(self) -> int:
        return self._stream.fileno()

    def isatty(self) -> bool:
        return self._stream.isatty()


def subcommands(parser: argparse.ArgumentParser) -> list[str]:
    """The commands, as the parser defines them (one list: a new command is never mistaken for a folder)."""
    found = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return list(found[0].choices) if found else []


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser()
    commands = subcommands(parser)
    if not argv or argv[0] not in (*commands, "-h", "--help"):
        # `kerneltui`, `kerneltui WORKSPACE`, `kerneltui --config F ...`: the dashboard
        if argv and not argv[0].startswith("-") and not Path(argv[0]).is_dir():
            parser.error(f"{argv[0]!r} is neither a command ({', '.join(commands)}) nor a workspace folder")
        argv = ["dashboard", *argv]
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return EXIT_USAGE
    if args.command not in PLAIN_TEXT_EXEMPT:
        sys.stdout = cast(TextIO, PrintableStream(sys.stdout))
        sys.stderr = cast(TextIO, PrintableStream(sys.stderr))
    try:
        code: int = args.func(args)
    except (WorkspaceError, config_mod.ConfigError, HistoryTooNew) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return 130
    return code


if __name__ == "__main__":
    sys.exit(main())
