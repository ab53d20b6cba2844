"""The dashboard's keys: one Binding each, with the id a config's [keys] remaps it by."""

from __future__ import annotations

from textual.binding import Binding, BindingType

TABS = ("rungs", "diff", "trends", "asm", "agent", "profile")
COMMENT_TIP = "comment on the lines chosen with ↑/↓ (shift: a range) in the Diff or Asm pane: guidance quoting them"
REWIND_TIP = "rewind: the agent continues from the selected version (its next one is diffed against it)"
ASM_KEYS = (("comma", ","), ("full_stop", "."), ("t", "t"), ("c", "c"))
ACCEPT_TIP = "the problem's files changed on disk: see the diff, accept them to judge against them"

BINDINGS: list[BindingType] = [
    # First: the footer is cut on the right on a narrow terminal, and these two must stay on it.
    Binding("question_mark", "help", "help", id="help"),
    Binding("q", "quit_app", "quit", id="quit"),
    Binding("a", "approve", "approve", id="approve", tooltip="approve the selected version"),
    Binding("r", "reject", "reject", id="reject", tooltip="reject the selected version, with a reason"),
    Binding("u", "undo_verdict", "undo", id="undo_verdict", show=False, tooltip="withdraw the last verdict"),
    Binding("i", "guide", "guide", id="guide", tooltip="type guidance for the agent"),
    Binding("C", "comment", "comment", id="comment", show=False, tooltip=COMMENT_TIP),
    Binding("z", "rewind", "rewind", id="rewind", show=False, tooltip=REWIND_TIP),
    Binding("d", "diff", "diff", id="diff", tooltip="diff against previous / best / approved / earlier / marked"),
    Binding("m", "mark", "mark", id="mark", show=False, tooltip="mark the selected version: diff others against it"),
    Binding("v", "source", "source", id="source", show=False, tooltip="the selected version's source"),
    Binding("f", "filter", "filter", id="filter", show=False, tooltip="versions: all, hide failed, only approved"),
    Binding("e", "edit", "edit", id="edit", show=False, tooltip="open the selected version in $EDITOR"),
    Binding("slash", "search", "search", id="search", tooltip="search the pane on show"),
    Binding("b", "rebench", "bench", id="rebench", tooltip="judge the selected version again"),
    Binding(
        "B",
        "rejudge_stale",
        "stale",
        id="rejudge_stale",
        show=False,
        tooltip="judge again every version judged against an older problem.py",
    ),
    Binding("A", "accept_problem", "accept problem", id="accept_problem", show=False, tooltip=ACCEPT_TIP),
    Binding(
        "p",
        "profile",
        "profile",
        id="profile",
        show=False,
        tooltip="profile the selected version with Nsight Compute",
    ),
    Binding(
        "S",
        "sanitize",
        "sanitize",
        id="sanitize",
        show=False,
        tooltip="judge the selected version again under compute-sanitizer: memcheck, racecheck, initcheck...",
    ),
    Binding(
        "L",
        "leaderboard",
        "leaderboard",
        id="leaderboard",
        show=False,
        tooltip="agents measured on this workspace (kerneltui bench-agents): fast_p, each agent's best",
    ),
    Binding(
        "w",
        "judges",
        "judges",
        id="gpus",
        show=False,
        tooltip="the judges, one per GPU: where each runs, what it judges now, how many it judged",
    ),
    Binding("s", "start_agent", "start agent", id="start_agent", tooltip="start an agent on the selected problem"),
    Binding("x", "stop_agent", "stop", id="stop_agent", tooltip="stop the selected problem's agent"),
    Binding(
        "plus",
        "grant_more",
        "go on",
        id="grant_more",
        show=False,
        tooltip="the selected problem's agent, paused on a spent budget: grant it the budget again",
    ),
    # Answers to an ACP agent's permission request, live only while one waits on the Agent pane.
    *[
        Binding(
            key, f"permission('{answer}')", label, id=f"permission_{answer}", priority=True, show=False, tooltip=tip
        )
        for key, answer, label, tip in (
            ("y", "allow_once", "allow once", "an agent's permission request (Agent pane): allow once"),
            ("a", "allow_always", "allow always", "an agent's permission request (Agent pane): allow always"),
            ("n", "reject", "deny", "an agent's permission request (Agent pane): deny"),
        )
    ],
    Binding("tab", "cycle_pane", "pane", id="cycle_pane", priority=True, tooltip="next pane"),
    Binding("shift+tab", "cycle_pane(-1)", "pane", id="cycle_pane_back", show=False, priority=True),
    *[Binding(str(n), f"tab('{tab}')", tab, id=f"tab_{tab}", show=False) for n, tab in enumerate(TABS, 1)],
    # The Asm pane's own keys, pressed elsewhere: said why nothing happened, not silently dropped.
    *[Binding(key, f"asm_key_elsewhere('{shown}')", shown, show=False) for key, shown in ASM_KEYS],
]
