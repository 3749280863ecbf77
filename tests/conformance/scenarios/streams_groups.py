"""Streams groups (KIP-1071): StreamsGroupHeartbeat and StreamsGroupDescribe, a member's
join and the error paths of bad heartbeats (no topology, an invalid or cyclic one, an
oversized one, unknown members, stale and bad epochs, task lists half given, a topology
sent when not joining), and the other group APIs asked of a streams group's id: a
classic JoinGroup, a ConsumerGroupHeartbeat, DescribeGroups, ListGroups, DeleteGroups.

The topology reads a topic that does not exist, so the group stays without tasks
(status MISSING_SOURCE_TOPICS) and creates no internal topics: tasks and internal topics
are compared by the Streams tests (tests/integration/test_kafka_streams.py) and the
kafka-streams-groups test (tests/integration/test_streams_group_requests.py). A member
joining with another topology than the group's is the inconsistent topology
(join-other-topology: "Topology updates are not supported yet.")."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..harness import Context, Scenario, Step, sweep
from .common import (
    CONSUMER_GROUP_HEARTBEAT,
    DELETE_GROUPS,
    DESCRIBE_GROUPS,
    FIND_COORDINATOR,
    JOIN_GROUP,
    LIST_GROUPS,
    create,
)

STREAMS_GROUP_HEARTBEAT, STREAMS_GROUP_DESCRIBE = 88, 89
NOT_YET = ("coordinator_not_available", "coordinator_load_in_progress", "not_coordinator")
# Kafka 4.3.1 takes a topology of any size the request can carry: this many subtopologies
# is beyond what Ottla keeps (coordinator/streams_topology.py MAX_SUBTOPOLOGIES).
OVERSIZED = 1001


def g(c: Context, n: str = "") -> str:
    return c.name("streams", n)


def internal(name: str, configs: dict[str, str] | None = None) -> dict[str, Any]:
    return {"name": name, "partitions": 0, "replication_factor": 0,
            "topic_configs": [{"key": k, "value": v} for k, v in (configs or {}).items()]}


def subtopology(sid: str, sources: Sequence[str] = (), changelogs: Sequence[dict] = (), sinks: Sequence[str] = (),
                repartition_sources: Sequence[dict] = ()) -> dict[str, Any]:
    return {"subtopology_id": sid, "source_topics": list(sources), "source_topic_regex": [],
            "state_changelog_topics": list(changelogs), "repartition_sink_topics": list(sinks),
            "repartition_source_topics": list(repartition_sources), "copartition_groups": []}


def topology(c: Context, n: str = "", source: str = "absent") -> dict[str, Any]:
    """WordTotals' shape: a re-key through a repartition topic, then a store."""
    app = g(c, n)
    return {"epoch": 1, "subtopologies": [
        subtopology("0", sources=[c.topic(source)], sinks=[f"{app}-rekey-repartition"]),
        subtopology("1", changelogs=[internal(f"{app}-store-changelog", {"cleanup.policy": "compact"})],
                    repartition_sources=[internal(f"{app}-rekey-repartition")])]}


def cyclic(c: Context) -> dict[str, Any]:
    """Two subtopologies each writing the other's repartition source."""
    app = g(c, "cycle")
    return {"epoch": 1, "subtopologies": [
        subtopology(str(i), sinks=[f"{app}-loop-{1 - i}"], repartition_sources=[internal(f"{app}-loop-{i}")])
        for i in (0, 1)]}


def oversized(c: Context) -> dict[str, Any]:
    return {"epoch": 1, "subtopologies": [subtopology(str(i), sources=[c.topic("absent")])
                                          for i in range(OVERSIZED)]}


EMPTY_TASKS: dict[str, Any] = {"active_tasks": [], "standby_tasks": [], "warmup_tasks": []}
NO_TASKS: dict[str, Any] = {"active_tasks": None, "standby_tasks": None, "warmup_tasks": None}


