"""KIP-1071 streams groups without a broker: topology validation and configuration, the
task assignor, the reconciliation rules, the heartbeat protocol on a clock the test
moves, and what a restart brings back from `__consumer_offsets`."""

from __future__ import annotations

from dataclasses import replace

import pytest

from ottla.coordinator.consumer_protocol import HeartbeatRequest
from ottla.coordinator.group import GroupType
from ottla.coordinator.streams_assignor import AssignmentMember, assign
from ottla.coordinator.streams_group import StreamsGroup
from ottla.coordinator.streams_group_records import (
    CopartitionGroup,
    CurrentAssignment,
    MemberMetadata,
    Subtopology,
    TaskAssignment,
    TopicInfo,
    Topology,
    decode_current_assignment,
    decode_group_metadata,
    decode_member_metadata,
    decode_topology,
    encode_current_assignment,
    encode_group_metadata,
    encode_member_metadata,
    encode_topology,
)
from ottla.coordinator.streams_protocol import StreamsHeartbeatRequest, StreamsHeartbeatResult
from ottla.coordinator.streams_topology import (
    STATUS_ASSIGNMENT_DELAYED,
    STATUS_INCORRECTLY_PARTITIONED_TOPICS,
    STATUS_MISSING_INTERNAL_TOPICS,
    STATUS_MISSING_SOURCE_TOPICS,
    STATUS_SHUTDOWN_APPLICATION,
    configure,
    validate_topology,
)
from ottla.protocol.errors import ErrorCode, KafkaError

from .test_consumer_groups import CONFIG, Harness
from .test_group_coordinator import error_of

REPARTITION = TopicInfo("app-by-key-repartition", 0, 0, (("cleanup.policy", "delete"), ("retention.ms", "-1")))
CHANGELOG = TopicInfo("app-store-changelog", 0, 0, (("cleanup.policy", "compact"),))
# WordTotals' shape: "0" reads the user topic and re-keys into the repartition topic,
# "1" reads that and keeps a store.
TOPOLOGY = Topology(1, (
    Subtopology("0", source_topics=("orders",), repartition_sink_topics=(REPARTITION.name,)),
    Subtopology("1", repartition_source_topics=(REPARTITION,), state_changelog_topics=(CHANGELOG,)),
))
NO_TASKS: dict = {}


def _tasks(assignment: TaskAssignment | None) -> set[tuple[str, int]]:
    assert assignment is not None
    return {(s, p) for s, ps in assignment.active.items() for p in ps}


# --- topology ------------------------------------------------------------------------------


def test_a_topology_is_configured_from_the_topics_that_exist():
    missing = configure(TOPOLOGY, {})
    assert missing.statuses == [(STATUS_MISSING_SOURCE_TOPICS, "Source topics orders are missing.")]
    assert not missing.ready and not missing.to_create

    # The internal topics take their partition counts from the source topic.
    to_create = configure(TOPOLOGY, {"orders": 6})
    assert to_create.to_create == {REPARTITION.name: (6, REPARTITION.configs), CHANGELOG.name: (6, CHANGELOG.configs)}
    assert [code for code, _ in to_create.statuses] == [STATUS_MISSING_INTERNAL_TOPICS]

    ready = configure(TOPOLOGY, {"orders": 6, REPARTITION.name: 6, CHANGELOG.name: 6})
    assert ready.ready and ready.task_counts == {"0": 6, "1": 6}

    wrong = configure(TOPOLOGY, {"orders": 6, REPARTITION.name: 6, CHANGELOG.name: 2})
    assert [code for code, _ in wrong.statuses] == [STATUS_INCORRECTLY_PARTITIONED_TOPICS]


def test_copartitioned_user_topics_must_agree():
    topology = Topology(1, (Subtopology("0", source_topics=("a", "b"),
                                        copartition_groups=(CopartitionGroup(source_topics=(0, 1)),)),))
    assert configure(topology, {"a": 3, "b": 3}).ready
    assert [c for c, _ in configure(topology, {"a": 3, "b": 4}).statuses] == [STATUS_INCORRECTLY_PARTITIONED_TOPICS]


