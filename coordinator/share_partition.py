"""One share-partition: the records of one topic partition as one share group consumes
them (KIP-932; Kafka's SharePartition).

Every offset from the start offset on is in one of four states:
- AVAILABLE: may be acquired by any member (the records not yet delivered are too, past
  the end of what is tracked);
- ACQUIRED: delivered to one member, locked to it until it acknowledges them or its
  acquisition lock (`share.record.lock.duration.ms`) expires;
- ACKNOWLEDGED: accepted, never delivered again;
- ARCHIVED: rejected, past the delivery-count limit, a control record, or aborted (under
  read_committed): never delivered again.
Each acquisition counts one delivery. A record released, or whose lock expires, becomes
AVAILABLE again, unless it reached `share.delivery.count.limit`: then it is ARCHIVED.
The start offset moves past every leading offset that is ACKNOWLEDGED or ARCHIVED.

What is durable is kept in `__share_group_state` (share_state_records.py): the start
offset and, per offset after it, AVAILABLE/ACKNOWLEDGED/ARCHIVED with its delivery
count. An acquisition is written as AVAILABLE with the count it reached, so a record
acquired when the broker dies is delivered again after a restart, counted. Locks (who
holds which offsets, until when) live only in memory, as Kafka keeps them.

State changes only by `replay` of those records: an operation decides the records and
the change to the locks; the share coordinator appends the records, replays them (the
replay the start-up load uses) and then changes the locks, which are not in the log
(writes.py's rule: a result's records, answer, and what runs after the replay).
"""

from __future__ import annotations

import bisect
import itertools
import math
import uuid
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from operator import attrgetter, itemgetter, ne, not_, or_, sub
from typing import TypeVar

from ottla.protocol.batch import BatchHeader
from ottla.protocol.errors import ErrorCode, KafkaError

from .share_state_records import (
    SNAPSHOT,
    UPDATE,
    ShareStateKey,
    ShareStateValue,
    StateBatch,
    encode_key,
    encode_value,
)
from .writes import CoordinatorResult, Records

AVAILABLE, ACQUIRED, ACKNOWLEDGED, ARCHIVED = 0, 1, 2, 4
TERMINAL = (ACKNOWLEDGED, ARCHIVED)
# Acknowledge types (ShareFetch/ShareAcknowledge AcknowledgementBatch.AcknowledgeTypes).
GAP, ACCEPT, RELEASE, REJECT, RENEW = 0, 1, 2, 3, 4
# After this many updates a snapshot replaces them (Kafka's
# share.coordinator.snapshot.update.records.per.snapshot).
UPDATES_PER_SNAPSHOT = 500
V = TypeVar("V")
UNTRACKED = (AVAILABLE, 0)  # the state of an offset past what is tracked
# The most offsets an acquisition takes past share.partition.max.record.locks to end on
# a batch's end (Kafka takes the whole batch, kept as one entry; Ottla keeps an entry per
# offset): more than a producer's batch of 1 MB holds but for the smallest records.
BATCH_OVERRUN = 65_536
# The work per record is done by C loops (dict.fromkeys, map, set operations): a share
# consumer's records cost a few Python steps per batch of them, not per record.


@dataclass(frozen=True, slots=True, eq=False)
class Lock:
    """One acquisition's lock, shared by every offset it took: compared and hashed by
    identity, so the distinct locks of many offsets are a set of a few."""

    member_id: str
    deadline: float  # clock seconds


@dataclass(frozen=True, slots=True)
class Acquired:
    """What one acquisition gives a member: (first, last, delivery count) ranges."""

    ranges: list[tuple[int, int, int]]

    @property
    def count(self) -> int:
        return sum(last - first + 1 for first, last, _ in self.ranges)


@dataclass(frozen=True, slots=True)
class LogBatch:
    """A batch of the partition's log, as acquisition sees it."""

    header: BatchHeader
    data: bytes | memoryview
    aborted: bool = False  # a batch of an aborted transaction (read_committed only)


