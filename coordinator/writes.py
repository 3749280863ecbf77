"""The one rule every coordinator follows to change its state, and what it answers
when its own topic (`__consumer_offsets`, `__transaction_state`) refuses a write.

An operation first decides, without touching the coordinator's memory, what it does:
the records that make the change durable, the answer for the client, and the change
to memory (Kafka's CoordinatorResult). The records are appended; only once they are
in the log is the change applied. An append that fails leaves memory as it was, so
memory never gets ahead of the log and a restart rebuilds what clients were told.

Errors are raised (KafkaError) inside the coordinators and turned into the response's
error codes by the request handlers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Generic, TypeVar


from ottla.protocol.errors import ErrorCode, KafkaError
from ottla.protocol.loggers import get_logger

Records = list[tuple[bytes, bytes | None]]  # (key, value); a None value is a tombstone
T = TypeVar("T")

log = get_logger("ottla.coordinators")


def _nothing(offset: int) -> None:
    pass


@dataclass(frozen=True, slots=True)
class CoordinatorResult(Generic[T]):
    """What an operation decided: its records, its answer, and the change to memory
    that `write` applies once the records are in the log. `apply` is given the offset
    of the first record in the log (-1 when there are no records)."""

    records: Records
    response: T
    apply: Callable[[int], object] = field(default=_nothing)

    def and_then(self, also: Callable[[int], object]) -> CoordinatorResult[T]:
        """The same result, applying `also` after its own change."""
        first = self.apply

        def both(offset: int) -> None:
            first(offset)
            also(offset)

        return CoordinatorResult(self.records, self.response, both)


def write(result: CoordinatorResult[T], append: Callable[[Records], int]) -> T:
    """Append the result's records (if any), then apply its change; returns its answer.
    An append that fails raises (see `append_error`) and nothing is applied."""
    offset = append(result.records) if result.records else -1
    result.apply(offset)
    return result.response


def append_error(exc: KafkaError, partition: str) -> KafkaError:
    """What the client is told when the coordinator's log (`partition`, for the log
    line) refuses a write, as Kafka's coordinators map it
    (GroupCoordinatorService.handleOperationException, TransactionStateManager's append
    callback): a storage error says NOT_COORDINATOR, so the client looks the coordinator
    up again and retries; a missing partition says COORDINATOR_NOT_AVAILABLE; a batch
    too large is the broker's own failure, UNKNOWN_SERVER_ERROR. These carry no message
    to the client (Kafka sends none with them); the reason is logged here. Anything else
    (a fenced producer epoch...) is the client's own answer and passes through."""
    if exc.code in (ErrorCode.kafka_storage_error, ErrorCode.not_leader_or_follower):
        answer = ErrorCode.not_coordinator
    elif exc.code in (ErrorCode.unknown_topic_or_partition, ErrorCode.not_enough_replicas,
                      ErrorCode.not_enough_replicas_after_append, ErrorCode.request_timed_out):
        answer = ErrorCode.coordinator_not_available
    elif exc.code in (ErrorCode.message_too_large, ErrorCode.record_list_too_large):
        answer = ErrorCode.unknown_server_error
    else:
        return exc
    log.warning("coordinator write failed: nothing changed", partition=partition, error=exc.code.name,
                reason=exc.message, answered=answer.name)
    return KafkaError(answer)
