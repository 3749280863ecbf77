"""A classic group member's Heartbeat at every version Ottla serves (v0-v4).

The answer of a heartbeat that finds all well is built once per version and kept
(broker/handlers/groups.py, the pipeline's floor): each version must still get its own,
and an error its own answer. Broken once by hand: with one answer kept for every version,
the v1 heartbeat after a v0 one was answered in v0's layout, which the client could not
read as v1's (kio's BufferUnderflow: a v0 answer has no throttle time)."""

from __future__ import annotations

import datetime
from typing import Any

from tests.wire import WireClient, request

JOIN_GROUP, SYNC_GROUP, HEARTBEAT = 11, 14, 12
MEMBER_ID_REQUIRED, ILLEGAL_GENERATION = 79, 22
GROUP = "classic-heartbeats"


def _join(client: WireClient) -> tuple[str, int]:
    """Join GROUP as its only member and take the assignment: (member id, generation)."""
    member = ""
    for _ in range(2):  # the first join is answered MEMBER_ID_REQUIRED, with the id to join with
        joined = client.call(request(JOIN_GROUP, 5, group_id=GROUP, session_timeout=60_000, rebalance_timeout=60_000,
                                     member_id=member, group_instance_id=None, protocol_type="consumer",
                                     protocols=[{"name": "range", "metadata": b""}]))
        member = joined.member_id
        if joined.error_code != MEMBER_ID_REQUIRED:
            break
    assert joined.error_code == 0, joined
    synced = client.call(request(SYNC_GROUP, 3, group_id=GROUP, generation_id=joined.generation_id, member_id=member,
                                 group_instance_id=None, assignments=[{"member_id": member, "assignment": b""}]))
    assert synced.error_code == 0, synced
    return member, joined.generation_id


def _heartbeat(client: WireClient, version: int, member: str, generation: int) -> Any:
    fields: dict[str, Any] = {"group_id": GROUP, "generation_id": generation, "member_id": member}
    if version >= 3:
        fields["group_instance_id"] = None
    return client.call(request(HEARTBEAT, version, **fields))


def test_a_member_is_answered_at_every_heartbeat_version(broker) -> None:
    with WireClient(broker.bootstrap, timeout=60) as client:
        member, generation = _join(client)
        for version in (0, 1, 2, 3, 4, 4, 3, 2, 1, 0):  # each version twice: the answer kept, then served again
            answer = _heartbeat(client, version, member, generation)
            assert answer.error_code == 0, (version, answer)
            if version >= 1:
                assert answer.throttle_time == datetime.timedelta(0)
        for version in range(5):
            assert _heartbeat(client, version, member, generation + 1).error_code == ILLEGAL_GENERATION
