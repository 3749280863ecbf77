"""A streams group's topology against the topics that exist: Kafka's
InternalTopicManager and StreamsGroupHeartbeatRequest validation.

A topology is checked twice. When a member declares it, for its shape
(`validate_topology`): unique subtopology ids, repartition topics written only where
some subtopology reads them, copartition indexes inside their lists, bounded sizes;
a topology that fails is STREAMS_INVALID_TOPOLOGY. Then, at every heartbeat, against
the topics (`configure`): every source topic must exist (else the status
MISSING_SOURCE_TOPICS), the internal topics get their partition counts (a repartition
topic's count is its declared one, else the largest of the topics its writers read,
STREAMS_INVALID_TOPOLOGY if that never resolves;
a changelog has as many partitions as its subtopology has tasks; copartitioned topics
are brought to one count), and internal topics not there yet are to be created by the
broker (status MISSING_INTERNAL_TOPICS) with the configs the topology declares. Only a
configured topology is assigned: its subtopologies' task counts are the partition
counts of their source topics.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from ottla.protocol.errors import ErrorCode, KafkaError
from ottla.storage.log_manager import validate_topic_name

from .internal_topics import is_internal
from .streams_group_records import TopicInfo, Topology

# Bounds on what one member may declare (Kafka sets none; far beyond any real
# application, they keep one heartbeat's work small).
MAX_SUBTOPOLOGIES = 1000
MAX_TOPICS_PER_SUBTOPOLOGY = 1000
MAX_TOPIC_CONFIGS = 100

# StreamsGroupHeartbeatResponse's status codes.
STATUS_MISSING_SOURCE_TOPICS = 1
STATUS_INCORRECTLY_PARTITIONED_TOPICS = 2
STATUS_MISSING_INTERNAL_TOPICS = 3
STATUS_SHUTDOWN_APPLICATION = 4
STATUS_ASSIGNMENT_DELAYED = 5


def _invalid(message: str) -> KafkaError:
    return KafkaError(ErrorCode.streams_invalid_topology, message)


def validate_topology(topology: Topology) -> None:
    """Raise STREAMS_INVALID_TOPOLOGY for a topology that cannot be right."""
    if not topology.subtopologies:
        raise _invalid("Topology must have at least one subtopology.")
    if len(topology.subtopologies) > MAX_SUBTOPOLOGIES:
        raise _invalid(f"Topology has more than {MAX_SUBTOPOLOGIES} subtopologies.")
    ids = [s.subtopology_id for s in topology.subtopologies]
    if len(set(ids)) != len(ids):
        raise _invalid("Subtopology IDs must be unique.")
    repartition_sources = {t.name for s in topology.subtopologies for t in s.repartition_source_topics}
    for s in topology.subtopologies:
        if not s.subtopology_id:
            raise _invalid("Subtopology ID must not be empty.")
        lists = (s.source_topics, s.source_topic_regex, s.state_changelog_topics, s.repartition_sink_topics,
                 s.repartition_source_topics)
        if any(len(items) > MAX_TOPICS_PER_SUBTOPOLOGY for items in lists):
            raise _invalid(f"Subtopology {s.subtopology_id} names more than {MAX_TOPICS_PER_SUBTOPOLOGY} topics.")
        if s.source_topic_regex:
            raise _invalid("Source topic regular expressions are not served by this broker yet.")
        for info in (*s.state_changelog_topics, *s.repartition_source_topics):
            if len(info.configs) > MAX_TOPIC_CONFIGS or info.partitions < 0:
                raise _invalid(f"Internal topic {info.name!r} of subtopology {s.subtopology_id} is invalid.")
            # The broker creates these: never one of its own topics, never a bad name.
            if is_internal(info.name):
                raise _invalid(f"Internal topic {info.name} of subtopology {s.subtopology_id} is one of the "
                               f"broker's internal topics.")
            try:
                validate_topic_name(info.name)
            except KafkaError as exc:
                raise _invalid(f"Internal topic name of subtopology {s.subtopology_id} is invalid: "
                               f"{exc.message}") from None
        for sink in s.repartition_sink_topics:
            if sink not in repartition_sources:
                raise _invalid(f"Repartition sink topic {sink} is not a repartition source topic of any "
                               f"subtopology.")
        for g in s.copartition_groups:
            for indexes, items in ((g.source_topics, s.source_topics), (g.source_topic_regex, s.source_topic_regex),
                                   (g.repartition_source_topics, s.repartition_source_topics)):
                if any(not 0 <= i < len(items) for i in indexes):
                    raise _invalid(f"Copartition group of subtopology {s.subtopology_id} refers to a topic "
                                   f"index out of range.")


@dataclass
class ConfiguredTopology:
    """What the topics make of a topology: statuses, the internal topics to create,
    and (when nothing is missing) each subtopology's number of tasks."""

    statuses: list[tuple[int, str]] = field(default_factory=list)
    to_create: dict[str, tuple[int, tuple[tuple[str, str], ...]]] = field(default_factory=dict)
    task_counts: dict[str, int] = field(default_factory=dict)

    @property
    def ready(self) -> bool:
        return not self.statuses


