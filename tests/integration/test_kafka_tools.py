"""Kafka's own command-line tools (kafka-tools 4.3.1, run as their Java main classes)
against Ottla, each command run the same way against Apache Kafka 4.3.1 (the session's
`kafka_reference`) and the two outputs compared once what legitimately differs (address,
topic ids, producer ids, timestamps) is normalised. Where the two brokers differ on
purpose the test says so and checks Ottla's side on its own."""

from __future__ import annotations

import json
import re
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from tests.clients import create_topic, idempotent_producer, produce_all, transactional_producer
from tests.kafka_tools import (
    ACL_COMMAND,
    CONFIG_COMMAND,
    CONSUMER_PERFORMANCE,
    DELETE_RECORDS_COMMAND,
    FEATURE_COMMAND,
    GET_OFFSET_SHELL,
    GROUP_COMMAND,
    LEADER_ELECTION_COMMAND,
    LOG_DIRS_COMMAND,
    PRODUCER_PERFORMANCE,
    TOPIC_COMMAND,
    TRANSACTIONS_COMMAND,
    kafka_tool,
    normalise,
    table,
)
from tests.sasl_brokers import PlainUsers


@pytest.fixture(scope="module")
def brokers(broker, kafka_reference):
    """Ottla first, then Kafka: every comparison runs its command on both."""
    return broker, kafka_reference


def _run_on_both(brokers, main_class: str, args: tuple[str, ...], check: bool) -> list:
    # The two JVMs at once: each tool spends most of its second starting up.
    with ThreadPoolExecutor(len(brokers)) as pool:
        return list(pool.map(lambda target: kafka_tool(main_class, target.bootstrap, *args, check=check), brokers))


def on_both(brokers, main_class: str, *args: str, check: bool = True) -> list[str]:
    """The command's stdout from Ottla and from Kafka, normalised."""
    return [normalise(result.stdout, target)
            for target, result in zip(brokers, _run_on_both(brokers, main_class, args, check), strict=True)]


def errors_on_both(brokers, main_class: str, *args: str) -> list[str]:
    """The first line the command printed (it must fail) on each: its error message."""
    lines = []
    for target, result in zip(brokers, _run_on_both(brokers, main_class, args, False), strict=True):
        assert result.returncode != 0, result.stdout
        lines.append(normalise(result.stdout + result.stderr, target).strip().splitlines()[0])
    return lines


def one_batch_each(bootstrap: str, records: list[tuple[str, int, bytes | None, bytes]],
                   timestamps: list[int] | None = None) -> None:
    """Produce each record as a batch of its own (with these timestamps, else the clock's),
    so both brokers hold byte-identical logs (log sizes can then be compared)."""
    producer = idempotent_producer(bootstrap, **{"linger.ms": 0})
    for i, (topic, partition, key, value) in enumerate(records):
        producer.produce(topic, value, key, partition, timestamp=timestamps[i] if timestamps else 0)
        assert producer.flush(30) == 0


