"""The judge process: the ladder and the small context its rungs receive, the rungs, timed requests, race,
confirmation, trust, metrics, device ceilings and clocks, artifacts, Nsight Compute, doctor and remote.
"""
