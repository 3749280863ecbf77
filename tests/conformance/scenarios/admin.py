"""The admin APIs: topics, configs, partitions, records, offsets by leader epoch, log
dirs, the cluster, quotas, SCRAM credentials, ACLs and SASL on a plaintext listener."""

from __future__ import annotations

import uuid
from typing import Any

from ..harness import Context, Scenario, Step, sweep
from .common import (
    ALTER_CLIENT_QUOTAS,
    ALTER_CONFIGS,
    ALTER_PARTITION_REASSIGNMENTS,
    ALTER_USER_SCRAM_CREDENTIALS,
    CREATE_ACLS,
    CREATE_PARTITIONS,
    CREATE_TOPICS,
    DELETE_ACLS,
    DELETE_RECORDS,
    DELETE_TOPICS,
    DESCRIBE_ACLS,
    DESCRIBE_CLIENT_QUOTAS,
    DESCRIBE_CLUSTER,
    DESCRIBE_CONFIGS,
    DESCRIBE_LOG_DIRS,
    DESCRIBE_TOPIC_PARTITIONS,
    DESCRIBE_USER_SCRAM_CREDENTIALS,
    ELECT_LEADERS,
    INCREMENTAL_ALTER_CONFIGS,
    LIST_PARTITION_REASSIGNMENTS,
    OFFSET_FOR_LEADER_EPOCH,
    PRODUCE,
    SASL_AUTHENTICATE,
    SASL_HANDSHAKE,
    batch,
    create,
    produce,
)

TOPIC, BROKER = 2, 4  # DescribeConfigs resource types

# A valid value of every topic config Ottla knows, and an invalid one.
VALID = {
    "cleanup.policy": "compact,delete", "compression.gzip.level": "5", "compression.lz4.level": "10",
    "compression.type": "zstd", "compression.zstd.level": "7", "delete.retention.ms": "1000",
    "file.delete.delay.ms": "1000", "flush.messages": "100", "flush.ms": "1000",
    "follower.replication.throttled.replicas": "", "index.interval.bytes": "8192",
    "leader.replication.throttled.replicas": "", "local.retention.bytes": "-2", "local.retention.ms": "-2",
    "max.compaction.lag.ms": "100000", "max.message.bytes": "200000", "message.timestamp.after.max.ms": "5000",
    "message.timestamp.before.max.ms": "5000000", "message.timestamp.type": "LogAppendTime",
    "min.cleanable.dirty.ratio": "0.3", "min.compaction.lag.ms": "10", "min.insync.replicas": "1",
    "preallocate": "false", "remote.log.copy.disable": "false", "remote.log.delete.on.disable": "false",
    "remote.storage.enable": "false", "retention.bytes": "1000000", "retention.ms": "100000",
    "segment.bytes": "1048576", "segment.index.bytes": "4096", "segment.jitter.ms": "0", "segment.ms": "100000",
    "unclean.leader.election.enable": "false",
}
INVALID = {
    "cleanup.policy": "sometimes", "compression.gzip.level": "12", "compression.lz4.level": "99",
    "compression.type": "brotli", "compression.zstd.level": "99", "delete.retention.ms": "-5",
    "file.delete.delay.ms": "x", "flush.messages": "0", "flush.ms": "-1", "index.interval.bytes": "-1",
    "max.compaction.lag.ms": "0", "max.message.bytes": "-1", "message.timestamp.after.max.ms": "-1",
    "message.timestamp.type": "WallClock", "min.cleanable.dirty.ratio": "1.5", "min.compaction.lag.ms": "-1",
    "min.insync.replicas": "0", "preallocate": "maybe", "retention.ms": "-7", "segment.bytes": "10",
    "segment.index.bytes": "1", "segment.jitter.ms": "-1", "segment.ms": "0", "unclean.leader.election.enable": "2",
    "no.such.config": "1",
}


def create_topics(name: str, topics: Any, version: int = 7, validate_only: bool = False) -> Step:
    return Step(name, CREATE_TOPICS, version, lambda c: {
        "timeout": 30000, "validate_only": validate_only, "topics": topics(c)})


