"""The verification ladder: judges one version of a kernel against its problem's reference.

Runs headless in the GPU box's Python and imports only torch, triton, numpy (and CuTeDSL or TileLang
in the worker of a version that uses it). Nothing here imports Textual, the agents or the history database.
"""

from harness.results import Evaluation, RungResult

__all__ = ["Evaluation", "RungResult"]
