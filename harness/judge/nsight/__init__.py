"""Nsight Compute: its timing of the recorded kernels and reading its reports."""
