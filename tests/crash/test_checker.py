"""The harness's checks themselves (workload.check): that what they read over the
protocol is what a client reads, and that an index pointing past its log is caught."""

from __future__ import annotations

import os
import random

from ottla.testing import BrokerProcess
from ottla.tools.client import Cluster
from tests.clients import create_topic, idempotent_producer, produce_all, read_all

from . import workload
from .forked import ForkedBroker
from .harness import record
from .recording import keep_at_random, keep_everything, keep_nothing


def test_the_checks_read_what_a_consumer_reads(tmp_path):
    """On crash states of the default mode (tails lost, transactions left open and then
    aborted by the fence), the protocol reads of workload.check and confluent-kafka's
    consumer (read_uncommitted; read_committed for the transactions) get the same values
    in the same order. Seen failing with workload._read stopping one offset short of
    the end (`record.offset < ends[partition] - 1`)."""
    recorded = record(str(tmp_path), fsync=False)
    recording = recorded.recording
    rng = random.Random(7)
    # Everything the workload wrote (every topic has records to compare), a random part
    # of the first half's (a transaction left open, for the fence to abort), and only
    # what was flushed by the end.
    end, middle = len(recording.ops) - 1, len(recording.ops) // 2
    states = [(end, keep_everything), (middle, keep_at_random(rng)), (end, keep_nothing)]
    read: dict[str, int] = {}
    for n, (cut, chooser) in enumerate(states):
        path = str(tmp_path / f"state-{n}")
        recording.crash_state(cut, chooser).materialize(path)
        broker = ForkedBroker(path, recorded.properties, log_path=path + ".broker.log")
        broker.start(timeout=120)
        try:
            with Cluster(broker.bootstrap) as cluster:
                found = workload.Findings()
                workload._fence(cluster, found)
                assert not found.violations
                for topic, partitions, read_committed in ((workload.PLAIN, [0, 1], False),
                                                           (workload.RAW, [0], False),
                                                           (workload.TXN, [0, 1], True)):
                    ours = workload._read(cluster, topic, partitions, read_committed)
                    theirs = read_all(broker.bootstrap, topic, partitions,
                                      isolation="read_committed" if read_committed else "read_uncommitted")
                    assert ours == theirs, f"state {n}, {topic}"
                    read[topic] = read.get(topic, 0) + sum(map(len, ours.values()))
        finally:
            broker.kill()
    assert all(read.get(topic) for topic in (workload.PLAIN, workload.RAW, workload.TXN)), read


def test_an_index_entry_past_its_log_is_a_violation(tmp_path):
    """The files a broker leaves pass the index check; cut a segment's log short and its
    index entries past the cut are reported (its time index's one entry, the segment's
    max timestamp, once the log is empty)."""
    data_dir = str(tmp_path / "data")
    broker = BrokerProcess(data_dir)
    broker.start()
    try:
        create_topic(broker.bootstrap, "t", 1, {"segment.bytes": "65536", "index.interval.bytes": "512"})
        produce_all(idempotent_producer(broker.bootstrap, **{"batch.size": 1000, "linger.ms": 0}),
                    [("t", 0, None, b"v" * 200) for _ in range(100)])
    finally:
        assert broker.stop() == 0
    found = workload.Findings()
    workload._check_indexes(data_dir, found)
    assert found.violations == []
    log = os.path.join(data_dir, "t-0", "00000000000000000000.log")
    assert os.path.getsize(os.path.join(data_dir, "t-0", "00000000000000000000.index")) > 8, "no index to check"
    os.truncate(log, os.path.getsize(log) // 2)
    workload._check_indexes(data_dir, found)
    assert any("t-0/00000000000000000000.index" in v for v in found.violations), found.violations
    os.truncate(log, 0)
    found = workload.Findings()
    workload._check_indexes(data_dir, found)
    assert any("t-0/00000000000000000000.timeindex" in v for v in found.violations), found.violations


def test_the_flushed_transactions_are_those_whose_abort_marker_is_there(tmp_path):
    """Without --fsync an aborted transaction may show when its partition lost the ABORT
    marker (a later commit's marker closes its records); it is a violation only where the
    marker had been flushed. flushed_values names those transactions' values: an aborted
    one with its marker, not a committed one, not one still open."""
    from ottla.protocol.batch import TRANSACTIONAL_FLAG, BatchHeader, build_batch, encode_record
    from ottla.protocol.control import ControlType, EndTxnMarker
    from ottla.storage.log import PartitionLog
    from ottla.storage.log_config import LogConfig

    log = PartitionLog.create(str(tmp_path / "txn-0"), "txn", 0, LogConfig(segment_ms=2**62))  # one segment
    sequence = 0
    for values, outcome in (([b"a1", b"a2"], ControlType.ABORT), ([b"c1"], ControlType.COMMIT), ([b"o1"], None)):
        records = [encode_record(None, v, offset_delta=i) for i, v in enumerate(values)]
        data = build_batch(records, timestamp=1_000, producer_id=7, producer_epoch=0, base_sequence=sequence,
                           attributes=TRANSACTIONAL_FLAG)
        log.append_batch(data, BatchHeader.parse(data))
        sequence += len(values)
        if outcome is not None:
            log.append_marker(7, 0, EndTxnMarker(outcome, 0))
    log.close_files()
    with open(tmp_path / "txn-0" / "00000000000000000000.log", "rb") as f:
        data = f.read()
    assert workload.flushed_values([("txn-0/00000000000000000000.log", data)]) == {"txn-0": {b"a1", b"a2"}}