def commit(bootstrap: str, group: str, offsets: list[TopicPartition]) -> None:
    """Commit offsets for a group from outside any membership (the coordinator may still
    be loading a moment after __consumer_offsets is created: retried then)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        for attempt in range(20):
            try:
                consumer.commit(offsets=offsets, asynchronous=False)
                return
            except KafkaException as exc:
                if not exc.args[0].retriable() and exc.args[0].code() not in (
                        KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
                        KafkaError.COORDINATOR_NOT_AVAILABLE) or attempt == 19:
                    raise
                time.sleep(0.5)
    finally:
        consumer.close()


def without_min_isr(describe: str) -> str:
    # Kafka 4.3 formats its cluster with eligible leader replicas (KIP-966), which writes a
    # cluster-wide min.insync.replicas=1 that kafka-topics lists with every topic; Ottla, one
    # broker without ELR, has it as the plain default (README: Where Ottla knowingly differs).
    return describe.replace("Configs: min.insync.replicas=1,", "Configs: ").replace(
        "Configs: min.insync.replicas=1", "Configs: ")


def test_kafka_topics_create_list_describe_alter_partitions_delete(brokers, topic_name):
    created = on_both(brokers, TOPIC_COMMAND, "--create", "--topic", topic_name, "--partitions", "2",
                      "--config", "retention.ms=3600000", "--config", "cleanup.policy=compact")
    assert created == [f"Created topic {topic_name}.\n"] * 2
    assert errors_on_both(brokers, TOPIC_COMMAND, "--create", "--topic", topic_name, "--partitions", "1") == [
        f"Error while executing topic command : Topic '{topic_name}' already exists."] * 2
    for listed in on_both(brokers, TOPIC_COMMAND, "--list", "--exclude-internal"):
        assert topic_name in listed.split()
        assert not any(name.startswith("__") for name in listed.split())

    ottla, kafka = on_both(brokers, TOPIC_COMMAND, "--describe", "--topic", topic_name)
    assert ottla == without_min_isr(kafka)
    assert ottla.splitlines() == [
        f"Topic: {topic_name}\tTopicId: ID\tPartitionCount: 2\tReplicationFactor: 1\t"
        "Configs: cleanup.policy=compact,retention.ms=3600000",
        f"\tTopic: {topic_name}\tPartition: 0\tLeader: 1\tReplicas: 1\tIsr: 1\tElr: \tLastKnownElr: ",
        f"\tTopic: {topic_name}\tPartition: 1\tLeader: 1\tReplicas: 1\tIsr: 1\tElr: \tLastKnownElr: "]

    assert on_both(brokers, TOPIC_COMMAND, "--alter", "--topic", topic_name, "--partitions", "3") == ["", ""]
    ottla, kafka = on_both(brokers, TOPIC_COMMAND, "--describe", "--topic", topic_name)
    assert ottla == without_min_isr(kafka) and "PartitionCount: 3" in ottla and "Partition: 2\t" in ottla
    assert errors_on_both(brokers, TOPIC_COMMAND, "--alter", "--topic", topic_name, "--partitions", "2")[0] \
        .startswith("Error while executing topic command : ")

    assert on_both(brokers, TOPIC_COMMAND, "--delete", "--topic", topic_name) == ["", ""]
    for listed in on_both(brokers, TOPIC_COMMAND, "--list"):
        assert topic_name not in listed.split()
    assert errors_on_both(brokers, TOPIC_COMMAND, "--describe", "--topic", topic_name) == [
        f"Error while executing topic command : Topic '{topic_name}' does not exist as expected"] * 2


def test_kafka_configs_describe_and_alter_topic_and_broker_configs(brokers, topic_name):
    for target in brokers:
        create_topic(target.bootstrap, topic_name, 1, {"segment.bytes": "1048576"})
    topic = ["--entity-type", "topics", "--entity-name", topic_name]
    ottla, kafka = on_both(brokers, CONFIG_COMMAND, "--describe", *topic)
    assert ottla == kafka == (
        f"Dynamic configs for topic {topic_name} are:\n"
        "  segment.bytes=1048576 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:segment.bytes=1048576, "
        "DEFAULT_CONFIG:log.segment.bytes=1073741824}\n")

    assert on_both(brokers, CONFIG_COMMAND, "--alter", *topic,
                   "--add-config", "max.message.bytes=2000000,cleanup.policy=[compact,delete],retention.ms=100000") \
        == [f"Completed updating config for topic {topic_name}.\n"] * 2
    assert on_both(brokers, CONFIG_COMMAND, "--alter", *topic, "--delete-config", "segment.bytes") \
        == [f"Completed updating config for topic {topic_name}.\n"] * 2
    ottla, kafka = on_both(brokers, CONFIG_COMMAND, "--describe", *topic)
    assert ottla == kafka
    assert "cleanup.policy=compact,delete" in ottla and "max.message.bytes=2000000" in ottla
    assert "retention.ms=100000" in ottla and "segment.bytes" not in ottla

    # Every topic config with its value, source and synonyms.
    ottla, kafka = on_both(brokers, CONFIG_COMMAND, "--describe", "--all", *topic)
    assert ottla.splitlines() == [line.replace("DYNAMIC_DEFAULT_BROKER_CONFIG:min.insync.replicas=1, ", "")
                                  for line in kafka.splitlines()]

    error = errors_on_both(brokers, CONFIG_COMMAND, "--alter", *topic, "--add-config", "no.such.config=1")
    assert error[0] == error[1], error

    # The broker: no dynamic configs, then a topic default changed at run time and back.
    broker = ["--entity-type", "brokers", "--entity-name", "1"]
    assert on_both(brokers, CONFIG_COMMAND, "--describe", *broker) == ["Dynamic configs for broker 1 are:\n"] * 2
    try:
        assert on_both(brokers, CONFIG_COMMAND, "--alter", *broker, "--add-config", "log.retention.bytes=123456789") \
            == ["Completed updating config for broker 1.\n"] * 2
        ottla, kafka = on_both(brokers, CONFIG_COMMAND, "--describe", *broker)
        assert ottla == kafka == (
            "Dynamic configs for broker 1 are:\n"
            "  log.retention.bytes=123456789 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:log.retention.bytes="
            "123456789, DEFAULT_CONFIG:log.retention.bytes=-1}\n")
        ottla, kafka = on_both(brokers, CONFIG_COMMAND, "--describe", *topic, "--all")
        assert ottla.splitlines() == [line.replace("DYNAMIC_DEFAULT_BROKER_CONFIG:min.insync.replicas=1, ", "")
                                      for line in kafka.splitlines()]
        assert "  retention.bytes=123456789 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:log.retention.bytes=" \
               "123456789, DEFAULT_CONFIG:log.retention.bytes=-1}" in ottla.splitlines()
    finally:
        on_both(brokers, CONFIG_COMMAND, "--alter", *broker, "--delete-config", "log.retention.bytes")
    assert on_both(brokers, CONFIG_COMMAND, "--describe", *broker) == ["Dynamic configs for broker 1 are:\n"] * 2


def test_kafka_consumer_groups_list_describe_reset_offsets_delete_offsets_delete(brokers, topic_name):
    group = f"g-{topic_name}"
    for target in brokers:
        create_topic(target.bootstrap, topic_name, 2)
        one_batch_each(target.bootstrap, [(topic_name, p, None, b"v%d" % i) for p in (0, 1) for i in range(5)])
        commit(target.bootstrap, group, [TopicPartition(topic_name, 0, 4), TopicPartition(topic_name, 1, 2)])
    for listed in on_both(brokers, GROUP_COMMAND, "--list"):
        assert group in listed.split()
    ottla, kafka = on_both(brokers, GROUP_COMMAND, "--describe", "--group", group)
    assert ottla == kafka
    assert [(row["PARTITION"], row["CURRENT-OFFSET"], row["LOG-END-OFFSET"], row["LAG"]) for row in table(ottla)] \
        == [("0", "4", "5", "1"), ("1", "2", "5", "3")]
    ottla, kafka = on_both(brokers, GROUP_COMMAND, "--describe", "--group", group, "--state", "--verbose")
    assert ottla == kafka and table(ottla)[0]["STATE"] == "Empty"
    assert on_both(brokers, GROUP_COMMAND, "--list", "--state", "Empty")[0].count(group) == 1

    ottla, kafka = on_both(brokers, GROUP_COMMAND, "--reset-offsets", "--group", group, "--topic", topic_name,
                           "--to-earliest", "--execute")
    assert sorted(ottla.splitlines()) == sorted(kafka.splitlines())
    assert sorted((row["PARTITION"], row["NEW-OFFSET"]) for row in table(ottla)) == [("0", "0"), ("1", "0")]
    ottla, kafka = on_both(brokers, GROUP_COMMAND, "--reset-offsets", "--group", group, "--all-topics",
                           "--shift-by", "3", "--execute")
    assert sorted(ottla.splitlines()) == sorted(kafka.splitlines())
    ottla, kafka = on_both(brokers, GROUP_COMMAND, "--reset-offsets", "--group", group, "--topic", f"{topic_name}:1",
                           "--to-offset", "4", "--dry-run")
    assert ottla == kafka and [(r["PARTITION"], r["NEW-OFFSET"]) for r in table(ottla)] == [("1", "4")]
    ottla, kafka = on_both(brokers, GROUP_COMMAND, "--reset-offsets", "--group", group, "--topic", topic_name,
                           "--to-latest", "--export", "--dry-run")
    assert sorted(ottla.split()) == sorted(kafka.split()) == [f"{topic_name},0,5", f"{topic_name},1,5"]

    ottla, kafka = on_both(brokers, GROUP_COMMAND, "--delete-offsets", "--group", group, "--topic", f"{topic_name}:0")
    assert ottla == kafka and ottla.startswith(f"Request succeeded for deleting offsets from group {group}.")
    ottla, kafka = on_both(brokers, GROUP_COMMAND, "--describe", "--group", group, "--offsets")
    assert ottla == kafka
    assert [(row["PARTITION"], row["CURRENT-OFFSET"]) for row in table(ottla)] == [("1", "3")]

    assert on_both(brokers, GROUP_COMMAND, "--delete", "--group", group) == [
        f"Deletion of requested consumer groups ('{group}') was successful.\n"] * 2
    for listed in on_both(brokers, GROUP_COMMAND, "--list"):
        assert group not in listed.split()
    ottla, kafka = on_both(brokers, GROUP_COMMAND, "--delete", "--group", group, check=False)
    assert ottla == kafka and "GroupIdNotFoundException: The group id does not exist." in ottla


EPOCHS = ("CURRENT-EPOCH", "TARGET-EPOCH", "GROUP-EPOCH", "TARGET-ASSIGNMENT-EPOCH")


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_kafka_consumer_groups_describe_an_active_member(brokers, topic_name, protocol):
    """A member of a classic or a consumer (KIP-848) group, as kafka-consumer-groups
    --members and --state show it. Member ids are the broker's own; the epochs too (Kafka
    bumps a new consumer group's epoch once more than Ottla, as its metadata settles)."""
    group = f"live-{topic_name}"
    described = []
    for target in brokers:
        create_topic(target.bootstrap, topic_name, 2)
        consumer = Consumer({"bootstrap.servers": target.bootstrap, "group.id": group, "group.protocol": protocol,
                             "client.id": "member-client", "auto.offset.reset": "earliest"})
        try:
            consumer.subscribe([topic_name])
            while not consumer.assignment():
                consumer.poll(0.2)
            members = table(kafka_tool(GROUP_COMMAND, target.bootstrap, "--describe", "--group", group,
                                       "--members", "--verbose").stdout)
            state = table(normalise(kafka_tool(GROUP_COMMAND, target.bootstrap, "--describe", "--group", group,
                                               "--state", "--verbose").stdout, target))
        finally:
            consumer.close()
        for row in members + state:
            row.update({column: "E" for column in EPOCHS if row.get(column, "-") != "-"})
            row.update({"CONSUMER-ID": "ID"} if "CONSUMER-ID" in row else {})
        described.append((members, state))
    assert described[0] == described[1]
    (members, state) = described[0]
    assert len(members) == 1 and members[0]["CLIENT-ID"] == "member-client" and members[0]["HOST"] == "/127.0.0.1"
    assert members[0]["#PARTITIONS"] == "2" and members[0]["CURRENT-ASSIGNMENT"] == f"{topic_name}:0,1"
    assert state[0]["STATE"] == "Stable" and state[0]["#MEMBERS"] == "1"
    assert state[0]["ASSIGNMENT-STRATEGY"] == ("range" if protocol == "classic" else "uniform")


