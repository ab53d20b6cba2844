"""The ladder's own rungs, one to a module (harness.judge.rungs.builtin gathers them)."""
