"""SASL and ACL errors, against brokers with a SASL_PLAINTEXT listener and the
StandardAuthorizer (tests/conformance/secured.py): the handshake and its failures, and
what a user without ACLs, then with some, is refused."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ..harness import Context, Scenario, Step
from ..secured import USERS
from .common import (
    ADD_PARTITIONS_TO_TXN,
    ALTER_CONFIGS,
    API_VERSIONS,
    CONSUMER_GROUP_HEARTBEAT,
    CREATE_ACLS,
    CREATE_PARTITIONS,
    CREATE_TOPICS,
    DELETE_ACLS,
    DELETE_GROUPS,
    DELETE_RECORDS,
    DELETE_TOPICS,
    DESCRIBE_ACLS,
    DESCRIBE_CLUSTER,
    DESCRIBE_CONFIGS,
    DESCRIBE_GROUPS,
    DESCRIBE_PRODUCERS,
    DESCRIBE_TRANSACTIONS,
    DESCRIBE_USER_SCRAM_CREDENTIALS,
    FETCH,
    FIND_COORDINATOR,
    INIT_PRODUCER_ID,
    JOIN_GROUP,
    LIST_GROUPS,
    LIST_OFFSETS,
    LIST_TRANSACTIONS,
    METADATA,
    OFFSET_COMMIT,
    OFFSET_FETCH,
    PRODUCE,
    SASL_AUTHENTICATE,
    SASL_HANDSHAKE,
    batch,
    create,
    produce,
)

TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID = 2, 3, 4, 5
LITERAL, PREFIXED = 3, 4
READ, WRITE, DESCRIBE = 3, 4, 8
ALLOW = 3
ANY = 1
NOT_YET = ("coordinator_not_available", "coordinator_load_in_progress", "not_coordinator")


def login(user: str, password: str | None = None, as_connection: str | None = None) -> list[Step]:
    secret = USERS.get(user, "") if password is None else password
    connection = as_connection or user
    return [Step(f"{connection}-handshake", SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"}, user=connection),
            Step(f"{connection}-authenticate", SASL_AUTHENTICATE, 2,
                 {"auth_bytes": b"\x00" + user.encode() + b"\x00" + secret.encode()}, user=connection)]


def acl(c: Context, resource_type: int, name: str, operation: int, pattern: int = LITERAL) -> dict[str, Any]:
    return {"resource_type": resource_type, "resource_name": name, "resource_pattern_type": pattern,
            "principal": "User:alice", "host": "*", "operation": operation, "permission_type": ALLOW}


def alice(name: str, api: int, version: int, body: Any) -> Step:
    return Step(name, api, version, body, user="alice")


def fetch(c: Context) -> dict[str, Any]:
    return {"replica_id": -1, "max_wait": 0, "min_bytes": 0, "max_bytes": 1 << 20, "isolation_level": 0,
            "session_id": 0, "session_epoch": -1, "forgotten_topics_data": [], "rack_id": "",
            "topics": [{"topic": c.topic(), "topic_id": c["create"].topics[0].topic_id, "partitions": [
                {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20, "current_leader_epoch": -1,
                 "log_start_offset": -1, "last_fetched_epoch": -1}]}]}


def metadata(c: Context) -> dict[str, Any]:
    return {"topics": [{"name": c.topic()}], "allow_auto_topic_creation": False}


def no_error(answer: Any) -> bool:
    """Metadata's topics all answered without error: the ACLs granted have reached the authorizer."""
    return all(t.get("error_code") == "none" for t in answer.get("topics", []))


def group_of(c: Context) -> str:
    return c.name("group")


