"""The broker as one signed-in principal may see it: what the pages enumerate (topics,
consumer groups, transactional ids, a group's committed offsets) filtered through the
authorizer, everything else the broker's own.

The pages (pages/) take it in place of the broker and never know: a topic the
principal may not DESCRIBE is not listed, as Kafka's Metadata leaves it out; a group's
offsets leave out the topics it may not DESCRIBE, as OffsetFetch does. What a page shows
about one named thing (a topic's records, a transaction) is checked before the page is
rendered (app.py), with the operation Kafka's API for it asks.
"""

from __future__ import annotations

from functools import cached_property
from typing import Any, Callable, Iterable

from ...security.authorizer import Operation, ResourceType

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
        """Whether the principal may DESCRIBE this topic (the schema pages ask it of a
        subject's topic)."""
        return self._allows(Operation.DESCRIBE, ResourceType.TOPIC, name)

    def describable(self, partitions: Iterable[tuple[str, int]]) -> list[tuple[str, int]]:
        """Of these partitions, those of topics the principal may DESCRIBE (the pages ask
        it where they read partitions from records, as a transaction's history)."""
        return [(topic, partition) for topic, partition in partitions
                if self._allows(Operation.DESCRIBE, ResourceType.TOPIC, topic)]


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
        return {group_id: group for group_id, group in self._inner.all_groups().items()
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
