"""The share-partition's record state machine (coordinator/share_partition.py) on a real
partition log: acquisition, acknowledgement, lock expiry, the delivery-count limit, bad
acknowledgements, and the rule that state changes only by replaying the records it
writes (a share-partition rebuilt from those records is the live one, locks aside)."""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable, Iterator

import pytest

from ottla.coordinator.share_coordinator import _read
from ottla.coordinator.share_partition import (
    ACCEPT,
    ACKNOWLEDGED,
    ARCHIVED,
    AVAILABLE,
    REJECT,
    RELEASE,
    RENEW,
    AckBatch,
    SharePartition,
)
from ottla.coordinator.share_state_records import ShareStateValue, StateBatch, decode_key, decode_value, encode_value
from ottla.coordinator.writes import CoordinatorResult, write
from ottla.protocol.batch import BatchHeader, build_batch, encode_record
from ottla.protocol.errors import ErrorCode, KafkaError
from ottla.storage.log import PartitionLog
from ottla.storage.log_config import LogConfig

LOCK, LIMIT = 30.0, 5


class Harness:
    """A share-partition over a log of `records` single-record batches, with the records
    it writes kept in order (what `__share_group_state` would hold)."""

    def __init__(self, tmp_path, records: int = 10) -> None:
        self.log = PartitionLog.create(str(tmp_path / "p-0"), "p", 0, LogConfig())
        for i in range(records):
            data = build_batch([encode_record(None, b"v%d" % i)], timestamp=0)
            self.log.append_batch(data, BatchHeader.parse(data))
        self.sp = SharePartition("g", uuid.uuid4(), 0)
        self.written: list[tuple[bytes, bytes | None]] = []
        self.now = 0.0
        self.run(self.sp.initialize(0, 0))

    def run(self, result: CoordinatorResult):
        """As the share coordinator writes: append, replay the records, then the rest."""
        def append(records):
            self.written += records
            return len(self.written)

        def replay(offset, key, value):
            kind = decode_key(key).type
            self.sp.replay(kind, decode_value(kind, value))
        return write(result, append, replay)

    def acquire(self, member: str, max_records: int = 100):
        upper = self.log.high_watermark
        return self.run(self.sp.acquire(member, lambda o: _read(self.log, o, upper, 1 << 20, False), upper,
                                        max_records, 2000, LOCK, LIMIT, self.now, 0)).ranges

    def ack(self, member: str, *batches: tuple[int, int, int]) -> None:
        self.run(self.sp.acknowledge(member, [AckBatch(f, last, (t,)) for f, last, t in batches], LOCK, LIMIT,
                                     self.now, 0))

    def rebuilt(self) -> SharePartition:
        again = SharePartition(self.sp.group_id, self.sp.topic_id, self.sp.partition)
        for key, value in self.written:
            decoded = decode_key(key)
            assert decoded is not None and value is not None
            again.replay(decoded.type, decode_value(decoded.type, value))
        return again

    def durable(self, sp: SharePartition) -> tuple:
        return sp.start_offset, sp.end_offset, dict(sp.states)


def random_history(h: Harness, rng: random.Random, steps: int, members: str, most: int, expiry: float,
                   ack: Callable[[str, list[int]], None]) -> Iterator[None]:
    """Steps of a random history, yielding after each: a member acquires up to `most`
    records, or the locks run out (`expiry` of the other steps), or `ack` acknowledges
    some of the offsets it holds."""
    for _ in range(steps):
        member = rng.choice(members)
        if rng.random() < 0.4:
            h.acquire(member, rng.randint(1, most))
        elif rng.random() < expiry:
            h.now += LOCK
        else:
            held = sorted(o for o, lock in h.sp.locks.items() if lock.member_id == member and lock.deadline > h.now)
            if held:
                ack(member, held)
        yield