@dataclass(frozen=True, slots=True)
class AckBatch:
    first_offset: int
    last_offset: int
    types: tuple[int, ...]  # one type for the whole range, or one per offset


@dataclass
class SharePartition:
    group_id: str
    topic_id: uuid.UUID
    partition: int
    start_offset: int = -1  # -1: not initialized yet
    # offset -> (delivery state, delivery count), for offsets from the start offset that
    # were ever acquired or archived (end_offset - 1 at most).
    states: dict[int, tuple[int, int]] = field(default_factory=dict)
    end_offset: int = 0  # the first offset never acquired
    snapshot_epoch: int = 0
    updates_since_snapshot: int = 0
    locks: dict[int, Lock] = field(default_factory=dict)  # memory only
    # No lock in `locks` runs out before this: every lock set lowers it, a look at all of
    # them that finds none run out raises it. So an operation looks at every lock (a loop
    # over the offsets held) only when one may have run out.
    lock_floor: float = field(default=-math.inf, compare=False, repr=False)

    @property
    def initialized(self) -> bool:
        return self.start_offset >= 0

    # --- replay: the only way the durable state changes --------------------------------

    def replay(self, kind: int, value: ShareStateValue) -> None:
        states, locks = self.states, self.locks
        if kind == SNAPSHOT:
            states.clear()
            self.start_offset = value.start_offset
            self.end_offset = value.start_offset
            self.snapshot_epoch = value.snapshot_epoch
            self.updates_since_snapshot = 0
            for offset in [o for o in locks if o < value.start_offset]:
                del locks[offset]
        else:
            self.updates_since_snapshot += 1
            if value.start_offset >= 0:
                _forget_below(states, self.start_offset, value.start_offset, self.end_offset)
                _forget_below(locks, self.start_offset, value.start_offset, self.end_offset)
                self.start_offset = value.start_offset
                self.end_offset = max(self.end_offset, value.start_offset)
        for b in value.batches:
            offsets = range(max(b.first_offset, self.start_offset), b.last_offset + 1)
            states.update(dict.fromkeys(offsets, (b.delivery_state, b.delivery_count)))
            if b.delivery_state in TERMINAL and locks:
                for offset in locks.keys() & set(offsets):
                    del locks[offset]
            self.end_offset = max(self.end_offset, b.last_offset + 1)

    def key(self, kind: int) -> bytes:
        return encode_key(ShareStateKey(kind, self.group_id, self.topic_id, self.partition))

    # --- what an operation decides -----------------------------------------------------

    def _result(self, changes: dict[int, tuple[int, int]], locks: Callable[[], None],
                response: object, now_ms: int, floor: int = -1,
                made: list[StateBatch] | None = None) -> CoordinatorResult:
        """The record that makes `changes` (offset -> new durable state) durable, with the
        start offset they move to (at least `floor`); applying it replays that record,
        then `locks`. `made`, when the operation made its changes a run at a time, in
        offset order (`_add_run`), are `_batches(changes)` without a look at each offset."""
        if not changes and floor <= self.start_offset:
            return CoordinatorResult([], response, locks)
        runs = _batches(changes) if made is None else tuple(made)
        start = self._moved_start(max(self.start_offset, floor), runs)
        if self.updates_since_snapshot + 1 >= UPDATES_PER_SNAPSHOT:
            kind = SNAPSHOT
            merged = {o: s for o, s in self.states.items() if o >= floor}
            merged.update((o, s) for o, s in changes.items() if o >= floor)
            value = ShareStateValue(self.snapshot_epoch + 1, start,
                                    _batches({o: s for o, s in merged.items() if o >= start}),
                                    create_timestamp=now_ms, write_timestamp=now_ms)
        else:
            kind = UPDATE
            value = ShareStateValue(self.snapshot_epoch, start if start != self.start_offset else -1,
                                    tuple(r if r.first_offset >= start else
                                          StateBatch(start, r.last_offset, r.delivery_state, r.delivery_count)
                                          for r in runs if r.last_offset >= start))
        records: Records = [(self.key(kind), encode_value(kind, value))]
        return CoordinatorResult(records, response, locks)

    def _moved_start(self, start: int, runs: tuple[StateBatch, ...]) -> int:
        """The start offset past the leading offsets that are done (ACKNOWLEDGED or
        ARCHIVED) once `runs` (the changes) are made: every offset between the start and
        the end offset is tracked. It moves a run at a time, not an offset at a time."""
        tracked: tuple[StateBatch, ...] | None = None  # the runs of the states, if needed
        while True:
            run = _run_at(runs, start)
            if run is None:  # no change there: the state it has
                if self.states.get(start, UNTRACKED)[0] not in TERMINAL:
                    return start
                if tracked is None:
                    tracked = _batches({o: s for o, s in self.states.items() if o >= start})
                run = _run_at(tracked, start)
                assert run is not None
                # Up to where the changes begin again, which override what is tracked.
                upcoming = [r.first_offset for r in runs if r.first_offset > start]
                start = min([run.last_offset + 1, *upcoming])
                continue
            if run.delivery_state not in TERMINAL:
                return start
            start = run.last_offset + 1

    def initialize(self, start_offset: int, now_ms: int, snapshot_epoch: int = 0) -> CoordinatorResult[None]:
        """The snapshot that starts the share-partition at `start_offset` (again, with
        AlterShareGroupOffsets: what was in flight is forgotten, locks too)."""
        value = ShareStateValue(snapshot_epoch, start_offset, (), create_timestamp=now_ms, write_timestamp=now_ms)
        records: Records = [(self.key(SNAPSHOT), encode_value(SNAPSHOT, value))]
        return CoordinatorResult(records, None, self.locks.clear)

    def _expired(self, now: float, limit: int, changes: dict[int, tuple[int, int]]) -> list[int]:
        """Offsets whose lock ran out; those at the delivery limit go to ARCHIVED."""
        if now < self.lock_floor:
            return []
        distinct = set(self.locks.values())
        ran_out = {lock for lock in distinct if lock.deadline <= now}
        if not ran_out:
            self.lock_floor = min((lock.deadline for lock in distinct), default=math.inf)
            return []
        expired = [o for o, lock in self.locks.items() if lock in ran_out]
        for offset in expired:
            state, count = self.states.get(offset, UNTRACKED)
            if state == AVAILABLE and count >= limit:
                changes[offset] = (ARCHIVED, count)
        return expired

    def acquire(self, member_id: str, batches: Callable[[int], Iterable[LogBatch]], upper: int, max_records: int,
                max_locks: int, lock_seconds: float, limit: int, now: float, now_ms: int,
                log_start: int = 0, record_limit: bool = False) -> CoordinatorResult[Acquired]:
        """Acquire up to `max_records` (more, to end on a batch boundary, unless
        `record_limit`: ShareFetch v2's record-limit acquire mode) for the member:
        first the AVAILABLE offsets already tracked, then new ones read by `batches(from)`
        below `upper` (the high watermark, or the LSO under read_committed).

        New records are bounded as Kafka 4.3's SharePartition bounds them: the offsets in
        flight (the start offset to the end offset) may reach `max_locks`
        (share.partition.max.record.locks), so at most `max_locks` less those are
        started, and none past it (records available again are still re-acquired); the
        batch holding the last one started is taken whole, even past the limit, as
        Kafka's batch-optimized acquisition takes it. What that adds is bounded where
        Kafka keeps a batch as one entry and Ottla an entry per offset: past the limit
        a batch is taken up to its record count (a batch compaction left with holes
        spans more offsets than it has records) and `BATCH_OVERRUN` offsets at most.
        So a client's MaxRecords, a long gap or a wide compacted batch cost at most
        `max_locks` + BATCH_OVERRUN tracked offsets. Records the log no longer has
        (retention, DeleteRecords: before `log_start`) are passed over: the start offset
        moves to the log's start, as Kafka moves it."""
        changes: dict[int, tuple[int, int]] = {}
        floor = max(self.start_offset, log_start)
        expired = self._expired(now, limit, changes)
        runs: list[StateBatch] | None = None if changes else []  # the changes' runs, while made a run at a time
        # (first, last, delivery count) of what is taken, in offset order
        taken: list[tuple[int, int, int]] = []
        acquired = 0
        # Tracked offsets not locked (or whose lock ran out): the records delivered before
        # and available again.
        locked = self.locks.keys() - set(expired) if expired else self.locks.keys()
        free = sorted(self.states.keys() - locked)
        # Of those, the AVAILABLE ones (0: false), as `changes` (the archived expired) leaves them.
        available = itertools.compress(free, map(not_, map(itemgetter(0), map(
            changes.get, free, map(self.states.__getitem__, free)))))
        for offset in available:
            if acquired >= max_records:
                break
            if offset >= floor:
                count = self.states[offset][1] + 1
                taken.append((offset, offset, count))
                acquired += 1
                changes[offset] = (AVAILABLE, count)
                runs = None
        position = max(self.end_offset, floor)
        # New offsets start below `bound`: max_records less what was re-acquired, and no
        # more than the in-flight offsets (floor to position) leave of max_locks.
        bound = position + min(max_records - acquired, max_locks - (position - floor))
        if position < min(upper, bound):
            for batch in batches(position):
                header = batch.header
                if header.base_offset >= upper:
                    break
                if header.base_offset > position and position == floor and not any(o >= floor for o in self.states):
                    # A gap (compacted away) with nothing tracked before it: the start
                    # offset moves past it, and the bound with it (nothing is in flight).
                    bound += header.base_offset - position
                    floor = position = header.base_offset
                if header.base_offset >= bound:
                    break
                if header.base_offset > position:  # a gap below the bound: archived
                    changes.update(dict.fromkeys(range(position, header.base_offset), (ARCHIVED, 0)))
                    if runs is not None:
                        _add_run(runs, position, header.base_offset - 1, ARCHIVED, 0)
                    position = header.base_offset
                first = max(header.base_offset, position)
                # The whole batch, bounded past `bound` by its record count and BATCH_OVERRUN.
                overrun = min(header.record_count, BATCH_OVERRUN)
                last = min(header.last_offset + 1, max(bound, first + overrun))
                delivered = not (header.is_control or batch.aborted)
                if delivered and record_limit:  # never more than asked, even mid-batch
                    last = min(last, first + max_records - acquired)
                state, count = (AVAILABLE, 1) if delivered else (ARCHIVED, 0)
                changes.update(dict.fromkeys(range(first, last), (state, count)))
                if runs is not None and last > first:
                    _add_run(runs, first, last - 1, state, count)
                if delivered and last > first:
                    taken.append((first, last - 1, 1))
                    acquired += last - first
                position = last
                if acquired >= max_records or position >= bound:
                    break
        ranges: list[tuple[int, int, int]] = []
        for first, last, count in taken:  # adjacent runs of one delivery count joined
            if ranges and ranges[-1][1] == first - 1 and ranges[-1][2] == count:
                ranges[-1] = (ranges[-1][0], last, count)
            else:
                ranges.append((first, last, count))
        lock = Lock(member_id, now + lock_seconds)

        def locks() -> None:
            for offset in expired:
                self.locks.pop(offset, None)
            if acquired == len(changes):  # the offsets changed are those taken: the same keys, no new ints
                self.locks.update(dict.fromkeys(changes, lock))
            else:
                for first, last, _ in ranges:
                    self.locks.update(dict.fromkeys(range(first, last + 1), lock))
            if ranges:
                self.lock_floor = min(self.lock_floor, lock.deadline)

        return self._result(changes, locks, Acquired(ranges), now_ms, floor, runs)

    def acknowledge(self, member_id: str, batches: list[AckBatch], lock_seconds: float, limit: int, now: float,
                    now_ms: int, renew_enabled: bool = True) -> CoordinatorResult[None]:
        """Apply a member's acknowledgements, all or none. Raises INVALID_REQUEST for
        batches that run backwards, overlap or carry bad types, INVALID_RECORD_STATE for
        offsets the member does not hold (never acquired, expired, already acknowledged)."""
        previous = -1
        for b in batches:
            if b.first_offset > b.last_offset or b.first_offset <= previous:
                raise KafkaError(ErrorCode.invalid_request, None)
            if len(b.types) not in (1, b.last_offset - b.first_offset + 1):
                raise KafkaError(ErrorCode.invalid_request, "Acknowledge types do not match the batch's offsets.")
            if any(t not in (GAP, ACCEPT, RELEASE, REJECT, RENEW) or (t == RENEW and not renew_enabled)
                   for t in b.types):
                raise KafkaError(ErrorCode.invalid_request, "Invalid acknowledge type.")
            previous = b.last_offset
        changes: dict[int, tuple[int, int]] = {}
        expired = self._expired(now, limit, changes)
        runs: list[StateBatch] | None = None if changes else []  # the changes' runs, while made a run at a time
        released: list[int] = []
        renewed: list[int] = []
        states_get, ran_out = self.states.get, set(expired)
        for b in batches:
            offsets: Sequence[int] = range(b.first_offset, b.last_offset + 1)
            # More offsets than are locked cannot all be held, nor a batch whose ends are not
            # locked: answered at once. The batches that pass lie within what is locked,
            # one after another, so checking them all costs at most the locks.
            locks_get = self.locks.get
            holders: set[Lock | None] = {None}
            if len(offsets) <= len(self.locks) and locks_get(b.first_offset) is not None \
                    and locks_get(b.last_offset) is not None:
                offsets = list(offsets)  # its ints made once, for the loops below
                locked = list(map(locks_get, offsets))  # one lock, mostly: counted by identity
                holders = {locked[0]} if locked.count(locked[0]) == len(locked) else set(locked)
            if any(lock is None or lock.member_id != member_id for lock in holders) or (
                    ran_out and not ran_out.isdisjoint(offsets)):
                raise KafkaError(ErrorCode.invalid_record_state,
                                 "Batch record not found. The request batch offsets are not found in the cache.")
            if len(b.types) == 1 and b.types[0] in (ACCEPT, REJECT, GAP):  # the common case, one C loop
                done = ACKNOWLEDGED if b.types[0] == ACCEPT else ARCHIVED
                held = list(map(states_get, offsets, itertools.repeat(UNTRACKED)))
                if held.count(held[0]) == len(held):  # one delivery count (one state object, mostly)
                    changes.update(dict.fromkeys(offsets, (done, held[0][1])))
                    if runs is not None:
                        _add_run(runs, b.first_offset, b.last_offset, done, held[0][1])
                else:
                    changes.update(zip(offsets, zip(itertools.repeat(done), map(itemgetter(1), held)), strict=True))
                    runs = None
                continue
            runs = None
            for offset in offsets:
                kind = b.types[0] if len(b.types) == 1 else b.types[offset - b.first_offset]
                count = states_get(offset, UNTRACKED)[1]
                if kind == ACCEPT:
                    changes[offset] = (ACKNOWLEDGED, count)
                elif kind in (REJECT, GAP):
                    changes[offset] = (ARCHIVED, count)
                elif kind == RELEASE:
                    released.append(offset)
                    if count >= limit:
                        changes[offset] = (ARCHIVED, count)
                else:
                    renewed.append(offset)

        def locks() -> None:
            for offset in expired + released:
                self.locks.pop(offset, None)
            for offset in self.locks.keys() & changes.keys():
                del self.locks[offset]
            if renewed:
                renewal = Lock(member_id, now + lock_seconds)
                self.locks.update(dict.fromkeys(renewed, renewal))
                self.lock_floor = min(self.lock_floor, renewal.deadline)

        return self._result(changes, locks, None, now_ms, made=runs)

    def release_member(self, member_id: str, limit: int, now_ms: int) -> CoordinatorResult[None]:
        """Give back every record the member holds (its share session closed, or it
        left the group): AVAILABLE again, or ARCHIVED at the delivery limit."""
        held = [o for o, lock in self.locks.items() if lock.member_id == member_id]
        changes = {o: (ARCHIVED, self.states[o][1]) for o in held
                   if o in self.states and self.states[o][1] >= limit}

        def locks() -> None:
            for offset in held:
                self.locks.pop(offset, None)

        return self._result(changes, locks, None, now_ms)

    def expire_locks(self, now: float, limit: int, now_ms: int) -> CoordinatorResult[None]:
        changes: dict[int, tuple[int, int]] = {}
        expired = self._expired(now, limit, changes)

        def locks() -> None:
            for offset in expired:
                self.locks.pop(offset, None)

        return self._result(changes, locks, None, now_ms)

    # --- what describes it -------------------------------------------------------------

    def in_flight(self) -> list[tuple[int, int, int, Lock | None]]:
        """(offset, state, delivery count, lock) of every tracked offset, in order."""
        return [(o, ACQUIRED if o in self.locks else s, c, self.locks.get(o))
                for o, (s, c) in sorted(self.states.items())]

    def next_lock_deadline(self) -> float | None:
        return min((lock.deadline for lock in set(self.locks.values())), default=None)


