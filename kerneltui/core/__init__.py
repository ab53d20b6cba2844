"""Headless: the scheduler, judge client, agent runs, watcher, config and workspace. No Textual."""
