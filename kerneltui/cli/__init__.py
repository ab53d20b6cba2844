"""The `kerneltui` command: the dashboard by default, and headless subcommands for scripts.

One module per command family (evaluate: eval and profile; workspace: history and init; verdicts: approve,
reject and guide; agent: the headless agent front end, its transcript in transcript; checks: agents and doctor;
dashboard: dashboard, serve-web and demo; config, mcp, context, imports, bench, export, custody: accept-problem,
gc), their shared options in options, and the parser built from them in entry.

Exit status of eval: 0 every rung passed (skips allowed), 1 a rung failed, 2 bad usage or a bad problem.
"""

from kerneltui.cli.entry import main
from kerneltui.cli.options import EXIT_FAILED, EXIT_OK, EXIT_USAGE

__all__ = ["EXIT_FAILED", "EXIT_OK", "EXIT_USAGE", "main"]