def test_invalid_and_cyclic_topologies_are_refused_not_crashed_on():
    """(A cycle's answer is Kafka 4.3.1's, asked of it: STREAMS_INVALID_TOPOLOGY.)"""
    def invalid(topology: Topology) -> ErrorCode:
        return error_of(lambda: validate_topology(topology))

    assert invalid(Topology(1, ())) == ErrorCode.streams_invalid_topology
    assert invalid(Topology(1, (Subtopology("0"), Subtopology("0")))) == ErrorCode.streams_invalid_topology
    assert invalid(Topology(1, (Subtopology("0", repartition_sink_topics=("nowhere",)),))) \
        == ErrorCode.streams_invalid_topology
    assert invalid(Topology(1, (Subtopology("0", source_topics=("a",),
                                            copartition_groups=(CopartitionGroup(source_topics=(3,)),)),))) \
        == ErrorCode.streams_invalid_topology
    assert invalid(Topology(1, tuple(Subtopology(str(i)) for i in range(1001)))) == ErrorCode.streams_invalid_topology
    # The broker creates internal topics: never one of its own, never a bad name.
    for name in ("__transaction_state", "__consumer_offsets", "bad name!", "x" * 300):
        assert invalid(Topology(1, (Subtopology("0", state_changelog_topics=(TopicInfo(name),)),))) \
            == ErrorCode.streams_invalid_topology, name
    # Two subtopologies feeding each other with no user topic: their counts never resolve.
    a, b = TopicInfo("cycle-a"), TopicInfo("cycle-b")
    cycle = Topology(1, (Subtopology("0", repartition_source_topics=(a,), repartition_sink_topics=(b.name,)),
                         Subtopology("1", repartition_source_topics=(b,), repartition_sink_topics=(a.name,))))
    assert invalid(cycle) == ErrorCode.none
    assert error_of(lambda: configure(cycle, {})) == ErrorCode.streams_invalid_topology


# --- assignor ------------------------------------------------------------------------------


def test_the_assignor_balances_and_keeps_tasks_where_they_were():
    counts = {"0": 6, "1": 6}
    first = assign({"a": AssignmentMember("p1", TaskAssignment())}, counts)
    assert len(_tasks(first["a"])) == 12
    second = assign({"a": AssignmentMember("p1", first["a"]), "b": AssignmentMember("p2", TaskAssignment())}, counts)
    assert len(_tasks(second["a"])) == len(_tasks(second["b"])) == 6
    assert _tasks(second["a"]) <= _tasks(first["a"])  # a keeps half of what it had
    # One standby per stateful task, never in the process of its active task.
    standby = assign({"a": AssignmentMember("p1", second["a"]), "b": AssignmentMember("p2", second["b"])}, counts, 1,
                     frozenset({"1"}))
    for m, other in (("a", "b"), ("b", "a")):
        assert {(s, p) for s, ps in standby[m].standby.items() for p in ps} == \
            {t for t in _tasks(standby[other]) if t[0] == "1"}
    # Two members in each of two processes: the standby copies are spread, not stacked.
    four = {m: AssignmentMember(process, TaskAssignment()) for m, process in
            (("a1", "p1"), ("a2", "p1"), ("b1", "p2"), ("b2", "p2"))}
    spread = assign(four, counts, 1, frozenset({"1"}))
    assert sorted(sum(len(ps) for ps in a.standby.values()) for a in spread.values()) == [1, 1, 2, 2]


# --- records -------------------------------------------------------------------------------