def heartbeat(name: str, epoch: int, *, n: str = "", member: str | None = None, joined: str | None = None,
              leave: bool = False, topology_of: Any = topology, **fields: Any) -> Step:
    """A StreamsGroupHeartbeat of the scenario's group (`n`: another group), from `member`
    (a name of the run) at `epoch`, or from the member an earlier step `joined` at its
    epoch + `epoch` (-1 if it is to `leave`); a join (epoch 0) carries `topology_of(c)`.
    `fields` override the body's (a function of the context for a value that needs it)."""
    def body(c: Context) -> dict[str, Any]:
        member_id = member if member is not None else c.name("member", n)
        member_epoch = epoch
        if joined is not None:
            member_id = str(c[joined].member_id)
            member_epoch = -1 if leave else int(c[joined].member_epoch) + epoch
        values: dict[str, Any] = {
            "group_id": g(c, n), "member_id": member_id, "member_epoch": member_epoch,
            "endpoint_information_epoch": 0, "instance_id": None, "rack_id": None, "rebalance_timeout": -1,
            "topology": None, "process_id": None, "user_endpoint": None, "client_tags": None,
            "task_offsets": None, "task_end_offsets": None, "shutdown_application": False, **NO_TASKS}
        if member_epoch == 0:
            values.update(rebalance_timeout=30000, process_id=c.name("process", n), client_tags=[],
                          topology=topology_of(c) if topology_of else None, **EMPTY_TASKS)
        values.update({k: v(c) if callable(v) else v for k, v in fields.items()})
        return values
    return Step(name, STREAMS_GROUP_HEARTBEAT, 0, body, retry=NOT_YET)


def describe(name: str) -> Step:
    return Step(name, STREAMS_GROUP_DESCRIBE, 0, lambda c: {"group_ids": [g(c), g(c, "none")],
                                                             "include_authorized_operations": True})


SCENARIOS = [
    Scenario("streams-group", [
        create("create", 2),
        Step("find", FIND_COORDINATOR, 4, lambda c: {"key_type": 0, "coordinator_keys": [g(c)]}, retry=NOT_YET),
        # Refused before the group is looked at.
        heartbeat("join-no-topology", 0, topology_of=None),
        heartbeat("join-empty-member-id", 0, member=""),
        heartbeat("join-no-rebalance-timeout", 0, rebalance_timeout=-1),
        heartbeat("join-with-active-tasks", 0, active_tasks=[{"subtopology_id": "0", "partitions": [0]}]),
        heartbeat("join-task-lists-null", 0, **NO_TASKS),
        heartbeat("heartbeat-bad-epoch", -7),
        heartbeat("join-cyclic-topology", 0, n="cycle", topology_of=cyclic),
        heartbeat("heartbeat-unknown-group", 3, n="none"),
        # The group: one member, its source topic missing.
        heartbeat("join", 0),
        heartbeat("heartbeat", 0, joined="join", **EMPTY_TASKS),
        heartbeat("heartbeat-unchanged", 0, joined="join"),
        heartbeat("heartbeat-task-lists-partial", 0, joined="join", active_tasks=[]),
        heartbeat("heartbeat-with-topology", 0, joined="join", topology=topology),
        heartbeat("heartbeat-unknown-member", 1, member="nobody-at-all-x"),
        heartbeat("heartbeat-fenced-epoch", 7, joined="join"),
        heartbeat("join-other-topology", 0, member="other-member-x", topology_of=lambda c: topology(c, "other")),
        describe("describe"),
        Step("list", LIST_GROUPS, 5, {"states_filter": [], "types_filter": ["streams"]}, only_mine=True),
        *sweep("describe-as-classic", DESCRIBE_GROUPS, lambda c: {"groups": [g(c)],
                                                                   "include_authorized_operations": False},
               versions=range(5, 7)),
        # The other protocols' requests, asked of a streams group's id.
        Step("classic-join-into-streams-group", JOIN_GROUP, 9, lambda c: {
            "group_id": g(c), "session_timeout": 30000, "rebalance_timeout": 30000, "member_id": "",
            "group_instance_id": None, "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": b""}], "reason": None}),
        Step("consumer-heartbeat-into-streams-group", CONSUMER_GROUP_HEARTBEAT, 1, lambda c: {
            "group_id": g(c), "member_id": c.name("member", "consumer"), "member_epoch": 0, "instance_id": None,
            "rack_id": None, "rebalance_timeout": 30000, "subscribed_topic_names": [c.topic()],
            "subscribed_topic_regex": None, "server_assignor": None, "topic_partitions": []}, retry=NOT_YET),
        Step("delete-while-members", DELETE_GROUPS, 2, lambda c: {"groups_names": [g(c)]}),
        # Kafka 4.3.1 does not check the process id.
        heartbeat("join-null-process-id", 0, n="noprocess", process_id=None),
        heartbeat("join-blank-process-id", 0, n="noprocess", member="blank-process-x", process_id=" "),
        # An epoch behind the member's (not its previous one): fenced, as one ahead is.
        heartbeat("heartbeat-stale-epoch", -1, n="noprocess", joined="join-blank-process-id", **EMPTY_TASKS),
        heartbeat("join-oversized-topology", 0, n="big", topology_of=oversized),
        heartbeat("leave", 0, joined="join", leave=True),
        describe("describe-after-leave"),
        Step("delete", DELETE_GROUPS, 2, lambda c: {"groups_names": [g(c), g(c, "none")]}),
    ]),
]
