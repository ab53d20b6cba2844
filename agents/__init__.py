"""Agent backends: they get a problem, its context and the ladder's results, and write versions.

Backends (the Claude SDK agent, a replay agent, external agents over ACP) build on the harness's
contracts only: version files in the workspace and the results the ladder records.
"""
