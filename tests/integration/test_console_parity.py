"""Each console page shows a principal what the Kafka API that returns the same data
answers it (issue 40 point 6), with Kafka 4.3.1's checks: console/view.py has the
table. Every test here asks the API as each principal first, with a real client
(confluent-kafka's AdminClient, or a raw request where it has no call for the API), and
derives from that answer what the page must show the same principal over HTTP.

The principals hold chosen ACL sets on a SASL broker with the StandardAuthorizer (no ACL
found means refused; `admin` is the super user):

    describer      DESCRIBE on `shown`
    configs        DESCRIBE and DESCRIBE_CONFIGS on `shown`
    reader         READ on `shown`; DESCRIBE on the transactional ids and on `cg-shown`
    grouper        DESCRIBE on `shown`, on every group and on `txn-open`
    cluster        DESCRIBE and DESCRIBE_CONFIGS on the cluster, DESCRIBE on `shown`, READ on
                   __transaction_state, DESCRIBE on `txn-open`
    brokerconfigs  DESCRIBE_CONFIGS on the cluster
    nobody         nothing

What the broker holds: topics `shown` and `secret`; an Avro schema registered under each
topic's value subject, and a record of `shown` in Confluent's wire format with each; a
transaction left open over both (`txn-open`) and one committed on `shown` (`txn-done`);
KIP-848 consumer groups with a live member on `secret` (`cg-secret`) and on `shown`
(`cg-shown`, subscribed to the topic `absent` too, which does not exist), a classic group
with a live member on `secret` (`classic-secret`), and a group with offsets committed on
both topics and no member (`offsets-group`).

Seen failing on the code before this change (22 of 72 cases): grouper saw `cg-secret`'s
member and its assignment of `secret` (ConsumerGroupDescribe: TOPIC_AUTHORIZATION_FAILED),
and Ottla's ConsumerGroupDescribe refused `cg-shown` for its subscribed name `absent`
(Kafka 4.3.1 asks DESCRIBE on assigned topics only); describer the configs of `shown` (DescribeConfigs:
TOPIC_AUTHORIZATION_FAILED), the partitions' sizes and segment files (DescribeLogDirs:
CLUSTER_AUTHORIZATION_FAILED), who holds the LSO back and `shown` among the topics with
producer state (DescribeProducers: TOPIC_AUTHORIZATION_FAILED); reader and grouper a
transactional id's history without READ on __transaction_state, or where its transaction
starts in a topic they may not READ; cluster was listed no group it had no DESCRIBE on
(ListGroups lists it every group); brokerconfigs saw the request counts and faults that
/metrics and /faults refuse it.
"""

from __future__ import annotations

import base64
import gc
import json
import struct
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from html.parser import HTMLParser
from typing import Any

import pytest
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ConfigResource,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from ottla.protocol.errors import ErrorCode
from ottla.protocol.member_assignment import consumer_assignment
from ottla.testing import BrokerProcess
from tests.sasl_brokers import PlainUsers
from tests.schema_registry_http import RegistryHttp
from tests.wire import request

USERS = PlainUsers({name: f"{name}-secret" for name in (
    "admin", "describer", "configs", "reader", "grouper", "cluster", "brokerconfigs", "nobody")})
PRINCIPALS = list(USERS.passwords)
TOPICS = ("shown", "secret")
TXN_TOPIC = "__transaction_state"
CONSUMER_GROUPS = ("cg-secret", "cg-shown")  # KIP-848
CLASSIC_GROUPS = ("classic-secret", "offsets-group")
TRANSACTIONS = ("txn-open", "txn-done")
FETCH, DESCRIBE_GROUPS, DESCRIBE_LOG_DIRS, DESCRIBE_PRODUCERS = 1, 15, 35, 61
DESCRIBE_TRANSACTIONS, LIST_TRANSACTIONS, CONSUMER_GROUP_DESCRIBE = 65, 66, 69


def _allow(user: str, operation: AclOperation, resource: ResourceType, name: str) -> AclBinding:
    return AclBinding(resource, name, ResourcePatternType.LITERAL, f"User:{user}", "*", operation,
                      AclPermissionType.ALLOW)