def _transactions_table(output: str) -> list[dict[str, str]]:
    rows = table(output)
    for row in rows:  # what each broker allocates or times on its own
        for column in ("ProducerId", "LastTimestamp", "CurrentTransactionStartTimeMs", "TransactionDurationMs"):
            if column in row and row[column] != "None":
                row[column] = "X"
    return rows


def test_kafka_transactions_list_describe_describe_producers_find_hanging_abort(brokers, topic_name):
    txn_id = f"txn-{topic_name}"
    producers = []
    for target in brokers:
        create_topic(target.bootstrap, topic_name, 2)
        producer = transactional_producer(target.bootstrap, txn_id)
        producer.begin_transaction()
        produce_all(producer, [(topic_name, 0, b"k", b"committed"), (topic_name, 1, b"k", b"committed")])
        producer.commit_transaction(30)
        producer.begin_transaction()
        produce_all(producer, [(topic_name, 0, b"k", b"left open")])  # offsets 2 on partition 0
        producers.append(producer)

    listed = [[row for row in _transactions_table(out) if row["TransactionalId"] == txn_id]
              for out in on_both(brokers, TRANSACTIONS_COMMAND, "list")]
    assert listed[0] == listed[1] == [{"TransactionalId": txn_id, "Coordinator": "1", "ProducerId": "X",
                                       "TransactionState": "Ongoing"}]
    # Filtered by how long they have run (KIP-994) and by a pattern (KIP-1152).
    for filters, expected in ((["--duration-filter", "0"], ["Ongoing"]), (["--duration-filter", "86400000"], []),
                              (["--transactional-id-pattern", "txn-t-[0-9a-f]+"], ["Ongoing"]),
                              (["--transactional-id-pattern", "t-.*"], [])):
        listed = [[row["TransactionState"] for row in _transactions_table(out) if row["TransactionalId"] == txn_id]
                  for out in on_both(brokers, TRANSACTIONS_COMMAND, "list", *filters)]
        assert listed[0] == listed[1] == expected, filters
    for result in _run_on_both(brokers, TRANSACTIONS_COMMAND, ("list", "--transactional-id-pattern", "txn-("), False):
        assert result.returncode == 1 and "error INVALID_REGULAR_EXPRESSION" in result.stderr, result.stderr
    described = [_transactions_table(out) for out in
                 on_both(brokers, TRANSACTIONS_COMMAND, "describe", "--transactional-id", txn_id)]
    assert described[0] == described[1] == [{
        "CoordinatorId": "1", "TransactionalId": txn_id, "ProducerId": "X", "ProducerEpoch": "0",
        "TransactionState": "Ongoing", "TransactionTimeoutMs": "60000", "CurrentTransactionStartTimeMs": "X",
        "TransactionDurationMs": "X", "TopicPartitions": f"{topic_name}-0"}]
    producing = [_transactions_table(out) for out in
                 on_both(brokers, TRANSACTIONS_COMMAND, "describe-producers", "--topic", topic_name,
                         "--partition", "0")]
    assert producing[0] == producing[1] == [{
        "ProducerId": "X", "ProducerEpoch": "0", "LatestCoordinatorEpoch": "0", "LastSequence": "1",
        "LastTimestamp": "X", "CurrentTransactionStartOffset": "2"}]
    # The coordinator knows the open transaction: it is not hanging.
    hanging = on_both(brokers, TRANSACTIONS_COMMAND, "find-hanging", "--broker-id", "1",
                      "--max-transaction-timeout", "0")
    assert hanging[0] == hanging[1]
    assert table(hanging[0]) == []
    errors = on_both(brokers, TRANSACTIONS_COMMAND, "describe", "--transactional-id", f"none-{txn_id}", check=False)
    assert errors[0] == errors[1]

    # Abort from the outside, as an operator would a hanging transaction: the partition's
    # LSO moves past it and its producer has no transaction open there.
    aborted = on_both(brokers, TRANSACTIONS_COMMAND, "abort", "--topic", topic_name, "--partition", "0",
                      "--start-offset", "2")
    assert aborted == ["", ""]
    producing = [_transactions_table(out) for out in
                 on_both(brokers, TRANSACTIONS_COMMAND, "describe-producers", "--topic", topic_name,
                         "--partition", "0")]
    assert producing[0] == producing[1] and producing[0][0]["CurrentTransactionStartOffset"] == "None"
    ends = on_both(brokers, GET_OFFSET_SHELL, "--topic", topic_name)
    assert ends[0] == ends[1] == f"{topic_name}:0:4\n{topic_name}:1:2\n"  # data, commit; data, abort marker
    for producer in producers:
        producer.abort_transaction(30)  # the coordinator's own abort, after the tool's, is accepted


