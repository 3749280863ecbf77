"""The idempotence rules, as a table of cases."""

from __future__ import annotations

import pytest

from ottla.protocol.batch import TRANSACTIONAL_FLAG, BatchHeader
from ottla.protocol.errors import ErrorCode, KafkaError
from ottla.storage.producer_state import ProducerStateManager, Verdict

PID = 1000
INT32_MAX = 2**31 - 1


def header(first_seq: int, count: int = 1, epoch: int = 0, transactional: bool = False,
           producer_id: int = PID) -> BatchHeader:
    return BatchHeader(base_offset=0, batch_length=100, partition_leader_epoch=0, magic=2, crc=0,
                       attributes=TRANSACTIONAL_FLAG if transactional else 0, last_offset_delta=count - 1,
                       base_timestamp=0, max_timestamp=0, producer_id=producer_id, producer_epoch=epoch,
                       base_sequence=first_seq, record_count=count)


def appended(state: ProducerStateManager, batches: list[tuple[int, int, int]]) -> None:
    """Append (first_seq, count, epoch) batches, each checked first, at made-up offsets."""
    offset = 0
    for first_seq, count, epoch in batches:
        h = header(first_seq, count, epoch)
        verdict, _ = state.check(h, offset)
        assert verdict is Verdict.APPEND
        state.record(h, offset)
        offset += count


SIX_BATCHES = [(0, 2, 0), (2, 2, 0), (4, 2, 0), (6, 2, 0), (8, 2, 0), (10, 2, 0)]

CASES = [
    # name, history, incoming (first_seq, count, epoch), expected verdict or error
    ("next in sequence", SIX_BATCHES, (12, 3, 0), Verdict.APPEND),
    ("duplicate of the last batch", SIX_BATCHES, (10, 2, 0), Verdict.DUPLICATE),
    ("duplicate of the fifth batch back", SIX_BATCHES, (2, 2, 0), Verdict.DUPLICATE),
    # The seed's Figure 5: the sixth batch back is no longer cached; it was written once, so
    # its retry is refused, as Kafka 4 does, instead of being appended a second time.
    ("the sixth batch back is no longer known", SIX_BATCHES, (0, 2, 0), ErrorCode.out_of_order_sequence_number),
    ("behind the last, overlapping no cached batch", SIX_BATCHES, (1, 2, 0), ErrorCode.out_of_order_sequence_number),
    ("a cached first sequence with another length", SIX_BATCHES, (10, 1, 0), ErrorCode.out_of_order_sequence_number),
    ("gap", SIX_BATCHES, (13, 1, 0), ErrorCode.out_of_order_sequence_number),
    ("far ahead", SIX_BATCHES, (2**30, 1, 0), ErrorCode.out_of_order_sequence_number),
    ("lower epoch", [(0, 2, 1)], (2, 1, 0), ErrorCode.invalid_producer_epoch),
    ("new epoch at 0", SIX_BATCHES, (0, 1, 1), Verdict.APPEND),
    ("new epoch not at 0", SIX_BATCHES, (12, 1, 1), ErrorCode.out_of_order_sequence_number),
    ("unknown producer may start anywhere", [], (500, 1, 0), Verdict.APPEND),
    ("wraparound from Int32.MAX to 0", [(INT32_MAX - 1, 2, 0)], (0, 5, 0), Verdict.APPEND),
    ("batch spanning the wrap", [(INT32_MAX - 3, 2, 0)], (INT32_MAX - 1, 4, 0), Verdict.APPEND),
    ("duplicate of a batch spanning the wrap", [(INT32_MAX - 1, 4, 0)], (INT32_MAX - 1, 4, 0), Verdict.DUPLICATE),
    ("behind the wrap, not cached", [(INT32_MAX - 9, 5, 0), (INT32_MAX - 4, 5, 0)] + [(s, 1, 0) for s in range(5)],
     (INT32_MAX - 4, 5, 0), ErrorCode.out_of_order_sequence_number),
]


