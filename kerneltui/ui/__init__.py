"""The dashboard: Textual lives here and nowhere else."""
