"""Authorization, round two (issue 28): the checks Kafka makes that a principal with no
ACLs, or only some, ran into nowhere else - loggers' configs, topic ids, transactions'
topics, broker-to-broker AddPartitionsToTxn, KIP-848 regex subscriptions - and a walk
over every API the broker serves, asking each as a principal that holds no ACL at all.

The broker: SASL_PLAINTEXT with PLAIN users, the StandardAuthorizer, no ACL found means
refused, `admin` the super user."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from ottla.protocol.batch import build_batch, encode_record
from ottla.protocol.errors import ErrorCode
from tests.reference.kafka import ReferenceUnavailable, run_java
from tests.sasl_brokers import PlainUsers
from tests.wire import request

# nobody: no test of this module ever gives it an ACL.
USERS = PlainUsers({"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret", "nobody": "nobody-secret"})
DESCRIBE_CONFIGS, ALTER_CONFIGS, INCREMENTAL_ALTER_CONFIGS = 32, 33, 44
TOPIC, BROKER_LOGGER = 2, 8


@pytest.fixture(scope="module")
def acl_broker(tmp_path_factory):
    yield from USERS.broker(tmp_path_factory.mktemp("authorization") / "data")


def _allow(principal: str, operation: AclOperation, resource: ResourceType, name: str,
           pattern: ResourcePatternType = ResourcePatternType.LITERAL) -> AclBinding:
    return AclBinding(resource, name, pattern, principal, "*", operation, AclPermissionType.ALLOW)


def _create_acls(*bindings: AclBinding, broker) -> None:
    admin = USERS.admin(broker)
    for future in admin.create_acls(list(bindings)).values():
        future.result(10)


def _create_topic(broker, name: str, partitions: int = 1) -> None:
    admin = USERS.admin(broker)
    for future in admin.create_topics([NewTopic(name, partitions, 1)]).values():
        future.result(10)


def _java_config(tmp_path, user: str) -> str:
    path = tmp_path / f"{user}.properties"
    path.write_text(USERS.properties(user))
    return str(path)


def _config_command(broker, tmp_path, user: str, *args: str):  # type: ignore[no-untyped-def]
    try:
        return run_java("kafka.admin.ConfigCommand", ["--bootstrap-server", broker.bootstrap, "--command-config",
                                                      _java_config(tmp_path, user), *args])
    except ReferenceUnavailable as exc:
        pytest.fail(f"Kafka's ConfigCommand is needed: {exc}", pytrace=False)


def test_broker_logger_configs_need_the_cluster_operations(acl_broker, tmp_path):
    """Point 2. bob (no ACL) may neither read nor switch off the broker's loggers, with
    Kafka's own kafka-configs; the super user may. Broken by dropping BROKER_LOGGER from
    _check_allowed's cluster branch: bob's `root=OFF` went through."""
    refused = _config_command(acl_broker, tmp_path, "bob", "--entity-type", "broker-loggers", "--entity-name", "1",
                              "--alter", "--add-config", "root=OFF")
    assert refused.returncode != 0 and "ClusterAuthorizationException" in refused.stdout + refused.stderr, refused
    described = _config_command(acl_broker, tmp_path, "bob", "--entity-type", "broker-loggers", "--entity-name", "1",
                                "--describe")
    assert described.returncode != 0 and "ClusterAuthorizationException" in described.stdout + described.stderr
    with USERS.wire_client(acl_broker, "bob") as bob:
        answer = bob.call(request(DESCRIBE_CONFIGS, 4, include_synonyms=False, include_documentation=False,
                                  resources=[{"resource_type": BROKER_LOGGER, "resource_name": "1",
                                              "configuration_keys": None}]))
        (result,) = answer.results
        assert result.error_code == ErrorCode.cluster_authorization_failed and not result.configs
    allowed = _config_command(acl_broker, tmp_path, "admin", "--entity-type", "broker-loggers", "--entity-name", "1",
                              "--describe")
    assert allowed.returncode == 0 and "root=INFO" in allowed.stdout, allowed
    # Logging is still on: a refusal is still logged.
    assert "root" not in _loggers_off(acl_broker)


def _loggers_off(broker) -> set[str]:
    with USERS.wire_client(broker, "admin") as admin:
        answer = admin.call(request(DESCRIBE_CONFIGS, 4, include_synonyms=False, include_documentation=False,
                                    resources=[{"resource_type": BROKER_LOGGER, "resource_name": "1",
                                                "configuration_keys": None}]))
    return {c.name for c in answer.results[0].configs if c.value == "OFF"}


def test_an_unknown_config_resource_type_is_refused_as_kafka_does(acl_broker, topic_name):
    """Point 2. DescribeConfigs fails every resource of a request naming an unknown type;
    AlterConfigs and IncrementalAlterConfigs refuse that resource, and the deprecated
    AlterConfigs refuses loggers. Broken by letting _KNOWN_TYPES hold 99: the answer
    was CLUSTER/none, not INVALID_REQUEST."""
    _create_topic(acl_broker, topic_name)
    with USERS.wire_client(acl_broker, "admin") as admin:
        answer = admin.call(request(DESCRIBE_CONFIGS, 4, include_synonyms=False, include_documentation=False,
                                    resources=[{"resource_type": TOPIC, "resource_name": topic_name,
                                                "configuration_keys": None},
                                               {"resource_type": 99, "resource_name": "x",
                                                "configuration_keys": None}]))
        assert [r.error_code for r in answer.results] == [ErrorCode.invalid_request] * 2
        answer = admin.call(request(INCREMENTAL_ALTER_CONFIGS, 1, validate_only=True, resources=[
            {"resource_type": 99, "resource_name": "x", "configs": [{"name": "a", "config_operation": 0,
                                                                    "value": "b"}]}]))
        assert answer.responses[0].error_code == ErrorCode.invalid_request
        answer = admin.call(request(ALTER_CONFIGS, 2, validate_only=True, resources=[
            {"resource_type": BROKER_LOGGER, "resource_name": "1", "configs": [{"name": "root", "value": "OFF"}]}]))
        assert answer.responses[0].error_code == ErrorCode.invalid_request
    assert "root" not in _loggers_off(acl_broker)


DELETE_TOPICS, METADATA, ADD_PARTITIONS_TO_TXN, DESCRIBE_TRANSACTIONS = 20, 3, 24, 65


def _topic_id(broker, name: str):  # type: ignore[no-untyped-def]
    with USERS.wire_client(broker, "admin") as admin:
        answer = admin.call(request(METADATA, 12, topics=[{"name": name, "topic_id": None}],
                                    allow_auto_topic_creation=False, include_topic_authorized_operations=False))
    return answer.topics[0].topic_id


def test_delete_topics_by_id_does_not_name_a_topic_the_principal_may_not_describe(acl_broker, topic_name):
    """Point 6 (raw frames: confluent-kafka deletes by name only). Kafka's ControllerApis
    answers TOPIC_AUTHORIZATION_FAILED with a null name to a principal without DESCRIBE,
    and with the name to one that may describe but not delete. Broken by dropping the
    `name = None`: bob was told the topic's name."""
    _create_topic(acl_broker, topic_name)
    topic_id = _topic_id(acl_broker, topic_name)
    _create_acls(_allow("User:alice", AclOperation.DESCRIBE, ResourceType.TOPIC, topic_name), broker=acl_broker)
    for user, name in (("bob", None), ("alice", topic_name)):
        with USERS.wire_client(acl_broker, user) as client:
            answer = client.call(request(DELETE_TOPICS, 6, timeout=10000, topics=[{"name": None,
                                                                                      "topic_id": topic_id}]))
        (result,) = answer.responses
        assert (result.name, result.topic_id, result.error_code) == (
            name, topic_id, ErrorCode.topic_authorization_failed), user
    assert topic_name in USERS.admin(acl_broker).list_topics(timeout=10).topics
    # By name: a missing topic the principal may describe does not exist; one it may
    # not describe is refused, existing or not.
    _create_acls(_allow("User:alice", AclOperation.DESCRIBE, ResourceType.TOPIC, f"{topic_name}-gone"),
                 broker=acl_broker)
    with USERS.wire_client(acl_broker, "alice") as alice:
        answer = alice.call(request(DELETE_TOPICS, 6, timeout=10000, topics=[
            {"name": f"{topic_name}-gone", "topic_id": uuid.UUID(int=0)},
            {"name": f"{topic_name}-unseen", "topic_id": uuid.UUID(int=0)}]))
    assert [r.error_code for r in answer.responses] == [ErrorCode.unknown_topic_or_partition,
                                                        ErrorCode.topic_authorization_failed]