def test_kafka_get_offsets_delete_records_log_dirs_leader_election(brokers, topic_name, tmp_path):
    base = int(time.time() * 1000) - 60_000
    # Two records share the largest timestamp: the first of them is the max-timestamp offset.
    stamps = [base + 1000, base + 3000, base + 3000, base + 2000]
    for target in brokers:
        create_topic(target.bootstrap, topic_name, 2)
        one_batch_each(target.bootstrap, [(topic_name, p, b"key", b"value %d" % i) for p in (0, 1) for i in range(4)],
                       stamps + stamps)

    expected = {"-1": "4 4", "-2": "0 0", "-3": "1 1", "-4": "0 0", "0": "0 0", str(base + 1500): "1 1",
                str(base + 2500): "1 1", str(base + 3000): "1 1"}
    for spec, offsets in expected.items():
        ottla, kafka = on_both(brokers, GET_OFFSET_SHELL, "--topic", topic_name, "--time", spec)
        assert ottla == kafka == "".join(f"{topic_name}:{p}:{o}\n" for p, o in enumerate(offsets.split())), spec
    # Past the last timestamp, and the latest tiered offset (ListOffsets v9; no tiered
    # storage): no offset, which GetOffsetShell does not print.
    for spec in (str(base + 4000), "-5"):
        for target in brokers:
            result = kafka_tool(GET_OFFSET_SHELL, target.bootstrap, "--topic", topic_name, "--time", spec)
            assert (result.stdout, result.stderr) == ("", ""), (getattr(target, "name", "Ottla"), spec)
    ottla, kafka = on_both(brokers, GET_OFFSET_SHELL, "--topic-partitions", f"{topic_name}:1")
    assert ottla == kafka == f"{topic_name}:1:4\n"

    offsets = tmp_path / "delete.json"
    offsets.write_text(json.dumps({"version": 1, "partitions": [{"topic": topic_name, "partition": 1, "offset": 3}]}))
    ottla, kafka = on_both(brokers, DELETE_RECORDS_COMMAND, "--offset-json-file", str(offsets))
    assert ottla == kafka
    assert f"partition: {topic_name}-1\tlow_watermark: 3" in ottla
    ottla, kafka = on_both(brokers, GET_OFFSET_SHELL, "--topic", topic_name, "--time", "-2")
    assert ottla == kafka == f"{topic_name}:0:0\n{topic_name}:1:3\n"

    ottla, kafka = on_both(brokers, LOG_DIRS_COMMAND, "--describe", "--topic-list", topic_name)
    assert ottla == kafka  # the same bytes on both: sizes agree
    described = json.loads(ottla.splitlines()[-1])
    partitions = described["brokers"][0]["logDirs"][0]["partitions"]
    assert sorted(p["partition"] for p in partitions) == [f"{topic_name}-0", f"{topic_name}-1"]
    assert all(p["size"] > 0 and p["offsetLag"] == 0 for p in partitions)

    ottla, kafka = on_both(brokers, LEADER_ELECTION_COMMAND, "--election-type", "preferred",
                           "--topic", topic_name, "--partition", "0")
    assert ottla == kafka == f"Valid replica already elected for partitions {topic_name}-0\n"
    ottla, kafka = on_both(brokers, LEADER_ELECTION_COMMAND, "--election-type", "unclean", "--all-topic-partitions")
    assert ottla == kafka