def test_two_members_share_records_and_accepted_ones_move_the_start(tmp_path) -> None:
    h = Harness(tmp_path)
    assert h.acquire("a", 4) == [(0, 3, 1)]
    assert h.acquire("b", 100) == [(4, 9, 1)]
    assert h.acquire("c") == []  # everything is locked
    h.ack("a", (0, 3, ACCEPT))
    assert h.sp.start_offset == 4
    h.ack("b", (4, 9, ACCEPT))
    assert h.sp.start_offset == 10 and not h.sp.states and not h.sp.locks
    assert h.durable(h.rebuilt()) == h.durable(h.sp)


def test_release_redelivers_counted_and_reject_never(tmp_path) -> None:
    h = Harness(tmp_path, 4)
    assert h.acquire("a") == [(0, 3, 1)]
    h.ack("a", (0, 1, RELEASE), (2, 3, REJECT))
    assert h.acquire("b") == [(0, 1, 2)]
    assert h.sp.states[2] == (ARCHIVED, 1)
    h.ack("b", (0, 1, ACCEPT))
    assert h.sp.start_offset == 4
    assert h.acquire("b") == []


def test_lock_expiry_redelivers_and_the_limit_archives(tmp_path) -> None:
    h = Harness(tmp_path, 2)
    for delivery in range(1, LIMIT + 1):
        assert h.acquire("a") == [(0, 1, delivery)]
        h.now += LOCK  # the lock runs out
    assert h.acquire("a") == []
    assert h.sp.start_offset == 2 and h.sp.states == {}
    assert h.durable(h.rebuilt()) == h.durable(h.sp)


def test_an_acquisition_is_durable_with_its_count(tmp_path) -> None:
    """What a restart sees of records acquired and never acknowledged: AVAILABLE, counted."""
    h = Harness(tmp_path, 3)
    h.acquire("a")
    again = h.rebuilt()
    assert again.states == {0: (AVAILABLE, 1), 1: (AVAILABLE, 1), 2: (AVAILABLE, 1)} and not again.locks
    upper = h.log.high_watermark
    got = again.acquire("b", lambda o: _read(h.log, o, upper, 1 << 20, False), upper, 100, 2000, LOCK, LIMIT, 0, 0)
    assert got.response.ranges == [(0, 2, 2)]  # decided on the rebuilt state, before any write


@pytest.mark.parametrize("batches, code", [
    ([(3, 2)], ErrorCode.invalid_request),  # backwards
    ([(0, 2), (2, 3)], ErrorCode.invalid_request),  # overlapping
    ([(2, 3), (0, 1)], ErrorCode.invalid_request),  # out of order
    ([(7, 8)], ErrorCode.invalid_record_state),  # never acquired
    ([(0, 2**62)], ErrorCode.invalid_record_state),  # far more than is held: answered at once
])
def test_bad_acknowledgements_change_nothing(tmp_path, batches, code) -> None:
    h = Harness(tmp_path, 5)
    h.acquire("a")
    before = (h.durable(h.sp), dict(h.sp.locks), len(h.written))
    with pytest.raises(KafkaError) as raised:
        h.ack("a", *[(f, last, ACCEPT) for f, last in batches])
    assert raised.value.code == code
    assert (h.durable(h.sp), dict(h.sp.locks), len(h.written)) == before


def test_only_the_holder_acknowledges_and_renew_extends_the_lock(tmp_path) -> None:
    h = Harness(tmp_path, 2)
    h.acquire("a")
    with pytest.raises(KafkaError) as raised:
        h.ack("b", (0, 1, ACCEPT))
    assert raised.value.code == ErrorCode.invalid_record_state
    h.now += LOCK - 1
    h.ack("a", (0, 1, RENEW))
    h.now += LOCK - 1  # past the first lock, within the renewed one
    assert h.acquire("b") == []
    h.ack("a", (0, 1, ACCEPT))
    assert h.sp.start_offset == 2


