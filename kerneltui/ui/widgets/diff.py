"""The selected version against the previous one, the best one, the last approved one, what its file held before
it was rewritten, or a version the person marked (`m`)."""

from __future__ import annotations

import difflib

from rich.text import Text

from kerneltui.ui.messages import Detail
from kerneltui.ui.widgets.format import highlighted, lines_of, shown
from kerneltui.ui.widgets.text_view import TextView

ADDED, REMOVED = "on #15361d", "on #3d1a1a"
TARGETS = ("previous", "best", "approved", "rewritten", "marked")
ALWAYS = ("previous", "best", "approved")  # cycled through even when missing (said so); the others when present


def diff_lines(old: str, new: str, old_label: str, new_label: str, context: int = 3) -> list[Text]:
    """A unified diff with both sides syntax-highlighted (lines cut as format.highlighted cuts them) and changed
    lines tinted; lines compared whole."""
    (old_lines, _), (new_lines, _) = lines_of(old), lines_of(new)
    old_hl, new_hl = highlighted(old), highlighted(new)
    out = [shown(f"--- {old_label}", style="bold red"), shown(f"+++ {new_label}", style="bold green")]
    matcher = difflib.SequenceMatcher(None, old_lines, new_lines, autojunk=False)
    groups = list(matcher.get_grouped_opcodes(context))
    if not groups:
        return [*out, Text("(no differences)", style="dim")]
    for group in groups:
        first, last = group[0], group[-1]
        out.append(
            Text(f"@@ -{first[1] + 1},{last[2] - first[1]} +{first[3] + 1},{last[4] - first[3]} @@", style="cyan")
        )
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                out += [_prefixed("  ", new_hl[j]) for j in range(j1, j2)]
                continue
            out += [_prefixed("- ", old_hl[i], REMOVED) for i in range(i1, i2)]
            out += [_prefixed("+ ", new_hl[j], ADDED) for j in range(j1, j2)]
    return out


def _prefixed(prefix: str, line: Text, background: str = "") -> Text:
    text = Text(prefix, style="bold red" if prefix == "- " else "bold green" if prefix == "+ " else "dim")
    text.append_text(line)
    if background:
        text.stylize(background)
    return text


def diff_for(detail: Detail, target: str) -> list[Text]:
    """The selected version against `target` (previous, best, approved), ready to show."""
    name = detail.version["name"]
    other = detail.compare.get(target)
    if other is None:
        if target == "rewritten":
            return [shown(f"{name}'s file was written once: there is no earlier content.", style="dim")]
        if target == "marked":
            return [Text("No version marked: press m on one, then d on another.", style="dim")]
        return [shown(f"No {target} version to compare {name} with.", style="dim")]
    if other["version_id"] == detail.version["version_id"]:
        return [shown(f"{name} is the {target} version itself.", style="dim")]
    old = detail.compare_sources.get(target, "")
    label = other["name"] if target == "rewritten" else f"{other['name']} ({target})"
    return diff_lines(old, detail.source, label, name)


def targets_of(detail: Detail | None) -> list[str]:
    """What `d` cycles through for this version: previous, best, approved, and the rewritten file's earlier
    content and the marked version where there are such."""
    present = detail.compare if detail is not None else {}
    return [t for t in TARGETS if t in ALWAYS or present.get(t) is not None]


class DiffPane(TextView):
    target = "previous"

    def cycle(self, targets: list[str]) -> str:
        """The next of `targets` after the current one."""
        if self.target in targets:
            self.target = targets[(targets.index(self.target) + 1) % len(targets)]
        else:
            self.target = targets[0] if targets else "previous"
        return self.target