def test_kafka_features_describe(brokers):
    """The features Ottla finalizes, each within what Kafka 4.3 supports; Kafka 4.3's
    other features (ELR, kraft.version) Ottla does not serve, and transaction.version 2
    (KIP-890 part 2) is not finalized yet. share.version 1 (KIP-932 share groups) and
    streams.version 1 (KIP-1071 streams groups) are finalized on both."""
    parsed = []
    for out in on_both(brokers, FEATURE_COMMAND, "describe"):
        features = {}
        for line in out.splitlines():
            fields = dict(re.findall(r"(\w+): (\S+)", line))
            features[fields["Feature"]] = fields
        parsed.append(features)
    ottla, kafka = parsed
    assert set(ottla) == {"group.version", "metadata.version", "transaction.version", "share.version",
                          "streams.version"}
    assert ottla["group.version"]["FinalizedVersionLevel"] == kafka["group.version"]["FinalizedVersionLevel"] == "1"
    assert ottla["share.version"]["FinalizedVersionLevel"] == kafka["share.version"]["FinalizedVersionLevel"] == "1"
    assert ottla["streams.version"]["FinalizedVersionLevel"] == kafka["streams.version"]["FinalizedVersionLevel"] == "1"
    assert ottla["transaction.version"]["FinalizedVersionLevel"] in ("1", "2")
    assert ottla["metadata.version"]["SupportedMinVersion"] == kafka["metadata.version"]["SupportedMinVersion"]
    assert ottla["metadata.version"]["FinalizedVersionLevel"].startswith("4.")
    assert all(f["Epoch"] != "-1" for f in ottla.values())