def refused_to_alice() -> list[Step]:
    """What alice, with no ACL yet, is refused."""
    return [
        alice("alice-metadata", METADATA, 12, metadata),
        alice("alice-produce", PRODUCE, 9, lambda c: produce(c.topic(), 0, batch([b"no"]))),
        alice("alice-fetch", FETCH, 12, fetch),
        alice("alice-list-offsets", LIST_OFFSETS, 8, lambda c: {"replica_id": -1, "isolation_level": 0, "topics": [
            {"name": c.topic(), "partitions": [{"partition_index": 0, "timestamp": -1}]}]}),
        alice("alice-create-topic", CREATE_TOPICS, 7, lambda c: {"timeout": 30000, "validate_only": False, "topics": [
            {"name": c.topic("alice"), "num_partitions": 1, "replication_factor": 1, "assignments": [],
             "configs": []}]}),
        alice("alice-delete-topic", DELETE_TOPICS, 6, lambda c: {"timeout": 30000, "topics": [
            {"name": c.topic(), "topic_id": None}]}),
        alice("alice-create-partitions", CREATE_PARTITIONS, 3, lambda c: {"timeout": 30000, "validate_only": False,
                                                                          "topics": [{"name": c.topic(), "count": 3,
                                                                                      "assignments": None}]}),
        alice("alice-delete-records", DELETE_RECORDS, 2, lambda c: {"timeout": 30000, "topics": [
            {"name": c.topic(), "partitions": [{"partition_index": 0, "offset": 1}]}]}),
        alice("alice-describe-configs", DESCRIBE_CONFIGS, 4, lambda c: {
            "resources": [{"resource_type": TOPIC, "resource_name": c.topic(), "configuration_keys": None},
                          {"resource_type": 4, "resource_name": "1", "configuration_keys": ["num.partitions"]}],
            "include_synonyms": False, "include_documentation": False}),
        alice("alice-alter-configs", ALTER_CONFIGS, 2, lambda c: {"validate_only": False, "resources": [
            {"resource_type": TOPIC, "resource_name": c.topic(), "configs": [{"name": "retention.ms",
                                                                              "value": "1000"}]}]}),
        alice("alice-init-idempotent", INIT_PRODUCER_ID, 4, {"transactional_id": None, "transaction_timeout": 60000,
                                                            "producer_id": -1, "producer_epoch": -1}),
        alice("alice-init-transactional", INIT_PRODUCER_ID, 4, lambda c: {
            "transactional_id": c.name("txn"), "transaction_timeout": 60000, "producer_id": -1,
            "producer_epoch": -1}),
        alice("alice-add-partitions", ADD_PARTITIONS_TO_TXN, 3, lambda c: {
            "v3_and_below_transactional_id": c.name("txn"), "v3_and_below_producer_id": 1,
            "v3_and_below_producer_epoch": 0, "v3_and_below_topics": [{"name": c.topic(), "partitions": [0]}]}),
        alice("alice-find-group", FIND_COORDINATOR, 4, lambda c: {"key_type": 0, "coordinator_keys": [group_of(c)]}),
        alice("alice-find-transaction", FIND_COORDINATOR, 4, lambda c: {"key_type": 1,
                                                                        "coordinator_keys": [c.name("txn")]}),
        alice("alice-join", JOIN_GROUP, 9, lambda c: {
            "group_id": group_of(c), "session_timeout": 30000, "rebalance_timeout": 30000, "member_id": "",
            "group_instance_id": None, "protocol_type": "consumer", "protocols": [{"name": "range",
                                                                                  "metadata": b"\x00"}],
            "reason": None}),
        alice("alice-offset-commit", OFFSET_COMMIT, 9, lambda c: {
            "group_id": group_of(c), "generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None,
            "topics": [{"name": c.topic(), "partitions": [{"partition_index": 0, "committed_offset": 1,
                                                           "committed_leader_epoch": -1,
                                                           "committed_metadata": ""}]}]}),
        alice("alice-offset-fetch", OFFSET_FETCH, 9, lambda c: {"groups": [
            {"group_id": group_of(c), "member_id": None, "member_epoch": -1,
             "topics": [{"name": c.topic(), "partition_indexes": [0]}]}], "require_stable": False}),
        alice("alice-describe-groups", DESCRIBE_GROUPS, 5, lambda c: {"groups": [group_of(c)],
                                                                      "include_authorized_operations": False}),
        alice("alice-list-groups", LIST_GROUPS, 5, {"states_filter": [], "types_filter": []}),
        alice("alice-delete-groups", DELETE_GROUPS, 2, lambda c: {"groups_names": [group_of(c)]}),
        alice("alice-consumer-group-heartbeat", CONSUMER_GROUP_HEARTBEAT, 1, lambda c: {
            "group_id": group_of(c), "member_id": c.name("member"), "member_epoch": 0, "rebalance_timeout": 30000,
            "subscribed_topic_names": [c.topic()], "topic_partitions": []}),
        alice("alice-describe-producers", DESCRIBE_PRODUCERS, 0, lambda c: {"topics": [
            {"name": c.topic(), "partition_indexes": [0]}]}),
        alice("alice-describe-transactions", DESCRIBE_TRANSACTIONS, 0, lambda c: {
            "transactional_ids": [c.name("txn")]}),
        alice("alice-list-transactions", LIST_TRANSACTIONS, 1, {"state_filters": [], "producer_id_filters": []}),
        alice("alice-describe-cluster", DESCRIBE_CLUSTER, 1, {"include_cluster_authorized_operations": False,
                                                              "endpoint_type": 1}),
        alice("alice-describe-acls", DESCRIBE_ACLS, 3, {
            "resource_type_filter": ANY, "resource_name_filter": None, "pattern_type_filter": ANY,
            "principal_filter": None, "host_filter": None, "operation": ANY, "permission_type": ANY}),
        alice("alice-create-acls", CREATE_ACLS, 3, lambda c: {"creations": [acl(c, TOPIC, c.topic(), READ)]}),
        alice("alice-describe-scram", DESCRIBE_USER_SCRAM_CREDENTIALS, 0, {"users": [{"name": "alice"}]}),
    ]


