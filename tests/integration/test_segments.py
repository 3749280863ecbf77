"""The partition on disk: Kafka's file names, sparse indexes, segment rolls."""

from __future__ import annotations

import os
import struct

from ottla.protocol.batch import HEADER_SIZE, BatchHeader
from tests.clients import consume_partitions, create_topic, idempotent_producer, produce_all


def _files(data_dir: str, topic: str) -> list[str]:
    return sorted(os.listdir(os.path.join(data_dir, f"{topic}-0")))


def test_segment_files_have_kafka_names_and_the_index_holds_entries(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, 1)
    producer = idempotent_producer(broker.bootstrap, **{"linger.ms": 0, "batch.size": 2000})
    produce_all(producer, [(topic_name, 0, None, b"x" * 500) for _ in range(2000)])

    files = _files(broker.data_dir, topic_name)
    assert "00000000000000000000.log" in files
    assert "00000000000000000000.index" in files
    assert "00000000000000000000.timeindex" in files
    assert "partition.metadata" in files

    index_path = os.path.join(broker.data_dir, f"{topic_name}-0", "00000000000000000000.index")
    with open(index_path, "rb") as f:
        data = f.read()
    entries = list(struct.iter_unpack(">ii", data))
    assert len(entries) > 10, "an entry about every log.index.interval.bytes (4 KiB) of ~1 MB of log"
    offsets = [e[0] for e in entries]
    positions = [e[1] for e in entries]
    assert offsets == sorted(offsets) and positions == sorted(positions)
    # Kafka's rule (what kafka-dump-log --verify-index-only checks): each entry points at
    # the start of a batch whose last offset is the entry's offset.
    with open(os.path.join(broker.data_dir, f"{topic_name}-0", "00000000000000000000.log"), "rb") as log:
        for relative_offset, position in entries:
            log.seek(position)
            assert BatchHeader.parse(log.read(HEADER_SIZE)).last_offset == relative_offset


def test_a_small_segment_size_rolls_the_log_and_reads_span_segments(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, 1, {"segment.bytes": str(1024 * 1024)})
    producer = idempotent_producer(broker.bootstrap)
    count = 5_000  # 5 MB: five segments
    produce_all(producer, [(topic_name, 0, None, b"%08d" % i + b"y" * 992) for i in range(count)])

    logs = [f for f in _files(broker.data_dir, topic_name) if f.endswith(".log")]
    assert len(logs) >= 4, logs
    snapshots = [f for f in _files(broker.data_dir, topic_name) if f.endswith(".snapshot")]
    assert snapshots, "producer state is snapshotted at each roll"
    assert all(int(name.split(".")[0]) > 0 for name in logs[1:])

    got = consume_partitions(broker.bootstrap, topic_name, [0], count)
    assert [int(m.value()[:8]) for m in got[0]] == list(range(count))
    assert [m.offset() for m in got[0]] == list(range(count))
