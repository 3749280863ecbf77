"""Kafka's own DumpLogSegments (kafka-dump-log of Kafka 4.3.1) reads every file Ottla
writes, with no error, and prints what `ottla dump-log` prints on the same files.

The files come from real clients (confluent-kafka): an idempotent producer, a
transactional one committing and aborting, a classic consumer group committing offsets,
against an Ottla stopped cleanly (so every segment has its producer snapshot and sealed
indexes). Kafka 4.3 prints __transaction_state and __consumer_offsets records as JSON of
their schemas where `ottla dump-log` keeps Kafka 3's text forms; those records are
compared field by field, everything else line by line."""

from __future__ import annotations

import glob
import json
import os
import re
import struct
import subprocess
import sys

import pytest
from confluent_kafka import Consumer, TopicPartition

from tests.clients import create_topic, idempotent_producer, produce_all, transactional_producer
from tests.kafka_tools import DUMP_LOG_SEGMENTS, kafka_tool

TXN_STATES = ["Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort", "Dead",
              "PrepareEpochFence"]
RECORD = re.compile(r"^(\| offset: \d+ .*?) key: (.*) payload: (.*)$")


def ottla_dump(*args: str) -> str:
    result = subprocess.run([sys.executable, "-m", "ottla.tools.cli", "dump-log", *args],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0 and not result.stderr, result.stderr
    return result.stdout


def kafka_dump(*args: str) -> tuple[str, str]:
    result = kafka_tool(DUMP_LOG_SEGMENTS, None, *args)
    assert "Exception" not in result.stderr and "error" not in result.stderr.lower(), result.stderr
    return result.stdout, result.stderr


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    """An Ottla data directory, stopped cleanly, and the names in it."""
    from ottla.testing import BrokerProcess

    broker = BrokerProcess(str(tmp_path_factory.mktemp("dump") / "data")).start()
    topic, txn_id, group = "dumped", "dump-txn", "dump-group"
    try:
        # Small segments with dense indexes: several segments, each with index entries.
        create_topic(broker.bootstrap, topic, 1, {"segment.bytes": "2000", "index.interval.bytes": "100"})
        produce_all(idempotent_producer(broker.bootstrap, **{"linger.ms": 100}),
                    [(topic, 0, b"k%d" % i, b"value-%d" % i) for i in range(30)])
        txn = transactional_producer(broker.bootstrap, txn_id, **{"linger.ms": 100})
        txn.begin_transaction()
        produce_all(txn, [(topic, 0, b"ck", b"committed %d" % i) for i in range(3)])
        txn.commit_transaction(30)
        txn.begin_transaction()
        produce_all(txn, [(topic, 0, b"ak", b"aborted %d" % i) for i in range(2)])
        txn.abort_transaction(30)
        tail = idempotent_producer(broker.bootstrap, **{"linger.ms": 0})
        for i in range(25):  # one batch each: more segments and index entries
            produce_all(tail, [(topic, 0, None, b"tail-%d" % i)])
        consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "enable.auto.commit": False,
                             "auto.offset.reset": "earliest"})
        consumer.subscribe([topic])
        while not consumer.assignment():
            consumer.poll(0.2)
        consumer.commit(offsets=[TopicPartition(topic, 0, 7)], asynchronous=False)
        consumer.close()
    finally:
        assert broker.stop() == 0  # a clean stop: producer snapshots, sealed time indexes
    return {"dir": broker.data_dir, "topic": topic, "txn_id": txn_id, "group": group}


def _files(directory: str, *suffixes: str) -> list[str]:
    return sorted(path for suffix in suffixes for path in glob.glob(os.path.join(directory, f"*{suffix}")))


