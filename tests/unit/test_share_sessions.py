"""Share sessions (broker/share_sessions.py): epochs, and the bound on how many there are."""

from __future__ import annotations

import pytest

from ottla.broker.share_sessions import FINAL_EPOCH, ShareSessionCache
from ottla.protocol.errors import ErrorCode, KafkaError


def test_epochs_follow_one_another_and_a_new_session_replaces_the_old() -> None:
    cache = ShareSessionCache(10)
    session, old = cache.open("g", "m")
    assert old is None and cache.current("g", "m", 1) is session
    cache.advance(session)
    for wrong in (1, 3, 0):
        with pytest.raises(KafkaError) as raised:
            cache.current("g", "m", wrong)
        assert raised.value.code == ErrorCode.invalid_share_session_epoch
    assert cache.current("g", "m", FINAL_EPOCH) is session
    again, old = cache.open("g", "m")
    assert old is session and cache.current("g", "m", 1) is again
    with pytest.raises(KafkaError) as raised:
        cache.current("g", "other", 1)
    assert raised.value.code == ErrorCode.share_session_not_found


def test_a_full_cache_makes_room_only_from_members_gone_from_their_group() -> None:
    """Broken once by never evicting: a client that opened sessions for members it made
    up kept every real member out (SHARE_SESSION_LIMIT_REACHED)."""
    cache = ShareSessionCache(3)
    for member in ("ghost-1", "ghost-2", "live"):
        cache.open("g", member)
    members = {"live", "new"}
    session, _ = cache.open("g", "new", lambda s: s.member_id not in members)
    assert set(m for _, m in cache.sessions) == {"live", "new"} and cache.current("g", "new", 1) is session
    cache.open("g", "newer", lambda s: s.member_id not in members | {"newer"})
    with pytest.raises(KafkaError) as raised:
        cache.open("g", "newest", lambda s: False)
    assert raised.value.code == ErrorCode.share_session_limit_reached
