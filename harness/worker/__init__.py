"""The kernel's process: dispatch of the judge's ops, the recorder, profiler hooks, interpreter fixes. Imports nothing
of the judge, its workers or the problem format: the judge sends it what it needs.
"""
