"""Digests the recorder takes of a call's buffers (harness.worker.fingerprints): a device buffer's is taken from a
copy on the host, here the same code over a CPU tensor (no GPU on this machine), and its copy runs quietly."""

from __future__ import annotations

import contextlib
import types
from collections.abc import Iterator

import torch

from harness.worker.fingerprints import Fingerprints, copied_fingerprint, host_fingerprint
from harness.worker.provenance import Provenance
from harness.worker.recorder import _key


def test_a_copied_digest_is_the_in_place_one_and_sees_one_byte_change() -> None:
    quiet_entered = []

    @contextlib.contextmanager
    def quiet() -> Iterator[None]:
        quiet_entered.append(True)
        yield

    tensor = torch.arange(1000, dtype=torch.float32)[10:20]  # a view: the whole storage is digested
    before = copied_fingerprint(tensor, quiet)
    assert before == host_fingerprint(tensor) and quiet_entered == [True]
    tensor.untyped_storage()[3999] = 7  # the last byte, outside the view
    assert copied_fingerprint(tensor, quiet) != before


def test_no_digest_where_the_bytes_cannot_be_read() -> None:
    assert Fingerprints(contextlib.nullcontext).of(torch.empty(4, device="meta")) is None


def test_a_held_weight_with_no_digest_at_the_start_is_not_taken_for_host_filled() -> None:
    """On a GPU a version's own buffer too large for a digest, or taken before one was (a model's weights, loaded
    by name), has none at the call's start: a digest taken at a launch cannot say it changed. Taken for host
    code's, an honest LayerNorm's weight and bias outweighed its output: `no-kernel`, "copied from a buffer
    filled by host code"."""
    weight, bias = torch.ones(64), torch.zeros(64)
    model = types.SimpleNamespace(weight=weight, bias=bias)
    provenance = Provenance()
    provenance.start((model,), lambda tensor: None if tensor is weight else host_fingerprint(tensor), _key)
    assert not provenance.host_filled(_key(weight), None, host_fingerprint(weight))
    assert not provenance.host_filled(_key(bias), None, host_fingerprint(bias))
    bias.add_(1.0)  # changed with no recorded writer, its digest from the start at hand: host code wrote it
    assert provenance.host_filled(_key(bias), None, host_fingerprint(bias))
