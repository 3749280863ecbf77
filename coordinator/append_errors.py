"""What a coordinator answers when its own topic (`__transaction_state`,
`__consumer_offsets`) refuses an append, as Kafka's coordinators map it."""

from __future__ import annotations

from ottla.protocol.errors import ErrorCode, KafkaError


def coordinator_append_error(exc: KafkaError) -> KafkaError:
    """A storage error (a full or failing disk) says NOT_COORDINATOR, so the client looks
    the coordinator up again and retries; a missing partition says
    COORDINATOR_NOT_AVAILABLE; anything else (a fenced producer epoch...) is the
    client's own answer and passes through."""
    if exc.code in (ErrorCode.kafka_storage_error, ErrorCode.not_leader_or_follower):
        return KafkaError(ErrorCode.not_coordinator, f"the coordinator's log refused the write: {exc.message}")
    if exc.code in (ErrorCode.unknown_topic_or_partition, ErrorCode.not_enough_replicas,
                    ErrorCode.request_timed_out):
        return KafkaError(ErrorCode.coordinator_not_available, exc.message)
    return exc
