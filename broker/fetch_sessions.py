"""Fetch sessions (KIP-227), as Kafka keeps them.

A consumer of many partitions sends one full Fetch (session epoch 0), which opens a
session holding each partition's fetch position; from then on its Fetch requests
(epochs 1, 2, ...) name only the partitions whose position changed and the ones to
forget, and the answers name only the partitions with something new: records, an
error, or a high watermark or log start offset that moved since the session last
said it. For a consumer of 1,000 quiet partitions a request and its answer shrink
from tens of kilobytes to a few bytes.

The rules are Kafka's (FetchManager, FetchSession, FetchSessionCacheShard):

- epoch -1 (FINAL_EPOCH): a full request outside any session; a session it names
  is closed. Epoch 0 (INITIAL_EPOCH): a full request that closes the session it names
  and opens a new one, if the cache has room. The answer's session id 0 means
  "no session": the client goes on with full requests.
- epoch > 0: FETCH_SESSION_ID_NOT_FOUND if the session is not (or no longer) cached,
  INVALID_FETCH_SESSION_EPOCH if the epoch is not the one expected next (a lost or
  duplicated request), FETCH_SESSION_TOPIC_ID_ERROR if the request uses topic ids
  (v13+) and the session names (or the other way round). A request that leaves the
  session empty closes it.
- The cache holds `max.incremental.fetch.session.cache.slots` sessions (1,000). A new
  session takes a full cache's least recently used session if that one has been
  unused for EVICTION_MS, or else the smallest session created more than EVICTION_MS
  ago, if the new one has more partitions; otherwise it is not created.
- A partition that returned records moves to the end of its session, so that each
  partition gets its turn at the front of the response's byte budget.
- Beyond Kafka: the sessions together hold at most MAX_CACHED_PARTITIONS partitions.
  Kafka bounds only how many sessions there are, so a thousand requests naming a
  million partitions each would make it hold a billion; here a session that would pass
  the bound is not opened, or is closed (the answer's session id 0), and the client
  goes on with full requests.

Sessions live in memory: after a restart a client's next incremental request gets
FETCH_SESSION_ID_NOT_FOUND and it starts a new session, as after a Kafka restart.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ottla.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from ottla.protocol.views.fetch import PartitionData

INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0
FINAL_EPOCH = -1
# Kafka's MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS: how long a session is safe from
# being taken over by a bigger one, and how long unused before anyone may take it.
EVICTION_MS = 120_000
TOPIC_ID_VERSION = 13  # Fetch names topics by id from this version on
# About 60 MB of cached partitions at most: a thousand consumers of 200 partitions.
MAX_CACHED_PARTITIONS = 200_000

NO_ERROR = ErrorCode.none  # read once: an enum member read off its class costs ~860 instructions
TopicKey = str | uuid.UUID  # a topic's name (Fetch v7-v12) or id (v13+)
PartitionKey = tuple[TopicKey, int]


def next_epoch(epoch: int) -> int:
    """Kafka's FetchMetadata.nextEpoch."""
    if epoch < 0:
        return FINAL_EPOCH
    return 1 if epoch == 2**31 - 1 else epoch + 1


# A partition a Fetch reads, and where from: (topic, partition, fetch_offset, max_bytes).
# A plain tuple: the Fetch handler makes one per partition of every request, and a
# tuple display runs no Python (a dataclass's __init__, or a named tuple's __new__, is a
# Python call of 1-2k instructions).
Wanted = tuple[TopicKey, int, int, int]


@dataclass(slots=True)
class CachedPartition:
    fetch_offset: int
    max_bytes: int
    # What the last answer that named the partition said (-1: nothing yet, or an error,
    # so that the partition is named again once the error is gone).
    high_watermark: int = -1
    log_start_offset: int = -1


@dataclass
class FetchSession:
    id: int
    uses_topic_ids: bool
    created_ms: int
    last_used_ms: int
    epoch: int = 1  # the epoch the next request must carry
    # In answer order: a partition that returned records moves to the end.
    partitions: dict[PartitionKey, CachedPartition] = field(default_factory=dict)

    def update(self, wanted: Iterable[Wanted], forgotten: Iterable[PartitionKey]) -> None:
        for topic, partition, fetch_offset, max_bytes in wanted:
            cached = self.partitions.get((topic, partition))
            if cached is None:
                self.partitions[(topic, partition)] = CachedPartition(fetch_offset, max_bytes)
            else:
                cached.fetch_offset, cached.max_bytes = fetch_offset, max_bytes
        for key in forgotten:
            self.partitions.pop(key, None)

    def wanted(self) -> list[Wanted]:
        return [(topic, partition, c.fetch_offset, c.max_bytes)
                for (topic, partition), c in self.partitions.items()]


@dataclass
class FetchContext:
    """What a Fetch request reads and how its answer is made, once its session part
    (if any) is settled. `error`: the session error the whole request is answered with."""

    wanted: list[Wanted]
    session: FetchSession | None = None
    incremental: bool = False
    error: ErrorCode = ErrorCode.none
    # A full request that may open a session once its answer is known.
    opens_session: bool = False
    uses_topic_ids: bool = False

    @property
    def session_id(self) -> int:
        return self.session.id if self.session is not None else INVALID_SESSION_ID


