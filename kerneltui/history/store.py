"""The history: every problem, version, evaluation, rung, timing and artifact, in SQLite (WAL).

A version is keyed by (problem, name, content hash): rewriting v003.py makes a new version row and
a new evaluation, and the old ones stay. A database that cannot be read is moved aside (kept, not
deleted) and a fresh one started, with a message saying where the old one went. The SQL lives in this
package alone: the connection, the schema, the write side (problems and versions, evaluations, agents)
and the read side, each a module; `Store` is all of them over one connection.
"""

from __future__ import annotations

from kerneltui.history.agents import AgentLog
from kerneltui.history.bench import BenchLog
from kerneltui.history.connection import OpenedStore, now
from kerneltui.history.evaluations import EvaluationWrites, key_metrics
from kerneltui.history.problems import ProblemDigests
from kerneltui.history.reads import MAY_BE_BEST, Reads, history_entry, parse_flags
from kerneltui.history.schema import SCHEMA_VERSION, HistoryTooNew, HistoryUnavailable
from kerneltui.history.writes import Writes

__all__ = [
    "MAY_BE_BEST",
    "SCHEMA_VERSION",
    "HistoryTooNew",
    "HistoryUnavailable",
    "OpenedStore",
    "Store",
    "history_entry",
    "key_metrics",
    "now",
    "parse_flags",
]


class Store(EvaluationWrites, Writes, ProblemDigests, AgentLog, BenchLog, Reads):
    """The whole history over one connection."""
