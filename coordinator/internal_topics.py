"""What clients may not do to the coordinators' topics, `__transaction_state` and
`__consumer_offsets`, and to the built-in schema registry's `_schemas` while it is on
(the LogManager's `internal_topics`).

These topics are the coordinators' memory: every transactional id, every open
transaction and every committed offset is rebuilt from them at start-up. Only the
coordinators write them (through the logs directly, never through these checks); a
client that could truncate, delete, reconfigure or append to them could make a restart
forget open transactions (their partitions' LSO then never advances) or committed
offsets.

Kafka refuses Produce ("Cannot append to internal topic") and DeleteRecords ("Cannot
delete records of internal topic") with INVALID_TOPIC_EXCEPTION, and leaves the rest to
its authorizer. Ottla's authorizer is off unless authorizer.class.name is set, and a
super user or an ACL on every topic passes it, so the rest is refused here to every
client, whatever the ACLs say: DeleteTopics with INVALID_TOPIC_EXCEPTION as well, a config change with POLICY_VIOLATION
(the code of Kafka's alter-config policy), and CreateTopics of an internal name with
INVALID_REQUEST, as Kafka refuses to create its `__cluster_metadata` (the broker creates
`__consumer_offsets` on first use, with its own partition count and settings).
"""

from __future__ import annotations

import enum
from collections.abc import Collection

from ottla.protocol.errors import ErrorCode, KafkaError
from ottla.storage.log_manager import INTERNAL_TOPICS


class ClientAction(enum.Enum):
    """What a client asks to do to a topic, with the error and message that refuse it
    on an internal topic."""

    APPEND = (ErrorCode.invalid_topic_exception, "Cannot append to internal topic {}")
    DELETE_RECORDS = (ErrorCode.invalid_topic_exception, "Cannot delete records of internal topic {}")
    DELETE_TOPIC = (ErrorCode.invalid_topic_exception, "Cannot delete internal topic {}")
    ALTER_CONFIGS = (ErrorCode.policy_violation, "The configs of internal topic {} cannot be changed")
    CREATE_TOPIC = (ErrorCode.invalid_request, "Creation of internal topic {} is prohibited")
    # The coordinators map ids to partitions by the partition count: it may not change.
    CREATE_PARTITIONS = (ErrorCode.invalid_partitions,
                         "The number of partitions of internal topic {} cannot be changed")


def is_internal(topic: str) -> bool:
    return topic in INTERNAL_TOPICS


def check_client_action(topic: str, action: ClientAction, internal: Collection[str]) -> None:
    """Raise the KafkaError that refuses `action` if `topic` is one of the `internal`
    topics (the LogManager's `internal_topics`)."""
    if topic in internal:
        code, message = action.value
        raise KafkaError(code, message.format(topic))
