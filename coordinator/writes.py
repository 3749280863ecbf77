"""The one rule every coordinator follows to change its state, and what it answers
when its own topic (`__consumer_offsets`, `__transaction_state`) refuses a write.

A coordinator's state is what replaying its records builds, and nothing else: as
Kafka's CoordinatorShard.replay, the same `replay` rebuilds it at start-up and moves it
on while the broker serves. An operation first decides, without touching the
coordinator's state, what it does: the records that describe the change, and the answer
for the client (Kafka's CoordinatorResult; the answer is computed before the append, so
it never reads a state the records have not made). `write` appends the records and then
replays those same records; an append that fails leaves the state as it was. So memory
never gets ahead of the log, and a restart rebuilds what clients were told.

What lives only for a rebalance (members waiting in a JoinGroup, timers, heartbeats)
is not in the log and stays in memory; an operation changes it in `then`, once its
records are replayed.

Errors are raised (KafkaError) inside the coordinators and turned into the response's
error codes by the request handlers.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, NamedTuple, TypeVar

from ottla.protocol.errors import ErrorCode, KafkaError
from ottla.protocol.loggers import get_logger

Records = list[tuple[bytes, bytes | None]]  # (key, value); a None value is a tombstone
T = TypeVar("T")

log = get_logger("ottla.coordinators")


# Replays one record into a coordinator's state: its offset in the log, its key and its
# value (None: a tombstone).
Replay = Callable[[int, bytes, bytes | None], None]


def nothing() -> None:
    """The `then` of a result that has nothing to run after its records."""


class CoordinatorResult(NamedTuple, Generic[T]):
    """What an operation decided: its records and its answer. `then` runs once the
    records are in the log and replayed: it completes what waits for them (members
    waiting for their assignment) and changes state that is not in the log; never
    state the records hold. A named tuple: made with no Python call of its own (a
    frozen dataclass sets each field with object.__setattr__), at every commit."""

    records: Records
    response: T
    then: Callable[[], object] = nothing


def write(result: CoordinatorResult[T], append: Callable[[Records], int], replay: Replay) -> T:
    """Append the result's records (if any), replay them, then run its `then`; returns
    its answer. An append that fails raises (see `append_error`): nothing is replayed."""
    if result.records:
        offset = append(result.records)
        for i, (key, value) in enumerate(result.records):
            replay(offset + i, key, value)
    result.then()
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