def test_describe_transactions_lists_only_the_topics_the_principal_may_describe(acl_broker, topic_name, tmp_path):
    """Point 7, with Kafka's kafka-transactions tool. bob may describe the transactional
    id but not the topic: the transaction is shown without it. Broken by removing the
    DESCRIBE filter in handle_describe_transactions: bob saw the topic."""
    _create_topic(acl_broker, topic_name)
    txn_id = "txn-" + topic_name[::-1]  # not containing the topic name
    producer = Producer({**USERS.client_config(acl_broker, "admin"), "transactional.id": txn_id})
    producer.init_transactions(10)
    producer.begin_transaction()
    producer.produce(topic_name, b"open")
    producer.flush(10)
    _create_acls(_allow("User:bob", AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, txn_id),
                 broker=acl_broker)
    try:
        def described(user: str) -> str:
            out = run_java("org.apache.kafka.tools.TransactionsCommand",
                           ["--bootstrap-server", acl_broker.bootstrap, "--command-config",
                            _java_config(tmp_path, user), "describe", "--transactional-id", txn_id])
            assert out.returncode == 0, out
            return out.stdout

        seen_by_admin = described("admin")
        assert "Ongoing" in seen_by_admin and f"{topic_name}-0" in seen_by_admin
        seen_by_bob = described("bob")
        assert "Ongoing" in seen_by_bob and topic_name not in seen_by_bob
        _create_acls(_allow("User:bob", AclOperation.DESCRIBE, ResourceType.TOPIC, topic_name), broker=acl_broker)
        assert f"{topic_name}-0" in described("bob")
    finally:
        producer.abort_transaction(10)