@pytest.mark.parametrize("name,history,incoming,expected", CASES, ids=[c[0] for c in CASES])
def test_idempotence_rules(tmp_path, name, history, incoming, expected):
    state = ProducerStateManager(str(tmp_path))
    appended(state, history)
    first_seq, count, epoch = incoming
    if isinstance(expected, Verdict):
        verdict, cached = state.check(header(first_seq, count, epoch), 12)
        assert verdict is expected
        if expected is Verdict.DUPLICATE:
            assert cached is not None and cached.first_seq == first_seq
    else:
        before = snapshot_of(state)
        with pytest.raises(KafkaError) as refused:
            state.check(header(first_seq, count, epoch), 12)
        assert refused.value.code == expected
        assert snapshot_of(state) == before  # a refusal changes nothing


def snapshot_of(state: ProducerStateManager) -> dict:
    return {pid: (e.epoch, list(e.batches), e.current_txn_first_offset) for pid, e in state.producers.items()}


def test_a_duplicate_is_answered_with_its_original_offsets(tmp_path):
    state = ProducerStateManager(str(tmp_path))
    state.record(header(0, 3), 100)
    state.record(header(3, 2), 250)
    verdict, cached = state.check(header(0, 3), 252)
    assert verdict is Verdict.DUPLICATE and (cached.first_offset, cached.last_offset) == (100, 102)


def test_a_retry_older_than_the_cache_gets_kafkas_message_and_the_next_batch_still_follows(tmp_path):
    state = ProducerStateManager(str(tmp_path / "orders-0"))
    appended(state, SIX_BATCHES)
    with pytest.raises(KafkaError) as refused:
        state.check(header(0, 2), 12)
    assert refused.value.message == (
        f"Out of order sequence number for producer {PID} at offset 12 in partition orders-0: "
        "0 (incoming seq. number), 11 (current end sequence number)"
    )
    assert state.check(header(12, 1), 12)[0] is Verdict.APPEND
    # The five that are cached are still answered as duplicates.
    assert [state.check(header(s, 2), 12)[0] for s in (2, 4, 6, 8, 10)] == [Verdict.DUPLICATE] * 5


def test_after_a_marker_begins_a_new_epoch_the_sequence_starts_at_0(tmp_path):
    state = ProducerStateManager(str(tmp_path))
    state.record(header(0, 2, transactional=True), 0)
    state.complete_txn(PID, producer_epoch=1, coordinator_epoch=0)
    with pytest.raises(KafkaError) as refused:
        state.check(header(2, 1, epoch=1), 3)
    assert refused.value.code == ErrorCode.out_of_order_sequence_number
    assert state.check(header(0, 1, epoch=1), 3)[0] is Verdict.APPEND


def test_non_transactional_batch_during_an_open_transaction(tmp_path):
    state = ProducerStateManager(str(tmp_path))
    txn = header(0, 2, transactional=True)
    state.record(txn, 10)
    assert state.first_unstable_offset() == 10
    with pytest.raises(KafkaError) as refused:
        state.check(header(2, 1), 12)
    assert refused.value.code == ErrorCode.invalid_txn_state
    assert state.complete_txn(PID, 0, coordinator_epoch=0) == 10
    assert state.first_unstable_offset() is None


def test_snapshot_round_trip_and_a_corrupt_snapshot_is_skipped(tmp_path):
    state = ProducerStateManager(str(tmp_path))
    state.record(header(0, 3, epoch=2), 0)
    state.record(header(3, 2, epoch=2, transactional=True), 3)
    state.write_snapshot(5)
    state.record(header(5, 1, epoch=2), 5)
    state.write_snapshot(6)
    with open(state.snapshot_path(6), "r+b") as f:
        f.seek(10)
        f.write(b"\xff")

    loaded = ProducerStateManager(str(tmp_path))
    assert loaded.load_snapshot(max_offset=100) == 5
    entry = loaded.producers[PID]
    assert entry.epoch == 2 and entry.last_seq == 4
    assert entry.current_txn_first_offset == 3 and loaded.first_unstable_offset() == 3
    # Only the last batch survives a snapshot, as in Kafka: it is still recognised.
    assert loaded.check(header(3, 2, epoch=2, transactional=True), 6)[0] is Verdict.DUPLICATE


def test_idle_producers_expire_unless_their_transaction_is_open(tmp_path):
    state = ProducerStateManager(str(tmp_path))
    state.record(header(0, 1), 0)
    state.record(header(0, 1, transactional=True, producer_id=PID + 1), 1)
    assert state.remove_expired(now_ms=10_000, expiration_ms=5_000) == [PID]
    assert list(state.producers) == [PID + 1]
