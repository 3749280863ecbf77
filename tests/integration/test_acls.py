"""ACLs with the StandardAuthorizer's semantics, over SASL/PLAIN principals (issue 13):
what each principal may do, DENY over ALLOW, prefixed patterns, super users, refusals
with Kafka's error codes and the data untouched, CreateAcls/DescribeAcls/DeleteAcls
through the admin client, and ACLs that survive a restart."""

from __future__ import annotations

import subprocess
import sys

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)
from kafka.admin import (
    ACLFilter,
    ACLOperation,
    ACLPermissionType,
    ACLResourcePatternType,
    KafkaAdminClient,
    ResourcePatternFilter,
)
from kafka.admin import ResourceType as KafkaResourceType
from kafka.errors import SecurityDisabledError

from ottla.protocol.errors import ErrorCode
from tests.clients import poll_to_partition_ends
from tests.restarts import RESTARTS, restart
from tests.sasl_brokers import PlainUsers
from tests.wire import request

USERS = PlainUsers({"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"})
WRITE_TXN_MARKERS = 27


@pytest.fixture(scope="module")
def acl_broker(tmp_path_factory):
    yield from USERS.broker(tmp_path_factory.mktemp("acls") / "data")


def _allow(principal: str, operation: AclOperation, resource: ResourceType, name: str,
           pattern: ResourcePatternType = ResourcePatternType.LITERAL,
           permission: AclPermissionType = AclPermissionType.ALLOW) -> AclBinding:
    return AclBinding(resource, name, pattern, principal, "*", operation, permission)


def _create(admin: AdminClient, *bindings: AclBinding) -> None:
    for future in admin.create_acls(list(bindings)).values():
        future.result(10)


def _produce(broker, user: str, topic: str, values: list[bytes]) -> list[KafkaError | None]:
    outcomes: list[KafkaError | None] = []
    producer = Producer({**USERS.client_config(broker, user), "message.timeout.ms": 5000})
    for value in values:
        producer.produce(topic, value, on_delivery=lambda error, message: outcomes.append(error))
    producer.flush(15)
    return outcomes


def _read(broker, user: str, topic: str, group: str) -> list[bytes]:
    """Everything `user` reads of `topic` in `group`, up to the end of its partitions."""
    consumer = Consumer({**USERS.client_config(broker, user), "group.id": group, "auto.offset.reset": "earliest",
                         "enable.partition.eof": True})
    consumer.subscribe([topic])
    try:
        return poll_to_partition_ends(consumer, topic, 20)
    finally:
        consumer.close()


def test_each_principal_gets_what_its_acls_allow(acl_broker, topic_name):
    admin = USERS.admin(acl_broker)
    for future in admin.create_topics([NewTopic(topic_name, 1, 1)]).values():
        future.result(10)
    _create(admin,
            _allow("User:alice", AclOperation.WRITE, ResourceType.TOPIC, topic_name),
            _allow("User:alice", AclOperation.READ, ResourceType.TOPIC, topic_name[:4], ResourcePatternType.PREFIXED),
            _allow("User:alice", AclOperation.READ, ResourceType.GROUP, "alice-", ResourcePatternType.PREFIXED))
    assert _produce(acl_broker, "alice", topic_name, [b"a1", b"a2"]) == [None, None]
    # bob has no ACL on the topic: refused, and nothing of his is stored.
    (error,) = _produce(acl_broker, "bob", topic_name, [b"b1"])
    assert error is not None and error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    # The topic does not even show in bob's metadata.
    assert topic_name not in USERS.admin(acl_broker, "bob").list_topics(timeout=10).topics
    assert topic_name in USERS.admin(acl_broker, "alice").list_topics(timeout=10).topics
    # READ implies DESCRIBE; alice reads in a group her prefix allows.
    assert _read(acl_broker, "alice", topic_name, "alice-group") == [b"a1", b"a2"]
    with pytest.raises(KafkaException) as refused:
        _read(acl_broker, "alice", topic_name, "other-group")
    assert refused.value.args[0].code() == KafkaError.GROUP_AUTHORIZATION_FAILED
    # DENY wins over ALLOW.
    _create(admin, _allow("User:alice", AclOperation.WRITE, ResourceType.TOPIC, topic_name,
                          permission=AclPermissionType.DENY))
    (error,) = _produce(acl_broker, "alice", topic_name, [b"a3"])
    assert error is not None and error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    # The super user reads everything there is: only what was allowed.
    assert _read(acl_broker, "admin", topic_name, "admin-group") == [b"a1", b"a2"]


def test_transactions_need_write_on_the_transactional_id(acl_broker, topic_name):
    admin = USERS.admin(acl_broker)
    for future in admin.create_topics([NewTopic(topic_name, 1, 1)]).values():
        future.result(10)
    _create(admin, _allow("User:bob", AclOperation.WRITE, ResourceType.TOPIC, topic_name))
    producer = Producer({**USERS.client_config(acl_broker, "bob"), "transactional.id": f"bob-{topic_name}"})
    with pytest.raises(KafkaException) as refused:
        producer.init_transactions(10)
    assert refused.value.args[0].code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    _create(admin, _allow("User:bob", AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, "bob-",
                          ResourcePatternType.PREFIXED))
    producer = Producer({**USERS.client_config(acl_broker, "bob"), "transactional.id": f"bob-{topic_name}"})
    producer.init_transactions(10)
    producer.begin_transaction()
    producer.produce(topic_name, b"in a transaction")
    producer.commit_transaction(10)