def test_broker_to_broker_add_partitions_to_txn_needs_cluster_action(acl_broker, topic_name):
    """Point 8 (raw frames: only brokers send v4 and v5). Kafka answers a principal
    without CLUSTER_ACTION with a top-level CLUSTER_AUTHORIZATION_FAILED. Broken by
    removing the check: bob's verification was answered per partition."""
    _create_topic(acl_broker, topic_name)
    _create_acls(_allow("User:bob", AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, "bob-txn"),
                 _allow("User:bob", AclOperation.WRITE, ResourceType.TOPIC, topic_name), broker=acl_broker)
    for version in (4, 5):
        body = request(ADD_PARTITIONS_TO_TXN, version, transactions=[{
            "transactional_id": "bob-txn", "producer_id": 1, "producer_epoch": 0, "verify_only": True,
            "topics": [{"name": topic_name, "partitions": [0]}]}])
        with USERS.wire_client(acl_broker, "bob") as bob:
            refused = bob.call(body)
        assert refused.error_code == ErrorCode.cluster_authorization_failed and not refused.results_by_transaction
        with USERS.wire_client(acl_broker, "admin") as admin:
            served = admin.call(body)
        assert served.error_code == ErrorCode.none and len(served.results_by_transaction) == 1


def test_add_partitions_to_txn_refuses_the_topics_a_producer_may_not_write_and_adds_none(acl_broker, topic_name):
    """bob may write his transactional id and one of two topics: as Kafka, the other
    topic's partitions are TOPIC_AUTHORIZATION_FAILED, the allowed one's
    OPERATION_NOT_ATTEMPTED (nothing is added). Seen failing with WRITE on a topic
    taken as allowed (every partition answered INVALID_PRODUCER_ID_MAPPING, bob having no producer)."""
    denied = f"{topic_name}-denied"
    _create_topic(acl_broker, topic_name)
    _create_topic(acl_broker, denied, partitions=2)
    _create_acls(_allow("User:bob", AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, "bob-txn-2"),
                 _allow("User:bob", AclOperation.WRITE, ResourceType.TOPIC, topic_name), broker=acl_broker)
    with USERS.wire_client(acl_broker, "bob") as bob:
        answer = bob.call(request(ADD_PARTITIONS_TO_TXN, 3, v3_and_below_transactional_id="bob-txn-2",
                                  v3_and_below_producer_id=1, v3_and_below_producer_epoch=0, v3_and_below_topics=[
                                      {"name": topic_name, "partitions": [0]}, {"name": denied, "partitions": [0, 1]}]))
    codes = {(t.name, p.partition_index): p.partition_error_code
             for t in answer.results_by_topic_v3_and_below for p in t.results_by_partition}
    refused = ErrorCode.topic_authorization_failed
    assert codes == {(topic_name, 0): ErrorCode.operation_not_attempted, (denied, 0): refused, (denied, 1): refused}