def test_a_random_history_rebuilds_to_the_live_state(tmp_path) -> None:
    """Across snapshots too (a snapshot replaces the updates before it); the start offset
    is always the first offset not done. Broken once by moving the start offset over the
    changes' runs only (it stopped at offsets acknowledged before, ahead of it)."""
    h = Harness(tmp_path, 60)
    rng = random.Random(7)
    import ottla.coordinator.share_partition as module
    old = module.UPDATES_PER_SNAPSHOT
    module.UPDATES_PER_SNAPSHOT = 5
    try:
        def ack(member: str, held: list[int]) -> None:
            o = rng.choice(held)
            h.ack(member, (o, o, rng.choice((ACCEPT, RELEASE, REJECT))))
        for _ in random_history(h, rng, 200, "abc", 7, 0.2, ack):
            assert h.durable(h.rebuilt()) == h.durable(h.sp)
            # The start offset is past every leading offset that is done, and no further.
            done = [o for o, (state, _) in sorted(h.sp.states.items()) if state in (ACKNOWLEDGED, ARCHIVED)]
            assert h.sp.states.get(h.sp.start_offset, (AVAILABLE, 0))[0] not in (ACKNOWLEDGED, ARCHIVED)
            assert not done or done[0] > h.sp.start_offset
    finally:
        module.UPDATES_PER_SNAPSHOT = old
    assert any(decode_key(k).type == 0 for k, _ in h.written[1:])  # snapshots were written


def test_runs_made_a_run_at_a_time_are_the_runs_of_the_changes(tmp_path, monkeypatch) -> None:
    """Acquisitions and acknowledgements of whole ranges write the runs they made a run at
    a time (no look at each offset): in a random history of many-record batches, gaps,
    ranged acknowledgements of every type and expired locks, each is what `_batches` finds
    in the offsets changed. Broken once by not joining a run to the one before it (two
    runs written where `_batches` finds one)."""
    import ottla.coordinator.share_partition as module
    h = Harness(tmp_path, 0)
    rng = random.Random(11)
    for _ in range(40):  # batches of 1-20 records
        data = build_batch([encode_record(None, b"v", offset_delta=i) for i in range(rng.randint(1, 20))],
                           timestamp=0)
        h.log.append_batch(data, BatchHeader.parse(data))
    hinted = []
    original = module.SharePartition._result

    def checked(self, changes, locks, response, now_ms, floor=-1, made=None):
        if made is not None:
            hinted.append(made)
            assert tuple(made) == module._batches(changes)
        return original(self, changes, locks, response, now_ms, floor, made)
    monkeypatch.setattr(module.SharePartition, "_result", checked)

    def ack(member: str, held: list[int]) -> None:
        first = rng.choice(held)
        last = first
        while last + 1 in held and rng.random() < 0.9:
            last += 1
        types = (ACCEPT, ACCEPT, RELEASE, REJECT)
        middle = rng.randint(first, last)  # one batch, or two of their own types
        h.ack(member, *([(first, last, rng.choice(types))] if middle == last else
                        [(first, middle, rng.choice(types)), (middle + 1, last, rng.choice(types))]))
    for _ in random_history(h, rng, 300, "ab", 40, 0.1, ack):
        assert h.durable(h.rebuilt()) == h.durable(h.sp)
    assert len(hinted) > 50 and sum(len(runs) > 1 for runs in hinted) > 5  # runs joined and not


def test_records_round_trip() -> None:
    value = ShareStateValue(3, 42, (StateBatch(42, 50, ACKNOWLEDGED, 2), StateBatch(51, 51, ARCHIVED, 5)),
                            state_epoch=1, create_timestamp=7, write_timestamp=8, delivery_complete_count=9)
    for kind in (0, 1):
        decoded = decode_value(kind, encode_value(kind, value))
        assert decoded.batches == value.batches and decoded.start_offset == 42
        assert decoded.delivery_complete_count == 9


def test_a_snapshot_keeps_the_other_members_locks(tmp_path, monkeypatch) -> None:
    """Broken once by clearing the locks in the replay of every snapshot: a's records
    became acquirable by c while a still held them."""
    import ottla.coordinator.share_partition as module
    h = Harness(tmp_path, 4)
    h.acquire("a", 2)
    h.acquire("b", 2)
    monkeypatch.setattr(module, "UPDATES_PER_SNAPSHOT", 1)  # b's acknowledgement writes a snapshot
    h.ack("b", (2, 3, ACCEPT))
    assert decode_key(h.written[-1][0]).type == 0
    assert h.acquire("c") == []
    h.ack("a", (0, 1, ACCEPT))
    assert h.sp.start_offset == 4


