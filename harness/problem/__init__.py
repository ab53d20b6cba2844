"""The problem format: loading problem.py (tolerances, cases, cost), the `@rung` a problem defines, KernelBench
sources.
"""