ACLS = [
    _allow("describer", AclOperation.DESCRIBE, ResourceType.TOPIC, "shown"),
    _allow("configs", AclOperation.DESCRIBE, ResourceType.TOPIC, "shown"),
    _allow("configs", AclOperation.DESCRIBE_CONFIGS, ResourceType.TOPIC, "shown"),
    _allow("reader", AclOperation.READ, ResourceType.TOPIC, "shown"),
    _allow("reader", AclOperation.DESCRIBE, ResourceType.GROUP, "cg-shown"),
    *[_allow("reader", AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, txn) for txn in TRANSACTIONS],
    _allow("grouper", AclOperation.DESCRIBE, ResourceType.TOPIC, "shown"),
    *[_allow("grouper", AclOperation.DESCRIBE, ResourceType.GROUP, g) for g in CONSUMER_GROUPS + CLASSIC_GROUPS],
    _allow("grouper", AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, "txn-open"),
    _allow("cluster", AclOperation.DESCRIBE, ResourceType.BROKER, "kafka-cluster"),
    _allow("cluster", AclOperation.DESCRIBE, ResourceType.TOPIC, "shown"),
    _allow("cluster", AclOperation.DESCRIBE_CONFIGS, ResourceType.BROKER, "kafka-cluster"),
    _allow("cluster", AclOperation.READ, ResourceType.TOPIC, TXN_TOPIC),
    _allow("cluster", AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, "txn-open"),
    _allow("brokerconfigs", AclOperation.DESCRIBE_CONFIGS, ResourceType.BROKER, "kafka-cluster"),
]


# One AdminClient per user for the module, dropped before the broker stops: one left to
# the garbage collector keeps reconnecting to the stopped broker.
_ADMINS: dict[str, AdminClient] = {}


def _admin(broker: BrokerProcess, user: str = "admin") -> AdminClient:
    if user not in _ADMINS:
        _ADMINS[user] = USERS.admin(broker, user)
    return _ADMINS[user]


@pytest.fixture(scope="module")
def secured(tmp_path_factory) -> Iterator[BrokerProcess]:
    yield from USERS.broker(tmp_path_factory.mktemp("console-parity") / "data",
                            {"admin.port": "0", "schema.registry.listeners": "http://127.0.0.1:0"})


def _until_assigned(consumer: Consumer) -> None:
    deadline = time.monotonic() + 60
    while not consumer.assignment() and time.monotonic() < deadline:
        consumer.poll(0.2)
    assert consumer.assignment(), "a group's member got no assignment"


@pytest.fixture(scope="module")
def world(secured: BrokerProcess) -> Iterator[BrokerProcess]:
    admin = _admin(secured)
    for future in admin.create_topics([NewTopic(t, 1) for t in TOPICS]).values():
        future.result(20)
    for future in admin.create_acls(ACLS).values():
        future.result(10)
    conf = USERS.client_config(secured, "admin")
    done = Producer({**conf, "transactional.id": "txn-done"})
    done.init_transactions(20)
    done.begin_transaction()
    done.produce("shown", value=b"committed", partition=0)
    done.commit_transaction(20)
    # Left open, holding both partitions' LSO back.
    opened = Producer({**conf, "transactional.id": "txn-open", "transaction.timeout.ms": 600_000})
    opened.init_transactions(20)
    opened.begin_transaction()
    for topic in TOPICS:
        opened.produce(topic, value=b"open", partition=0)
    assert opened.flush(20) == 0
    members = []
    # cg-shown's member also subscribes to `absent`, a topic that does not exist: a name
    # subscribed, never assigned.
    for group, topics, protocol in (("cg-secret", ["secret"], "consumer"),
                                    ("cg-shown", ["shown", "absent"], "consumer"),
                                    ("classic-secret", ["secret"], "classic")):
        member = Consumer({**conf, "group.id": group, "group.protocol": protocol, "enable.auto.commit": False,
                           "log_level": 0})
        member.subscribe(topics)
        members.append(member)
    for member in members:
        _until_assigned(member)
    registry = RegistryHttp(str(secured.schema_registry_url))
    schema = {"schema": json.dumps({"type": "record", "name": "Count", "fields": [{"name": "n", "type": "long"}]})}
    plain = Producer(conf)
    for topic in TOPICS:
        status, registered, _ = registry.call("POST", f"/subjects/{topic}-value/versions", schema,
                                              headers=_basic("admin"))
        assert status == 200, registered
        # n = 21, Avro's zig-zag varint; the record is in `shown` whatever topic the schema's is.
        plain.produce("shown", value=b"\0" + struct.pack(">i", registered["id"]) + b"\x2a", partition=0)
        schema = {"schema": json.dumps({"type": "record", "name": f"Count_{topic}",
                                        "fields": [{"name": "n", "type": "long"}]})}
    assert plain.flush(20) == 0
    committer = Consumer({**conf, "group.id": "offsets-group", "log_level": 3})
    committer.commit(offsets=[TopicPartition(t, 0, 1) for t in TOPICS], asynchronous=False)
    committer.close()
    yield secured
    for member in members:
        member.close()
    opened.abort_transaction(20)
    _ADMINS.clear()
    gc.collect()


