"""Request bodies whose lengths and counts lie (issue 12 points 1 and 10), over the wire
with raw frames, since no client sends them.

Before: a 20-byte Metadata request claiming 4,294,967,295 topics made kio's reader ask
for 32 GiB and the process died; a truncated request queued behind a long-polling Fetch
killed that connection's worker without a word. Now each is refused (the connection is
closed, as Kafka closes one whose request cannot be parsed), logged, and the broker
serves everyone else as before."""

from __future__ import annotations

import struct
import time

from ottla.protocol.codec import request_class
from tests.clients import create_topic, idempotent_producer, produce_all, read_all
from tests.process_stats import resident_mib
from tests.wire import WireClient, request

PRODUCE, FETCH, METADATA, API_VERSIONS, CREATE_TOPICS = 0, 1, 3, 18, 19


def frame(api_key: int, version: int, body: bytes, correlation_id: int = 7) -> bytes:
    """A request frame around `body`: header v1, or v2 with no tagged fields."""
    header = struct.pack(">hhih", api_key, version, correlation_id, 4) + b"evil"
    if request_class(api_key, version).__flexible__:
        header += b"\x00"
    return struct.pack(">i", len(header) + len(body)) + header + body


# Each claims far more than its frame holds, in a different kind of length.
LIES = {
    "Metadata v9, a compact array of 4,294,967,294 topics": frame(METADATA, 9, b"\xff\xff\xff\xff\x0f"),
    "Metadata v1, an int32 array of 2,147,483,647 topics": frame(METADATA, 1, b"\x7f\xff\xff\xff\x00\x01a"),
    "Produce v3, records of 2 GiB": frame(PRODUCE, 3, b"\xff\xff\xff\xff\x00\x00\x75\x30\x00\x00\x00\x01\x00\x01t"
                                                   b"\x00\x00\x00\x01\x00\x00\x00\x00\x7f\xff\xff\xff" + b"\x00" * 8),
    "Produce v9, 2 billion topics": frame(PRODUCE, 9, b"\x00\xff\xff\x00\x00\x75\x30\xff\xff\xff\xff\x07"),
    "Fetch v12, a compact array of a billion partitions": frame(
        FETCH, 12, struct.pack(">iiiibii", -1, 500, 1, 1 << 20, 0, 0, -1) + b"\x02\x02t\xff\xff\xff\xff\x03"),
    "CreateTopics v7, a topic name of 4 GB": frame(CREATE_TOPICS, 7, b"\x02\xff\xff\xff\xff\x0f"),
    "ApiVersions v3, a client software name of 4 GB": frame(API_VERSIONS, 3, b"\xff\xff\xff\xff\x0f"),
    "ApiVersions v3, 4 billion tagged fields": frame(API_VERSIONS, 3, b"\x02a\x02b\xff\xff\xff\xff\x0f"),
}


def test_no_length_or_count_can_claim_more_than_the_frame(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, 1)
    pid = broker.process.pid
    before = resident_mib(pid)
    for what, data in LIES.items():
        with WireClient(broker.bootstrap) as client:
            client.send_raw(data)
            assert client.is_closed(), f"{what}: the connection should be closed, as Kafka closes it"
    log = broker.log()
    assert log.count("closing connection") >= len(LIES) and "elements with" in log
    assert resident_mib(pid) < before + 64, "a lying request made the broker allocate"
    # Nothing else was touched: a real client produces and reads as before.
    producer = idempotent_producer(broker.bootstrap)
    produce_all(producer, [(topic_name, 0, None, b"still-here")])
    assert read_all(broker.bootstrap, topic_name, [0], isolation="read_committed")[0] == [b"still-here"]


def test_a_truncated_request_behind_a_long_poll_fetch_closes_the_connection(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, 1)
    with WireClient(broker.bootstrap) as client:
        # A Fetch that waits (nothing to read), then a Metadata request cut short: its
        # frame is whole, its body ends in the middle of a topic name.
        waiting = client.send(request(FETCH, 12, replica_id=-1, max_wait=1500, min_bytes=1, max_bytes=1 << 20,
                                      isolation_level=0, session_id=0, session_epoch=-1, topics=[
                                          {"topic": topic_name, "partitions": [
                                              {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20,
                                               "current_leader_epoch": -1, "last_fetched_epoch": -1,
                                               "log_start_offset": -1}]}],
                                      forgotten_topics_data=[], rack_id=""))
        client.send_raw(frame(METADATA, 9, b"\x02\x10abc"))
        started = time.monotonic()
        # Kafka answers in order: the Fetch first (at its max wait), then the bad
        # request closes the connection. Before, the Fetch was answered and then the
        # connection stayed open and silent forever.
        correlation_id, _ = client.receive(FETCH, 12)
        assert correlation_id == waiting
        assert client.is_closed(timeout=10)
        assert time.monotonic() - started < 10
    assert "malformed Metadata v9" in broker.log()
    with WireClient(broker.bootstrap) as other:
        assert other.call(request(METADATA, 9, topics=None, allow_auto_topic_creation=False,
                                  include_cluster_authorized_operations=False,
                                  include_topic_authorized_operations=False)).brokers