def test_only_the_cluster_action_may_write_transaction_markers(acl_broker, topic_name):
    with USERS.wire_client(acl_broker, "alice") as client:
        answer = client.call(request(WRITE_TXN_MARKERS, 1, markers=[{
            "producer_id": 1, "producer_epoch": 0, "transaction_result": True, "coordinator_epoch": 0,
            "topics": [{"name": topic_name, "partition_indexes": [0]}]}]))
    (marker,) = answer.markers
    assert marker.topics[0].partitions[0].error_code == ErrorCode.cluster_authorization_failed


@pytest.mark.parametrize("how", RESTARTS)
def test_acls_are_listed_deleted_and_survive_a_restart(acl_broker, topic_name, how):
    """Checked by breaking it: with Authorizer.add no longer saving and the broker's
    clean shutdown saving the ACLs instead (a two-line break), the SIGTERM variant
    passes and the SIGKILL one fails: the ACLs must be on disk when the answer leaves."""
    admin = USERS.admin(acl_broker)
    _create(admin, _allow("User:carol", AclOperation.DESCRIBE, ResourceType.GROUP, topic_name))
    everything = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
                                  AclPermissionType.ANY)
    before = admin.describe_acls(everything).result(10)
    assert any(b.name == topic_name and b.principal == "User:carol" for b in before)
    # A principal without ALTER on the cluster may not change ACLs.
    with pytest.raises(KafkaException) as refused:
        _create(USERS.admin(acl_broker, "bob"), _allow("User:bob", AclOperation.ALL, ResourceType.BROKER,
                                                  "kafka-cluster"))
    assert refused.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    restart(acl_broker, how)
    admin = USERS.admin(acl_broker)
    after = admin.describe_acls(everything).result(10)
    assert sorted(map(str, after)) == sorted(map(str, before))
    just_carol = AclBindingFilter(ResourceType.GROUP, topic_name, ResourcePatternType.LITERAL, "User:carol", None,
                                  AclOperation.ANY, AclPermissionType.ANY)
    (deleted,) = admin.delete_acls([just_carol]).values()
    assert len(deleted.result(10)) == 1
    assert len(admin.describe_acls(everything).result(10)) == len(before) - 1


def test_without_an_authorizer_the_acl_apis_answer_security_disabled(broker):
    # kafka-python raises the error; confluent-kafka's describe_acls reads it as an empty list.
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    everything = ACLFilter(principal=None, host="*", operation=ACLOperation.ANY,
                           permission_type=ACLPermissionType.ANY,
                           resource_pattern=ResourcePatternFilter(KafkaResourceType.ANY, None,
                                                                  ACLResourcePatternType.ANY))
    try:
        with pytest.raises(SecurityDisabledError):
            admin.describe_acls(everything)
    finally:
        admin.close()


def _ottla(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ottla.tools.cli", *args], capture_output=True, text=True,
                          timeout=60)


def test_the_acls_command_adds_lists_and_removes_with_a_command_config(acl_broker, topic_name, tmp_path):
    admin_config = tmp_path / "admin.properties"
    admin_config.write_text(USERS.properties("admin"))
    common = ["--bootstrap-server", acl_broker.bootstrap, "--command-config", str(admin_config)]
    added = _ottla("acls", "add", *common, "--allow-principal", "User:bob", "--operation", "Read",
                   "--operation", "Describe", "--topic", topic_name, "--group", "bob-group")
    assert added.returncode == 0, added.stderr
    assert "Added 4 ACLs" in added.stdout
    listed = _ottla("acls", "list", *common, "--principal", "User:bob")
    assert listed.returncode == 0, listed.stderr
    assert topic_name in listed.stdout and "bob-group" in listed.stdout and "READ" in listed.stdout
    removed = _ottla("acls", "remove", *common, "--allow-principal", "User:bob", "--operation", "Read",
                     "--topic", topic_name)
    assert removed.returncode == 0 and "Removed 1 ACLs" in removed.stdout, removed.stderr
    # Other admin commands take the same file; without it, the SASL listener refuses them.
    assert _ottla("topics", "list", *common).returncode == 0
    refused = _ottla("topics", "list", "--bootstrap-server", acl_broker.bootstrap)
    assert refused.returncode == 1
    # A wrong password: the broker's answer, exit 1.
    wrong = tmp_path / "wrong.properties"
    wrong.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.username=admin\n"
                     "sasl.password=nope\n")
    failed = _ottla("topics", "list", "--bootstrap-server", acl_broker.bootstrap, "--command-config", str(wrong))
    assert failed.returncode == 1 and "Invalid username or password" in failed.stderr


def test_a_principal_without_acls_is_refused_everything_and_a_super_user_nothing(acl_broker, topic_name):
    # bob holds no ACL on this topic, and no ACL names it at all.
    (error,) = _produce(acl_broker, "bob", f"{topic_name}-nobody", [b"x"])
    assert error is not None and error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    bob = USERS.admin(acl_broker, "bob")
    (future,) = bob.create_topics([NewTopic(topic_name, 1, 1)]).values()
    with pytest.raises(KafkaException) as refused:
        future.result(10)
    assert refused.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    admin = USERS.admin(acl_broker)
    assert topic_name not in admin.list_topics(timeout=10).topics
    # The super user may do all of it.
    (future,) = admin.create_topics([NewTopic(topic_name, 1, 1)]).values()
    future.result(10)
    assert _produce(acl_broker, "admin", topic_name, [b"y"]) == [None]
