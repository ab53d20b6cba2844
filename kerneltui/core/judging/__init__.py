"""Judging: the scheduler and its intake, one JudgeClient over local, SSH and Ray judges, the watcher, custody of
what is judged, and the one-off evaluation."""
