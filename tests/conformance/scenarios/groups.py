"""Consumer groups: the classic protocol (JoinGroup, SyncGroup, Heartbeat, LeaveGroup,
offsets) and KIP-848's ConsumerGroupHeartbeat, with their error paths."""

from __future__ import annotations

from typing import Any

from ..harness import Context, Scenario, Step, sweep
from .common import (
    CONSUMER_GROUP_DESCRIBE,
    CONSUMER_GROUP_HEARTBEAT,
    DELETE_GROUPS,
    DESCRIBE_GROUPS,
    FIND_COORDINATOR,
    HEARTBEAT,
    JOIN_GROUP,
    LEAVE_GROUP,
    LIST_GROUPS,
    OFFSET_COMMIT,
    OFFSET_DELETE,
    OFFSET_FETCH,
    SYNC_GROUP,
    create,
)

NOT_YET = ("coordinator_not_available", "coordinator_load_in_progress", "not_coordinator")
# A consumer's subscription as the classic "consumer" protocol encodes it (version 0,
# one topic, no user data) is opaque to the broker: any bytes do.
METADATA = b"\x00\x00\x00\x00\x00\x01\x00\x01t\xff\xff\xff\xff"


def g(c: Context, n: str = "") -> str:
    return c.name("group", n)


def member(c: Context, step: str) -> str:
    return str(c[step].member_id)


def generation(c: Context, step: str) -> int:
    return int(c[step].generation_id)


def join(name: str, version: int, member_step: str | None = None, n: str = "", protocol_type: str = "consumer",
         session_timeout: int = 30000, retry: tuple[str, ...] = NOT_YET) -> Step:
    return Step(name, JOIN_GROUP, version, lambda c: {
        "group_id": g(c, n), "session_timeout": session_timeout, "rebalance_timeout": 30000,
        "member_id": member(c, member_step) if member_step else "", "group_instance_id": None,
        "protocol_type": protocol_type, "protocols": [{"name": "range", "metadata": METADATA}],
        "reason": None}, retry=retry)


def sync(name: str, version: int, join_step: str, n: str = "", generation_delta: int = 0,
         member_id: str | None = None, assign: bool = True) -> Step:
    def body(c: Context) -> dict[str, Any]:
        me = member_id if member_id is not None else member(c, join_step)
        return {"group_id": g(c, n), "generation_id": generation(c, join_step) + generation_delta, "member_id": me,
                "group_instance_id": None, "protocol_type": "consumer", "protocol_name": "range",
                "assignments": [{"member_id": me, "assignment": b"\x00\x00"}] if assign else []}
    return Step(name, SYNC_GROUP, version, body)


def heartbeat(name: str, version: int, join_step: str, n: str = "", generation_delta: int = 0,
              member_id: str | None = None) -> Step:
    return Step(name, HEARTBEAT, version, lambda c: {
        "group_id": g(c, n), "generation_id": generation(c, join_step) + generation_delta,
        "member_id": member_id if member_id is not None else member(c, join_step), "group_instance_id": None})


def leave(name: str, version: int, join_step: str | None, n: str = "") -> Step:
    return Step(name, LEAVE_GROUP, version, lambda c: {
        "group_id": g(c, n), "member_id": member(c, join_step) if join_step else "nobody",
        "members": [{"member_id": member(c, join_step) if join_step else "nobody", "group_instance_id": None,
                     "reason": None}]})


def commit(name: str, version: int, join_step: str | None = None, n: str = "", partition: int = 0,
           generation_delta: int = 0, topic: str = "") -> Step:
    return Step(name, OFFSET_COMMIT, version, lambda c: {
        "group_id": g(c, n),
        "generation_id_or_member_epoch": generation(c, join_step) + generation_delta if join_step else -1,
        "member_id": member(c, join_step) if join_step else "", "group_instance_id": None,
        "retention_time": -1,
        "topics": [{"name": c.topic(topic), "partitions": [{"partition_index": partition, "committed_offset": 5,
                                                            "committed_leader_epoch": -1,
                                                            "committed_metadata": "meta"}]}]}, retry=NOT_YET)


def offset_fetch(name: str, version: int, n: str = "", partitions: tuple[int, ...] = (0, 1, 7)) -> Step:
    return Step(name, OFFSET_FETCH, version, lambda c: {
        "group_id": g(c, n), "topics": [{"name": c.topic(), "partition_indexes": list(partitions)}],
        "groups": [{"group_id": g(c, n), "member_id": None, "member_epoch": -1,
                    "topics": [{"name": c.topic(), "partition_indexes": list(partitions)}]}],
        "require_stable": True}, retry=NOT_YET)


def cg_heartbeat(name: str, version: int, member_step: str | None = None, epoch: int = 0, n: str = "",
                 member_id: str | None = None, topics: list[str] | None = None, **more: Any) -> Step:
    def body(c: Context) -> dict[str, Any]:
        me = member_id if member_id is not None else (str(c[member_step].member_id) if member_step else
                                                      c.name("member", name))
        return {"group_id": g(c, n), "member_id": me, "member_epoch": epoch, "instance_id": None,
                "rack_id": None, "rebalance_timeout": 30000,
                "subscribed_topic_names": [c.topic()] if topics is None else topics,
                "subscribed_topic_regex": None, "server_assignor": None, "topic_partitions": [], **more}
    return Step(name, CONSUMER_GROUP_HEARTBEAT, version, body, retry=NOT_YET)


