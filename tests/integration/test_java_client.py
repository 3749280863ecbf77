"""The Java client 4.3.1 against Ottla, the same program against Apache Kafka 4.3.1:
tests/java/ClientCheck.java drives an idempotent producer, a transactional one (commit,
abort, a transaction left open and read around with read_committed, then fenced through
the Admin client), consumers of both group protocols (classic and consumer, KIP-848) and
the Admin calls Ottla serves, printing each result as a JSON line. Ottla's lines are
checked for what they must say, and compared with Kafka's line for line; where the two
differ for a reason the test names it."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from tests.reference.kafka import TOOL_OPTS, java, libs_dir
from tests.system_tools import require

SOURCE = os.path.join(os.path.dirname(os.path.dirname(__file__)), "java", "ClientCheck.java")

# Kafka finalizes transaction.version 2 (KIP-890 part 2) and the Java client uses it there:
# the epoch is bumped at every transaction end, so the open transaction's sequence starts
# at 0 again, and a fenced producer learns it from Produce (InvalidProducerEpoch) rather
# than from AddPartitionsToTxn (ProducerFenced). Ottla finalizes version 1 for now.
TRANSACTION_VERSION_2 = {"describeProducers", "fenceProducers"}
# Kafka 4.3 finalizes features Ottla does not serve (ELR, kraft, share and Streams groups).
FEATURES = {"describeFeatures"}


@pytest.fixture(scope="session")
def client_check(tmp_path_factory) -> str:
    """ClientCheck compiled once for the session: the directory of its classes."""
    javac = require("javac")
    classes = str(tmp_path_factory.mktemp("java-classes"))
    subprocess.run([javac, "-nowarn", "-cp", os.path.join(libs_dir(), "*"), "-d", classes, SOURCE],
                   check=True, capture_output=True, text=True, timeout=300)
    return classes


def run_client_check(classes: str, bootstrap: str, prefix: str) -> dict[str, list[dict]]:
    result = subprocess.run([java(), *TOOL_OPTS, "-cp", f"{classes}{os.pathsep}{os.path.join(libs_dir(), '*')}",
                             "ClientCheck", bootstrap, prefix], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, f"{result.stdout[-3000:]}\n{result.stderr[-5000:]}"
    checks: dict[str, list[dict]] = {}
    for line in result.stdout.splitlines():
        if line.startswith("{"):
            record = json.loads(line)
            checks.setdefault(record.pop("check"), []).append(record)
    return checks


def test_java_client_producers_consumers_and_admin_against_ottla_and_kafka(broker, kafka_reference, client_check,
                                                                          topic_name):
    ottla = run_client_check(client_check, broker.bootstrap, topic_name)
    kafka = run_client_check(client_check, kafka_reference.bootstrap, topic_name)
    data = f"{topic_name}-data"

    def one(name: str) -> dict:
        (record,) = ottla[name]
        return record

    # Admin: topics, configs, partitions, cluster.
    assert one("createTopicsExisting") == {"error": "TopicExistsException"}
    assert one("describeTopics") == {"partitions": 3, "leader": 1, "replicas": 1, "isr": 1, "internal": False,
                                     "topicIdSet": True}
    assert one("describeTopicsUnknown") == {"error": "UnknownTopicOrPartitionException"}
    assert one("describeCluster") == {"nodes": 1, "node": 1, "controller": 1, "clusterIdSet": True}
    assert one("describeConfigs") == {"retention.ms": "3600000", "retentionSource": "DYNAMIC_TOPIC_CONFIG",
                                      "cleanup.policy": "delete", "cleanupSource": "DEFAULT_CONFIG",
                                      "segment.bytes": "1073741824", "max.message.bytes": "1048588"}
    assert one("incrementalAlterConfigs") == {"retention.ms": "7200000", "cleanup.policy": "delete,compact"}
    assert one("incrementalAlterConfigsInvalid") == {"error": "InvalidConfigurationException"}
    assert one("createPartitions") == {"partitions": 4, "shrinkError": "InvalidPartitionsException"}

    # Producers: idempotent, transactional, read_committed around an open transaction.
    assert one("idempotentProduce") == {"offsets": [0, 1, 2, 3, 4, 5]}
    assert one("describeTransactions") == {"state": "ONGOING", "partitions": f"[{data}-1]", "timeoutMs": 60000,
                                           "coordinator": 1}
    assert one("listTransactions") == {"states": ["ONGOING"]}
    # Offsets 0-2 committed, 3 the commit marker, 4-5 aborted, 6 the abort marker, 7 the
    # open transaction's record.
    assert [p["txnStartOffset"] for p in one("describeProducers")["producers"]] == [7]
    assert one("listOffsets") == {"latestCommitted": 7, "latestUncommitted": 8, "earliest": 0, "maxTimestamp": 5,
                                  "forTimestamp": 3}
    committed = ["committed-0", "committed-1", "committed-2"]
    assert one("readCommitted") == {"values": committed}
    assert one("readCommittedAfterCommit") == {"values": committed + ["open"]}
    assert one("readUncommitted") == {"values": committed + ["aborted-0", "aborted-1", "open"]}
    assert one("fenceProducers")["error"] in ("ProducerFencedException", "InvalidProducerEpochException")
    assert one("describeTransactionsAfterFence") == {"state": "EMPTY"}
    assert one("deleteRecords") == {"lowWatermark": 2, "earliest": 2}

    # Consumers of both protocols, and the groups through the Admin client.
    assert ottla["describeConsumerGroupsLive"] == [
        {"protocol": "classic", "type": "CLASSIC", "state": "STABLE", "members": 1, "assigned": 4, "assignor": "range"},
        {"protocol": "consumer", "type": "CONSUMER", "state": "STABLE", "members": 1, "assigned": 4,
         "assignor": "uniform"}]
    # 4 left on partition 0 after DeleteRecords, 4 committed on partition 1.
    assert one("groupsConsumed") == {"counts": {"classic": 8, "consumer": 8}}
    assert one("listGroups") == {"groups": {"classic": "CLASSIC/EMPTY", "consumer": "CONSUMER/EMPTY"}}
    assert ottla["describeConsumerGroups"] == [
        {"protocol": "classic", "type": "CLASSIC", "state": "EMPTY", "members": 0},
        {"protocol": "consumer", "type": "CONSUMER", "state": "EMPTY", "members": 0}]
    assert one("listConsumerGroupOffsets") == {"offsets": {"0": 6, "1": 9, "2": 0, "3": 0}}  # past the last marker
    assert one("alteredAndDeletedOffsets") == {"offsets": {"0": 3, "2": 0, "3": 0}, "metadata": "moved"}
    # DescribeGroups v6 (KIP-1043): a deleted group is not found.
    assert one("deleteConsumerGroups") == {"error": "GroupIdNotFoundException"}
    assert one("describeFeatures")["finalized"]["group.version"] == 1
    assert one("deleteTopics") == {"listed": False}
    assert "failed" not in ottla

    # Kafka answered the same, but for the differences named above.
    differing = TRANSACTION_VERSION_2 | FEATURES
    assert {name: records for name, records in ottla.items() if name not in differing} == \
        {name: records for name, records in kafka.items() if name not in differing}