def new_topic(c: Context, suffix: str, partitions: int = 1, replication: int = 1,
              configs: dict[str, str] | None = None, assignments: list[dict[str, Any]] | None = None) -> dict:
    return {"name": c.topic(suffix), "num_partitions": partitions, "replication_factor": replication,
            "assignments": assignments or [], "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()]}


def describe_configs(name: str, version: int, resources: Any, synonyms: bool = True,
                     documentation: bool = True) -> Step:
    return Step(name, DESCRIBE_CONFIGS, version, lambda c: {
        "resources": resources(c), "include_synonyms": synonyms, "include_documentation": documentation})


def alter(name: str, version: int, configs: dict[str, str | None], suffix: str = "", validate_only: bool = False
          ) -> Step:
    return Step(name, ALTER_CONFIGS, version, lambda c: {"validate_only": validate_only, "resources": [
        {"resource_type": TOPIC, "resource_name": c.topic(suffix),
         "configs": [{"name": k, "value": v} for k, v in configs.items()]}]})


def incremental(name: str, version: int, ops: list[tuple[str, int, str | None]], suffix: str = "",
                resource_type: int = TOPIC) -> Step:
    return Step(name, INCREMENTAL_ALTER_CONFIGS, version, lambda c: {"validate_only": False, "resources": [
        {"resource_type": resource_type, "resource_name": c.topic(suffix) if resource_type == TOPIC else "1",
         "configs": [{"name": k, "config_operation": op, "value": v} for k, op, v in ops]}]})


SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3

BROKER_KEYS = ["log.retention.ms", "log.retention.hours", "num.partitions", "message.max.bytes",
               "log.cleanup.policy", "auto.create.topics.enable", "compression.type", "min.insync.replicas"]


def records(c: Context, count: int) -> dict:
    return produce(c.topic(), 0, batch([b"r%d" % i for i in range(count)]))


def epochs(c: Context, suffix: str, partition: int, leader_epoch: int, current: int = -1) -> dict:
    return {"replica_id": -1, "topics": [{"topic": c.topic(suffix), "partitions": [
        {"partition": partition, "current_leader_epoch": current, "leader_epoch": leader_epoch}]}]}


def delete_records(c: Context, partition: int, offset: int, suffix: str = "") -> dict:
    return {"timeout": 30000, "topics": [{"name": c.topic(suffix), "partitions": [
        {"partition_index": partition, "offset": offset}]}]}


ACL_FILTER = {"resource_type_filter": 1, "resource_name_filter": None, "pattern_type_filter": 1,
              "principal_filter": None, "host_filter": None, "operation": 1, "permission_type": 1}
ACL = {"resource_type": 2, "resource_name": "t", "resource_pattern_type": 3, "principal": "User:alice",
       "host": "*", "operation": 3, "permission_type": 3}

SCENARIOS = [
    Scenario("create-topics", [
        *[create_topics(f"create@v{v}", lambda c, v=v: [new_topic(c, f"v{v}", 2)], version=v) for v in range(2, 8)],
        create_topics("every-config", lambda c: [new_topic(c, "configs", 1, configs=VALID)]),
        *[create_topics(f"invalid-{key}", lambda c, key=key, value=value: [
            new_topic(c, f"bad-{key.replace('.', '-')}", configs={key: value})]) for key, value in INVALID.items()],
        create_topics("already-exists", lambda c: [new_topic(c, "v7")]),
        create_topics("zero-partitions", lambda c: [new_topic(c, "zero", 0)]),
        create_topics("negative-partitions", lambda c: [new_topic(c, "neg", -5)]),
        create_topics("default-partitions", lambda c: [new_topic(c, "default", -1, -1)]),
        create_topics("replication-3", lambda c: [new_topic(c, "rf3", 1, 3)]),
        create_topics("replication-0", lambda c: [new_topic(c, "rf0", 1, 0)]),
        create_topics("invalid-name", lambda c: [{**new_topic(c, ""), "name": "bad name!"}]),
        create_topics("dot-name", lambda c: [{**new_topic(c, ""), "name": "."}]),
        # A trailing newline: a pattern checked with `$` let it through (issue 40).
        create_topics("newline-name", lambda c: [{**new_topic(c, ""), "name": "nl\n"}]),
        create_topics("long-name", lambda c: [{**new_topic(c, ""), "name": "x" * 250}]),
        create_topics("assignment-unknown-broker", lambda c: [new_topic(
            c, "assigned", -1, -1, assignments=[{"partition_index": 0, "broker_ids": [7]}])]),
        create_topics("assignment", lambda c: [new_topic(c, "assigned-ok", -1, -1, assignments=[
            {"partition_index": 0, "broker_ids": [1]}, {"partition_index": 1, "broker_ids": [1]}])]),
        create_topics("validate-only", lambda c: [new_topic(c, "validate", 3, configs={"retention.ms": "5"})],
                      validate_only=True),
        create_topics("duplicate-in-request", lambda c: [new_topic(c, "dup"), new_topic(c, "dup")]),
        create_topics("internal", lambda c: [{**new_topic(c, ""), "name": "__consumer_offsets"}]),
        *[Step(f"delete@v{v}", DELETE_TOPICS, v, lambda c, v=v: {  # type: ignore[misc]
            "timeout": 30000, "topic_names": [c.topic(f"v{v + 1}")],
            "topics": [{"name": c.topic(f"v{v + 1}"), "topic_id": None}]}) for v in range(1, 7) if v + 1 <= 7],
        Step("delete-v6-by-id", DELETE_TOPICS, 6, lambda c: {"timeout": 30000, "topics": [
            {"name": None, "topic_id": c["every-config"].topics[0].topic_id}]}),
        Step("delete-unknown", DELETE_TOPICS, 6, lambda c: {"timeout": 30000, "topic_names": [c.topic("nope")],
                                                            "topics": [{"name": c.topic("nope"), "topic_id": None}]}),
        Step("delete-unknown-id", DELETE_TOPICS, 6, {"timeout": 30000, "topics": [
            {"name": None, "topic_id": uuid.UUID("6b4a2a1e-0000-4000-8000-000000000001")}]}),
        Step("delete-both-name-and-id", DELETE_TOPICS, 6, lambda c: {"timeout": 30000, "topics": [
            {"name": c.topic("assigned-ok"), "topic_id": c["assignment"].topics[0].topic_id}]}),
    ]),
    Scenario("configs", [
        create("create", 1, {"retention.ms": "123456", "cleanup.policy": "compact"}),
        *[describe_configs(f"describe-topic@v{v}", v, lambda c: [
            {"resource_type": TOPIC, "resource_name": c.topic(), "configuration_keys": None}]) for v in range(1, 5)],
        describe_configs("describe-topic-keys", 4, lambda c: [
            {"resource_type": TOPIC, "resource_name": c.topic(),
             "configuration_keys": ["retention.ms", "segment.bytes", "no.such.key"]}]),
        describe_configs("describe-unknown-topic", 4, lambda c: [
            {"resource_type": TOPIC, "resource_name": c.topic("nope"), "configuration_keys": None}]),
        describe_configs("describe-broker-keys", 4, lambda c: [
            {"resource_type": BROKER, "resource_name": "1", "configuration_keys": BROKER_KEYS}]),
        describe_configs("describe-other-broker", 4, lambda c: [
            {"resource_type": BROKER, "resource_name": "9", "configuration_keys": BROKER_KEYS}]),
        describe_configs("describe-bad-resource-type", 4, lambda c: [
            {"resource_type": 99, "resource_name": "x", "configuration_keys": None}]),
        *[alter(f"alter@v{v}", v, {"retention.ms": str(1000 * (v + 1)), "cleanup.policy": "delete"})
          for v in range(3)],
        alter("alter-invalid", 2, {"retention.ms": "-7"}),
        alter("alter-unknown-config", 2, {"no.such.config": "1"}),
        alter("alter-unknown-topic", 2, {"retention.ms": "1"}, suffix="nope"),
        alter("alter-validate-only", 2, {"retention.ms": "999"}, validate_only=True),
        *[incremental(f"incremental@v{v}", v, [("retention.ms", SET, "424242"), ("segment.ms", SET, "600000")])
          for v in range(2)],
        incremental("incremental-delete", 1, [("segment.ms", DELETE, None)]),
        incremental("incremental-append", 1, [("cleanup.policy", APPEND, "compact")]),
        incremental("incremental-subtract", 1, [("cleanup.policy", SUBTRACT, "delete")]),
        incremental("incremental-append-scalar", 1, [("retention.ms", APPEND, "5")]),
        incremental("incremental-invalid", 1, [("retention.ms", SET, "soon")]),
        incremental("incremental-bad-op", 1, [("retention.ms", 9, "5")]),
        incremental("incremental-twice", 1, [("retention.ms", SET, "5"), ("retention.ms", SET, "6")]),
        incremental("incremental-unknown-topic", 1, [("retention.ms", SET, "5")], suffix="nope"),
        incremental("incremental-broker-read-only", 1, [("num.network.threads", SET, "5")], resource_type=BROKER),
        # Kafka took that change: take it back, for the other tests of the session's Kafka.
        Step("incremental-broker-restore", INCREMENTAL_ALTER_CONFIGS, 1, lambda c: {
            "validate_only": False, "resources": [{"resource_type": BROKER, "resource_name": "1", "configs": [
                {"name": "num.network.threads", "config_operation": DELETE, "value": None}]}]}, compare=False),
        describe_configs("describe-after", 4, lambda c: [
            {"resource_type": TOPIC, "resource_name": c.topic(),
             "configuration_keys": ["retention.ms", "segment.ms", "cleanup.policy"]}]),
    ]),
    Scenario("partitions-and-records", [
        create("create", 1),
        Step("produce", PRODUCE, 9, lambda c: records(c, 5)),
        *[Step(f"create-partitions@v{v}", CREATE_PARTITIONS, v, lambda c, v=v: {  # type: ignore[misc]
            "timeout": 30000, "validate_only": False,
            "topics": [{"name": c.topic(), "count": 2 + v, "assignments": None}]}) for v in range(4)],
        Step("create-partitions-shrink", CREATE_PARTITIONS, 3, lambda c: {
            "timeout": 30000, "validate_only": False,
            "topics": [{"name": c.topic(), "count": 2, "assignments": None}]}),
        Step("create-partitions-same", CREATE_PARTITIONS, 3, lambda c: {
            "timeout": 30000, "validate_only": False,
            "topics": [{"name": c.topic(), "count": 5, "assignments": None}]}),
        Step("create-partitions-unknown", CREATE_PARTITIONS, 3, lambda c: {
            "timeout": 30000, "validate_only": False,
            "topics": [{"name": c.topic("nope"), "count": 5, "assignments": None}]}),
        Step("create-partitions-validate-only", CREATE_PARTITIONS, 3, lambda c: {
            "timeout": 30000, "validate_only": True, "topics": [{"name": c.topic(), "count": 9, "assignments": None}]}),
        Step("create-partitions-bad-assignment", CREATE_PARTITIONS, 3, lambda c: {
            "timeout": 30000, "validate_only": False,
            "topics": [{"name": c.topic(), "count": 6, "assignments": [{"broker_ids": [4]}]}]}),
        Step("create-partitions-duplicate", CREATE_PARTITIONS, 3, lambda c: {
            "timeout": 30000, "validate_only": False,
            "topics": [{"name": c.topic(), "count": 7, "assignments": None},
                       {"name": c.topic(), "count": 8, "assignments": None}]}),
        *[Step(f"delete-records@v{v}", DELETE_RECORDS, v,
               lambda c, v=v: delete_records(c, 0, v + 1))  # type: ignore[misc]
          for v in range(3)],
        Step("delete-records-beyond-end", DELETE_RECORDS, 2, lambda c: delete_records(c, 0, 50)),
        Step("delete-records-to-end", DELETE_RECORDS, 2, lambda c: delete_records(c, 0, -1)),
        Step("delete-records-backwards", DELETE_RECORDS, 2, lambda c: delete_records(c, 0, 1)),
        Step("delete-records-unknown-partition", DELETE_RECORDS, 2, lambda c: delete_records(c, 30, 1)),
        Step("delete-records-unknown-topic", DELETE_RECORDS, 2, lambda c: delete_records(c, 0, 1, "nope")),
        *[Step(f"offset-for-leader-epoch@v{v}", OFFSET_FOR_LEADER_EPOCH, v, lambda c: epochs(c, "", 0, 0))
          for v in range(2, 5)],
        Step("offset-for-future-epoch", OFFSET_FOR_LEADER_EPOCH, 4, lambda c: epochs(c, "", 0, 5)),
        Step("offset-for-epoch-fenced", OFFSET_FOR_LEADER_EPOCH, 4, lambda c: epochs(c, "", 0, 0, current=3)),
        Step("offset-for-epoch-old-current", OFFSET_FOR_LEADER_EPOCH, 4,
             lambda c: epochs(c, "", 0, 0, current=-2)),
        Step("offset-for-epoch-unknown", OFFSET_FOR_LEADER_EPOCH, 4, lambda c: epochs(c, "nope", 0, 0)),
        Step("offset-for-epoch-as-follower", OFFSET_FOR_LEADER_EPOCH, 4,
             lambda c: {**epochs(c, "", 0, 0), "replica_id": 1}),
        *sweep("describe-log-dirs", DESCRIBE_LOG_DIRS, lambda c: {"topics": [
            {"topic": c.topic(), "partitions": [0, 1, 99]}, {"topic": c.topic("nope"), "partitions": [0]}]}),
        Step("describe-topic-partitions", DESCRIBE_TOPIC_PARTITIONS, 0, lambda c: {
            "topics": [{"name": c.topic()}, {"name": c.topic("nope")}], "response_partition_limit": 2,
            "cursor": None}),
        Step("describe-topic-partitions-cursor", DESCRIBE_TOPIC_PARTITIONS, 0, lambda c: {
            "topics": [{"name": c.topic()}], "response_partition_limit": 2,
            "cursor": {"topic_name": c.topic(), "partition_index": 3}}),
        *[Step(f"elect-leaders@v{v}", ELECT_LEADERS, v, lambda c: {
            "election_type": 0, "timeout": 30000,
            "topic_partitions": [{"topic": c.topic(), "partitions": [0, 77]}]}) for v in range(3)],
        Step("elect-unclean", ELECT_LEADERS, 2, lambda c: {
            "election_type": 1, "timeout": 30000, "topic_partitions": [{"topic": c.topic(), "partitions": [0]}]}),
        *[Step(f"alter-reassignments@v{v}", ALTER_PARTITION_REASSIGNMENTS, v, lambda c: {
            "timeout": 30000, "allow_replication_factor_change": True,
            "topics": [{"name": c.topic(), "partitions": [{"partition_index": 0, "replicas": [1]},
                                                          {"partition_index": 1, "replicas": None},
                                                          {"partition_index": 66, "replicas": [1]}]}]})
          for v in range(2)],
        Step("alter-reassignments-other-broker", ALTER_PARTITION_REASSIGNMENTS, 1, lambda c: {
            "timeout": 30000, "allow_replication_factor_change": True,
            "topics": [{"name": c.topic(), "partitions": [{"partition_index": 0, "replicas": [2]}]}]}),
        Step("list-reassignments", LIST_PARTITION_REASSIGNMENTS, 0, lambda c: {
            "timeout": 30000, "topics": [{"name": c.topic(), "partition_indexes": [0, 1]}]}),
        Step("list-all-reassignments", LIST_PARTITION_REASSIGNMENTS, 0, {"timeout": 30000, "topics": None}),
    ]),
    Scenario("cluster-quotas-credentials-acls", [
        *sweep("describe-cluster", DESCRIBE_CLUSTER, {"include_cluster_authorized_operations": False,
                                                      "endpoint_type": 1}),
        Step("describe-cluster-operations", DESCRIBE_CLUSTER, 1, {"include_cluster_authorized_operations": True,
                                                                  "endpoint_type": 1}),
        Step("describe-cluster-controllers", DESCRIBE_CLUSTER, 1, {"include_cluster_authorized_operations": False,
                                                                   "endpoint_type": 2}),
        Step("describe-cluster-unknown-endpoint", DESCRIBE_CLUSTER, 1, {
            "include_cluster_authorized_operations": False, "endpoint_type": 9}),
        *[Step(f"alter-quotas@v{v}", ALTER_CLIENT_QUOTAS, v,
               lambda c, v=v: {"validate_only": False, "entries": [  # type: ignore[misc]
            {"entity": [{"entity_type": "client-id", "entity_name": c.name("client", str(v))}],
             "ops": [{"key": "producer_byte_rate", "value": 1024000.0, "remove": False}]}]}) for v in range(2)],
        Step("alter-quotas-unknown-key", ALTER_CLIENT_QUOTAS, 1, lambda c: {"validate_only": False, "entries": [
            {"entity": [{"entity_type": "client-id", "entity_name": c.name("client")}],
             "ops": [{"key": "no_such_quota", "value": 1.0, "remove": False}]}]}),
        Step("alter-quotas-bad-entity", ALTER_CLIENT_QUOTAS, 1, lambda c: {"validate_only": False, "entries": [
            {"entity": [{"entity_type": "planet", "entity_name": "x"}],
             "ops": [{"key": "producer_byte_rate", "value": 1.0, "remove": False}]}]}),
        *[Step(f"describe-quotas@v{v}", DESCRIBE_CLIENT_QUOTAS, v, lambda c: {"strict": False, "components": [
            {"entity_type": "client-id", "match_type": 0, "match": c.name("client", "1")}]}) for v in range(2)],
        Step("alter-quotas-remove", ALTER_CLIENT_QUOTAS, 1, lambda c: {"validate_only": False, "entries": [
            {"entity": [{"entity_type": "client-id", "entity_name": c.name("client", "1")}],
             "ops": [{"key": "producer_byte_rate", "value": 0.0, "remove": True}]}]}),
        Step("describe-scram", DESCRIBE_USER_SCRAM_CREDENTIALS, 0, lambda c: {"users": [{"name": c.name("user")}]}),
        Step("describe-scram-all", DESCRIBE_USER_SCRAM_CREDENTIALS, 0, {"users": None}, only_mine=True),
        Step("alter-scram", ALTER_USER_SCRAM_CREDENTIALS, 0, lambda c: {"deletions": [], "upsertions": [
            {"name": c.name("user"), "mechanism": 1, "iterations": 4096, "salt": b"salt-salt-salt",
             "salted_password": b"p" * 32}]}),
        Step("alter-scram-few-iterations", ALTER_USER_SCRAM_CREDENTIALS, 0, lambda c: {"deletions": [], "upsertions": [
            {"name": c.name("user2"), "mechanism": 1, "iterations": 10, "salt": b"salt", "salted_password": b"p"}]}),
        Step("alter-scram-unknown-mechanism", ALTER_USER_SCRAM_CREDENTIALS, 0, lambda c: {
            "deletions": [{"name": c.name("user3"), "mechanism": 0}], "upsertions": []}),
        Step("delete-scram-missing", ALTER_USER_SCRAM_CREDENTIALS, 0, lambda c: {
            "deletions": [{"name": c.name("user4"), "mechanism": 2}], "upsertions": []}),
        Step("describe-scram-after", DESCRIBE_USER_SCRAM_CREDENTIALS, 0, lambda c: {
            "users": [{"name": c.name("user")}, {"name": c.name("user2")}]}),
        *[Step(f"describe-acls@v{v}", DESCRIBE_ACLS, v, ACL_FILTER) for v in range(1, 4)],
        *[Step(f"create-acls@v{v}", CREATE_ACLS, v, {"creations": [ACL]}) for v in range(1, 4)],
        *[Step(f"delete-acls@v{v}", DELETE_ACLS, v, {"filters": [ACL_FILTER]}) for v in range(1, 4)],
        *[Step(f"sasl-handshake@v{v}", SASL_HANDSHAKE, v, {"mechanism": "PLAIN"}) for v in range(2)],
        *[Step(f"sasl-authenticate@v{v}", SASL_AUTHENTICATE, v, {"auth_bytes": b"\x00alice\x00secret"})
          for v in range(3)],
    ]),
]