# --- the console over HTTP, as a principal --------------------------------------------------

def _basic(user: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{USERS[user]}".encode()).decode()}


def _get(broker: BrokerProcess, user: str, path: str) -> tuple[int, str]:
    asked = urllib.request.Request(f"{broker.admin_url}{path}", headers=_basic(user))
    try:
        with urllib.request.urlopen(asked, timeout=30) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


class _Table(HTMLParser):
    """The text of each cell of the table with this id, row by row (the "nothing to
    show" row left out); `found` tells whether the page has the table at all."""

    def __init__(self, table_id: str) -> None:
        super().__init__()
        self.table_id = table_id
        self.found = False
        self.rows: list[list[str]] = []
        self._depth = 0  # of tables, inside ours
        self._cell: list[str] | None = None
        self._empty = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        if tag == "table":
            if self._depth or values.get("id") == self.table_id:
                self.found = True
                self._depth += 1
        elif self._depth and tag == "tr":
            self.rows.append([])
        elif self._depth and tag == "td":
            self._cell = []
            self._empty = values.get("class") == "empty"

    def handle_endtag(self, tag: str) -> None:
        if tag == "table" and self._depth:
            self._depth -= 1
        elif tag == "td" and self._cell is not None:
            if self._empty:
                self.rows.pop()
            else:
                self.rows[-1].append("".join(self._cell).strip())
            self._cell = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def _table(page: str, table_id: str) -> list[list[str]] | None:
    """The rows of the page's table of this id, None if it has none."""
    parser = _Table(table_id)
    parser.feed(page)
    return [row for row in parser.rows if row] if parser.found else None


# --- the Kafka APIs, as a principal ---------------------------------------------------------

def _call(broker: BrokerProcess, user: str, entity: Any) -> Any:
    with USERS.wire_client(broker, user) as client:
        return client.call(entity)


def _log_dirs_refused(broker: BrokerProcess, user: str) -> bool:
    answer = _call(broker, user, request(DESCRIBE_LOG_DIRS, 4, topics=None))
    assert answer.error_code in (ErrorCode.none, ErrorCode.cluster_authorization_failed), answer
    return answer.error_code == ErrorCode.cluster_authorization_failed


def _producers(broker: BrokerProcess, user: str, topic: str, partitions: int = 1) -> set[int] | None:
    """DescribeProducers of the topic's first `partitions`: their producer ids, None if
    refused."""
    answer = _call(broker, user, request(DESCRIBE_PRODUCERS, 0, topics=[
        {"name": topic, "partition_indexes": list(range(partitions))}]))
    codes = {p.error_code for p in answer.topics[0].partitions}
    if codes == {ErrorCode.topic_authorization_failed}:
        return None
    assert codes == {ErrorCode.none}, answer
    return {p.producer_id for partition in answer.topics[0].partitions for p in partition.active_producers}


def _metadata_topics(broker: BrokerProcess, user: str) -> dict[str, int]:
    """Metadata of every topic: those the user is answered, with their partition counts."""
    return {name: len(t.partitions) for name, t in _admin(broker, user).list_topics(timeout=20).topics.items()}


def _describe_configs(broker: BrokerProcess, user: str, resource: ConfigResource) -> dict[str, str | None] | None:
    """DescribeConfigs of one resource: its configs, None if refused for authorization."""
    future = _admin(broker, user).describe_configs([resource])[resource]
    try:
        return {name: entry.value for name, entry in future.result(20).items()}
    except KafkaException as exc:
        assert "AUTHORIZATION_FAILED" in exc.args[0].name(), exc
        return None


def _fetch_refused(broker: BrokerProcess, user: str, topic: str) -> bool:
    """Whether a Fetch of the topic's partition 0 is refused (TOPIC_AUTHORIZATION_FAILED)."""
    answer = _call(broker, user, request(FETCH, 12, replica_id=-1, max_wait=0, min_bytes=0, max_bytes=1 << 16,
                                         isolation_level=0, session_id=0, session_epoch=-1, topics=[
                                             {"topic": topic, "partitions": [
                                                 {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 16,
                                                  "current_leader_epoch": -1, "last_fetched_epoch": -1,
                                                  "log_start_offset": -1}]}],
                                         forgotten_topics_data=[], rack_id=""))
    code = answer.responses[0].partitions[0].error_code
    assert code in (ErrorCode.none, ErrorCode.topic_authorization_failed), answer
    return code == ErrorCode.topic_authorization_failed


# --- one test per page ----------------------------------------------------------------------

@pytest.mark.parametrize("user", PRINCIPALS)
def test_the_topics_page_lists_what_metadata_does_and_sizes_as_describe_log_dirs(world, user):
    listed = _metadata_topics(world, user)
    status, page = _get(world, user, "/console/topics")
    rows = _table(page, "topics")
    assert status == 200 and rows is not None
    assert {row[0] for row in rows} == set(listed)
    sizes = {row[4] for row in rows}
    if _log_dirs_refused(world, user):
        assert sizes <= {"–"}
    else:
        assert "–" not in sizes


@pytest.mark.parametrize("user", PRINCIPALS)
def test_a_topic_page_is_metadata_describe_configs_describe_log_dirs_and_describe_producers(world, user):
    log_dirs_refused = _log_dirs_refused(world, user)
    listed = _metadata_topics(world, user)
    for topic in TOPICS:
        status, page = _get(world, user, f"/console/topic?name={topic}")
        if topic not in listed:
            assert status == 403 and "Configs" not in page, (user, topic)
            continue
        assert status == 200, (user, topic)
        configs = _describe_configs(world, user, ConfigResource(ResourceType.TOPIC, topic))
        shown = _table(page, "configs")
        if configs is None:
            assert shown is None and 'id="configs-refused"' in page, (user, topic)
        else:
            assert shown and all(configs[name] == value for name, value, _source in shown), (user, topic)
        partitions = _table(page, "partitions")
        assert partitions is not None and len(partitions) == 1
        _partition, _start, lso, _hw, size, files, _links = partitions[0]
        assert (size == files == "–") == log_dirs_refused, (user, topic)
        # The open transaction holds the LSO back: who does is DescribeProducers' answer.
        assert ("held by" in lso) == (_producers(world, user, topic) is not None), (user, topic, lso)


@pytest.mark.parametrize("user", PRINCIPALS)
def test_the_messages_page_is_fetch(world, user):
    for topic in TOPICS:
        status, page = _get(world, user, f"/console/messages?topic={topic}&partition=0")
        if _fetch_refused(world, user, topic):
            assert status == 403 and _table(page, "messages") is None, (user, topic)
        else:
            assert status == 200 and _table(page, "messages"), (user, topic)


@pytest.mark.parametrize("user", PRINCIPALS)
def test_the_producers_pages_are_describe_producers(world, user):
    answers = {topic: _producers(world, user, topic, partitions)
               for topic, partitions in _metadata_topics(world, user).items()}
    status, page = _get(world, user, "/console/producers")
    rows = _table(page, "producer-topics")
    assert status == 200 and rows is not None
    assert {row[0] for row in rows} == {topic for topic, ids in answers.items() if ids}, user
    for topic in TOPICS:
        ids = answers.get(topic)
        status, page = _get(world, user, f"/console/producers?topic={topic}")
        if ids is None:
            assert status == 403, (user, topic)
            continue
        rows = _table(page, "producers-0")
        assert status == 200 and rows is not None
        assert {int(row[0].split()[0]) for row in rows} == ids, (user, topic)


@pytest.mark.parametrize("user", PRINCIPALS)
def test_the_groups_page_is_list_groups_and_its_members_the_describe_apis(world, user):
    admin = _admin(world, user)
    listed = {g.group_id for g in admin.list_consumer_groups().result(20).valid}
    status, page = _get(world, user, "/console/groups")
    rows = _table(page, "groups")
    assert status == 200 and rows is not None
    assert {row[0] for row in rows} == listed, user
    for group_id, _type, _protocol, _state, members in rows:
        described = _described_members(world, user, group_id)
        assert (members == "–") == (described is None), (user, group_id)
        if user == "grouper":
            # Kafka 4.3.1's ConsumerGroupDescribe asks DESCRIBE on the topics of the members'
            # assignments, not on a name only subscribed (KafkaApis: assignment and target
            # assignment): cg-shown is described, cg-secret refused.
            assert (described is None) == (group_id == "cg-secret"), group_id
        if described is not None:
            assert int(members) == len(described), (user, group_id)


def _described_members(broker: BrokerProcess, user: str, group_id: str) -> dict[str, set[str]] | None:
    """The group's members (member id: topics assigned) as its describe API answers the
    user: ConsumerGroupDescribe for a consumer group, DescribeGroups for a classic one;
    None if refused."""
    if group_id in CONSUMER_GROUPS:
        group = _call(broker, user, request(CONSUMER_GROUP_DESCRIBE, 0, group_ids=[group_id],
                                            include_authorized_operations=False)).groups[0]
        if group.error_code in (ErrorCode.group_authorization_failed, ErrorCode.topic_authorization_failed):
            return None
        assert group.error_code == ErrorCode.none, group
        return {m.member_id: {tp.topic_name for tp in m.assignment.topic_partitions} for m in group.members}
    classic = _call(broker, user, request(DESCRIBE_GROUPS, 5, groups=[group_id],
                                          include_authorized_operations=False)).groups[0]
    if classic.error_code == ErrorCode.group_authorization_failed:
        return None
    assert classic.error_code == ErrorCode.none, classic
    return {m.member_id: {t for t, _ in consumer_assignment(bytes(m.member_assignment))} for m in classic.members}


@pytest.mark.parametrize("user", PRINCIPALS)
def test_a_group_page_is_the_describe_apis_and_offset_fetch(world, user):
    admin = _admin(world, user)
    for group_id in CONSUMER_GROUPS + CLASSIC_GROUPS:
        status, page = _get(world, user, f"/console/group?id={group_id}")
        # Every describe API and OffsetFetch ask DESCRIBE on the group first.
        offsets_future = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group_id)])[group_id]
        try:
            offsets = {tp.topic for tp in offsets_future.result(20).topic_partitions}
        except KafkaException as exc:
            assert exc.args[0].code() == ErrorCode.group_authorization_failed, exc
            assert status == 403, (user, group_id)
            continue
        assert status == 200, (user, group_id)
        shown_offsets = _table(page, "offsets")
        assert shown_offsets is not None and {row[0] for row in shown_offsets} == offsets, (user, group_id)
        described = _described_members(world, user, group_id)
        members = _table(page, "members")
        if described is None:
            assert members is None and "TOPIC_AUTHORIZATION_FAILED" in page, (user, group_id)
            hidden = {"secret"} - offsets
            assert not any(f">{topic}<" in page for topic in hidden), (user, group_id)
            continue
        assert members is not None
        assert {row[0]: {line.split(" ")[0] for line in row[4].splitlines() if line}
                for row in members} == described, (user, group_id)