def _batches(states: dict[int, tuple[int, int]]) -> tuple[StateBatch, ...]:
    """Runs of consecutive offsets in the same state and count. The runs' boundaries are
    found by C loops: where the next offset is not this one plus one, or its state differs."""
    if not states:
        return ()
    offsets = sorted(states)
    values = list(map(states.__getitem__, offsets))
    gaps = map(ne, map(sub, offsets[1:], offsets[:-1]), itertools.repeat(1))
    changed = map(ne, values[1:], values[:-1])
    starts = [0, *itertools.compress(range(1, len(offsets)), map(or_, gaps, changed)), len(offsets)]
    return tuple(StateBatch(offsets[i], offsets[j - 1], *values[i]) for i, j in itertools.pairwise(starts))


def _add_run(runs: list[StateBatch], first: int, last: int, state: int, count: int) -> None:
    """Add the run `first`..`last` (after every run in `runs`) as `_batches` would find
    it: joined to the last run when it follows it in the same state and count."""
    if runs:
        before = runs[-1]
        if before.last_offset == first - 1 and before.delivery_state == state and before.delivery_count == count:
            runs[-1] = StateBatch(before.first_offset, last, state, count)
            return
    runs.append(StateBatch(first, last, state, count))


def _run_at(runs: tuple[StateBatch, ...], offset: int) -> StateBatch | None:
    """The run (in offset order) that holds `offset`, if any."""
    i = bisect.bisect_right(runs, offset, key=attrgetter("first_offset")) - 1
    return runs[i] if i >= 0 and runs[i].last_offset >= offset else None


def _forget_below(offsets: dict[int, V], old_start: int, new_start: int, end: int) -> None:
    """Drop the keys below `new_start` of a dict holding none below `old_start` nor at or
    past `end` (the states and locks: offsets before the end offset): all of them when the
    start passes the end (what a consumer that acknowledged everything it held moves it to),
    else a C loop over the offsets passed when they are fewer than the dict's keys."""
    if new_start <= old_start:
        return
    if new_start >= end:
        offsets.clear()
        return
    if old_start < 0 or new_start - old_start > len(offsets):
        for offset in [o for o in offsets if o < new_start]:
            del offsets[offset]
    else:
        deque(map(offsets.pop, range(old_start, new_start), itertools.repeat(None)), maxlen=0)