def test_kafka_producer_and_consumer_perf_test(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, 3)
    produced = kafka_tool(PRODUCER_PERFORMANCE, None, "--topic", topic_name, "--num-records", "2000",
                          "--record-size", "100", "--throughput", "-1", "--command-property",
                          f"bootstrap.servers={broker.bootstrap}", "acks=all").stdout
    assert re.search(r"^2000 records sent, [\d.]+ records/sec", produced, re.M), produced
    transactional = kafka_tool(PRODUCER_PERFORMANCE, None, "--topic", topic_name, "--num-records", "1000",
                               "--record-size", "100", "--throughput", "-1", "--transactional-id", f"perf-{topic_name}",
                               "--transaction-duration-ms", "100",
                               "--command-property", f"bootstrap.servers={broker.bootstrap}").stdout
    assert re.search(r"^1000 records sent", transactional, re.M), transactional
    consumed = kafka_tool(CONSUMER_PERFORMANCE, broker.bootstrap, "--topic", topic_name, "--num-records", "3000",
                          "--group", f"perf-{topic_name}", "--timeout", "30000",
                          "--command-property", "isolation.level=read_committed").stdout
    header, row = consumed.strip().splitlines()[-2:]
    result = dict(zip([c.strip() for c in header.split(",")], [c.strip() for c in row.split(",")], strict=True))
    assert int(result["data.consumed.in.nMsg"]) == 3000, consumed
    assert float(result["data.consumed.in.MB"]) == pytest.approx(3000 * 100 / 1024 / 1024, abs=0.001)


