"""Authorization, round two (issue 28): the checks Kafka makes that a principal with no
ACLs, or only some, ran into nowhere else - loggers' configs, topic ids, transactions'
topics, broker-to-broker AddPartitionsToTxn, KIP-848 regex subscriptions - and a walk
over every API the broker serves, asking each as a principal that holds no ACL at all.

The broker: SASL_PLAINTEXT with PLAIN users, the StandardAuthorizer, no ACL found means
refused, `admin` the super user."""

from __future__ import annotations

import pytest
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
