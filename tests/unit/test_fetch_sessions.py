"""The fetch session cache on its own (broker/fetch_sessions.py): Kafka's epochs, errors,
eviction rules and what an incremental answer names."""

from __future__ import annotations

import random

from ottla.broker.fetch_sessions import EVICTION_MS, FetchSessionCache, Wanted
from ottla.protocol.errors import ErrorCode

V12, V13 = 12, 13


def wanted(*partitions: int, topic: str = "t", offset: int = 0) -> list[Wanted]:
    return [(topic, p, offset, 1 << 20) for p in partitions]


def answer(w: Wanted, *, records: bytes = b"", hw: int = 10, log_start: int = 0,
           error: ErrorCode = ErrorCode.none) -> tuple[Wanted, dict]:
    return w, {"partition_index": w[1], "error_code": error, "high_watermark": hw,
               "log_start_offset": log_start, "records": records}


def open_session(cache: FetchSessionCache, partitions: list[Wanted], now: int = 0) -> int:
    context = cache.context(V12, 0, 0, partitions, [], now)
    assert context.opens_session and not context.incremental
    kept = cache.answer(context, [answer(w) for w in context.wanted], now)
    assert len(kept) == len(partitions)  # a full request is answered in full
    return context.session_id


def test_an_incremental_request_reads_the_whole_session_and_answers_only_the_news():
    cache = FetchSessionCache(10)
    session_id = open_session(cache, wanted(0, 1, 2))
    assert session_id != 0

    context = cache.context(V12, session_id, 1, [], [], 1)
    assert context.incremental and [w[1] for w in context.wanted] == [0, 1, 2]
    # Nothing moved: nothing is named.
    assert cache.answer(context, [answer(w) for w in context.wanted], 1) == []

    # Partition 1 has records, partition 2's high watermark moved.
    context = cache.context(V12, session_id, 2, wanted(1, offset=10), [], 2)
    assert [w[1:3] for w in context.wanted] == [(0, 0), (1, 10), (2, 0)]
    answers = [answer(context.wanted[0]), answer(context.wanted[1], records=b"x", hw=12),
               answer(context.wanted[2], hw=11)]
    assert [w[1] for w, _ in cache.answer(context, answers, 2)] == [1, 2]
    # The partition that returned records goes last next time.
    context = cache.context(V12, session_id, 3, [], [], 3)
    assert [w[1] for w in context.wanted] == [0, 2, 1]


def test_a_moved_log_start_offset_is_named_once():
    """Records deleted (DeleteRecords, retention) move a partition's log start offset: the
    next incremental answer names it, the one after does not. (Seen failing with the
    log start offset's change left out of what an incremental answer names.)"""
    cache = FetchSessionCache(10)
    session_id = open_session(cache, wanted(0, 1))
    for epoch, named in ((1, [1]), (2, [])):
        context = cache.context(V12, session_id, epoch, [], [], epoch)
        answers = [answer(context.wanted[0]), answer(context.wanted[1], log_start=5)]
        assert [w[1] for w, _ in cache.answer(context, answers, epoch)] == named


def test_an_error_is_named_every_time_and_once_more_when_it_is_gone():
    cache = FetchSessionCache(10)
    session_id = open_session(cache, wanted(0))
    for epoch in (1, 2):
        context = cache.context(V12, session_id, epoch, [], [], epoch)
        kept = cache.answer(context, [answer(context.wanted[0], error=ErrorCode.unknown_topic_or_partition, hw=-1)],
                            epoch)
        assert len(kept) == 1
    context = cache.context(V12, session_id, 3, [], [], 3)
    assert len(cache.answer(context, [answer(context.wanted[0])], 3)) == 1  # healed: said once
    context = cache.context(V12, session_id, 4, [], [], 4)
    assert cache.answer(context, [answer(context.wanted[0])], 4) == []


def test_session_errors_are_kafkas():
    cache = FetchSessionCache(10)
    session_id = open_session(cache, wanted(0, 1))
    assert cache.context(V12, session_id + 1, 1, [], [], 1).error is ErrorCode.fetch_session_id_not_found
    assert cache.context(V12, session_id, 2, [], [], 1).error is ErrorCode.invalid_fetch_session_epoch
    assert cache.context(V13, session_id, 1, [], [], 1).error is ErrorCode.fetch_session_topic_id_error
    # None of these moved the epoch: 1 is still the one expected.
    context = cache.context(V12, session_id, 1, [], [], 1)
    assert context.error is ErrorCode.none and context.session_id == session_id
    # A duplicate of that request is refused: the session has moved on to epoch 2.
    assert cache.context(V12, session_id, 1, [], [], 1).error is ErrorCode.invalid_fetch_session_epoch


def test_forgetting_every_partition_closes_the_session_and_full_requests_close_theirs():
    cache = FetchSessionCache(10)
    session_id = open_session(cache, wanted(0, 1))
    context = cache.context(V12, session_id, 1, [], [("t", 0), ("t", 1)], 1)
    assert context.session_id == 0 and not context.incremental and not context.opens_session
    assert cache.sessions == {}

    session_id = open_session(cache, wanted(0, 1))
    context = cache.context(V12, session_id, -1, wanted(0), [], 2)  # FINAL_EPOCH: sessionless
    assert session_id not in cache.sessions and not context.opens_session
    session_id = open_session(cache, wanted(0, 1))
    replaced = cache.context(V12, session_id, 0, wanted(0), [], 3)  # a new full request
    assert session_id not in cache.sessions and replaced.opens_session


def test_a_full_cache_takes_a_stale_session_or_a_smaller_old_one():
    cache = FetchSessionCache(2, rng=random.Random(7))
    small = open_session(cache, wanted(0), now=0)
    big = open_session(cache, wanted(0, 1, 2), now=0)
    # Both fresh: no room for a third, however big.
    assert open_session(cache, wanted(*range(10)), now=1000) == 0
    # Both used after the eviction time: both may now be taken, the smaller first,
    # but only by a bigger session.
    for session_id in (small, big):
        cache.context(V12, session_id, 1, [], [], EVICTION_MS + 1)
    assert open_session(cache, wanted(0), now=EVICTION_MS + 2) == 0
    bigger = open_session(cache, wanted(0, 1), now=EVICTION_MS + 2)
    assert bigger != 0 and small not in cache.sessions and big in cache.sessions
    # A session unused for longer than the eviction time goes to anyone.
    cache.context(V12, bigger, 1, [], [], 2 * EVICTION_MS)
    newcomer = open_session(cache, wanted(0), now=2 * EVICTION_MS + 3)
    assert newcomer != 0 and big not in cache.sessions and cache.evictions == 2


def test_the_sessions_together_hold_a_bounded_number_of_partitions():
    cache = FetchSessionCache(10, max_partitions=5)
    first = open_session(cache, wanted(0, 1, 2))
    assert open_session(cache, wanted(0, 1, 2)) == 0  # 6 would pass the bound: no session
    second = open_session(cache, wanted(0, 1))
    assert second != 0 and cache.partitions == 5
    # A session that grows past the bound is closed; the request is answered sessionless.
    context = cache.context(V12, first, 1, wanted(3, 4), [], 1)
    assert context.session_id == 0 and [w[1] for w in context.wanted] == [3, 4]
    assert first not in cache.sessions and cache.partitions == 2
    # Forgetting frees room.
    cache.context(V12, second, 1, [], [("t", 1)], 2)
    assert cache.partitions == 1 and open_session(cache, wanted(0, 1, 2, 3)) != 0