def test_dump_log_reads_logs_indexes_snapshots_and_txnindex_as_ottla_dump_log(written):
    directory = os.path.join(written["dir"], f"{written['topic']}-0")
    files = _files(directory, ".log", ".index", ".timeindex", ".snapshot", ".txnindex")
    logs = _files(directory, ".log")
    assert len(logs) >= 2 and _files(directory, ".snapshot") and _files(directory, ".txnindex")
    kafka, errors = kafka_dump("--files", ",".join(files), "--deep-iteration", "--print-data-log")
    ottla = ottla_dump(*files)
    # Kafka's DumpLogSegments counts its offsets from -1 in every segment, so it reports
    # each segment but the first as "non-consecutive"; nothing else may be on its stderr.
    later = [path for path in logs if not path.endswith(f"{0:020d}.log")]
    assert errors.splitlines() == [line for path in later for line in (
        f"Non-consecutive offsets in {path}", f"  -1 is followed by {int(os.path.basename(path)[:20])}")]
    assert kafka.splitlines() == ottla.splitlines()

    # What the files hold, as Kafka reads them: both kinds of batches, the markers, the
    # aborted transaction in the .txnindex, every producer in the snapshots.
    assert re.search(r"^baseOffset: 0 lastOffset: 29 count: 30 baseSequence: 0 lastSequence: 29 producerId: \d+ "
                     r"producerEpoch: 0 .* isTransactional: false isControl: false", kafka, re.M)
    markers = re.findall(r"^\| offset: (\d+) .* endTxnMarker: (COMMIT|ABORT) coordinatorEpoch: 0$", kafka, re.M)
    assert [kind for _, kind in markers] == ["COMMIT", "ABORT"]
    assert len(re.findall(r"^\| offset: \d+ .* key: ck payload: committed \d$", kafka, re.M)) == 3
    assert len(re.findall(r"^\| offset: \d+ .* key: ak payload: aborted \d$", kafka, re.M)) == 2
    abort_offset = int(markers[1][0])
    txnindex = re.findall(r"^version: 0 producerId: (\d+) firstOffset: (\d+) lastOffset: (\d+) "
                          r"lastStableOffset: (\d+)$", kafka, re.M)
    assert len(txnindex) == 1 and int(txnindex[0][2]) == abort_offset
    snapshot_producers = re.findall(r"^producerId: (\d+) producerEpoch: 0 coordinatorEpoch: -?\d+ "
                                    r"currentTxnFirstOffset: OptionalLong.empty lastTimestamp: \d+", kafka, re.M)
    assert len(set(snapshot_producers)) == 3  # the two idempotent producers and the transactional one
    assert re.search(r"^offset: \d+ position: \d+$", kafka, re.M)  # index entries
    assert re.search(r"^timestamp: \d+ offset: \d+$", kafka, re.M)  # time index entries


def test_dump_log_index_sanity_check_and_verify_index_only(written):
    directory = os.path.join(written["dir"], f"{written['topic']}-0")
    indexes = _files(directory, ".index", ".timeindex")
    kafka, errors = kafka_dump("--files", ",".join(indexes), "--index-sanity-check")
    assert not errors
    assert [line for line in kafka.splitlines() if not line.startswith("Dumping ")] == [
        f"{path} passed sanity check." for path in indexes]
    # --verify-index-only reads each index against its log: every mismatch would be printed.
    kafka, errors = kafka_dump("--files", ",".join(indexes), "--verify-index-only")
    assert not errors and kafka.splitlines() == [f"Dumping {path}" for path in indexes]


def _kafka_record(key: str, payload: str) -> tuple[dict, dict | None]:
    return json.loads(key), None if payload == "<DELETE>" else json.loads(payload)


def test_dump_log_transaction_log_decoder_agrees_with_ottla(written):
    logs = sorted(p for p in glob.glob(os.path.join(written["dir"], "__transaction_state-*", "*.log"))
                  if os.path.getsize(p))
    assert logs
    kafka, errors = kafka_dump("--files", ",".join(logs), "--transaction-log-decoder")
    assert not errors
    ottla = ottla_dump("--transaction-log-decoder", *logs)
    states = []
    for kafka_line, ottla_line in zip(kafka.splitlines(), ottla.splitlines(), strict=True):
        kafka_record, ottla_record = RECORD.match(kafka_line), RECORD.match(ottla_line)
        if kafka_record is None:
            assert kafka_line == ottla_line
            continue
        assert ottla_record is not None and kafka_record.group(1) == ottla_record.group(1)
        key, value = _kafka_record(kafka_record.group(2), kafka_record.group(3))
        assert key["type"] == "0" and key["data"]["transactionalId"] == ottla_record.group(2)
        assert value is not None
        data = value["data"]
        metadata = re.fullmatch(
            r"TransactionMetadata\(transactionalId=(.*), producerId=(-?\d+), producerEpoch=(-?\d+), "
            r"txnTimeoutMs=(\d+), state=(\w+), pendingState=None, topicPartitions=Set\((.*)\), "
            r"txnStartTimestamp=(-?\d+), txnLastUpdateTimestamp=(-?\d+)\)", ottla_record.group(3))
        assert metadata, ottla_record.group(3)
        # An Empty transaction's partitions are a null array, as Kafka writes them.
        partitions = sorted(f"{t['topic']}-{p}" for t in data["transactionPartitions"] or []
                            for p in t["partitionIds"])
        assert metadata.groups() == (
            key["data"]["transactionalId"], str(data["producerId"]), str(data["producerEpoch"]),
            str(data["transactionTimeoutMs"]), TXN_STATES[data["transactionStatus"]],
            ", ".join(partitions), str(data["transactionStartTimestampMs"]),
            str(data["transactionLastUpdateTimestampMs"])), kafka_line
        if key["data"]["transactionalId"] == written["txn_id"]:
            states.append(metadata.group(5))
    # The transaction's life as the coordinator wrote it: a commit, then an abort.
    assert states == ["Empty", "Ongoing", "PrepareCommit", "CompleteCommit", "Ongoing", "PrepareAbort",
                      "CompleteAbort"], states


