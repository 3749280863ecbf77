"""What every page shares: what the console reads of the broker, the errors a page
raises, and the cells several pages show (a partition's LSO and who holds it back)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Protocol

from ottla.protocol.errors import KafkaError
from ottla.storage.log import PartitionLog

from ..html import Markup, esc, join, link, page, tag

if TYPE_CHECKING:
    from ottla.broker.config import Listener
    from ottla.broker.faults import Faults
    from ottla.broker.metrics import Metrics
    from ottla.broker.services import Services
    from ottla.schema_registry.store import SchemaStore


PAGE_SIZE = 50
PARTITIONS_PER_PAGE = 100


class ConsoleBroker(Protocol):
    """What the console reads of the broker (server.Broker, as console/view.py lets
    the request's principal see it: the questions below are view.py's, each a Kafka API's
    check)."""

    services: Services
    metrics: Metrics
    faults: Faults
    listeners: list[Listener]
    connections: set[Any]
    config_sources: dict[str, str]  # static setting -> its file, OTTLA_<KEY> variable or "command line"
    schema_store: SchemaStore  # the built-in schema registry's state (its pages)

    def may_describe_topic(self, name: str) -> bool:
        """Whether the viewer may see this topic (the schema pages ask it of a subject's)."""
        ...

    def may_describe_group(self, group_id: str) -> bool: ...

    def may_describe_configs(self, topic: str) -> bool: ...

    def may_describe_producers(self, topic: str) -> bool: ...

    def may_describe_cluster(self) -> bool: ...

    def may_read_transaction_history(self) -> bool: ...

    def members_refused(self, group: Any) -> str | None: ...

    def describable(self, partitions: Iterable[tuple[str, int]]) -> list[tuple[str, int]]:
        """Of these partitions, those the viewer may see (a signed-in principal: those of
        topics it may DESCRIBE, console/view.py; the broker itself: all)."""
        ...


class NotFound(Exception):
    """The thing a page is about does not exist (404 with this message)."""

    status = 404


class BadRequest(NotFound):
    """A parameter the page cannot use (400 with this message)."""

    status = 400


def filtered(names: Iterable[str], query: str) -> list[str]:
    q = query.lower()
    return sorted(n for n in names if q in n.lower()) if q else sorted(names)


def log_size(log: PartitionLog) -> int:
    return sum(segment.size for segment in log.segments)


def txn_ids_by_producer(broker: ConsoleBroker) -> dict[int, str]:
    return broker.services.transactions.transactional_ids_by_producer()


def lso_holder(log: PartitionLog) -> int | None:
    """The producer id whose open transaction sets the partition's LSO, if one does."""
    ongoing = log.producer_state.ongoing_txns
    if not ongoing:
        return None
    pid, first = min(ongoing.items(), key=lambda item: item[1])
    return pid if first < log.high_watermark else None


def lso_cell(log: PartitionLog, txn_ids: dict[int, str], holder_shown: bool = True) -> Markup:
    """The LSO, and who holds it back if `holder_shown` (DescribeProducers' answer: the
    viewer may READ the topic)."""
    lso = log.last_stable_offset
    holder = lso_holder(log)
    if holder is None or not holder_shown:
        return esc(f"{lso:,}") if holder is None else tag("span", f"{lso:,}", class_="held")
    txn_id = txn_ids.get(holder)
    who = link(f"transaction {txn_id}", "transaction", id=txn_id) if txn_id is not None else \
        link(f"producer {holder}", "producers", topic=log.topic, partition=log.partition)
    return join([tag("span", f"{lso:,}", class_="held"), " held by ", who])


def error_page(status: int, message: str) -> bytes:
    title = {404: "Not found", 400: "Bad request", 503: "Not available"}.get(status, "Error")
    return page(title, "", tag("p", message, class_="error"))


def handle_kafka_error(exc: KafkaError) -> bytes:
    return page("Not available", "", tag("p", f"{exc.code.name.upper()}: {exc.message}", class_="error"))