def test_records_round_trip():
    """(Their bytes were read back with Kafka 4.3.1's generated StreamsGroup*Value classes
    once: a nullable struct's presence byte before UserEndpoint was missing; and
    StreamsGroupMetadataValue's LastAssignmentConfigs both ways, with Kafka's
    ValidatedTopologyEpoch tag skipped.)"""
    assert decode_topology(encode_topology(TOPOLOGY)) == TOPOLOGY
    metadata = MemberMetadata("i", None, "client", "/127.0.0.1", 30_000, 1, "process", ("h", 8080), (("k", "v"),))
    assert decode_member_metadata(encode_member_metadata(metadata)) == metadata
    no_endpoint = MemberMetadata(process_id="process")
    assert decode_member_metadata(encode_member_metadata(no_endpoint)) == no_endpoint
    current = CurrentAssignment(3, 2, 1, TaskAssignment({"0": frozenset({1, 2})}, {"1": frozenset({0})}, {}),
                                TaskAssignment({"1": frozenset({5})}, {}, {}))
    assert decode_current_assignment(encode_current_assignment(current)) == current
    configs = (("num.standby.replicas", "1"),)
    assert decode_group_metadata(encode_group_metadata(7, -3, configs)) == (7, -3, configs)
    assert decode_group_metadata(encode_group_metadata(7, -3)) == (7, -3, ())


# --- the protocol --------------------------------------------------------------------------


class StreamsHarness(Harness):
    def beat(self, member_id: str, epoch: int, owned: dict | None = None, **fields):  # type: ignore[override]
        """A StreamsGroupHeartbeat; the internal topics the coordinator asks for are made,
        as the request handler makes them."""
        if epoch == 0:
            fields.setdefault("rebalance_timeout_ms", 30_000)
            fields.setdefault("topology", TOPOLOGY)
            fields.setdefault("process_id", f"process-{member_id}")
            owned = {} if owned is None else owned
        if owned is not None:  # the three lists go together, as a client sends them
            fields.setdefault("standby_tasks", {})
            fields.setdefault("warmup_tasks", {})
        fields.setdefault("group_id", "g")
        try:
            result = self.coordinator.streams_heartbeat(
                StreamsHeartbeatRequest(member_id=member_id, member_epoch=epoch, active_tasks=owned, **fields))
        except KafkaError as exc:
            return StreamsHeartbeatResult(exc.code, exc.message)
        assert self.logs is not None
        for name, (partitions, configs) in result.to_create.items():
            self.logs.create_topic(name, partitions, dict(configs))
        return result

    def group(self) -> StreamsGroup:  # type: ignore[override]
        group = self.coordinator.groups["g"]
        assert isinstance(group, StreamsGroup)
        return group

    def assert_no_task_has_two_owners(self) -> None:
        owned = [t for m in self.group().members.values() for t in m.owned_active()]
        assert len(owned) == len(set(owned))


@pytest.fixture
def harness(tmp_path) -> StreamsHarness:
    return StreamsHarness(str(tmp_path))


def _owned(result: StreamsHeartbeatResult) -> dict:
    assert result.assignment is not None
    return dict(result.assignment.active)


def test_members_join_get_their_tasks_and_a_task_moves_only_once_revoked(harness):
    first = harness.beat("m1", 0)
    assert first.error == ErrorCode.none and _tasks(first.assignment) == set()
    assert [code for code, _ in first.statuses] == [STATUS_MISSING_INTERNAL_TOPICS]
    assert harness.group().type is GroupType.STREAMS and harness.group().state_name == "NotReady"
    listed = harness.coordinator.list_groups(set(), {"Streams"})
    assert [g.group_id for g in listed] == ["g"]
    assert harness.coordinator.list_groups(set(), {"consumer", "classic"}) == []
    assert [g.group_id for g in harness.coordinator.list_groups({"notready"}, set())] == ["g"]

    # The topics exist now: the group epoch moves, and m1 gets every task.
    ready = harness.beat("m1", first.member_epoch, owned={})
    assert ready.statuses == [] and ready.member_epoch > first.member_epoch
    assert len(_tasks(ready.assignment)) == 12 and harness.group().state_name == "Stable"

    second = harness.beat("m2", 0)
    assert _tasks(second.assignment) == set()  # its tasks are still m1's
    revoking = harness.beat("m1", ready.member_epoch, owned=_owned(ready))
    assert revoking.member_epoch == ready.member_epoch and len(_tasks(revoking.assignment)) == 6
    harness.assert_no_task_has_two_owners()
    # m2 asks again before m1 let go: nothing yet, and nothing written for it.
    log = harness.logs.partition("__consumer_offsets", harness.coordinator.partition_for("g"))
    end = log.log_end_offset
    for _ in range(3):
        waiting = harness.beat("m2", second.member_epoch, owned={})
        assert waiting.assignment is None or _tasks(waiting.assignment) == set()
    assert log.log_end_offset == end
    harness.assert_no_task_has_two_owners()
    done = harness.beat("m1", revoking.member_epoch, owned=_owned(revoking))
    assert done.member_epoch == second.member_epoch
    given = harness.beat("m2", second.member_epoch, owned={})
    assert _tasks(given.assignment) == _tasks(ready.assignment) - _tasks(revoking.assignment)
    harness.assert_no_task_has_two_owners()
    assert harness.group().state_name == "Stable"


