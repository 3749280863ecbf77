import errno
import os

import pytest

from ottla.coordinator.producer_ids import ProducerIdAllocator
from ottla.protocol.errors import ErrorCode, KafkaError


def test_ids_are_never_handed_out_twice_across_restarts(tmp_path):
    first = ProducerIdAllocator(str(tmp_path), block_size=10)
    issued = [first.allocate() for _ in range(13)]
    # A crash now loses the in-memory position; the persisted block end is past it.
    second = ProducerIdAllocator(str(tmp_path), block_size=10)
    more = [second.allocate() for _ in range(25)]
    assert len(set(issued + more)) == len(issued) + len(more)
    assert min(more) > max(issued)


def test_a_block_that_cannot_be_written_is_not_taken(tmp_path, monkeypatch):
    """A full disk when a new block is due: COORDINATOR_LOAD_IN_PROGRESS (what Kafka
    answers while it has no block; clients retry), and no id of the unwritten block is
    handed out. (Checked: with `self._block_end = end` moved above the write, this test
    fails.)"""
    allocator = ProducerIdAllocator(str(tmp_path), block_size=10)
    assert allocator.allocate() == 0

    def full_disk(src: str, dst: str) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    allocator._next = allocator._block_end  # the block is used up
    with monkeypatch.context() as patched:
        patched.setattr(os, "replace", full_disk)
        with pytest.raises(KafkaError) as refused:
            allocator.allocate()
        assert refused.value.code == ErrorCode.coordinator_load_in_progress
    assert allocator.allocate() == 10
    assert ProducerIdAllocator(str(tmp_path), block_size=10).allocate() == 20