def _assigned(hex_bytes: str) -> list[tuple[str, int]]:
    """The (topic, partition) pairs of a consumer protocol Assignment (version, topics)."""
    data = bytes.fromhex(hex_bytes)
    position = 2
    (topics,) = struct.unpack_from(">i", data, position)
    position += 4
    pairs = []
    for _ in range(topics):
        (length,) = struct.unpack_from(">h", data, position)
        topic = data[position + 2:position + 2 + length].decode()
        position += 2 + length
        (count,) = struct.unpack_from(">i", data, position)
        pairs += [(topic, p) for p in struct.unpack_from(f">{count}i", data, position + 4)]
        position += 4 + 4 * count
    return sorted(pairs)


def test_dump_log_offsets_decoder_agrees_with_ottla(written):
    logs = sorted(p for p in glob.glob(os.path.join(written["dir"], "__consumer_offsets-*", "*.log"))
                  if os.path.getsize(p))
    assert logs
    kafka, errors = kafka_dump("--files", ",".join(logs), "--offsets-decoder")
    assert not errors
    ottla = ottla_dump("--offsets-decoder", *logs)
    commits, generations = [], []
    for kafka_line, ottla_line in zip(kafka.splitlines(), ottla.splitlines(), strict=True):
        kafka_record, ottla_record = RECORD.match(kafka_line), RECORD.match(ottla_line)
        if kafka_record is None:
            assert kafka_line == ottla_line
            continue
        assert ottla_record is not None and kafka_record.group(1) == ottla_record.group(1)
        key, value = _kafka_record(kafka_record.group(2), kafka_record.group(3))
        ottla_key, ottla_value = ottla_record.group(2), ottla_record.group(3)
        if key["type"] in ("0", "1"):  # an offset commit
            k = key["data"]
            assert ottla_key == f"offset::{k['group']}:{k['topic']}:{k['partition']}"
            assert value is not None, kafka_line
            expected = str(value["data"]["offset"]) + (f":{value['data']['metadata']}"
                                                       if value["data"]["metadata"] else "")
            assert ottla_value == expected
            commits.append((k["group"], k["topic"], k["partition"], value["data"]["offset"]))
        else:  # a classic group's metadata
            assert key["type"] == "2" and ottla_key == f"metadata::{key['data']['group']}"
            if value is None:
                assert ottla_value == "<DELETE>"
                continue
            data = value["data"]
            header = re.fullmatch(r"(\w+):(\w*):(\d+):\{(.*)\}", ottla_value)
            assert header, ottla_value
            assert header.group(1, 2, 3) == (data["protocolType"], str(data["protocol"]), str(data["generation"]))
            assignments = dict(item.split("=") for item in header.group(4).split(",") if item)
            assert {member_id: _assigned(hex_bytes) for member_id, hex_bytes in assignments.items()} == {
                m["memberId"]: sorted((t["topic"], p) for t in m["assignment"]["assignedPartitions"]
                                      for p in t["partitions"]) for m in data["members"]}
            for member in data["members"]:
                assert member["clientHost"] == "/127.0.0.1"
            generations.append((data["generation"], len(data["members"])))
    assert commits == [(written["group"], written["topic"], 0, 7)]
    assert generations and generations[0] == (1, 1) and generations[-1][1] == 0  # joined, then left