def test_bad_heartbeats_get_kafkas_errors(harness):
    joined = harness.beat("m1", 0)
    assert harness.beat("m1", joined.member_epoch + 5).error == ErrorCode.fenced_member_epoch
    assert harness.beat("ghost", 1).error == ErrorCode.unknown_member_id
    assert harness.beat("m1", 1, group_id="nowhere").error == ErrorCode.group_id_not_found
    assert harness.beat("m1", -3).error == ErrorCode.invalid_request
    assert harness.beat("m1", joined.member_epoch, topology=TOPOLOGY).error == ErrorCode.invalid_request
    assert harness.beat("", 0).error == ErrorCode.invalid_request
    # Any other topology is refused as Kafka 4.3.1 refuses topology updates.
    other = Topology(1, (Subtopology("0", source_topics=("orders",)),))
    assert harness.beat("m2", 0, topology=other).error == ErrorCode.invalid_request
    newer = Topology(2, TOPOLOGY.subtopologies)
    assert harness.beat("m2", 0, topology=newer).error == ErrorCode.invalid_request
    # The other protocols meet a streams group as one of another type.
    consumer = harness.coordinator.consumer_heartbeat  # no assertion error: an answer
    assert error_of(lambda: consumer(HeartbeatRequest(group_id="g", member_id="c", member_epoch=0,
                                                      rebalance_timeout_ms=1, subscribed_topic_names=("orders",),
                                                      owned={}))) == ErrorCode.group_id_not_found
    # None of it changed the group.
    assert list(harness.group().members) == ["m1"]


def test_a_shutdown_request_reaches_every_member_until_the_group_is_empty(harness):
    m1 = harness.beat("m1", 0)
    m2 = harness.beat("m2", 0)
    asked = harness.beat("m1", m1.member_epoch, owned={}, shutdown_application=True)
    assert STATUS_SHUTDOWN_APPLICATION in [code for code, _ in asked.statuses]
    told = harness.beat("m2", m2.member_epoch, owned={})
    assert STATUS_SHUTDOWN_APPLICATION in [code for code, _ in told.statuses]
    harness.beat("m1", -1)
    harness.beat("m2", -1)
    again = harness.beat("m3", 0)
    assert STATUS_SHUTDOWN_APPLICATION not in [code for code, _ in again.statuses]


def test_offsets_of_topics_the_topology_reads_are_not_deleted_under_it(harness):
    from ottla.coordinator.offsets_log import CommittedOffset

    joined = harness.beat("m1", 0)
    ready = harness.beat("m1", joined.member_epoch, owned={})  # the internal topics exist now
    assert ready.statuses == []
    harness.coordinator.commit_offsets("g", "m1", None, ready.member_epoch, {("orders", 0): CommittedOffset(5)}, 9)
    codes = harness.coordinator.delete_offsets("g", [("orders", 0)])
    assert codes == {("orders", 0): ErrorCode.group_subscribed_to_topic}
    # As Kafka 4.3.1 (asked the same, in test_streams_group_requests.py): once the group
    # has no member, its offsets can go.
    harness.beat("m1", -1)
    assert harness.coordinator.delete_offsets("g", [("orders", 0)]) == {("orders", 0): ErrorCode.none}