USERS = PlainUsers({"admin": "admin-secret", "alice": "alice-secret"})


@pytest.fixture(scope="module")
def acl_broker(tmp_path_factory):
    yield from USERS.broker(tmp_path_factory.mktemp("tool-acls") / "data")


def _client_properties(path, user: str) -> str:
    path.write_text(USERS.properties(user))
    return str(path)


def test_kafka_acls_add_list_remove_against_an_authorizer(acl_broker, topic_name, tmp_path):
    admin = ["--command-config", _client_properties(tmp_path / "admin.properties", "admin")]
    alice = ["--command-config", _client_properties(tmp_path / "alice.properties", "alice")]
    bootstrap = acl_broker.bootstrap
    kafka_tool(TOPIC_COMMAND, bootstrap, *admin, "--create", "--topic", topic_name, "--partitions", "1")
    # alice may not see the topic until an ACL lets her.
    assert topic_name not in kafka_tool(TOPIC_COMMAND, bootstrap, *alice, "--list").stdout.split()

    added = kafka_tool(ACL_COMMAND, bootstrap, *admin, "--add", "--allow-principal", "User:alice",
                       "--operation", "Read", "--operation", "Describe", "--topic", topic_name).stdout
    pattern = f"ResourcePattern(resourceType=TOPIC, name={topic_name}, patternType=LITERAL)"
    assert f"Adding ACLs for resource `{pattern}`:" in added
    assert "(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)" in added
    assert "(principal=User:alice, host=*, operation=DESCRIBE, permissionType=ALLOW)" in added
    kafka_tool(ACL_COMMAND, bootstrap, *admin, "--add", "--deny-principal", "User:alice", "--operation", "Write",
               "--topic", "secret-", "--resource-pattern-type", "prefixed")
    kafka_tool(ACL_COMMAND, bootstrap, *admin, "--add", "--allow-principal", "User:alice", "--consumer",
               "--topic", topic_name, "--group", "alice-group")

    listed = kafka_tool(ACL_COMMAND, bootstrap, *admin, "--list", "--topic", topic_name).stdout
    assert listed.startswith(f"Current ACLs for resource `{pattern}`:")
    entries = sorted(re.findall(r"\(principal=(\S+), host=(\S+), operation=(\w+), permissionType=(\w+)\)", listed))
    assert entries == [("User:alice", "*", "DESCRIBE", "ALLOW"), ("User:alice", "*", "READ", "ALLOW")]
    everything = kafka_tool(ACL_COMMAND, bootstrap, *admin, "--list").stdout
    assert "ResourcePattern(resourceType=TOPIC, name=secret-, patternType=PREFIXED)" in everything
    assert "(principal=User:alice, host=*, operation=WRITE, permissionType=DENY)" in everything
    assert "ResourcePattern(resourceType=GROUP, name=alice-group, patternType=LITERAL)" in everything
    by_principal = kafka_tool(ACL_COMMAND, bootstrap, *admin, "--list", "--principal", "User:alice").stdout
    assert by_principal.count("ResourcePattern(") == 3
    assert topic_name in kafka_tool(TOPIC_COMMAND, bootstrap, *alice, "--list").stdout.split()

    # alice may not manage ACLs herself.
    refused = kafka_tool(ACL_COMMAND, bootstrap, *alice, "--list", check=False)
    assert "ClusterAuthorizationException" in refused.stdout + refused.stderr

    kafka_tool(ACL_COMMAND, bootstrap, *admin, "--remove", "--force", "--allow-principal", "User:alice",
               "--operation", "Read", "--operation", "Describe", "--topic", topic_name)
    # --consumer's READ and DESCRIBE on the topic were the same two ACLs: none is left there.
    assert kafka_tool(ACL_COMMAND, bootstrap, *admin, "--list", "--topic", topic_name).stdout.strip() == ""
    assert topic_name not in kafka_tool(TOPIC_COMMAND, bootstrap, *alice, "--list").stdout.split()
    kafka_tool(ACL_COMMAND, bootstrap, *admin, "--remove", "--force", "--group", "alice-group")
    kafka_tool(ACL_COMMAND, bootstrap, *admin, "--remove", "--force", "--topic", "secret-",
               "--resource-pattern-type", "prefixed")
    assert kafka_tool(ACL_COMMAND, bootstrap, *admin, "--list").stdout.strip() == ""