CONSUMER_GROUP_DESCRIBE = 69


def _describe_consumer_group(broker, user: str, group: str):  # type: ignore[no-untyped-def]
    with USERS.wire_client(broker, user) as client:
        answer = client.call(request(CONSUMER_GROUP_DESCRIBE, 0, group_ids=[group],
                                     include_authorized_operations=False))
    return answer.groups[0]


def test_a_kip848_regex_matches_only_topics_the_member_may_describe(acl_broker, topic_name):
    """Point 5. alice may read her group and one of two topics her regex matches:
    librdkafka's KIP-848 consumer is assigned only that one; ConsumerGroupDescribe
    names it to her, and answers TOPIC_AUTHORIZATION_FAILED to bob, who may describe the
    group but not the topic, as Kafka does. Broken by dropping the regex filter in
    ConsumerProtocol.subscriptions: alice was assigned the other topic too; and by
    dropping the topic check in ConsumerGroupDescribe: bob saw the group."""
    import time

    from confluent_kafka import Consumer

    mine, other, group = f"{topic_name}-mine", f"{topic_name}-other", f"alice-{topic_name}"
    _create_topic(acl_broker, mine, 2)
    _create_topic(acl_broker, other, 2)
    _create_acls(_allow("User:alice", AclOperation.READ, ResourceType.GROUP, group),
                 _allow("User:alice", AclOperation.READ, ResourceType.TOPIC, mine),
                 _allow("User:bob", AclOperation.DESCRIBE, ResourceType.GROUP, group), broker=acl_broker)
    consumer = Consumer({**USERS.client_config(acl_broker, "alice"), "group.id": group, "group.protocol": "consumer",
                         "auto.offset.reset": "earliest"})
    consumer.subscribe([f"^{topic_name}-.*"])
    try:
        deadline = time.monotonic() + 30
        assigned: set[str] = set()
        while time.monotonic() < deadline and len(assigned) < 2:
            consumer.poll(0.2)
            assigned = {f"{tp.topic}-{tp.partition}" for tp in consumer.assignment()}
        # Give a wrong assignment of the other topic time to show up.
        for _ in range(10):
            consumer.poll(0.2)
        assert {tp.topic for tp in consumer.assignment()} == {mine}
        seen = _described_topics(_describe_consumer_group(acl_broker, "alice", group))
        assert seen == {mine}
        refused = _describe_consumer_group(acl_broker, "bob", group)
        assert refused.error_code == ErrorCode.topic_authorization_failed and not refused.members
    finally:
        consumer.close()


def _described_topics(group) -> set[str]:  # type: ignore[no-untyped-def]
    assert group.error_code == ErrorCode.none, group
    return {tp.topic_name for m in group.members for tp in m.assignment.topic_partitions}


# --- every API, asked by a principal with no ACL -----------------------------------------

E = ErrorCode
WALK_TOPIC, WALK_GROUP, WALK_TXN = "walk-topic", "walk-group", "walk-txn"


def _codes(value) -> list[ErrorCode]:  # type: ignore[no-untyped-def]
    """Every error_code-like field anywhere in a response, depth first."""
    from dataclasses import fields, is_dataclass

    found: list[ErrorCode] = []
    if isinstance(value, tuple):
        for item in value:
            found += _codes(item)
    elif is_dataclass(value):
        for f in fields(value):
            item = getattr(value, f.name)
            if f.name.endswith("error_code") and isinstance(item, ErrorCode):
                found.append(item)
            else:
                found += _codes(item)
    return found