def test_what_is_tracked_stays_within_the_record_locks_whatever_the_log_holds(tmp_path) -> None:
    """A batch spanning a million offsets (as compaction leaves them) and records deleted
    under the share-partition cost at most `max_locks` tracked offsets. Broken once by
    tracking every offset of a batch's range (a million entries)."""
    h = Harness(tmp_path, 0)
    data = build_batch([encode_record(None, b"wide")], timestamp=0, last_offset_delta=1_000_000)
    h.log.append_batch(data, BatchHeader.parse(data))
    upper = h.log.high_watermark
    got = h.run(h.sp.acquire("a", lambda o: _read(h.log, o, upper, 1 << 20, False), upper, 10**9, 100, LOCK,
                             LIMIT, 0, 0))
    assert got.ranges == [(0, 99, 1)] and len(h.sp.states) == 100
    # The log's start moves past everything: the share-partition's start follows it.
    got = h.run(h.sp.acquire("b", lambda o: iter(()), upper, 10, 100, LOCK, LIMIT, 0, 0, log_start=upper))
    assert got.ranges == [] and h.sp.start_offset == upper and not h.sp.states and not h.sp.locks
    assert h.durable(h.rebuilt()) == h.durable(h.sp)


def test_record_limit_mode_acquires_no_more_than_asked_even_mid_batch(tmp_path) -> None:
    """Batch-optimized (mode 0) rounds up to the batch's end; record-limit (mode 1,
    ShareFetch v2) stops at max_records. Broken once by ignoring the mode (0-4 came)."""
    h = Harness(tmp_path, 0)
    data = build_batch([encode_record(None, b"v%d" % i, offset_delta=i) for i in range(5)], timestamp=0)
    h.log.append_batch(data, BatchHeader.parse(data))
    upper = h.log.high_watermark
    limited = h.run(h.sp.acquire("a", lambda o: _read(h.log, o, upper, 1 << 20, False), upper, 2, 2000, LOCK, LIMIT,
                                 0, 0, record_limit=True))
    assert limited.ranges == [(0, 1, 1)]
    whole = h.run(h.sp.acquire("b", lambda o: _read(h.log, o, upper, 1 << 20, False), upper, 1, 2000, LOCK, LIMIT,
                               0, 0))
    assert whole.ranges == [(2, 4, 1)]  # the rest of the batch


def test_batches_are_acquired_whole_within_the_records_in_flight(tmp_path, monkeypatch) -> None:
    """Kafka 4.3's rule: new records start only while the offsets in flight (start to end)
    are under share.partition.max.record.locks, and the batch holding the last one is
    taken whole, past the limit; whatever MaxRecords asks. Past the limit a batch is taken
    up to BATCH_OVERRUN offsets at most. Broken once by cutting the batch at the limit
    (a got 0-39, not 0-59)."""
    import ottla.coordinator.share_partition as module
    h = Harness(tmp_path, 0)
    for _ in range(4):  # four batches of 30 records: 0-29, 30-59, 60-89, 90-119
        data = build_batch([encode_record(None, b"v%d" % i, offset_delta=i) for i in range(30)], timestamp=0)
        h.log.append_batch(data, BatchHeader.parse(data))
    upper = h.log.high_watermark

    def acquire(member: str, max_records: int = 10**9, max_locks: int = 40) -> list:
        return h.run(h.sp.acquire(member, lambda o: _read(h.log, o, upper, 1 << 20, False), upper, max_records,
                                  max_locks, LOCK, LIMIT, h.now, 0)).ranges

    assert acquire("a") == [(0, 59, 1)]  # 30 in flight < 40: the second batch whole, 20 past the limit
    assert acquire("b") == []  # 60 in flight: nothing new, whatever MaxRecords says
    h.ack("a", (0, 29, ACCEPT))  # 30 in flight: 10 more may start, in the third batch, taken whole
    assert acquire("b") == [(60, 89, 1)]
    h.ack("b", (60, 89, ACCEPT))  # 30-59, held by a, keep the start: 60 in flight, acknowledged or not
    assert acquire("c") == []
    h.ack("a", (30, 59, ACCEPT))
    assert acquire("c", max_records=5) == [(90, 119, 1)]  # MaxRecords 5, rounded up to the batch's end
    assert h.durable(h.rebuilt()) == h.durable(h.sp)

    # A batch larger than the overrun is taken up to BATCH_OVERRUN offsets, the rest later.
    h = Harness(tmp_path / "big", 0)
    data = build_batch([encode_record(None, b"v%d" % i, offset_delta=i) for i in range(200)], timestamp=0)
    h.log.append_batch(data, BatchHeader.parse(data))
    upper = h.log.high_watermark
    monkeypatch.setattr(module, "BATCH_OVERRUN", 50)
    assert acquire("a", max_locks=10) == [(0, 49, 1)] and len(h.sp.states) == 50


