"""Authorization, round two (issue 28): the checks Kafka makes that a principal with no
ACLs, or only some, ran into nowhere else - loggers' configs, topic ids, transactions'
topics, broker-to-broker AddPartitionsToTxn, KIP-848 regex subscriptions - and a walk
over every API the broker serves, asking each as a principal that holds no ACL at all.

The broker: SASL_PLAINTEXT with PLAIN users, the StandardAuthorizer, no ACL found means
refused, `admin` the super user."""

from __future__ import annotations

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import (AclBinding, AclOperation, AclPermissionType, AdminClient, NewTopic,
                                   ResourcePatternType, ResourceType)

from ottla.broker.testing import BrokerProcess
from ottla.protocol.errors import ErrorCode
from tests.reference.kafka import ReferenceUnavailable, run_java
from tests.wire import WireClient, request

USERS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}
SASL_HANDSHAKE, SASL_AUTHENTICATE = 17, 36
DESCRIBE_CONFIGS, ALTER_CONFIGS, INCREMENTAL_ALTER_CONFIGS = 32, 33, 44
TOPIC, BROKER_LOGGER = 2, 8


@pytest.fixture(scope="module")
def acl_broker(tmp_path_factory):
    jaas = ("org.apache.kafka.common.security.plain.PlainLoginModule required "
            + " ".join(f'user_{name}="{password}"' for name, password in USERS.items()) + ";")
    broker = BrokerProcess(str(tmp_path_factory.mktemp("authorization") / "data"), {
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": jaas,
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:admin",
    }).start()
    yield broker
    broker.cleanup()


def _conf(broker, user: str) -> dict[str, object]:
    return {"bootstrap.servers": broker.bootstrap, "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
            "sasl.username": user, "sasl.password": USERS[user]}


def _admin(broker, user: str = "admin") -> AdminClient:
    return AdminClient(_conf(broker, user))


def _allow(principal: str, operation: AclOperation, resource: ResourceType, name: str,
           pattern: ResourcePatternType = ResourcePatternType.LITERAL) -> AclBinding:
    return AclBinding(resource, name, pattern, principal, "*", operation, AclPermissionType.ALLOW)


def _create_acls(*bindings: AclBinding, broker) -> None:
    admin = _admin(broker)
    for future in admin.create_acls(list(bindings)).values():
        future.result(10)


def _create_topic(broker, name: str, partitions: int = 1) -> None:
    admin = _admin(broker)
    for future in admin.create_topics([NewTopic(name, partitions, 1)]).values():
        future.result(10)


def _authenticated(broker, user: str) -> WireClient:
    client = WireClient(broker.bootstrap)
    assert client.call(request(SASL_HANDSHAKE, 1, mechanism="PLAIN")).error_code == ErrorCode.none
    answer = client.call(request(SASL_AUTHENTICATE, 2, auth_bytes=f"\0{user}\0{USERS[user]}".encode()))
    assert answer.error_code == ErrorCode.none
    return client


def _java_config(tmp_path, user: str) -> str:
    path = tmp_path / f"{user}.properties"
    path.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.jaas.config="
                    "org.apache.kafka.common.security.plain.PlainLoginModule required "
                    f'username="{user}" password="{USERS[user]}";\n')
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
    with _authenticated(acl_broker, "bob") as bob:
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
    with _authenticated(broker, "admin") as admin:
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
    with _authenticated(acl_broker, "admin") as admin:
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
    with _authenticated(broker, "admin") as admin:
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
        with _authenticated(acl_broker, user) as client:
            answer = client.call(request(DELETE_TOPICS, 6, timeout=10000, topics=[{"name": None,
                                                                                      "topic_id": topic_id}]))
        (result,) = answer.responses
        assert (result.name, result.topic_id, result.error_code) == (
            name, topic_id, ErrorCode.topic_authorization_failed), user
    assert topic_name in _admin(acl_broker).list_topics(timeout=10).topics


def test_describe_transactions_lists_only_the_topics_the_principal_may_describe(acl_broker, topic_name, tmp_path):
    """Point 7, with Kafka's kafka-transactions tool. bob may describe the transactional
    id but not the topic: the transaction is shown without it. Broken by removing the
    DESCRIBE filter in handle_describe_transactions: bob saw the topic."""
    _create_topic(acl_broker, topic_name)
    txn_id = "txn-" + topic_name[::-1]  # not containing the topic name
    producer = Producer({**_conf(acl_broker, "admin"), "transactional.id": txn_id})
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
        with _authenticated(acl_broker, "bob") as bob:
            refused = bob.call(body)
        assert refused.error_code == ErrorCode.cluster_authorization_failed and not refused.results_by_transaction
        with _authenticated(acl_broker, "admin") as admin:
            served = admin.call(body)
        assert served.error_code == ErrorCode.none and len(served.results_by_transaction) == 1


CONSUMER_GROUP_DESCRIBE = 69


def _describe_consumer_group(broker, user: str, group: str):  # type: ignore[no-untyped-def]
    with _authenticated(broker, user) as client:
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
    consumer = Consumer({**_conf(acl_broker, "alice"), "group.id": group, "group.protocol": "consumer",
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