class FetchSessionCache:
    def __init__(self, slots: int, eviction_ms: int = EVICTION_MS, rng: random.Random | None = None,
                 max_partitions: int = MAX_CACHED_PARTITIONS) -> None:
        self.slots = slots
        self.eviction_ms = eviction_ms
        self.max_partitions = max_partitions
        self.sessions: dict[int, FetchSession] = {}
        self.evictions = 0
        self.partitions = 0  # held by all sessions together
        self._random = rng or random.Random()

    def _remove(self, session: FetchSession) -> None:
        if self.sessions.pop(session.id, None) is not None:
            self.partitions -= len(session.partitions)

    def context(self, version: int, session_id: int, epoch: int, wanted: list[Wanted],
                forgotten: list[PartitionKey], now_ms: int) -> FetchContext:
        """Settle the session part of a Fetch request (Kafka's FetchManager.newContext)."""
        uses_topic_ids = version >= TOPIC_ID_VERSION
        if epoch in (INITIAL_EPOCH, FINAL_EPOCH):
            named = self.sessions.get(session_id)
            if named is not None:
                self._remove(named)  # a full request closes the session it names
            return FetchContext(wanted, opens_session=epoch == INITIAL_EPOCH, uses_topic_ids=uses_topic_ids)
        session = self.sessions.get(session_id)
        if session is None:
            return FetchContext([], error=ErrorCode.fetch_session_id_not_found)
        if session.epoch != epoch:
            return FetchContext([], error=ErrorCode.invalid_fetch_session_epoch)
        if session.uses_topic_ids != uses_topic_ids:
            return FetchContext([], error=ErrorCode.fetch_session_topic_id_error)
        before = len(session.partitions)
        session.update(wanted, forgotten)
        self.partitions += len(session.partitions) - before
        if not session.partitions or self.partitions > self.max_partitions:
            self._remove(session)
            return FetchContext(wanted, uses_topic_ids=uses_topic_ids)
        session.last_used_ms = now_ms
        session.epoch = next_epoch(session.epoch)
        # By position (wanted, session, incremental, error, opens_session, uses_topic_ids):
        # at every incremental request, and a keyword argument costs about 1.4k instructions.
        return FetchContext(session.wanted(), session, True, NO_ERROR, False, uses_topic_ids)

    def answer(self, context: FetchContext, answers: list[tuple[Wanted, PartitionData]],
               now_ms: int) -> list[tuple[Wanted, PartitionData]]:
        """The partition answers that go into the response, in order; opens the
        session of a full request that asked for one (then `context.session` is set)."""
        if context.incremental:
            assert context.session is not None
            partitions = context.session.partitions
            kept = []
            # Whether each partition goes into the answer, noting what it says: in this
            # loop, not a method of CachedPartition, which cost a Python call (1-2k
            # instructions) for every partition of a session at every request.
            for w, answer in answers:
                key = (w[0], w[1])  # (topic, partition)
                cached = partitions.get(key)
                if cached is None:
                    continue
                records = answer["records"]
                must = bool(records)
                high_watermark = answer["high_watermark"]
                if cached.high_watermark != high_watermark:
                    must = True
                    cached.high_watermark = high_watermark
                log_start_offset = answer["log_start_offset"]
                if cached.log_start_offset != log_start_offset:
                    must = True
                    cached.log_start_offset = log_start_offset
                if answer["error_code"] != NO_ERROR:
                    cached.high_watermark = -1
                    must = True
                if not must:
                    continue
                kept.append((w, answer))
                if records:
                    partitions[key] = partitions.pop(key)  # to the end: the others go first next time
            return kept
        if context.opens_session:
            session = self._create(len(answers), context.uses_topic_ids, now_ms)
            if session is not None:
                for (topic, partition, fetch_offset, max_bytes), answer in answers:
                    session.partitions[(topic, partition)] = CachedPartition(
                        fetch_offset, max_bytes, answer["high_watermark"], answer["log_start_offset"])
                self.partitions += len(session.partitions)
                context.session = session
        return answers

    def _create(self, size: int, uses_topic_ids: bool, now_ms: int) -> FetchSession | None:
        if self.partitions + size > self.max_partitions:
            return None
        if len(self.sessions) >= self.slots and not self._evict_for(size, now_ms):
            return None
        session_id = INVALID_SESSION_ID
        while session_id == INVALID_SESSION_ID or session_id in self.sessions:
            session_id = self._random.randint(1, 2**31 - 1)
        session = self.sessions[session_id] = FetchSession(session_id, uses_topic_ids, now_ms, now_ms)
        return session

    def _evict_for(self, size: int, now_ms: int) -> bool:
        """Kafka's tryEvict for a consumer's session of `size` partitions."""
        if not self.sessions:
            return False
        least_recent = min(self.sessions.values(), key=lambda s: (s.last_used_ms, s.id))
        if now_ms - least_recent.last_used_ms > self.eviction_ms:
            victim = least_recent
        else:
            # Only sessions older than the eviction time may be taken, the smallest
            # first, and only by a bigger one (Kafka's EvictableKey order: size, id).
            old = [s for s in self.sessions.values() if s.last_used_ms - s.created_ms > self.eviction_ms]
            if not old:
                return False
            victim = min(old, key=lambda s: (len(s.partitions), s.id))
            if size <= len(victim.partitions):
                return False
        self._remove(victim)
        self.evictions += 1
        return True
