"""What a request handler may use: the broker's parts that serving a request needs, and
nothing of the process around them (listeners, connections, the admin endpoint, the
background tasks).

Handlers depend on this module, and it depends only on storage, the coordinators and
what the security room says it needs (security/sasl.py), so the request path cannot
reach back up into the server that runs it. The broker builds one `Services` at start, once the data
directory is loaded and the coordinators exist, and every connection hands it to its
handlers (handlers/context.py).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from ottla.coordinator.groups import GroupCoordinator
from ottla.coordinator.markers import MarkerWriter
from ottla.coordinator.offsets_log import TOPIC as OFFSETS_TOPIC
from ottla.coordinator.producer_ids import ProducerIdAllocator
from ottla.coordinator.share_coordinator import ShareCoordinator
from ottla.coordinator.transactions import INTERNAL_TOPIC_CONFIGS, TransactionCoordinator
from ottla.storage.log_config import TOPIC_CONFIGS
from ottla.storage.log_manager import LogManager, Topic

from .security.sasl import Credentials, SecurityEvents

T = TypeVar("T")

# Kafka's controller refuses a CreateTopics that would create more partitions than this
# (MAX_PARTITIONS_PER_BATCH), the whole request, before it creates anything.
MAX_PARTITIONS_PER_REQUEST = 10_000

if TYPE_CHECKING:
    from ottla.storage.log_config import LogConfig

    from .client_quotas import ClientQuotas
    from .fetch_sessions import FetchSessionCache
    from .group_configs import GroupConfigs
    from .share_sessions import ShareSessionCache


class Settings(Protocol):
    """The broker configuration handlers read (broker/config.py's BrokerConfig)."""

    # Read-only: the configuration is a frozen dataclass.
    @property
    def num_partitions(self) -> int: ...
    @property
    def auto_create_topics_enable(self) -> bool: ...
    @property
    def fetch_max_bytes(self) -> int: ...
    @property
    def offsets_topic_partitions(self) -> int: ...
    @property
    def log(self) -> LogConfig: ...

    def broker_properties(self) -> dict[str, str | None]: ...


class AppendWaiters(Protocol):
    """Where a long-polling Fetch waits for appends (broker/watchers.py)."""

    async def wait(self, partitions: list[tuple[str, int]], timeout: float) -> None: ...


class Threads(Protocol):
    """Where a handler runs work too long for the event loop (broker/worker_threads.py)."""

    async def run(self, work: Callable[..., T], *args: Any) -> T: ...


class DynamicConfigs(Protocol):
    """Broker configs changed at run time (broker/dynamic_config.py)."""

    scopes: dict[str, dict[str, str]]

    def values(self) -> dict[str, str]: ...
    def source_of(self, key: str) -> str | None: ...
    def replace(self, scope: str, values: Mapping[str, str]) -> None: ...


class Authorization(Protocol):
    """The ACLs (broker/security/authorizer.py's Authorizer), when authorizer.class.name is set."""

    changes: int  # counts every change of the ACLs

    def authorize(self, principal: str, host: str, operation: Any, resource_type: Any, name: str) -> bool: ...
    def authorize_any(self, principal: str, host: str, operation: Any, resource_type: Any) -> bool: ...
    def add(self, acls: list[Any]) -> None: ...
    def delete(self, filters: list[Any]) -> list[list[Any]]: ...
    def describe(self, acl_filter: Any) -> list[Any]: ...


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
    threads: Threads
    scram: Credentials
    security_events: SecurityEvents
    # None: no authorizer configured, every request allowed (Kafka without one).
    authorizer: Authorization | None
    dynamic_configs: DynamicConfigs
    # Incremental fetch sessions (KIP-227, fetch_sessions.py): state of the Fetch
    # handler, kept here because it outlives one request.
    fetch_sessions: FetchSessionCache
    # Client quotas (client_quotas.py): their config, and the rates measured against it.
    quotas: ClientQuotas
    # Share groups (KIP-932): their coordinator, and the share sessions of ShareFetch.
    shares: ShareCoordinator = None  # type: ignore[assignment]
    share_sessions: ShareSessionCache = None  # type: ignore[assignment]
    group_configs: GroupConfigs = None  # type: ignore[assignment]
    # The configuration as started (files, environment, flags); `config` is it with the
    # dynamic broker configs applied.
    static_config: Settings = None  # type: ignore[assignment]
    # Set once the broker begins its shutdown: a long-polling Fetch stops waiting.
    stopping: bool = False
    # Metadata answers kept, with what they were made from (handlers/metadata.py).
    metadata_answers: dict[Any, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.static_config is None:
            self.static_config = self.config
        self._apply_dynamic_configs()

    def set_dynamic_broker_configs(self, scope: str, values: Mapping[str, str]) -> None:
        """Replace one scope's dynamic broker configs (checked by the caller), durably, and
        apply them to every topic that does not override them."""
        self.dynamic_configs.replace(scope, values)
        self._apply_dynamic_configs()

    def _apply_dynamic_configs(self) -> None:
        synonyms = {c.broker_property: c.name for c in TOPIC_CONFIGS.values() if c.broker_property is not None}
        log_values = {synonyms[k]: v for k, v in self.dynamic_configs.values().items() if k in synonyms}
        log_config = self.static_config.log.with_topic_configs(log_values)
        self.config = replace(self.static_config, log=log_config)  # type: ignore[type-var]
        self.logs.set_default_config(log_config)

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
        self.shares.topic_deleted(topic.topic_id)
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
