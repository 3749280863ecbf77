"""Share sessions (KIP-932): the share-partitions a share consumer fetches from, kept
between its ShareFetch and ShareAcknowledge requests, as Kafka's ShareSessionCache.

A session is keyed by (group id, member id). Epoch 0 opens one (replacing the member's
previous session, whose records go back), -1 closes it, and every other request must
carry the epoch that follows the last one: SHARE_SESSION_NOT_FOUND when the member has
no session, INVALID_SHARE_SESSION_EPOCH when the epoch is not the next. A request of a
session names only the partitions it adds and forgets; a ShareFetch reads all of them.

As in Kafka 4.3 (ShareSessionCache, SharePartitionManager.newContext), a session ends only
by its final epoch or the member's next epoch 0: not when the member leaves its group or
its group session expires, which the group coordinator decides (on another broker, in a
cluster). A member whose heartbeats came late still acknowledges through its session,
and its client never sees SHARE_SESSION_NOT_FOUND for it. (Kafka also drops a session
when the connection that opened it closes; here a full cache makes room instead from
the sessions of members gone from their group.)
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from ottla.protocol.errors import ErrorCode, KafkaError

INITIAL_EPOCH = 0
FINAL_EPOCH = -1
TopicIdPartition = tuple[uuid.UUID, int]


@dataclass
class ShareSession:
    group_id: str
    member_id: str
    next_epoch: int = 1
    partitions: dict[TopicIdPartition, None] = field(default_factory=dict)  # ordered set


def next_epoch(epoch: int) -> int:
    return 1 if epoch >= 2**31 - 1 else epoch + 1


class ShareSessionCache:
    def __init__(self, max_sessions: int) -> None:
        self.max_sessions = max_sessions
        self.sessions: dict[tuple[str, str], ShareSession] = {}

    def __len__(self) -> int:
        return len(self.sessions)

    def open(self, group_id: str, member_id: str,
             stale: Callable[[ShareSession], bool] = lambda _: False) -> tuple[ShareSession, ShareSession | None]:
        """A new session for the member; the one it replaces, if any. When the cache is
        full, the sessions `stale` says are of members gone from their group make room."""
        key = (group_id, member_id)
        old = self.sessions.pop(key, None)
        if len(self.sessions) >= self.max_sessions:
            for gone in [k for k, session in self.sessions.items() if stale(session)]:
                del self.sessions[gone]
        if len(self.sessions) >= self.max_sessions:
            if old is not None:
                self.sessions[key] = old
            raise KafkaError(ErrorCode.share_session_limit_reached,
                             "The limit of share sessions on this broker has been reached.")
        session = self.sessions[key] = ShareSession(group_id, member_id)
        return session, old

    def current(self, group_id: str, member_id: str, epoch: int) -> ShareSession:
        """The member's session, if `epoch` is the one it expects (or FINAL_EPOCH)."""
        session = self.sessions.get((group_id, member_id))
        if session is None:
            raise KafkaError(ErrorCode.share_session_not_found, None)
        if epoch != FINAL_EPOCH and epoch != session.next_epoch:
            raise KafkaError(ErrorCode.invalid_share_session_epoch, None)
        return session

    def advance(self, session: ShareSession) -> None:
        session.next_epoch = next_epoch(session.next_epoch)

    def close(self, session: ShareSession) -> None:
        if self.sessions.get((session.group_id, session.member_id)) is session:
            del self.sessions[(session.group_id, session.member_id)]

    def of_member(self, group_id: str, member_id: str) -> ShareSession | None:
        return self.sessions.get((group_id, member_id))