def test_commits_check_the_member_epoch(harness):
    from ottla.coordinator.offsets_log import CommittedOffset

    joined = harness.beat("m1", 0)
    commit = harness.coordinator.commit_offsets
    offsets = {("orders", 0): CommittedOffset(5)}
    assert error_of(lambda: commit("g", "m1", None, joined.member_epoch, offsets, 9)) == ErrorCode.none
    # Kafka's StreamsGroup: any other epoch is STALE_MEMBER_EPOCH, ahead or behind.
    assert error_of(lambda: commit("g", "m1", None, joined.member_epoch + 1, offsets, 9)) \
        == ErrorCode.stale_member_epoch
    assert error_of(lambda: commit("g", "m1", None, joined.member_epoch - 1, offsets, 9)) \
        == ErrorCode.stale_member_epoch
    assert error_of(lambda: harness.coordinator.fetch_offsets("g", None, False, "m1", joined.member_epoch + 1)) \
        == ErrorCode.stale_member_epoch
    # In a transaction, a stale epoch is ILLEGAL_GENERATION, as Kafka answers it (the
    # producer aborts on it; STALE_MEMBER_EPOCH would be fatal to Streams).
    txn = harness.coordinator.commit_txn_offsets
    assert error_of(lambda: txn("g", 1, 0, "m1", None, joined.member_epoch - 1, offsets)) \
        == ErrorCode.illegal_generation
    assert error_of(lambda: txn("g", 1, 0, "m1", None, joined.member_epoch + 1, offsets)) \
        == ErrorCode.illegal_generation
    assert error_of(lambda: txn("g", 1, 0, "", None, -1, offsets)) == ErrorCode.none  # no member named
    assert error_of(lambda: commit("g", "ghost", None, 1, offsets, 9)) == ErrorCode.unknown_member_id


def test_a_silent_member_is_fenced_and_its_tasks_move(harness):
    m1 = harness.beat("m1", 0)
    m1 = harness.beat("m1", m1.member_epoch, owned={})
    m2 = harness.beat("m2", 0)
    harness.clock.now += 30
    harness.beat("m2", m2.member_epoch, owned={})
    harness.clock.now += 20  # m1: 50 s without a heartbeat, past the 45 s session
    assert harness.coordinator.tick() == [("g", "m1")]
    moved = harness.beat("m2", harness.group().members["m2"].member_epoch, owned={})
    assert len(_tasks(moved.assignment)) == 12


def test_a_restart_rebuilds_the_group_from_its_records(harness):
    m1 = harness.beat("m1", 0)
    m1 = harness.beat("m1", m1.member_epoch, owned={})
    m2 = harness.beat("m2", 0)
    harness.beat("m1", m1.member_epoch, owned=_owned(m1))  # m1 is revoking

    def snapshot():
        g = harness.group()
        return (g.group_epoch, g.assignment_epoch, g.metadata_hash, g.topology, dict(g.target),
                {m.member_id: (m.member_epoch, m.previous_member_epoch, m.state, m.assigned, m.pending_revocation,
                               m.metadata) for m in g.members.values()})

    before = snapshot()
    harness.reopen()
    assert snapshot() == before
    # Members rebuilt from the log and not heard from yet are not expired by a tick that
    # comes before `restored` (as one can while the broker still loads).
    for member in harness.group().members.values():
        member.last_heartbeat = 0.0
    assert harness.coordinator.tick() == []
    assert snapshot() == before
    # The members carry on where they were; leaving and deleting are kept too.
    assert harness.beat("m2", m2.member_epoch, owned={}).error == ErrorCode.none
    harness.beat("m2", -1)
    harness.beat("m1", -1)
    assert error_of(lambda: harness.coordinator.delete_group("g")) == ErrorCode.none
    harness.reopen()
    assert "g" not in harness.coordinator.groups


# --- the initial rebalance delay and the group's own configs -------------------------------


def _delayed(result: StreamsHeartbeatResult) -> bool:
    return (STATUS_ASSIGNMENT_DELAYED, "Assignment delayed due to the configured initial rebalance delay.") \
        in result.statuses