@pytest.mark.parametrize("user", PRINCIPALS)
def test_the_transaction_pages_are_list_and_describe_transactions(world, user):
    listed = {t.transactional_id for t in _call(world, user, request(
        LIST_TRANSACTIONS, 0, state_filters=[], producer_id_filters=[])).transaction_states}
    status, page = _get(world, user, "/console/transactions")
    rows = _table(page, "transactions")
    assert status == 200 and rows is not None
    assert {row[0] for row in rows} == listed, user
    history_refused = _fetch_refused(world, user, TXN_TOPIC)
    for txn_id in TRANSACTIONS:
        state = _call(world, user, request(DESCRIBE_TRANSACTIONS, 0, transactional_ids=[txn_id])).transaction_states[0]
        status, page = _get(world, user, f"/console/transaction?id={txn_id}")
        if state.error_code == ErrorCode.transactional_id_authorization_failed:
            assert status == 403, (user, txn_id)
            continue
        assert state.error_code == ErrorCode.none and status == 200, (user, txn_id)
        partitions = {f"{t.topic}-{p}" for t in state.topics for p in t.partitions}
        shown = _table(page, "txn-partitions")
        assert shown is not None and {row[0] for row in shown} == partitions, (user, txn_id)
        for name, first, _lso, _hw, holds in shown:
            refused = _producers(world, user, name.rsplit("-", 1)[0]) is None
            assert (first == "–" and holds == "–") == refused, (user, txn_id, name)
        assert (_table(page, "history") is None) == history_refused, (user, txn_id)