def _only(code: ErrorCode):  # type: ignore[no-untyped-def]
    """Every error in the response is `code`, and there is at least one (a top-level
    error_code may be NONE where Kafka answers per partition, as in Fetch)."""
    def check(response) -> None:  # type: ignore[no-untyped-def]
        codes = _codes(response)
        if getattr(response, "error_code", None) == E.none and len(codes) > 1:
            codes.remove(E.none)
        assert codes and set(codes) == {code}, (code, codes, response)
    check.__name__ = f"only {code.name}"
    return check


def _none_and_empty(field: str):  # type: ignore[no-untyped-def]
    """Served, with nothing the principal may not see: no error, `field` empty."""
    def check(response) -> None:  # type: ignore[no-untyped-def]
        assert set(_codes(response)) <= {E.none} and not getattr(response, field), response
    return check


def _served(response) -> None:  # type: ignore[no-untyped-def]
    assert set(_codes(response)) <= {E.none}, response


def _walk_requests(batch: bytes) -> dict[int, Any]:
    """api key -> (version, request fields, Kafka's answer to a principal without ACLs),
    or a list of them where versions differ."""
    partition = [{"partition_index": 0}]
    t, g, x = WALK_TOPIC, WALK_GROUP, WALK_TXN
    return {
        0: (9, {"acks": -1, "timeout": 5000, "topic_data": [
            {"name": t, "partition_data": [{"index": 0, "records": batch}]}]}, _only(E.topic_authorization_failed)),
        1: (12, {"max_wait": 0, "min_bytes": 1, "max_bytes": 1000, "topics": [{"topic": t, "partitions": [
            {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1000}]}]}, _only(E.topic_authorization_failed)),
        2: (7, {"replica_id": -1, "topics": [{"name": t, "partitions": [{"partition_index": 0, "timestamp": -1}]}]},
            _only(E.topic_authorization_failed)),
        3: (12, {"topics": [{"name": t, "topic_id": None}], "allow_auto_topic_creation": False},
            _only(E.topic_authorization_failed)),
        8: (8, {"group_id": g, "generation_id_or_member_epoch": -1, "member_id": "", "topics": [
            {"name": t, "partitions": [{"partition_index": 0, "committed_offset": 1}]}]},
            _only(E.group_authorization_failed)),
        9: (8, {"groups": [{"group_id": g, "topics": None}]}, _only(E.group_authorization_failed)),
        10: (4, {"key_type": 0, "coordinator_keys": [g]}, _only(E.group_authorization_failed)),
        11: (5, {"group_id": g, "session_timeout": 10000, "rebalance_timeout": 10000, "member_id": "",
                 "protocol_type": "consumer", "protocols": [{"name": "range", "metadata": b""}]},
             _only(E.group_authorization_failed)),
        12: (4, {"group_id": g, "generation_id": 1, "member_id": "m"}, _only(E.group_authorization_failed)),
        13: (3, {"group_id": g, "members": [{"member_id": "m"}]}, _only(E.group_authorization_failed)),
        14: (5, {"group_id": g, "generation_id": 1, "member_id": "m", "assignments": []},
             _only(E.group_authorization_failed)),
        15: (5, {"groups": [g]}, _only(E.group_authorization_failed)),
        16: (4, {"states_filter": []}, _none_and_empty("groups")),
        # Authenticated, with no session expiry (connections.max.reauth.ms 0): no
        # re-authentication, so Kafka's KafkaApis answers the handshake ILLEGAL_SASL_STATE.
        17: (1, {"mechanism": "PLAIN"}, _only(E.illegal_sasl_state)),
        18: (3, {"client_software_name": "walk", "client_software_version": "1"}, _served),
        19: (5, {"topics": [{"name": f"{t}-new", "num_partitions": 1, "replication_factor": 1}], "timeout": 5000},
             _only(E.topic_authorization_failed)),
        20: (5, {"topic_names": [t], "timeout": 5000}, _only(E.topic_authorization_failed)),
        21: (2, {"topics": [{"name": t, "partitions": [{"partition_index": 0, "offset": 0}]}], "timeout": 5000},
             _only(E.topic_authorization_failed)),
        22: (4, {"transactional_id": x, "transaction_timeout": 60000, "producer_id": -1, "producer_epoch": -1},
             _only(E.transactional_id_authorization_failed)),
        23: (4, {"replica_id": -1, "topics": [{"topic": t, "partitions": [
            {"partition": 0, "current_leader_epoch": -1, "leader_epoch": 0}]}]}, _only(E.topic_authorization_failed)),
        24: [(3, {"v3_and_below_transactional_id": x, "v3_and_below_producer_id": 1,
                  "v3_and_below_producer_epoch": 0, "v3_and_below_topics": [{"name": t, "partitions": [0]}]},
              _only(E.transactional_id_authorization_failed)),
             # v4+: brokers' verification requests, CLUSTER_ACTION first.
             (4, {"transactions": [{"transactional_id": x, "producer_id": 1, "producer_epoch": 0,
                                    "verify_only": True, "topics": [{"name": t, "partitions": [0]}]}]},
              _only(E.cluster_authorization_failed))],
        25: (3, {"transactional_id": x, "producer_id": 1, "producer_epoch": 0, "group_id": g},
             _only(E.transactional_id_authorization_failed)),
        26: (3, {"transactional_id": x, "producer_id": 1, "producer_epoch": 0, "committed": True},
             _only(E.transactional_id_authorization_failed)),
        27: (1, {"markers": [{"producer_id": 1, "producer_epoch": 0, "transaction_result": True,
                              "coordinator_epoch": 0, "topics": [{"name": t, "partition_indexes": [0]}]}]},
             _only(E.cluster_authorization_failed)),
        28: (3, {"transactional_id": x, "group_id": g, "producer_id": 1, "producer_epoch": 0, "topics": [
            {"name": t, "partitions": [{"partition_index": 0, "committed_offset": 1}]}]},
            _only(E.transactional_id_authorization_failed)),
        29: (3, {"resource_type_filter": 1, "resource_name_filter": None, "pattern_type_filter": 1,
                 "principal_filter": None, "host_filter": None, "operation": 1, "permission_type": 1},
             _only(E.cluster_authorization_failed)),
        30: (3, {"creations": [{"resource_type": 2, "resource_name": t, "resource_pattern_type": 3,
                                "principal": "User:nobody", "host": "*", "operation": 2, "permission_type": 3}]},
             _only(E.cluster_authorization_failed)),
        31: (3, {"filters": [{"resource_type_filter": 1, "resource_name_filter": None, "pattern_type_filter": 1,
                              "principal_filter": None, "host_filter": None, "operation": 1,
                              "permission_type": 1}]}, _only(E.cluster_authorization_failed)),
        32: (4, {"resources": [{"resource_type": TOPIC, "resource_name": t, "configuration_keys": None}]},
             _only(E.topic_authorization_failed)),
        33: (2, {"resources": [{"resource_type": TOPIC, "resource_name": t, "configs": [
            {"name": "retention.ms", "value": "1000"}]}], "validate_only": True}, _only(E.topic_authorization_failed)),
        35: (4, {"topics": None}, _only(E.cluster_authorization_failed)),
        # After authentication, a SaslAuthenticate that no handshake started.
        36: (2, {"auth_bytes": b"\0nobody\0nobody-secret"}, _only(E.illegal_sasl_state)),
        37: (3, {"topics": [{"name": t, "count": 3, "assignments": None}], "timeout": 5000, "validate_only": True},
             _only(E.topic_authorization_failed)),
        42: (2, {"groups_names": [g]}, _only(E.group_authorization_failed)),
        43: (2, {"election_type": 0, "topic_partitions": None, "timeout": 5000}, _only(E.cluster_authorization_failed)),
        44: (1, {"resources": [{"resource_type": TOPIC, "resource_name": t, "configs": [
            {"name": "retention.ms", "config_operation": 0, "value": "1000"}]}], "validate_only": True},
            _only(E.topic_authorization_failed)),
        45: (0, {"timeout": 5000, "topics": [{"name": t, "partitions": [{"partition_index": 0, "replicas": [1]}]}]},
             _only(E.cluster_authorization_failed)),
        46: (0, {"timeout": 5000, "topics": None}, _only(E.cluster_authorization_failed)),
        47: (0, {"group_id": g, "topics": [{"name": t, "partitions": partition}]}, _only(E.group_authorization_failed)),
        48: (1, {"components": [], "strict": False}, _only(E.cluster_authorization_failed)),
        49: (1, {"entries": [{"entity": [{"entity_type": "client-id", "entity_name": "c"}], "ops": [
            {"key": "producer_byte_rate", "value": 1024.0, "remove": False}]}], "validate_only": True},
            _only(E.cluster_authorization_failed)),
        50: (0, {"users": None}, _only(E.cluster_authorization_failed)),
        51: (0, {"deletions": [{"name": "carol", "mechanism": 1}], "upsertions": []},
             _only(E.cluster_authorization_failed)),
        60: (1, {"include_cluster_authorized_operations": False, "endpoint_type": 1}, _served),
        61: (0, {"topics": [{"name": t, "partition_indexes": [0]}]}, _only(E.topic_authorization_failed)),
        65: (0, {"transactional_ids": [x]}, _only(E.transactional_id_authorization_failed)),
        66: (1, {"state_filters": [], "producer_id_filters": [], "duration_filter": -1},
             _none_and_empty("transaction_states")),
        68: (0, {"group_id": g, "member_id": "", "member_epoch": 0, "rebalance_timeout": 30000,
                 "subscribed_topic_names": [t], "server_assignor": None, "topic_partitions": []},
             _only(E.group_authorization_failed)),
        69: (0, {"group_ids": [g], "include_authorized_operations": False}, _only(E.group_authorization_failed)),
        75: (0, {"topics": [{"name": t}], "response_partition_limit": 100, "cursor": None},
             _only(E.topic_authorization_failed)),
        # Share groups: READ on the group first (DESCRIBE to describe, DELETE to delete offsets).
        76: (1, {"group_id": g, "member_id": "m", "member_epoch": 0, "subscribed_topic_names": [t]},
             _only(E.group_authorization_failed)),
        77: (1, {"group_ids": [g], "include_authorized_operations": False}, _only(E.group_authorization_failed)),
        78: (1, {"group_id": g, "member_id": "m", "share_session_epoch": 0, "max_wait": 0, "min_bytes": 1,
                 "max_records": 10, "batch_size": 10, "topics": [], "forgotten_topics_data": []},
             _only(E.group_authorization_failed)),
        79: (1, {"group_id": g, "member_id": "m", "share_session_epoch": 1, "topics": []},
             _only(E.group_authorization_failed)),
        90: (1, {"groups": [{"group_id": g, "topics": None}]}, _only(E.group_authorization_failed)),
        91: (0, {"group_id": g, "topics": [{"topic_name": t, "partitions": [{"partition_index": 0,
                                                                            "start_offset": 0}]}]},
             _only(E.group_authorization_failed)),
        92: (0, {"group_id": g, "topics": [{"topic_name": t}]}, _only(E.group_authorization_failed)),
        88: (0, {"group_id": g, "member_id": "m", "member_epoch": 0, "endpoint_information_epoch": 0,
                 "rebalance_timeout": 30000, "topology": {"epoch": 1, "subtopologies": [{
                     "subtopology_id": "0", "source_topics": [t], "source_topic_regex": [],
                     "state_changelog_topics": [], "repartition_sink_topics": [], "repartition_source_topics": [],
                     "copartition_groups": []}]},
                 "active_tasks": [], "standby_tasks": [], "warmup_tasks": [], "process_id": "p",
                 "client_tags": None, "task_offsets": None, "task_end_offsets": None},
             _only(E.group_authorization_failed)),
        89: (0, {"group_ids": [g], "include_authorized_operations": False}, _only(E.group_authorization_failed)),
    }


