"""storage/_producer_state.c's record against its Python twin, ProducerStateManager.record:
after every batch of long random histories (producers new and known, epochs bumped and
not, sequences wrapping and absent, transactional batches, markers closing
transactions, batches recorded without their sequence), the two managers hold the same
state, entry for entry."""

from __future__ import annotations

import os
import random
from typing import Any

import pytest

from ottla.protocol.batch import CONTROL_FLAG, TRANSACTIONAL_FLAG, BatchHeader
from ottla.storage import producer_state
from ottla.storage.producer_state import ProducerStateManager

from .extensions import compiled_extension

C = compiled_extension("_producer_state", "ottla.storage")


def _header(rng: random.Random, producer_id: int, epoch: int, first_seq: int, attributes: int) -> BatchHeader:
    count = rng.choice([1, 1, 2, 5, 100])
    return BatchHeader(base_offset=0, batch_length=100, partition_leader_epoch=0, magic=2, crc=0,
                       attributes=attributes, last_offset_delta=count - 1, base_timestamp=rng.randrange(2**40),
                       max_timestamp=rng.randrange(-1, 2**41), producer_id=producer_id, producer_epoch=epoch,
                       base_sequence=first_seq, record_count=count)


def _state(manager: ProducerStateManager) -> Any:
    return (manager.changed, dict(manager.ongoing_txns),
            {pid: (e.producer_id, e.epoch, list(e.batches), [type(b) for b in e.batches], e.coordinator_epoch,
                   e.current_txn_first_offset, e.last_timestamp) for pid, e in manager.producers.items()})


def test_the_append_path_records_with_the_c_record() -> None:
    """Unless OTTLA_PURE_PYTHON=1 asks for the Python path (tests/integration/test_request_paths.py
    compares a broker on each)."""
    pure = os.environ.get("OTTLA_PURE_PYTHON", "") not in ("", "0")
    assert producer_state.record_batch is (ProducerStateManager.record if pure else C.record)


@pytest.mark.parametrize("seed", range(20))
def test_record_leaves_the_state_its_python_twin_leaves(tmp_path, seed: int) -> None:
    rng = random.Random(seed)
    in_c, in_python = ProducerStateManager(str(tmp_path / "c")), ProducerStateManager(str(tmp_path / "py"))
    offset = rng.choice([0, 2**31, 2**63 - 1000])
    epochs: dict[int, int] = {}
    sequences: dict[int, int] = {}
    for _ in range(400):
        pid = rng.choice([1, 2, 3, 2**62])
        if rng.random() < 0.1:
            epochs[pid] = epochs.get(pid, 0) + 1  # a bumped epoch
        epoch = epochs.setdefault(pid, rng.randrange(3))
        kind = rng.random()
        if kind < 0.1:  # a marker, and the transaction closed as the log closes it
            header = _header(rng, pid, epoch, -1, CONTROL_FLAG | TRANSACTIONAL_FLAG)
        else:
            first_seq = -1 if kind < 0.15 else sequences.get(pid, rng.choice([0, 2**31 - 2, 2**31 - 1]))
            header = _header(rng, pid, epoch, first_seq, TRANSACTIONAL_FLAG if rng.random() < 0.5 else 0)
            if first_seq >= 0:
                sequences[pid] = (first_seq + header.last_offset_delta + 1) % 2**31
        track_sequence = rng.random() < 0.9
        in_c.changed = in_python.changed = False
        C.record(in_c, header, offset, track_sequence)
        in_python.record(header, offset, track_sequence)
        if header.attributes & CONTROL_FLAG:
            coordinator_epoch = rng.randrange(5)
            for manager in (in_c, in_python):
                manager.complete_txn(pid, epoch, coordinator_epoch)
        assert _state(in_c) == _state(in_python), (seed, header, offset, track_sequence)
        offset += header.last_offset_delta + 1
    assert len(in_c.producers) > 1 and any(e.batches for e in in_c.producers.values())


def test_a_renamed_field_is_an_error_not_a_silent_skip(tmp_path) -> None:
    """The C code reads the manager's and the entry's fields by name: a rename must fail
    loudly (AttributeError), here and in every test that appends."""
    manager = ProducerStateManager(str(tmp_path))
    header = BatchHeader(0, 100, 0, 2, 0, TRANSACTIONAL_FLAG, 0, 0, 5, 7, 0, 0, 1)
    manager.record(header, 0)

    class Renamed:
        def __init__(self) -> None:
            self.changed = False
            self.producers = {7: object()}  # an entry without its fields

    with pytest.raises(AttributeError):
        C.record(Renamed(), header, 1, True)