@pytest.mark.parametrize("user", PRINCIPALS)
def test_the_broker_page_is_describe_configs_of_the_broker_and_its_metrics_describe_cluster(world, user):
    node_id = next(iter(_admin(world).list_topics(timeout=20).brokers))
    configs = _describe_configs(world, user, ConfigResource(ResourceType.BROKER, str(node_id)))
    status, page = _get(world, user, "/console/broker")
    if configs is None:
        assert status == 403, user
        return
    assert status == 200, user
    shown = _table(page, "config")
    assert shown is not None
    assert {row[0] for row in shown} == set(configs), user
    # Request counts and faults are what /metrics and /faults answer: DESCRIBE on the
    # cluster, the check of DescribeLogDirs.
    metrics_status = _get(world, user, "/metrics")[0]
    refused = _log_dirs_refused(world, user)
    assert metrics_status == (403 if refused else 200)
    assert (_table(page, "apis") is None) == refused and (_table(page, "faults") is None) == refused, user
    # Its charts' counters: records consumed are the committed offsets OffsetFetch gives
    # the user, over the groups ListGroups lists it.
    status, stats = _get(world, user, "/console/stats")
    assert status == metrics_status, user
    if status == 200:
        admin = _admin(world, user)
        consumed = 0
        for listed in admin.list_consumer_groups().result(20).valid:
            future = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(listed.group_id)])
            try:
                consumed += sum(max(tp.offset, 0) for tp in future[listed.group_id].result(20).topic_partitions)
            except KafkaException as exc:
                assert exc.args[0].code() == ErrorCode.group_authorization_failed, exc
        assert json.loads(stats)["consumed"] == consumed, user