def test_a_groups_own_numbers_are_kept_within_the_brokers_bounds_of_now(tmp_path):
    """A share group's config set when the broker's bounds were wider runs at the bound,
    as consumer and streams groups' do (Kafka's GroupConfig.evaluate), and a value that
    is no number runs at the broker's setting."""
    from ottla.coordinator.share_config import ShareConfig
    from ottla.coordinator.share_coordinator import ShareCoordinator
    from ottla.storage.log_config import LogConfig
    from ottla.storage.log_manager import LogManager

    own = {"g": {"share.record.lock.duration.ms": "90000", "share.delivery.count.limit": "1",
                 "share.session.timeout.ms": "x"}}
    shares = ShareCoordinator(LogManager(str(tmp_path), LogConfig()), lambda: None, ShareConfig(), {}, lambda _: False,
                              lambda group_id: own.get(group_id, {}), write_group=lambda *_: None)
    settings = shares.settings("g")
    assert (settings.record_lock_duration_ms, settings.delivery_count_limit, settings.session_timeout_ms) == \
        (60_000, 2, 45_000)
    assert shares.settings("other").record_lock_duration_ms == 30_000


def test_a_lock_runs_out_after_a_look_that_found_none_run_out(tmp_path) -> None:
    """lock_floor, the earliest a lock may run out, raised by a look that found none run
    out, still lets a later lock run out on time (with it set to infinity, or to the
    latest deadline, "b"'s records stay locked)."""
    h = Harness(tmp_path, 4)
    assert h.acquire("a", 2) == [(0, 1, 1)]
    h.now = LOCK / 2
    assert h.acquire("b", 2) == [(2, 3, 1)]
    h.now = LOCK + 1
    assert h.acquire("c", 2) == [(0, 1, 2)]
    h.now = LOCK + 2
    assert h.acquire("c", 2) == []  # a look: none ran out
    h.now = LOCK / 2 + LOCK
    assert h.acquire("a", 2) == [(2, 3, 2)]


def test_a_range_spanning_two_holders_is_refused(tmp_path) -> None:
    h = Harness(tmp_path, 4)
    assert h.acquire("a", 2) == [(0, 1, 1)]
    assert h.acquire("b", 2) == [(2, 3, 1)]
    with pytest.raises(KafkaError) as raised:
        h.ack("a", (0, 3, ACCEPT))
    assert raised.value.code == ErrorCode.invalid_record_state


def test_an_acknowledged_range_keeps_each_offsets_count(tmp_path) -> None:
    h = Harness(tmp_path, 5)
    assert h.acquire("a", 5) == [(0, 4, 1)]
    h.ack("a", (1, 2, RELEASE))
    assert h.acquire("a", 5) == [(1, 2, 2)]
    h.ack("a", (1, 4, REJECT))  # offset 0 still held: the start stays
    assert h.sp.states == {0: (0, 1), 1: (ARCHIVED, 2), 2: (ARCHIVED, 2), 3: (ARCHIVED, 1), 4: (ARCHIVED, 1)}
