"""The Consumer groups page and one group's page: members, committed offsets, lag."""

from __future__ import annotations

import struct
from typing import Any

from ottla.coordinator.classic_group import ClassicGroup
from ottla.coordinator.consumer_group import ConsumerGroup
from ottla.coordinator.offsets_log import CommittedOffset
from ottla.coordinator.share_group import ShareGroup
from ottla.coordinator.streams_group import StreamsGroup
from ottla.coordinator.streams_group_records import Subtopology, TaskAssignment, TopicInfo
from ottla.coordinator.streams_topology import configure
from ottla.protocol.errors import KafkaError
from ottla.protocol.member_assignment import consumer_assignment
from ottla.storage.log import PartitionLog

from ..html import Markup, dl, join, link, page, pager, search_form, table, tag
from ..params import Params
from .common import PAGE_SIZE, ConsoleBroker, NotFound, filtered
from .share_partitions import share_partitions

OFFSETS_PER_PAGE = 200


def groups(broker: ConsoleBroker, params: Params) -> bytes:
    coordinator = broker.services.groups
    query = params.text("q")
    page_no = params.integer("page", 0, 0, 10**6)
    all_groups = coordinator.all_groups()
    ids = filtered(all_groups, query)
    rows = []
    for group_id in ids[page_no * PAGE_SIZE:(page_no + 1) * PAGE_SIZE]:
        group = all_groups[group_id]
        # ListGroups gives the type, protocol type and state; the members are the describe
        # APIs' answer, which may refuse what ListGroups lists.
        described = broker.may_describe_group(group_id) and broker.members_refused(group) is None
        rows.append([link(group_id, "group", id=group_id), group.type.value, group.protocol_type or "",
                     group.state_name, len(_members(group)) if described else "–"])
    body = join([search_form("groups", query, "group id contains"),
                 pager("groups", len(ids), page_no, PAGE_SIZE, q=query),
                 table(["group", "type", "protocol type", "state", "members"], rows, id_="groups",
                       empty="no group matches")])
    return page("Consumer groups", "groups", body)


def _members(group: Any) -> list[Any]:
    """A group's members, whatever kind of group (classic or KIP-848 consumer) it is."""
    return list(group.members.values())


def _member_row(group: Any, member: Any, topic_names: dict[object, str]) -> list[object]:
    """member id, instance id, client id, host, and what it is assigned: a consumer group's
    member holds partitions by topic id (named here); a classic member holds the bytes
    its leader assigned, readable when the protocol type is "consumer"."""
    if isinstance(group, (ConsumerGroup, ShareGroup)):  # a share member has no instance id
        pairs = sorted((topic_names.get(t, str(t)), sorted(ps)) for t, ps in member.assigned.items())
        return [member.member_id, getattr(member, "instance_id", None) or "", member.client_id, member.client_host,
                topic_partitions(pairs)]
    if isinstance(group, StreamsGroup):  # its tasks, by kind and subtopology
        meta = member.metadata
        return [member.member_id, meta.instance_id or "", meta.client_id, meta.client_host,
                _streams_tasks(member.assigned)]
    return [member.member_id, member.group_instance_id or "", member.client_id, member.client_host,
            _classic_assignment(member.assignment, group.protocol_type)]


def _streams_tasks(assigned: TaskAssignment) -> Markup:
    """A streams member's active, standby and warm-up tasks: partitions by subtopology."""
    pairs = [(f"{kind} subtopology {s}", sorted(ps))
             for kind, tasks in (("active", assigned.active), ("standby", assigned.standby),
                                 ("warm-up", assigned.warmup))
             for s, ps in sorted(tasks.items()) if ps]
    return topic_partitions(pairs)


def _streams_topology(broker: ConsoleBroker, group: StreamsGroup) -> Markup:
    """A streams group's topology as its members declared it: each subtopology's source,
    repartition and changelog topics (with their partitions, or "missing"), and the
    status the coordinator gives its members for it (what is missing, what is
    partitioned wrongly), worked out from the topics as they are now."""
    if group.topology is None:
        return tag("p", "no topology: no member has joined", id="topology")
    partitions_of = {name: len(t.partitions) for name, t in broker.services.logs.topics.items()}

    def topics(names: list[str]) -> Markup:
        return join(join([link(n, "topic", name=n), f" ({partitions_of[n]})" if n in partitions_of
                          else tag("span", " (missing)", class_="error"), Markup("<br>")]) for n in names)

    def names(infos: tuple[TopicInfo, ...]) -> list[str]:
        return [i.name for i in infos]

    def row(s: Subtopology) -> list[object]:
        regexes = join(tag("code", r) for r in s.source_topic_regex)
        return [s.subtopology_id, join([topics(list(s.source_topics)), regexes]),
                topics(names(s.repartition_source_topics)), topics(list(s.repartition_sink_topics)),
                topics(names(s.state_changelog_topics))]

    try:
        statuses = [detail for _code, detail in configure(group.topology, partitions_of).statuses]
    except KafkaError as exc:  # repartition counts that cannot be derived
        statuses = [exc.message or exc.code.name]
    if group.shutdown_requested:
        statuses.append("a member asked the whole application to shut down")
    status = (join(tag("p", s, class_="error") for s in statuses) if statuses
              else tag("p", "ready: every topic is there"))
    return join([tag("h2", f"Topology (epoch {group.topology.epoch})"), tag("div", status, id="topology-status"),
                 table(["subtopology", "source topics", "repartition source topics", "repartition sink topics",
                        "changelog topics"], [row(s) for s in group.topology.subtopologies], id_="topology")])


