"""The commands' stdout and stderr: control characters written out, for text that comes from elsewhere."""

from __future__ import annotations

import contextlib
import io
import os
import signal
import sys
from typing import TextIO, cast

from harness.contract.text import printable

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


def printable_output(command: str) -> None:
    """stdout and stderr made printable for the command, unless it draws on the terminal or speaks a protocol."""
    if command not in PLAIN_TEXT_EXEMPT:
        sys.stdout = cast(TextIO, PrintableStream(sys.stdout))
        sys.stderr = cast(TextIO, PrintableStream(sys.stderr))


def flush_stdout() -> None:
    """What print left buffered, written now: a reader gone is then caught by main, not said by Python at exit."""
    with contextlib.suppress(ValueError):  # closed already (the MCP server's stdio transport closes its own)
        sys.stdout.flush()


def reader_gone() -> int:
    """stdout's reader stopped reading (`kerneltui history | head`): no traceback. What is still buffered goes
    to /dev/null, so Python's own flush at exit fails no more, and the status is a SIGPIPE'd command's."""
    with contextlib.suppress(OSError):  # a stdout with no file behind it has nothing buffered for the exit
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 128 + signal.SIGPIPE
