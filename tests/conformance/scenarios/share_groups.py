"""Share groups (KIP-932): ShareGroupHeartbeat and ShareGroupDescribe with their error
paths, the share-session errors of ShareFetch and ShareAcknowledge, and the share-group
offsets APIs on what does not exist. The member subscribes to a topic that does not
exist: Kafka assigns a share-partition only a heartbeat after it initialized it, Ottla
in the same heartbeat, so an existing topic would differ by design (docs/share-groups.md);
records, acquisition and acknowledgement are compared by the client tests
(tests/integration/test_share_groups.py)."""

from __future__ import annotations

from typing import Any

from ..harness import Context, Scenario, Step, sweep
from .common import (
    DELETE_GROUPS,
    DESCRIBE_GROUPS,
    FIND_COORDINATOR,
    JOIN_GROUP,
    LIST_GROUPS,
    OFFSET_COMMIT,
    OFFSET_DELETE,
    create,
)

SHARE_GROUP_HEARTBEAT, SHARE_GROUP_DESCRIBE, SHARE_FETCH, SHARE_ACKNOWLEDGE = 76, 77, 78, 79
DESCRIBE_SHARE_GROUP_OFFSETS, ALTER_SHARE_GROUP_OFFSETS, DELETE_SHARE_GROUP_OFFSETS = 90, 91, 92
NOT_YET = ("coordinator_not_available", "coordinator_load_in_progress", "not_coordinator")


def g(c: Context, n: str = "") -> str:
    return c.name("share", n)


def heartbeat(name: str, epoch: int, member: str | None = None, topics: list[str] | None = None,
              absent_topic: bool = True) -> Step:
    def body(c: Context) -> dict[str, Any]:
        return {"group_id": g(c), "member_id": member or c.name("member"), "member_epoch": epoch, "rack_id": None,
                "subscribed_topic_names": topics if topics is not None or not absent_topic else [c.topic("absent")]}
    return Step(name, SHARE_GROUP_HEARTBEAT, 1, body, retry=NOT_YET)


def fetch(name: str, version: int, epoch: int, acks: bool = False) -> Step:
    def body(c: Context) -> dict[str, Any]:
        topic_id = c["create"].topics[0].topic_id
        batches = [{"first_offset": 0, "last_offset": 0, "acknowledge_types": [1]}] if acks else []
        return {"group_id": g(c), "member_id": c.name("member"), "share_session_epoch": epoch, "max_wait": 0,
                "min_bytes": 1, "max_bytes": 1 << 20, "max_records": 10, "batch_size": 10,
                "topics": [{"topic_id": topic_id, "partitions": [{"partition_index": 0,
                                                                   "acknowledgement_batches": batches}]}],
                "forgotten_topics_data": []}
    return Step(name, SHARE_FETCH, version, body)


SCENARIOS = [
    Scenario("share-group", [
        create("create", 1),
        Step("find", FIND_COORDINATOR, 4, lambda c: {"key_type": 0, "coordinator_keys": [g(c)]}, retry=NOT_YET),
        heartbeat("join-no-subscription", 0, absent_topic=False),
        heartbeat("heartbeat-unknown-group", 3),
        heartbeat("join", 0),
        heartbeat("heartbeat-unknown-member", 3, member="nobody-at-all-x"),
        heartbeat("heartbeat-fenced-epoch", 7),
        heartbeat("heartbeat-bad-epoch", -7),
        Step("describe", SHARE_GROUP_DESCRIBE, 1, lambda c: {"group_ids": [g(c), g(c, "none")],
                                                               "include_authorized_operations": False}),
        Step("list", LIST_GROUPS, 5, {"states_filter": [], "types_filter": ["share"]}, only_mine=True),
        *sweep("describe-as-classic", DESCRIBE_GROUPS, lambda c: {"groups": [g(c)],
                                                                   "include_authorized_operations": False},
               versions=range(5, 7)),
        *[fetch(f"fetch-no-session@v{v}", v, 1) for v in (1, 2)],
        *[Step(f"acknowledge-initial-epoch@v{v}", SHARE_ACKNOWLEDGE, v, lambda c: {
            "group_id": g(c), "member_id": c.name("member"), "share_session_epoch": 0, "topics": []})
          for v in (1, 2)],
        *sweep("describe-offsets-unknown-group", DESCRIBE_SHARE_GROUP_OFFSETS, lambda c: {
            "groups": [{"group_id": g(c, "none"), "topics": None}]}),
        # The other group APIs, asked of a share group's id.
        Step("classic-join-into-share-group", JOIN_GROUP, 9, lambda c: {
            "group_id": g(c), "session_timeout": 30000, "rebalance_timeout": 30000, "member_id": "",
            "group_instance_id": None, "protocol_type": "consumer", "protocols": [{"name": "range",
                                                                                  "metadata": b""}],
            "reason": None}),
        Step("offset-commit-to-share-group", OFFSET_COMMIT, 9, lambda c: {
            "group_id": g(c), "generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None,
            "topics": [{"name": c.topic(), "partitions": [{"partition_index": 0, "committed_offset": 1,
                                                           "committed_metadata": None}]}]}),
        Step("offset-delete-of-share-group", OFFSET_DELETE, 0, lambda c: {
            "group_id": g(c), "topics": [{"name": c.topic(), "partitions": [{"partition_index": 0}]}]}),
        Step("alter-offsets-members", ALTER_SHARE_GROUP_OFFSETS, 0, lambda c: {
            "group_id": g(c), "topics": [{"topic_name": c.topic(), "partitions": [
                {"partition_index": 0, "start_offset": 0}]}]}),
        heartbeat("leave", -1),
        Step("delete-offsets-unknown-topic", DELETE_SHARE_GROUP_OFFSETS, 0, lambda c: {
            "group_id": g(c), "topics": [{"topic_name": c.topic("absent")}]}),
        Step("delete", DELETE_GROUPS, 2, lambda c: {"groups_names": [g(c), g(c, "none")]}),
    ]),
]
