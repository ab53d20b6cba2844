"""Benchmark suites run by agents, and the leaderboard."""