def _classic_assignment(value: bytes, protocol_type: str | None) -> Markup:
    if not value:
        return Markup("")
    if protocol_type == "consumer":
        try:
            return topic_partitions(consumer_assignment(bytes(value)))
        except (struct.error, IndexError, UnicodeDecodeError):
            pass
    return tag("code", bytes(value[:256]).hex(" "), class_="hex")


def topic_partitions(pairs: list[tuple[str, list[int]]]) -> Markup:
    return join(join([tag("b", t), f" {', '.join(map(str, ps))}", Markup("<br>")]) for t, ps in pairs)


def _type_facts(group: Any) -> list[tuple[object, object]]:
    """What only a group of its type has: a consumer group's epoch; a classic group's
    generation, assignor and leader."""
    if isinstance(group, (ConsumerGroup, ShareGroup, StreamsGroup)):
        facts: list[tuple[object, object]] = [("group epoch", group.group_epoch)]
    elif isinstance(group, ClassicGroup):
        facts = [("generation", group.generation), ("assignor", group.protocol_name), ("leader", group.leader_id)]
    else:
        return []
    return [(label, value) for label, value in facts if value is not None]


def group(broker: ConsoleBroker, params: Params) -> bytes:
    services = broker.services
    group_id = params.text("id")
    g = services.groups.group(group_id)
    committed = services.groups.fetch_offsets(group_id, None, False)
    if g is None and not committed:
        raise NotFound(f"no group {group_id!r}")
    facts: list[tuple[object, object]] = []
    members = []
    refused = None
    if g is not None:
        facts = [("type", g.type.value), ("protocol type", g.protocol_type or "–"), ("state", g.state_name)]
        refused = broker.members_refused(g)
        if refused is None:
            facts += _type_facts(g)
            topic_names = services.groups.topic_names()
            members = [_member_row(g, m, topic_names) for m in _members(g)]
    page_no = params.integer("page", 0, 0, 10**6)
    # Lag as kafka-consumer-groups gives it: log end offset (the high watermark) less the
    # committed offset; beside it, what a read_committed consumer can still read: up to the LSO.
    lags: list[tuple[str, int, CommittedOffset | None, PartitionLog | None, int | None, int | None]] = []
    for (t, p), (offset, _error) in sorted(committed.items()):
        log = services.logs.partition(t, p)
        if log is None or offset is None:
            lags.append((t, p, offset, log, None, None))
            continue
        lags.append((t, p, offset, log, log.high_watermark - offset.offset,
                     max(0, log.last_stable_offset - offset.offset)))
    shown = lags[page_no * OFFSETS_PER_PAGE:(page_no + 1) * OFFSETS_PER_PAGE]
    rows = [[link(t, "topic", name=t), p, f"{offset.offset:,}" if offset else "–",
             f"{log.high_watermark:,}" if log is not None else "(deleted)",
             f"{lag:,}" if lag is not None else "–", f"{committed_lag:,}" if committed_lag is not None else "–",
             offset.metadata if offset else ""]
            for t, p, offset, log, lag, committed_lag in shown]
    facts.append(("total lag", tag("span", f"{sum(lag[4] or 0 for lag in lags):,}", id="total-lag")))
    body = join([dl(facts), tag("h2", "Members"),
                 tag("p", f"ConsumerGroupDescribe refuses this group: {refused}", class_="error",
                     id="members-refused") if refused is not None else
                 table(["member id", "instance id", "client id", "host", "assignment"], members, id_="members",
                       empty="no member"),
                 tag("h2", "Committed offsets and lag"),
                 pager("group", len(lags), page_no, OFFSETS_PER_PAGE, id=group_id),
                 table(["topic", "partition", "committed offset", "log end offset", "lag",
                        "lag to the LSO (read_committed)", "metadata"], rows,
                       id_="offsets", empty="no committed offset")])
    if isinstance(g, ShareGroup):
        body = join([body, share_partitions(broker, group_id)])
    if isinstance(g, StreamsGroup) and refused is None:
        body = join([body, _streams_topology(broker, g)])
    return page(f"Group {group_id}", "groups", body)
