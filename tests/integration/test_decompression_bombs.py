"""Compressed batches that expand beyond any reason are refused without being expanded
in memory (issue 12 point 5). Before, 32 KB of zstd sent to a compacted topic took the
broker from 35 MB to 2 GB resident and stalled every client for 4 s."""

from __future__ import annotations

import gzip
import struct

import cramjam
import crc32c
import pytest

from ottla.protocol.batch import encode_record
from ottla.protocol.codec import decode_response
from ottla.protocol.errors import ErrorCode
from tests.clients import create_topic, idempotent_producer, produce_all, read_all
from tests.process_stats import resident_mib
from tests.wire import WireClient, request

PRODUCE, API_VERSIONS = 0, 18
MiB = 1024 * 1024
CODECS = {
    "gzip": (1, lambda data: gzip.compress(data, 6)),
    # Snappy cannot expand more than ~21x: 20 MiB still fits under max.message.bytes.
    "snappy": (2, lambda data: bytes(cramjam.snappy.compress_raw(data[:20 * MiB]))),
    "lz4": (3, lambda data: bytes(cramjam.lz4.compress(data))),
    "zstd": (4, lambda data: bytes(cramjam.zstd.compress(data))),
}


def _bomb(codec: int, compress) -> bytes:  # type: ignore[no-untyped-def]
    """One real record, then 64 MiB of zeros, compressed: a batch that says 1 record."""
    section = compress(encode_record(b"k", b"v", offset_delta=0) + bytes(64 * MiB))
    after_crc = struct.pack(">hiqqqhii", codec, 0, 0, 0, -1, -1, -1, 1) + section
    return struct.pack(">qiibI", 0, 9 + len(after_crc), 0, 2, crc32c.crc32c(after_crc)) + after_crc


@pytest.mark.parametrize("codec_name", list(CODECS))
def test_a_bomb_is_refused_as_corrupt_without_being_expanded(broker, topic_name, codec_name):
    codec, compress = CODECS[codec_name]
    bomb = _bomb(codec, compress)
    assert len(bomb) < MiB  # within max.message.bytes: only its expansion gives it away
    plain, compacted = f"{topic_name}-plain", f"{topic_name}-compacted"
    create_topic(broker.bootstrap, plain, 1)
    create_topic(broker.bootstrap, compacted, 1, {"cleanup.policy": "compact"})
    pid = broker.process.pid
    before = resident_mib(pid)
    with WireClient(broker.bootstrap) as client, WireClient(broker.bootstrap) as other:
        for topic in (plain, compacted):
            answer = client.call(request(PRODUCE, 9, transactional_id=None, acks=-1, timeout=30000, topic_data=[
                {"name": topic, "partition_data": [{"index": 0, "records": bomb}]}]))
            result = answer.responses[0].partition_responses[0]
            assert result.error_code == ErrorCode.corrupt_message, result
            assert "decompress" in result.error_message
            # Another client is answered right after.
            assert other.call(request(API_VERSIONS, 3, client_software_name="t", client_software_version="1"))
    # The scratch room of the bound (16 x max.message.bytes) at most, not the 64 MiB.
    assert resident_mib(pid) - before < 40
    # Compressed batches of real clients are as welcome as ever, on both topics.
    producer = idempotent_producer(broker.bootstrap, **{"compression.type": codec_name})
    produce_all(producer, [(t, 0, b"key", b"v" * 1000) for t in (plain, compacted) for _ in range(50)])
    assert len(read_all(broker.bootstrap, compacted, [0], isolation="read_committed")[0]) == 50


def _keyless_batch(records: int) -> bytes:
    """A valid zstd batch of `records` keyless records: on a compacted topic, every one
    is a per-record error, found only by decompressing and walking them all."""
    section = bytes(cramjam.zstd.compress(b"".join(encode_record(None, b"", offset_delta=i)
                                                   for i in range(records))))
    after_crc = struct.pack(">hiqqqhii", 4, records - 1, 0, 0, -1, -1, -1, records) + section
    return struct.pack(">qiibI", 0, 9 + len(after_crc), 0, 2, crc32c.crc32c(after_crc)) + after_crc


def test_other_clients_are_served_while_large_compressed_batches_are_checked(broker, topic_name):
    """Checking a batch that expands to megabytes is done beside the event loop: a client
    asking something else meanwhile is answered all along. Before, the check ran on the
    loop, a few tens of ms per batch, and a request of many such batches stalled every
    client for seconds."""
    import threading
    import time

    partitions = 24
    create_topic(broker.bootstrap, topic_name, partitions, {"cleanup.policy": "compact"})
    batch = _keyless_batch(1_200_000)  # about 8 MiB of records in under 1 MB
    assert len(batch) < MiB
    answers: list[float] = []
    done = threading.Event()

    def probe() -> None:
        with WireClient(broker.bootstrap) as client:
            while not done.is_set():
                client.call(request(API_VERSIONS, 3, client_software_name="t", client_software_version="1"))
                answers.append(time.monotonic())

    prober = threading.Thread(target=probe)
    prober.start()
    try:
        with WireClient(broker.bootstrap, timeout=120) as client:
            client.send(request(PRODUCE, 9, transactional_id=None, acks=-1, timeout=30000, topic_data=[
                {"name": topic_name, "partition_data": [{"index": p, "records": batch} for p in range(partitions)]}]))
            sent = time.monotonic()
            frame = client.read_frame()
            # The clock stops at the answer's arrival: decoding it here holds this
            # process's GIL and would delay the probe thread, not the broker.
            answered = time.monotonic()
    finally:
        done.set()
        prober.join()
    _, answer = decode_response(PRODUCE, 9, frame)
    for result in answer.responses[0].partition_responses:
        assert result.error_code == ErrorCode.invalid_record
        # The first thousand records are named; the message counts them all.
        assert len(result.record_errors) == 1000 and result.record_errors[0].batch_index == 0
        assert "due to 1200000 record errors in total" in result.error_message
    during = [t for t in answers if sent <= t <= answered]
    gaps = [b - a for a, b in zip([sent, *during], [*during, answered], strict=True)]
    # The probe was answered throughout the check: no wait between two of its answers
    # came near the time the produce took (on the loop, the longest wait was most of it).
    # The first and last waits are left out: they span reading the 24 MB request and
    # writing the 24,000 record errors, which are the loop's work in any broker.
    checking = gaps[1:-1]
    assert len(checking) > 10 and max(checking) < (answered - sent) / 4, (len(checking), max(checking), answered - sent)
