"""Digests the recorder takes of a call's buffers (harness.worker.fingerprints): a device buffer's is taken from a
copy on the host, here the same code over a CPU tensor (no GPU on this machine), and its copy runs quietly."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch

from harness.worker.fingerprints import Fingerprints, copied_fingerprint, host_fingerprint


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