def test_a_new_groups_first_assignment_waits_for_the_initial_rebalance_delay(tmp_path):
    """As Kafka 4.3.1 (its answers seen side by side): a member joining an empty group
    starts group.streams.initial.rebalance.delay.ms; until it is over every heartbeat is
    answered ASSIGNMENT_DELAYED with no tasks (the group created at epoch 1 with an empty
    target, the join at 2); then the tick computes the target for the group epoch and
    the next heartbeats bring the tasks. A member joining a group emptied since starts
    it again. (Seen failing with the delay never started: tasks at the first heartbeat.)"""
    harness = StreamsHarness(str(tmp_path), replace(CONFIG, streams_initial_rebalance_delay_ms=3000))
    first = harness.beat("m1", 0)
    assert first.statuses[0] == (STATUS_ASSIGNMENT_DELAYED,
                                 "Assignment delayed due to the configured initial rebalance delay.")
    assert first.member_epoch == 1 and _tasks(first.assignment) == set()
    again = harness.beat("m1", 1, owned={})
    second = harness.beat("m2", 0)
    assert _delayed(again) and _delayed(second) and again.assignment is None
    assert harness.group().group_epoch > harness.group().assignment_epoch == 1
    assert harness.group().state_name == "Assigning"

    harness.clock.now += 2.9
    harness.coordinator.tick()
    assert harness.group().assignment_epoch == 1  # not yet
    harness.clock.now += 0.2
    harness.coordinator.tick()  # the delay is over: the target, without a heartbeat
    group = harness.group()
    assert group.assignment_epoch == group.group_epoch
    assert sum(len(_tasks(t)) for t in group.target.values()) == 12
    one = harness.beat("m1", 1, owned={})
    two = harness.beat("m2", second.member_epoch, owned={})
    assert not _delayed(one) and not _delayed(two)
    assert len(_tasks(one.assignment)) + len(_tasks(two.assignment)) == 12
    harness.assert_no_task_has_two_owners()

    harness.beat("m1", -1)
    harness.beat("m2", -1)
    assert _delayed(harness.beat("m3", 0))  # the group was empty: the delay starts over


def test_a_streams_groups_own_configs_set_its_heartbeat_session_and_standbys(tmp_path):
    """streams.heartbeat.interval.ms, streams.session.timeout.ms and
    streams.num.standby.replicas set on the GROUP resource are the group's, over the
    broker's settings; a value beyond the broker's bounds as they are now is brought
    within them, as Kafka's GroupConfig.evaluate does. (Seen failing with the broker's
    settings read instead: a 5 s interval, no standby task.)"""
    harness = StreamsHarness(str(tmp_path))
    harness.group_configs["g"] = {"streams.heartbeat.interval.ms": "6000", "streams.session.timeout.ms": "50000",
                                  "streams.num.standby.replicas": "1"}
    m1 = harness.beat("m1", 0)
    assert m1.heartbeat_interval_ms == 6000
    m1 = harness.beat("m1", m1.member_epoch, owned={})
    m2 = harness.beat("m2", 0)
    standbys = {t for target in harness.group().target.values() for s, ps in target.standby.items() for t in ps}
    assert standbys  # the stateful subtopology's tasks each have a standby copy
    harness.clock.now += 46  # past the broker's 45 s, within the group's 50 s
    harness.beat("m2", m2.member_epoch, owned={})
    assert harness.coordinator.tick() == []
    harness.clock.now += 5
    assert harness.coordinator.tick() == [("g", "m1")]

    harness.group_configs["g"] = {"streams.heartbeat.interval.ms": "60000"}  # set when the bound was higher
    assert harness.beat("m2", harness.group().members["m2"].member_epoch, owned={}).heartbeat_interval_ms == 15_000