def configure(topology: Topology, partitions_of: Mapping[str, int]) -> ConfiguredTopology:
    """`partitions_of`: topic name -> partition count of the topics that exist.
    Raises STREAMS_INVALID_TOPOLOGY when the repartition topics' counts cannot be
    derived (a cycle with no source topic), as Kafka's join does."""
    result = ConfiguredTopology()
    missing = sorted({t for s in topology.subtopologies for t in s.source_topics if t not in partitions_of})
    if missing:
        result.statuses.append((STATUS_MISSING_SOURCE_TOPICS, f"Source topics {', '.join(missing)} are missing."))
        return result

    # Repartition topics: declared counts first, then from their writers' sources, until
    # nothing more can be learnt (a cycle with no source topic never resolves).
    repartition: dict[str, TopicInfo] = {t.name: t for s in topology.subtopologies
                                         for t in s.repartition_source_topics}
    counts: dict[str, int] = {name: t.partitions for name, t in repartition.items() if t.partitions > 0}
    changed = True
    while changed:
        changed = False
        for s in topology.subtopologies:
            inputs = [partitions_of[t] for t in s.source_topics]
            inputs += [counts[t.name] for t in s.repartition_source_topics if t.name in counts]
            if not inputs:
                continue
            for sink in s.repartition_sink_topics:
                # Counts only grow and are bounded by the largest source: this ends.
                if repartition[sink].partitions <= 0 and counts.get(sink, 0) < max(inputs):
                    counts[sink] = max(inputs)
                    changed = True
    if set(repartition) - set(counts):
        # Kafka's words: the join is refused, nothing of the topology is kept.
        raise _invalid("Failed to compute number of partitions for all repartition topics. There may be loops "
                       "in the topology that cannot be resolved.")

    # Copartitioned topics get one count: that of their user topics (which must agree),
    # else the largest of their repartition topics.
    for s in topology.subtopologies:
        for g in s.copartition_groups:
            user = {partitions_of[s.source_topics[i]] for i in g.source_topics}
            if len(user) > 1:
                names = ", ".join(s.source_topics[i] for i in g.source_topics)
                result.statuses.append((STATUS_INCORRECTLY_PARTITIONED_TOPICS,
                                        f"Following topics do not have the same number of partitions: [{names}]"))
                return result
            internal = [s.repartition_source_topics[i].name for i in g.repartition_source_topics]
            target = user.pop() if user else max((counts[n] for n in internal), default=0)
            for name in internal:
                if repartition[name].partitions <= 0:
                    counts[name] = target

    for s in topology.subtopologies:
        tasks = max([partitions_of[t] for t in s.source_topics]
                    + [counts[t.name] for t in s.repartition_source_topics], default=0)
        result.task_counts[s.subtopology_id] = tasks
        wanted = [(t, counts[t.name]) for t in s.repartition_source_topics]
        wanted += [(t, tasks) for t in s.state_changelog_topics]
        for info, n in wanted:
            existing = partitions_of.get(info.name)
            if existing is None:
                result.to_create[info.name] = (n, info.configs)
            elif existing != n:
                result.statuses.append((STATUS_INCORRECTLY_PARTITIONED_TOPICS,
                                        f"Internal topic {info.name} has {existing} partitions, {n} expected."))
    if result.to_create:
        result.statuses.append((STATUS_MISSING_INTERNAL_TOPICS,
                                f"Internal topics are missing: {', '.join(sorted(result.to_create))}"))
    if not result.ready:
        result.task_counts = {}
    return result
