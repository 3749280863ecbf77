"""The broker as one signed-in principal may see it: each page shows what the Kafka API
that returns the same data would answer that principal, with Kafka 4.3.1's checks
(KafkaApis, AuthHelper, ConfigHelper), and nothing else:

    topics listed, a topic's id and partitions     Metadata: DESCRIBE on the topic
    log start offset, LSO, high watermark          ListOffsets: DESCRIBE on the topic
    a topic's configs                              DescribeConfigs: DESCRIBE_CONFIGS on the topic
    partition sizes, segment files, the log dir    DescribeLogDirs: DESCRIBE on the cluster
    records                                        Fetch: READ on the topic
    producer ids, sequences, the LSO's holder,     DescribeProducers: READ on the topic
      an open transaction's first offset
    groups listed                                  ListGroups: DESCRIBE on the cluster, else on the group
    a classic group's members                      DescribeGroups: DESCRIBE on the group
    a consumer group's epoch and members           ConsumerGroupDescribe: DESCRIBE on the group, and
                                                     on every topic its assignments name (else the
                                                     group is refused: TOPIC_AUTHORIZATION_FAILED)
    a group's committed offsets                    OffsetFetch: DESCRIBE on the group; topics it
                                                     may not DESCRIBE left out
    transactional ids listed                       ListTransactions: DESCRIBE on the id
    a transaction and its partitions               DescribeTransactions: DESCRIBE on the id; partitions
                                                     of topics it may not DESCRIBE left out
    a transactional id's history                   Fetch of __transaction_state: READ on it
    the Broker page's configs and listeners        DescribeConfigs (broker): DESCRIBE_CONFIGS on the cluster
    request counts, rates, faults                  the endpoint's /metrics and /faults: DESCRIBE on the cluster
    a schema (subjects, decoded records)           the schema registry's own rule (schema_registry/access.py)

The pages (pages/) take this view in place of the broker and never know what it
filters: a topic the principal may not DESCRIBE is not in `services.logs.topics`, as
Metadata leaves it out. What a page shows beside what it enumerates it asks of the view
by the API's name (`may_describe_configs`, `may_describe_producers`...). The page about
one named thing is refused as a whole (403) before it is rendered, with the operation the
API for it asks (app.py). The operator (admin.token, a super user) and the console of a
broker without security see the same pages through a view that allows everything.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from functools import cached_property
from typing import Any

from ottla.broker.security.authorizer import CLUSTER_NAME, Operation, ResourceType
from ottla.coordinator.consumer_group import ConsumerGroup
from ottla.coordinator.transaction_log import TOPIC as TXN_TOPIC

Allows = Callable[[Operation, ResourceType, str], bool]


class _Delegate:
    def __init__(self, inner: Any, allows: Allows) -> None:
        self._inner = inner
        self._allows = allows

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class PrincipalView(_Delegate):
    """server.Broker, seen by a principal (what pages.common.ConsoleBroker describes)."""

    @cached_property
    def services(self) -> Any:
        return _Services(self._inner.services, self._allows)

    def may_describe_topic(self, name: str) -> bool:
        """Metadata and ListOffsets: DESCRIBE on the topic (the schema pages ask it of a
        subject's topic, as the registry does)."""
        return self._allows(Operation.DESCRIBE, ResourceType.TOPIC, name)

    def may_describe_group(self, group_id: str) -> bool:
        """DescribeGroups and ConsumerGroupDescribe ask DESCRIBE on the group (ListGroups
        may list more: everything, to DESCRIBE on the cluster)."""
        return self._allows(Operation.DESCRIBE, ResourceType.GROUP, group_id)

    def may_describe_configs(self, topic: str) -> bool:
        """DescribeConfigs of a topic: DESCRIBE_CONFIGS on it."""
        return self._allows(Operation.DESCRIBE_CONFIGS, ResourceType.TOPIC, topic)

    def may_describe_producers(self, topic: str) -> bool:
        """DescribeProducers: READ on the topic. Who holds a partition's LSO back, and
        where an open transaction starts in it, are its answer."""
        return self._allows(Operation.READ, ResourceType.TOPIC, topic)

    def may_describe_cluster(self) -> bool:
        """DESCRIBE on the cluster: DescribeLogDirs (partition sizes, segment files, the
        log directory) and the admin endpoint's /metrics and /faults."""
        return self._allows(Operation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME)

    def may_read_transaction_history(self) -> bool:
        """A transactional id's records in __transaction_state: Fetch, READ on that topic."""
        return self._allows(Operation.READ, ResourceType.TOPIC, TXN_TOPIC)

    def members_refused(self, group: Any) -> str | None:
        """Why the principal may not see this group's epoch and members, or None if it may:
        a consumer group is ConsumerGroupDescribe's, refused for a topic its assignments
        name that the principal may not DESCRIBE; a classic group is DescribeGroups', which
        asks DESCRIBE on the group only (the page asked it already)."""
        if not isinstance(group, ConsumerGroup):
            return None
        names = self._inner.services.groups.topic_names()
        if all(self.may_describe_topic(topic) for topic in group.described_topics(names)):
            return None
        return "TOPIC_AUTHORIZATION_FAILED: its members are assigned topics you may not DESCRIBE."

    def describable(self, partitions: Iterable[tuple[str, int]]) -> list[tuple[str, int]]:
        """Of these partitions, those of topics the principal may DESCRIBE (the pages ask
        it where they read partitions from records, as a transaction's history)."""
        return [(topic, partition) for topic, partition in partitions if self.may_describe_topic(topic)]


class _Services(_Delegate):
    @cached_property
    def logs(self) -> Any:
        return _Logs(self._inner.logs, self._allows)

    @cached_property
    def groups(self) -> Any:
        return _Groups(self._inner.groups, self._allows)

    @cached_property
    def transactions(self) -> Any:
        inner = self._inner.transactions
        return None if inner is None else _Transactions(inner, self._allows)


class _Logs(_Delegate):
    @cached_property
    def topics(self) -> dict[str, Any]:
        return {name: topic for name, topic in self._inner.topics.items()
                if self._allows(Operation.DESCRIBE, ResourceType.TOPIC, name)}


class _Groups(_Delegate):
    def all_groups(self) -> dict[str, Any]:
        """ListGroups: every group to a principal with DESCRIBE on the cluster, else the
        groups it may DESCRIBE."""
        groups = self._inner.all_groups()
        if self._allows(Operation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME):
            return dict(groups)
        return {group_id: group for group_id, group in groups.items()
                if self._allows(Operation.DESCRIBE, ResourceType.GROUP, group_id)}

    def group(self, group_id: str) -> Any:
        allowed = self._allows(Operation.DESCRIBE, ResourceType.GROUP, group_id)
        return self._inner.group(group_id) if allowed else None

    def fetch_offsets(self, group_id: str, *args: Any, **kwargs: Any) -> dict[tuple[str, int], Any]:
        offsets = self._inner.fetch_offsets(group_id, *args, **kwargs)
        return {(topic, partition): value for (topic, partition), value in offsets.items()
                if self._allows(Operation.DESCRIBE, ResourceType.TOPIC, topic)}


class _Transactions(_Delegate):
    def records(self) -> dict[str, Any]:
        return {txn_id: _Transaction(txn, self._allows) for txn_id, txn in self._inner.records().items()
                if self._allows(Operation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, txn_id)}

    def transactional_ids_by_producer(self) -> dict[int, str]:
        return {producer_id: txn_id for producer_id, txn_id in self._inner.transactional_ids_by_producer().items()
                if self._allows(Operation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, txn_id)}

    def describe(self, txn_id: str) -> Any:
        txn = self._inner.describe(txn_id)
        return None if txn is None else _Transaction(txn, self._allows)


class _Transaction(_Delegate):
    """A transaction with the partitions of the topics the principal may DESCRIBE only,
    as Kafka's DescribeTransactions filters them."""

    @cached_property
    def partitions(self) -> set[tuple[str, int]]:
        return {(topic, partition) for topic, partition in self._inner.partitions
                if self._allows(Operation.DESCRIBE, ResourceType.TOPIC, topic)}
