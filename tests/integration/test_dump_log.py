"""`ottla dump-log` on the files a real broker wrote for confluent-kafka producers:
idempotent, transactional (committed and aborted) and compressed batches, the producer
snapshot of a clean stop, and the `__transaction_state` records."""

from __future__ import annotations

import glob
import os
import re
import subprocess
import sys

import pytest

from tests.clients import create_topic, idempotent_producer, produce_all, transactional_producer


def dump_log(*paths: str) -> list[str]:
    result = subprocess.run([sys.executable, "-m", "ottla.tools.cli", "dump-log", *paths],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()


def batch_line(fields: str) -> str:
    """A pattern for a whole batch line with these leading fields, the rest as the seed's."""
    return (fields + r" partitionLeaderEpoch: 0 isTransactional: (true|false) isControl: (true|false) "
            r"deleteHorizonMs: OptionalLong.empty position: \d+ CreateTime: \d+ size: \d+ magic: 2 "
            r"compresscodec: \w+ crc: \d+ isvalid: true")


def test_idempotent_and_transactional_batches_markers_txnindex_snapshot_and_transaction_state(
        fresh_broker, topic_name):
    broker = fresh_broker()
    create_topic(broker.bootstrap, topic_name, 1)
    # One batch of four: a long linger gathers them.
    produce_all(idempotent_producer(broker.bootstrap, **{"linger.ms": 200}),
                [(topic_name, 0, None, b"e%d" % i) for i in range(4)])
    txn_id = f"dump-{topic_name}"
    txn = transactional_producer(broker.bootstrap, txn_id, **{"linger.ms": 200})
    txn.begin_transaction()
    produce_all(txn, [(topic_name, 0, b"key", b"committed %d" % i) for i in range(3)])
    txn.commit_transaction(30)
    txn.begin_transaction()
    produce_all(txn, [(topic_name, 0, None, b"aborted")])
    txn.abort_transaction(30)
    assert broker.stop() == 0  # a clean stop writes the producer snapshot

    directory = os.path.join(broker.data_dir, f"{topic_name}-0")
    log = dump_log(os.path.join(directory, f"{0:020d}.log"))
    assert log[1] == "Log starting offset: 0"
    idempotent = re.fullmatch(batch_line(
        r"baseOffset: 0 lastOffset: 3 count: 4 baseSequence: 0 lastSequence: 3 producerId: (\d+) producerEpoch: 0"),
        log[2])
    assert idempotent and idempotent.group(2, 3) == ("false", "false"), log[2]
    for i in range(4):
        assert re.fullmatch(rf"\| offset: {i} CreateTime: \d+ keySize: -1 valueSize: 2 sequence: {i} "
                            rf"headerKeys: \[\] payload: e{i}", log[3 + i]), log[3 + i]

    committed = re.fullmatch(batch_line(
        r"baseOffset: 4 lastOffset: 6 count: 3 baseSequence: 0 lastSequence: 2 producerId: (\d+) producerEpoch: 0"),
        log[7])
    assert committed and committed.group(2, 3) == ("true", "false"), log[7]
    txn_pid = committed.group(1)
    assert log[8].endswith(" keySize: 3 valueSize: 11 sequence: 0 headerKeys: [] key: key payload: committed 0")
    commit = re.fullmatch(batch_line(rf"baseOffset: 7 lastOffset: 7 count: 1 baseSequence: -1 lastSequence: -1 "
                                     rf"producerId: {txn_pid} producerEpoch: 0"), log[11])
    assert commit and commit.group(1, 2) == ("true", "true"), log[11]
    assert re.fullmatch(r"\| offset: 7 CreateTime: \d+ keySize: 4 valueSize: 6 sequence: -1 headerKeys: \[\] "
                        r"endTxnMarker: COMMIT coordinatorEpoch: \d+", log[12]), log[12]
    assert re.fullmatch(batch_line(rf"baseOffset: 8 lastOffset: 8 count: 1 baseSequence: 3 lastSequence: 3 "
                                   rf"producerId: {txn_pid} producerEpoch: 0"), log[13]), log[13]
    assert log[14].endswith(" sequence: 3 headerKeys: [] payload: aborted")
    assert re.fullmatch(r"\| offset: 9 CreateTime: \d+ keySize: 4 valueSize: 6 sequence: -1 headerKeys: \[\] "
                        r"endTxnMarker: ABORT coordinatorEpoch: \d+", log[16]), log[16]
    assert len(log) == 17

    assert dump_log(os.path.join(directory, f"{0:020d}.txnindex"))[1:] == [
        f"version: 0 producerId: {txn_pid} firstOffset: 8 lastOffset: 9 lastStableOffset: 10"]

    snapshot = dump_log(os.path.join(directory, f"{10:020d}.snapshot"))
    entries = {line.split()[1]: line for line in snapshot[1:]}
    assert re.fullmatch(rf"producerId: {idempotent.group(1)} producerEpoch: 0 coordinatorEpoch: -1 "
                        r"currentTxnFirstOffset: OptionalLong.empty lastTimestamp: (\d+) firstSequence: 0 "
                        r"lastSequence: 3 "
                        r"lastOffset: 3 offsetDelta: 3 timestamp: \1", entries[idempotent.group(1)])
    assert re.fullmatch(rf"producerId: {txn_pid} producerEpoch: 0 coordinatorEpoch: \d+ "
                        r"currentTxnFirstOffset: OptionalLong.empty "
                        r"lastTimestamp: (\d+) firstSequence: 3 lastSequence: 3 lastOffset: 8 offsetDelta: 0 "
                        r"timestamp: \1", entries[txn_pid])
    assert len(entries) == 2

    # The coordinator's records, decoded because the files live in __transaction_state-N.
    state_logs = [path for path in glob.glob(os.path.join(broker.data_dir, "__transaction_state-*", "*.log"))
                  if os.path.getsize(path)]
    states = [line.split(" payload: ")[1] for line in dump_log(*state_logs) if f" key: {txn_id} " in line]
    partitions = f"topicPartitions=Set({topic_name}-0)"
    metadata = rf"TransactionMetadata\(transactionalId={txn_id}, producerId={txn_pid}, producerEpoch=0, "
    expected = [
        ("Empty", r"topicPartitions=Set\(\), txnStartTimestamp=-1"),
        ("Ongoing", re.escape(partitions) + r", txnStartTimestamp=\d+"),
        ("PrepareCommit", re.escape(partitions) + r", txnStartTimestamp=\d+"),
        ("CompleteCommit", r"topicPartitions=Set\(\), txnStartTimestamp=\d+"),
        ("Ongoing", re.escape(partitions) + r", txnStartTimestamp=\d+"),
        ("PrepareAbort", re.escape(partitions) + r", txnStartTimestamp=\d+"),
        ("CompleteAbort", r"topicPartitions=Set\(\), txnStartTimestamp=\d+"),
    ]
    assert len(states) == len(expected), states
    for line, (state, rest) in zip(states, expected, strict=True):
        assert re.fullmatch(metadata + rf"txnTimeoutMs=\d+, state={state}, pendingState=None, {rest}, "
                            r"txnLastUpdateTimestamp=\d+\)", line), line


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_compressed_batches_are_decoded_for_printing(broker, topic_name, codec):
    create_topic(broker.bootstrap, topic_name, 1)
    # Repetitive values: librdkafka sends a batch uncompressed when compression does not pay.
    values = [b"%s value %03d " % (codec.encode(), i) + b"x" * 200 for i in range(50)]
    producer = idempotent_producer(broker.bootstrap, **{"compression.type": codec, "linger.ms": 200})
    produce_all(producer, [(topic_name, 0, None, value) for value in values])

    lines = dump_log(os.path.join(broker.data_dir, f"{topic_name}-0", f"{0:020d}.log"))
    batches = [line for line in lines if line.startswith("baseOffset: ")]
    assert batches and all(f" compresscodec: {codec} " in b and b.endswith("isvalid: true") for b in batches)
    records = [line for line in lines if line.startswith("| ")]
    assert [line.split(" payload: ")[1] for line in records] == [v.decode() for v in values]
    assert [int(line.split()[2]) for line in records] == list(range(50))
