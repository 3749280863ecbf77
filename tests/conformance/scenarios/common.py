"""API keys and the request bodies many scenarios share."""

from __future__ import annotations

from typing import Any

from ottla.protocol.batch import build_batch, encode_record

from ..harness import Step

PRODUCE, FETCH, LIST_OFFSETS, METADATA = 0, 1, 2, 3
OFFSET_COMMIT, OFFSET_FETCH, FIND_COORDINATOR, JOIN_GROUP, HEARTBEAT, LEAVE_GROUP, SYNC_GROUP = 8, 9, 10, 11, 12, 13, 14
DESCRIBE_GROUPS, LIST_GROUPS, SASL_HANDSHAKE, API_VERSIONS = 15, 16, 17, 18
CREATE_TOPICS, DELETE_TOPICS, DELETE_RECORDS, INIT_PRODUCER_ID, OFFSET_FOR_LEADER_EPOCH = 19, 20, 21, 22, 23
ADD_PARTITIONS_TO_TXN, ADD_OFFSETS_TO_TXN, END_TXN, WRITE_TXN_MARKERS, TXN_OFFSET_COMMIT = 24, 25, 26, 27, 28
DESCRIBE_ACLS, CREATE_ACLS, DELETE_ACLS, DESCRIBE_CONFIGS, ALTER_CONFIGS = 29, 30, 31, 32, 33
DESCRIBE_LOG_DIRS, SASL_AUTHENTICATE, CREATE_PARTITIONS = 35, 36, 37
DELETE_GROUPS, ELECT_LEADERS, INCREMENTAL_ALTER_CONFIGS = 42, 43, 44
ALTER_PARTITION_REASSIGNMENTS, LIST_PARTITION_REASSIGNMENTS, OFFSET_DELETE = 45, 46, 47
DESCRIBE_CLIENT_QUOTAS, ALTER_CLIENT_QUOTAS = 48, 49
DESCRIBE_USER_SCRAM_CREDENTIALS, ALTER_USER_SCRAM_CREDENTIALS = 50, 51
DESCRIBE_CLUSTER, DESCRIBE_PRODUCERS, DESCRIBE_TRANSACTIONS, LIST_TRANSACTIONS = 60, 61, 65, 66
CONSUMER_GROUP_HEARTBEAT, CONSUMER_GROUP_DESCRIBE, DESCRIBE_TOPIC_PARTITIONS = 68, 69, 75

# Every batch a scenario writes carries this timestamp, so both brokers store the same bytes.
TIMESTAMP = 1_700_000_000_000


def batch(values: list[bytes], producer_id: int = -1, epoch: int = -1, sequence: int = -1,
          transactional: bool = False, keys: list[bytes | None] | None = None) -> bytes:
    records = [encode_record(keys[i] if keys else None, v, offset_delta=i) for i, v in enumerate(values)]
    return build_batch(records, timestamp=TIMESTAMP, producer_id=producer_id, producer_epoch=epoch,
                       base_sequence=sequence, attributes=0x10 if transactional else 0)


def produce(topic: str, partition: int, records: bytes, transactional_id: str | None = None,
            acks: int = -1) -> dict[str, Any]:
    return {"transactional_id": transactional_id, "acks": acks, "timeout": 30000,
            "topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": records}]}]}


def create(name: str, partitions: int = 1, configs: dict[str, str] | None = None, suffix: str = "",
           version: int = 7) -> Step:
    """CreateTopics of the scenario's topic (`suffix` for a second one): compared too."""
    return Step(name, CREATE_TOPICS, version, lambda c: {
        "timeout": 30000, "validate_only": False,
        "topics": [{"name": c.topic(suffix), "num_partitions": partitions, "replication_factor": 1,
                    "assignments": [], "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()]}]})

