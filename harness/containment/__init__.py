"""Confining what runs on a version's bytes: bubblewrap, Landlock and seccomp, limits, the process-tree watch, confined
tools. No torch, triton or numpy.
"""
