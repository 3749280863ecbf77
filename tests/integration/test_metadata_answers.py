"""Metadata answers the broker keeps (broker/handlers/metadata.py): the same request is
answered from what was kept while nothing its answer was made from has changed, so
each test asks the same question on the same connection before and after a change and
expects the answer to follow it: topics created, grown, deleted and created again
(named, by id and all of them), the listener asked on, and the ACLs, for each
principal on its own.

Break-and-see-it-fail, made once by hand for each: with add_partitions not counted as a
change of the topics (LogManager.topics_changed), test_a_kept_answer_follows_every_
change_of_the_topics failed (1 partition where 3 were); with the listener's address left
out of the kept answers' key, test_each_listener_is_answered_with_its_own_address failed
(the first listener's port on the second); with an ACL's creation not counted
(Authorizer.changes), test_a_kept_answer_follows_the_acls_of_each_principal failed
(alice's kept list of every topic still without the one her new ACL let her describe);
with the principal left out of the key, it failed too (bob was answered alice's kept
list, with her topic in it), and with the host left out of it,
test_a_kept_answer_is_for_the_host_it_was_made_for failed (alice from 127.0.0.2
answered what was kept for her from 127.0.0.1)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewPartitions,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from ottla.protocol.errors import ErrorCode
from ottla.testing import BrokerProcess
from tests.clients import create_topic
from tests.sasl_brokers import PlainUsers
from tests.wire import WireClient, request

METADATA = 3
USERS = PlainUsers({"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"})


@pytest.fixture(scope="module")
def two_listeners(tmp_path_factory) -> Iterator[BrokerProcess]:
    broker = BrokerProcess(str(tmp_path_factory.mktemp("metadata-answers") / "data"), {
        "listeners": "PLAINTEXT://127.0.0.1:0,OTHER://127.0.0.1:0",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,OTHER:PLAINTEXT",
    }).start()
    try:
        yield broker
    finally:
        broker.cleanup()


@pytest.fixture(scope="module")
def acl_broker(tmp_path_factory) -> Iterator[BrokerProcess]:
    yield from USERS.broker(tmp_path_factory.mktemp("metadata-answers-acls") / "data")


def _metadata(client: WireClient, names: list[str] | None = None, ids: list[uuid.UUID] | None = None) -> Any:
    topics = None
    if names is not None:
        topics = [{"name": name, "topic_id": None} for name in names]
    elif ids is not None:
        topics = [{"name": None, "topic_id": topic_id} for topic_id in ids]
    return client.call(request(METADATA, 12, topics=topics, allow_auto_topic_creation=False,
                               include_topic_authorized_operations=False))


def _partitions(answer: Any, name: str) -> int | None:
    """How many partitions the answer gives `name`; None where it does not list it."""
    for topic in answer.topics:
        if topic.name == name:
            assert topic.error_code == ErrorCode.none
            return len(topic.partitions)
    return None


def _asked_twice(client: WireClient, **what: Any) -> Any:
    """The answer to the same request asked twice (the second, kept, must be the first)."""
    first, second = _metadata(client, **what), _metadata(client, **what)
    assert first == second
    return second


def test_a_kept_answer_follows_every_change_of_the_topics(two_listeners, topic_name):
    admin = AdminClient({"bootstrap.servers": two_listeners.bootstrap})
    with WireClient(two_listeners.bootstrap) as client:
        assert _asked_twice(client, names=[topic_name]).topics[0].error_code == ErrorCode.unknown_topic_or_partition
        create_topic(two_listeners.bootstrap, topic_name, 1)
        named = _asked_twice(client, names=[topic_name])
        first_id = named.topics[0].topic_id
        assert _partitions(named, topic_name) == 1
        assert _partitions(_asked_twice(client), topic_name) == 1
        assert _partitions(_asked_twice(client, ids=[first_id]), topic_name) == 1

        for future in admin.create_partitions([NewPartitions(topic_name, 3)]).values():
            future.result(30)
        assert _partitions(_asked_twice(client, names=[topic_name]), topic_name) == 3
        assert _partitions(_asked_twice(client), topic_name) == 3
        assert _partitions(_asked_twice(client, ids=[first_id]), topic_name) == 3

        for future in admin.delete_topics([topic_name]).values():
            future.result(30)
        assert _asked_twice(client, names=[topic_name]).topics[0].error_code == ErrorCode.unknown_topic_or_partition
        assert _partitions(_asked_twice(client), topic_name) is None
        assert _asked_twice(client, ids=[first_id]).topics[0].error_code == ErrorCode.unknown_topic_id

        for future in admin.create_topics([NewTopic(topic_name, 2, 1)]).values():
            future.result(30)
        again = _asked_twice(client, names=[topic_name])
        assert _partitions(again, topic_name) == 2 and again.topics[0].topic_id != first_id
        assert _partitions(_asked_twice(client), topic_name) == 2
        assert _asked_twice(client, ids=[first_id]).topics[0].error_code == ErrorCode.unknown_topic_id


def test_each_listener_is_answered_with_its_own_address(two_listeners, topic_name):
    create_topic(two_listeners.bootstrap, topic_name, 1)
    # The first listener is the bootstrap; `listeners` names the others.
    for address in (two_listeners.bootstrap, two_listeners.listeners["OTHER"], two_listeners.bootstrap):
        with WireClient(address) as client:
            (broker,) = _asked_twice(client, names=[topic_name]).brokers
        assert f"{broker.host}:{broker.port}" == address


def _acl(principal: str, name: str, host: str = "*") -> AclBinding:
    return AclBinding(ResourceType.TOPIC, name, ResourcePatternType.LITERAL, principal, host, AclOperation.DESCRIBE,
                      AclPermissionType.ALLOW)


def _sees(client: WireClient, name: str) -> bool:
    """Whether the principal of `client` may describe `name`, asked twice by name and
    twice for every topic (the answers agree, and a refused name is refused as Kafka does)."""
    named = _asked_twice(client, names=[name]).topics[0]
    listed = _partitions(_asked_twice(client), name) is not None
    assert listed == (named.error_code == ErrorCode.none)
    if not listed:
        assert named.error_code == ErrorCode.topic_authorization_failed
    return listed


def test_a_kept_answer_follows_the_acls_of_each_principal(acl_broker, topic_name):
    """alice and bob ask the same questions on the same listener, before and after the
    ACLs change: each sees only what its own ACLs allow at that moment, through the
    wire and through a real client (librdkafka's list_topics)."""
    admin = USERS.admin(acl_broker)
    for future in admin.create_topics([NewTopic(topic_name, 1, 1)]).values():
        future.result(30)
    alice, bob = USERS.wire_client(acl_broker, "alice"), USERS.wire_client(acl_broker, "bob")
    try:
        def sees(client: WireClient) -> bool:
            return _sees(client, topic_name)

        assert not sees(alice) and not sees(bob)
        for future in admin.create_acls([_acl("User:alice", topic_name)]).values():
            future.result(10)
        assert sees(alice) and not sees(bob)
        assert topic_name in USERS.admin(acl_broker, "alice").list_topics(timeout=10).topics
        assert topic_name not in USERS.admin(acl_broker, "bob").list_topics(timeout=10).topics

        for future in admin.create_acls([_acl("User:bob", topic_name)]).values():
            future.result(10)
        assert sees(bob) and sees(alice)
        for future in admin.delete_acls([AclBindingFilter(
                ResourceType.TOPIC, topic_name, ResourcePatternType.LITERAL, "User:alice", "*", AclOperation.ANY,
                AclPermissionType.ANY)]).values():
            future.result(10)
        assert not sees(alice) and sees(bob)
        assert topic_name not in USERS.admin(acl_broker, "alice").list_topics(timeout=10).topics
        assert topic_name in USERS.admin(acl_broker, "bob").list_topics(timeout=10).topics
    finally:
        alice.close()
        bob.close()


def test_a_kept_answer_is_for_the_host_it_was_made_for(acl_broker, topic_name):
    """alice may describe the topic from 127.0.0.2 only: asked from 127.0.0.1 first, then
    from 127.0.0.2, then from 127.0.0.1 again, each host gets its own answer."""
    admin = USERS.admin(acl_broker)
    for future in admin.create_topics([NewTopic(topic_name, 1, 1)]).values():
        future.result(30)
    for future in admin.create_acls([_acl("User:alice", topic_name, "127.0.0.2")]).values():
        future.result(10)
    for source, allowed in (("127.0.0.1", False), ("127.0.0.2", True), ("127.0.0.1", False)):
        client = USERS.wire_client(acl_broker, "alice", source)
        try:
            assert _sees(client, topic_name) == allowed, f"from {source}"
        finally:
            client.close()