@pytest.mark.parametrize("user", PRINCIPALS)
def test_the_schema_pages_and_decoding_are_the_registrys_answers(world, user):
    """Not a Kafka API: the registry's own rule (schema_registry/access.py), asked over
    its REST API as the same user."""
    registry = RegistryHttp(str(world.schema_registry_url))
    status, subjects, _ = registry.call("GET", "/subjects", headers=_basic(user))
    assert status == 200
    status, page = _get(world, user, "/console/schemas")
    rows = _table(page, "subjects")
    assert status == 200 and rows is not None and {row[0] for row in rows} == set(subjects), user
    for topic in TOPICS:
        status, page = _get(world, user, f"/console/subject?name={topic}-value")
        assert (status == 200) == (f"{topic}-value" in subjects), (user, topic)
    if _fetch_refused(world, user, "shown"):
        return
    status, page = _get(world, user, "/console/messages?topic=shown&partition=0")
    assert status == 200
    admin = RegistryHttp(str(world.schema_registry_url))
    for topic in TOPICS:
        schema_id = admin.call("GET", f"/subjects/{topic}-value/versions/1", headers=_basic("admin"))[1]["id"]
        readable = registry.call("GET", f"/schemas/ids/{schema_id}", headers=_basic(user))[0] == 200
        assert (f"schema id {schema_id} (" in page) == readable, (user, topic)
