"""What a person's verdict needs checking against: one rule for the dashboard's `a` and `kerneltui approve`."""

from __future__ import annotations

from typing import Any


def approval_doubt(evaluation: dict[str, Any] | None) -> str | None:
    """Why approving the version in the state of its newest evaluation deserves a second look; None when it
    passed (or passed with what this box could check: unverified)."""
    status = (evaluation or {}).get("status")
    failed = (evaluation or {}).get("failed_rung")
    if status in ("pass", "unverified"):
        return None
    if status in (None, "queued", "running"):
        return "has not been judged yet"
    if status == "fail":
        return f"failed at {failed}" if failed else "failed"
    if status == "error":
        return "could not be judged (an error, not a verdict)"
    return f"is {status}"
