"""Agents at work on a problem: the host that runs them, external ACP agents, the feedback they read."""