SCENARIOS = [
    Scenario("classic-group", [
        create("create", 2),
        *[Step(f"find-coordinator@v{v}", FIND_COORDINATOR, v, lambda c: {
            "key_type": 0, "key": g(c), "coordinator_keys": [g(c)]}, retry=NOT_YET) for v in range(7)],
        Step("find-bad-key-type", FIND_COORDINATOR, 4, lambda c: {"key_type": 7, "coordinator_keys": [g(c)]}),
        join("join-needs-member-id", 9),
        join("join", 9, "join-needs-member-id"),
        *[sync(f"sync@v{v}", v, "join") for v in range(6)],
        *[heartbeat(f"heartbeat@v{v}", v, "join") for v in range(5)],
        heartbeat("heartbeat-wrong-generation", 4, "join", generation_delta=3),
        heartbeat("heartbeat-unknown-member", 4, "join", member_id="nobody"),
        Step("heartbeat-unknown-group", HEARTBEAT, 4, lambda c: {"group_id": g(c, "none"), "generation_id": 1,
                                                                  "member_id": "x", "group_instance_id": None}),
        sync("sync-wrong-generation", 5, "join", generation_delta=2),
        sync("sync-unknown-member", 5, "join", member_id="nobody"),
        join("join-inconsistent-protocol", 9, protocol_type="other"),
        join("join-unknown-member", 9, "join", n="other"),
        join("join-bad-session-timeout", 9, session_timeout=1),
        *[commit(f"commit@v{v}", v, "join") for v in range(2, 10)],
        commit("commit-wrong-generation", 9, "join", generation_delta=4),
        commit("commit-unknown-partition", 9, "join", partition=9),
        commit("commit-unknown-topic", 9, "join", topic="nope"),
        *[offset_fetch(f"offset-fetch@v{v}", v) for v in range(1, 10)],
        offset_fetch("offset-fetch-unknown-group", 9, n="none"),
        *sweep("describe", DESCRIBE_GROUPS, lambda c: {"groups": [g(c), g(c, "none")],
                                                       "include_authorized_operations": False}),
        *sweep("describe-operations", DESCRIBE_GROUPS, lambda c: {"groups": [g(c), g(c, "none")],
                                                                  "include_authorized_operations": True},
               range(3, 6)),
        *sweep("list", LIST_GROUPS, {"states_filter": [], "types_filter": []}, only_mine=True),
        Step("list-by-state", LIST_GROUPS, 5, {"states_filter": ["Stable"], "types_filter": ["classic"]},
             only_mine=True),
        Step("delete-non-empty", DELETE_GROUPS, 2, lambda c: {"groups_names": [g(c)]}),
        Step("offset-delete-subscribed", OFFSET_DELETE, 0, lambda c: {
            "group_id": g(c), "topics": [{"name": c.topic(), "partitions": [{"partition_index": 0}]}]}),
        leave("leave-unknown-member", 5, None),
        *[leave(f"leave@v{v}", v, "join") for v in range(6)],
        Step("offset-delete", OFFSET_DELETE, 0, lambda c: {
            "group_id": g(c), "topics": [{"name": c.topic(), "partitions": [{"partition_index": 0},
                                                                            {"partition_index": 5}]}]}),
        *[Step(f"delete@v{v}", DELETE_GROUPS, v, lambda c: {"groups_names": [g(c), g(c, "none")]})
          for v in range(3)],
    ]),
    Scenario("classic-join-versions", [
        create("create"),
        *[join(f"join@v{v}", v, n=f"v{v}") for v in range(10)],
    ]),
    Scenario("consumer-group", [
        create("create", 2),
        Step("find", FIND_COORDINATOR, 4, lambda c: {"key_type": 0, "coordinator_keys": [g(c)]}, retry=NOT_YET),
        cg_heartbeat("join@v0", 0, member_id="", n="v0"),
        cg_heartbeat("join", 1),
        # Until the member has its assignment (Kafka may compute it a moment later).
        Step("reconciled", CONSUMER_GROUP_HEARTBEAT, 1, lambda c: {
            "group_id": g(c), "member_id": str(c["join"].member_id), "member_epoch": int(c["join"].member_epoch),
            "rebalance_timeout": 30000, "subscribed_topic_names": None, "topic_partitions": None},
            retry=NOT_YET),
        cg_heartbeat("heartbeat-fenced-epoch", 1, "join", epoch=7),
        cg_heartbeat("heartbeat-unknown-member", 1, member_id="nobody-at-all-x", epoch=3),
        cg_heartbeat("join-empty-member-id-v1", 1, member_id="", n="empty"),
        cg_heartbeat("join-no-subscription", 1, topics=[], n="nosub"),
        cg_heartbeat("join-bad-assignor", 1, n="assignor", server_assignor="nope"),
        cg_heartbeat("join-bad-regex", 1, n="regex", topics=[], subscribed_topic_regex="(["),
        *sweep("describe", CONSUMER_GROUP_DESCRIBE, lambda c: {"group_ids": [g(c, "v0"), g(c, "none")],
                                                               "include_authorized_operations": False}),
        Step("describe-operations", CONSUMER_GROUP_DESCRIBE, 1, lambda c: {
            "group_ids": [g(c, "v0"), g(c, "none")], "include_authorized_operations": True}),
        Step("classic-join-into-consumer-group", JOIN_GROUP, 9, lambda c: {
            "group_id": g(c), "session_timeout": 30000, "rebalance_timeout": 30000, "member_id": "",
            "group_instance_id": None, "protocol_type": "consumer", "protocols": [{"name": "range",
                                                                                  "metadata": METADATA}],
            "reason": None}),
        Step("describe-as-classic", DESCRIBE_GROUPS, 5, lambda c: {"groups": [g(c)],
                                                                    "include_authorized_operations": False}),
        cg_heartbeat("leave", 1, "join", epoch=-1),
        cg_heartbeat("leave-again", 1, "join", epoch=-1),
    ]),
]