def test_group_configs_are_checked_with_kafkas_bounds_and_messages():
    from ottla.coordinator.group import GroupConfig
    from ottla.coordinator.group_resource_configs import check, definitions

    defined = definitions(GroupConfig())
    assert len(defined) == 17

    def fault(**values: str) -> str | None:
        try:
            check(defined, {k.replace("_", "."): v for k, v in values.items()})
        except KafkaError as exc:
            assert exc.code is ErrorCode.invalid_config
            return exc.message
        return None

    assert fault(streams_num_standby_replicas="2", streams_initial_rebalance_delay_ms="999999999") is None
    assert fault(streams_num_standby_replicas="3") == \
        "streams.num.standby.replicas must be less than or equal to group.streams.max.standby.replicas"
    assert fault(streams_num_standby_replicas="-1") == \
        "Invalid value -1 for configuration streams.num.standby.replicas: Value must be at least 0"
    assert fault(streams_session_timeout_ms="1000") == \
        "streams.session.timeout.ms must be greater than or equal to group.streams.min.session.timeout.ms"
    assert fault(streams_heartbeat_interval_ms="x") == \
        "Invalid value x for configuration streams.heartbeat.interval.ms: Not a number of type INT"
    tight = definitions(GroupConfig(streams_min_session_timeout_ms=1000, streams_max_heartbeat_interval_ms=60_000))
    assert check(tight, {"streams.session.timeout.ms": "20000"}) is None
    with pytest.raises(KafkaError, match="streams.session.timeout.ms must be greater than streams.heartbeat"):
        check(tight, {"streams.session.timeout.ms": "20000", "streams.heartbeat.interval.ms": "20000"})
    # A duration of hundreds of digits is no duration (Kafka: INVALID_CONFIG), not a crash
    # of the handler (the float it made was infinite).
    for huge in ("by_duration:PT" + "9" * 400 + "S", "by_duration:P" + "9" * 400 + "D"):
        assert (fault(share_auto_offset_reset=huge) or "").startswith(
            "Invalid value by_duration:P"), huge


def test_a_full_group_refuses_a_new_member_as_kafka_does(tmp_path):
    """group.streams.max.size: past it a join is GROUP_MAX_SIZE_REACHED with Kafka's
    message, a member's own rejoin too (Kafka 4.3.1's throwIfStreamsGroupIsFull looks
    at the count only); a member's other heartbeats go on. (Seen failing with the
    bound left out: m2 joined.)"""
    harness = StreamsHarness(str(tmp_path), replace(CONFIG, streams_max_size=1))
    joined = harness.beat("m1", 0)
    assert joined.error is ErrorCode.none
    refused = harness.beat("m2", 0)
    assert (refused.error, refused.message) == (
        ErrorCode.group_max_size_reached, "The streams group has reached its maximum capacity of 1 members.")
    assert harness.beat("m1", 0).error is ErrorCode.group_max_size_reached
    assert harness.beat("m1", joined.member_epoch, owned={}).error is ErrorCode.none


def test_a_change_of_the_groups_standby_replicas_is_a_new_target(tmp_path):
    """As Kafka 4.3.1: the assignment configs (num.standby.replicas) go with each group
    epoch in StreamsGroupMetadata; a heartbeat that finds the group's config changed
    since moves the group epoch, and the new target has the standby copies. (Seen
    failing without the comparison: no standby task until something else moved.)"""
    harness = StreamsHarness(str(tmp_path))
    m1 = harness.beat("m1", 0)
    m1 = harness.beat("m1", m1.member_epoch, owned={})
    m2 = harness.beat("m2", 0)
    m2 = harness.beat("m2", m2.member_epoch, owned={})
    epoch = harness.group().group_epoch
    assert harness.group().assignment_configs == (("num.standby.replicas", "0"),)
    assert not any(t.standby for t in harness.group().target.values())

    harness.group_configs["g"] = {"streams.num.standby.replicas": "1"}
    member = harness.group().members["m2"]
    harness.beat("m2", member.member_epoch, owned=dict(member.assigned.active))
    group = harness.group()
    assert group.group_epoch == epoch + 1 and group.assignment_configs == (("num.standby.replicas", "1"),)
    assert any(t.standby for t in group.target.values())
    harness.reopen()  # the configs are in the group's record
    assert harness.group().assignment_configs == (("num.standby.replicas", "1"),)