def test_every_api_answers_a_principal_without_acls_as_kafka_does(acl_broker):
    """The broker's own ApiVersions says which APIs it serves; each one must be in the
    table above, with a request and Kafka's answer to a principal holding no ACL on
    anything (allow.everyone.if.no.acl.found is false). A new API cannot ship without
    saying how it is authorized. Broken by deleting the check of DescribeLogDirs (and,
    before it was fixed, of AddPartitionsToTxn v4): this test failed on that key."""
    import time

    admin = USERS.admin(acl_broker)
    if WALK_TOPIC not in admin.list_topics(timeout=10).topics:
        _create_topic(acl_broker, WALK_TOPIC)
    batch = build_batch([encode_record(b"k", b"v", offset_delta=0)], timestamp=int(time.time() * 1000))
    table = _walk_requests(batch)
    with USERS.wire_client(acl_broker, "nobody") as nobody:
        served = nobody.call(request(18, 3, client_software_name="walk", client_software_version="1")).api_keys
    missing = sorted(api.api_key for api in served if api.api_key not in table)
    assert not missing, f"APIs served with no authorization expectation in this test: {missing}"
    failures = []
    for api in served:
        cases = table[api.api_key]
        for version, values, check in cases if isinstance(cases, list) else [cases]:
            assert api.min_version <= version <= api.max_version, (api.api_key, version)
            with USERS.wire_client(acl_broker, "nobody") as nobody:
                try:
                    check(nobody.call(request(api.api_key, version, **values)))
                except AssertionError as exc:
                    failures.append(f"api {api.api_key} v{version}: {exc}")
    assert not failures, "\n".join(failures)
    # Nothing nobody asked for happened.
    assert f"{WALK_TOPIC}-new" not in admin.list_topics(timeout=10).topics


