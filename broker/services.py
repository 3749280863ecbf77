"""What a request handler may use: the broker's parts that serving a request needs, and
nothing of the process around them (listeners, connections, the admin endpoint, the
background tasks).

This module imports nothing from the rest of `broker/`: handlers depend on it, and it
depends only on storage and the coordinators, so the request path cannot reach back up
into the server that runs it. The broker builds one `Services` at start, once the data
directory is loaded and the coordinators exist, and every connection hands it to its
handlers (handlers/context.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from ottla.coordinator.groups import GroupCoordinator
from ottla.coordinator.markers import MarkerWriter
from ottla.coordinator.offsets_log import TOPIC as OFFSETS_TOPIC
from ottla.coordinator.producer_ids import ProducerIdAllocator
from ottla.coordinator.transactions import INTERNAL_TOPIC_CONFIGS, TransactionCoordinator
from ottla.storage.log_manager import LogManager, Topic

if TYPE_CHECKING:
    from ottla.storage.log_config import LogConfig


class Settings(Protocol):
    """The broker configuration handlers read (broker/config.py's BrokerConfig)."""

    num_partitions: int
    auto_create_topics_enable: bool
    fetch_max_bytes: int
    offsets_topic_partitions: int
    log: "LogConfig"

    def broker_properties(self) -> dict[str, str | None]: ...


class AppendWaiters(Protocol):
    """Where a long-polling Fetch waits for appends (broker/watchers.py)."""

    async def wait(self, partitions: list[tuple[str, int]], timeout: float) -> None: ...


class TopicEvents(Protocol):
    """Where topic creation and deletion are told (the broker logs them)."""

    def topic_created(self, name: str, partitions: int, configs: dict[str, str] | None) -> None: ...

    def topic_deleted(self, name: str) -> None: ...


@dataclass(slots=True)
class Services:
    config: Settings
    logs: LogManager
    transactions: TransactionCoordinator
    groups: GroupCoordinator
    markers: MarkerWriter
    producer_ids: ProducerIdAllocator
    waiters: AppendWaiters
    events: TopicEvents
    # Set once the broker begins its shutdown: a long-polling Fetch stops waiting.
    stopping: bool = False

    @property
    def node_id(self) -> int:
        return self.logs.node_id

    # --- topics (shared by CreateTopics, Metadata auto-creation and the coordinators) ----

    def create_topic(self, name: str, partitions: int, configs: dict[str, str] | None = None,
                     validate_only: bool = False) -> Topic | None:
        if validate_only:
            self.logs.validate_new_topic(name, partitions)
            self.logs.default_config.with_topic_configs(configs or {})
            return None
        topic = self.logs.create_topic(name, partitions, configs)
        self.events.topic_created(name, partitions, configs)
        return topic

    def delete_topic(self, name: str) -> Topic:
        topic = self.logs.delete_topic(name)
        self.events.topic_deleted(name)
        return topic

    def offsets_partition_for(self, group_id: str) -> tuple[str, int]:
        """The `__consumer_offsets` partition of a group, creating the topic on first
        use as Kafka does."""
        create_offsets_topic(self.logs, self.config.offsets_topic_partitions, self.events)
        return OFFSETS_TOPIC, self.groups.partition_for(group_id)


def create_offsets_topic(logs: LogManager, partitions: int, events: TopicEvents) -> None:
    """`__consumer_offsets` is created on first use, as Kafka does."""
    if logs.topic(OFFSETS_TOPIC) is None:
        logs.create_topic(OFFSETS_TOPIC, partitions, INTERNAL_TOPIC_CONFIGS)
        events.topic_created(OFFSETS_TOPIC, partitions, INTERNAL_TOPIC_CONFIGS)