SCENARIOS = [
    Scenario("sasl", secured=True, steps=[
        Step("api-versions-before-auth", API_VERSIONS, 3, {"client_software_name": "conformance",
                                                           "client_software_version": "1"}, user="x"),
        Step("unknown-mechanism", SASL_HANDSHAKE, 1, {"mechanism": "GSSAPI"}, user="x"),
        Step("after-unknown-mechanism", SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"}, user="x"),
        *login("alice", "wrong-password", as_connection="wrong"),
        Step("after-failed-login", METADATA, 12, {"topics": [], "allow_auto_topic_creation": False}, user="wrong"),
        Step("metadata-before-auth", METADATA, 12, {"topics": [], "allow_auto_topic_creation": False}, user="y"),
        *login("nobody", "x", as_connection="nobody"),
        *login("alice"),
        *[Step(f"authenticate-again@v{v}", SASL_AUTHENTICATE, v, {"auth_bytes": b"\x00alice\x00alice-secret"},
               user="alice") for v in (0, 1)],
        Step("handshake-again", SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"}, user="alice"),
    ]),
    Scenario("acls", secured=True, steps=[
        *login("admin"),
        replace(create("create", 1), user="admin"),
        # The coordinators' topics exist before alice asks anything of them (Kafka creates
        # them on the first FindCoordinator it authorizes).
        Step("admin-find-group", FIND_COORDINATOR, 4, lambda c: {"key_type": 0, "coordinator_keys": [group_of(c)]},
             user="admin", retry=NOT_YET),
        Step("admin-find-transaction", FIND_COORDINATOR, 4, lambda c: {
            "key_type": 1, "coordinator_keys": [c.name("txn")]}, user="admin", retry=NOT_YET),
        Step("admin-init", INIT_PRODUCER_ID, 4, {"transactional_id": None, "transaction_timeout": 60000,
                                                 "producer_id": -1, "producer_epoch": -1}, user="admin",
             retry=NOT_YET),
        *login("alice"),
        *refused_to_alice(),
        Step("grant", CREATE_ACLS, 3, lambda c: {"creations": [
            acl(c, TOPIC, c.topic(), READ), acl(c, TOPIC, c.topic("w"), WRITE, PREFIXED),
            acl(c, GROUP, group_of(c), READ), acl(c, TRANSACTIONAL_ID, c.name("txn"), DESCRIBE)]}, user="admin"),
        *[Step(f"describe-acls@v{v}", DESCRIBE_ACLS, v, lambda c: {
            "resource_type_filter": ANY, "resource_name_filter": None, "pattern_type_filter": ANY,
            "principal_filter": "User:alice", "host_filter": None, "operation": ANY, "permission_type": ANY},
            user="admin", only_mine=True, until=lambda answer: bool(answer.get("resources"))) for v in range(1, 4)],
        replace(alice("alice-metadata-granted", METADATA, 12, metadata), until=no_error),
        alice("alice-metadata-operations", METADATA, 12, lambda c: {
            **metadata(c), "include_topic_authorized_operations": True}),
        alice("alice-describe-cluster-operations", DESCRIBE_CLUSTER, 1, {
            "include_cluster_authorized_operations": True, "endpoint_type": 1}),
        alice("alice-fetch-granted", FETCH, 12, fetch),
        alice("alice-produce-read-only", PRODUCE, 9, lambda c: produce(c.topic(), 0, batch([b"no"]))),
        alice("alice-init-idempotent-with-write", INIT_PRODUCER_ID, 4, {
            "transactional_id": None, "transaction_timeout": 60000, "producer_id": -1, "producer_epoch": -1}),
        alice("alice-describe-transaction", DESCRIBE_TRANSACTIONS, 0, lambda c: {
            "transactional_ids": [c.name("txn")]}),
        alice("alice-init-transactional-describe-only", INIT_PRODUCER_ID, 4, lambda c: {
            "transactional_id": c.name("txn"), "transaction_timeout": 60000, "producer_id": -1,
            "producer_epoch": -1}),
        alice("alice-offset-fetch-granted", OFFSET_FETCH, 9, lambda c: {"groups": [
            {"group_id": group_of(c), "member_id": None, "member_epoch": -1,
             "topics": [{"name": c.topic(), "partition_indexes": [0]}]}], "require_stable": False}),
        *[Step(f"delete-acls@v{v}", DELETE_ACLS, v, lambda c: {"filters": [{
            "resource_type_filter": ANY, "resource_name_filter": None, "pattern_type_filter": ANY,
            "principal_filter": "User:alice", "host_filter": None, "operation": ANY, "permission_type": ANY}]},
            user="admin", only_mine=True) for v in range(1, 4)],
        replace(alice("alice-metadata-revoked", METADATA, 12, metadata), until=lambda answer: not no_error(answer)),
    ]),
]