def test_a_share_consumer_needs_read_on_its_group_and_its_topics(acl_broker, topic_name):
    """As Kafka checks them: ShareGroupHeartbeat READ on the group and DESCRIBE on the
    subscribed topics, ShareFetch READ on the group and, per partition, READ on the
    topic. Broken once by not checking the topic in ShareFetch (bob read the records)."""
    group = f"share-{topic_name}"
    _create_topic(acl_broker, topic_name)
    _create_acls(_allow("User:bob", AclOperation.READ, ResourceType.GROUP, group),
                 _allow("User:bob", AclOperation.DESCRIBE, ResourceType.TOPIC, topic_name), broker=acl_broker)
    member = str(uuid.uuid4())
    with USERS.wire_client(acl_broker, "bob") as bob:
        def heartbeat(epoch: int, names: list[str] | None):  # type: ignore[no-untyped-def]
            return bob.call(request(76, 1, group_id=group, member_id=member, member_epoch=epoch,
                                    subscribed_topic_names=names))

        assert heartbeat(0, [topic_name, f"{topic_name}-other"]).error_code == E.topic_authorization_failed
        joined = heartbeat(0, [topic_name])
        assert joined.error_code == E.none and [t.partitions for t in joined.assignment.topic_partitions] == [(0,)]
        topic_id = joined.assignment.topic_partitions[0].topic_id
        producer = Producer(USERS.client_config(acl_broker, "admin"))
        producer.produce(topic_name, value=b"secret")
        producer.flush(10)

        def fetch(epoch: int):  # type: ignore[no-untyped-def]
            return bob.call(request(78, 2, group_id=group, member_id=member, share_session_epoch=epoch,
                                    max_wait=0, min_bytes=1, max_bytes=1 << 20, max_records=10, batch_size=10,
                                    topics=[{"topic_id": topic_id, "partitions": [
                                        {"partition_index": 0, "acknowledgement_batches": []}]}],
                                    forgotten_topics_data=[]))

        refused = fetch(0).responses[0].partitions[0]
        assert refused.error_code == E.topic_authorization_failed and not refused.records
        _create_acls(_allow("User:bob", AclOperation.READ, ResourceType.TOPIC, topic_name), broker=acl_broker)
        got = fetch(0).responses[0].partitions[0]
        assert got.error_code == E.none and [(a.first_offset, a.delivery_count) for a in got.acquired_records] == [
            (0, 1)]
