"""Used by both processes: timing primitives, ahead-of-time compile, precompiled kernels."""
