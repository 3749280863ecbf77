"""A Fetch answer's records are sent from the segment files with sendfile (issue 45,
storage/file_slice.py, broker/network/file_sender.py), not read into memory. These
tests hold a large answer back with a client that reads slowly (a small receive
buffer), so that the broker is still sending it from the file when:

- the topic is deleted (its segment files unlinked): the answer still arrives whole and
  as it was written, read from the descriptor the answer holds;
- more requests are pipelined behind it, small answers and other Fetches: every answer
  comes back whole, in request order, none of them inside another.
"""

from __future__ import annotations

import os
import time

from confluent_kafka.admin import AdminClient

from ottla.protocol.batch import HEADER_SIZE, BatchHeader, build_batch, crc_is_valid, encode_record, iter_records
from ottla.protocol.codec import decode_response, encode_request
from ottla.protocol.errors import ErrorCode
from tests.clients import create_topic
from tests.wire import WireClient, recv_exactly, request

PRODUCE, FETCH, API_VERSIONS = 0, 1, 18
RECORD_BYTES = 1_000
RECORDS_PER_BATCH = 900  # a batch under the default max.message.bytes (1 MiB)
SLOW_READER = 4096  # bytes of receive buffer: the broker's answers wait for the reader


def _value(offset: int) -> bytes:
    return f"{offset:010d}".encode() * (RECORD_BYTES // 10)


def _produce(client: WireClient, topic: str, batches: int) -> int:
    """`batches` batches of distinct records; returns the offset after the last."""
    offset = 0
    for _ in range(batches):
        batch = build_batch([encode_record(None, _value(offset + i), offset_delta=i) for i in range(RECORDS_PER_BATCH)],
                            timestamp=int(time.time() * 1000))
        response = client.call(request(PRODUCE, 9, transactional_id=None, acks=-1, timeout=30000, topic_data=[
            {"name": topic, "partition_data": [{"index": 0, "records": batch}]}]))
        assert response.responses[0].partition_responses[0].error_code == ErrorCode.none
        offset += RECORDS_PER_BATCH
    return offset


def _fetch(topic: str, offset: int, max_bytes: int):
    return request(FETCH, 12, replica_id=-1, max_wait=0, min_bytes=0, max_bytes=max_bytes, isolation_level=0,
                   session_id=0, session_epoch=-1, topics=[{"topic": topic, "partitions": [
                       {"partition": 0, "fetch_offset": offset, "partition_max_bytes": max_bytes,
                        "current_leader_epoch": -1, "last_fetched_epoch": -1, "log_start_offset": -1}]}],
                   forgotten_topics_data=[], rack_id="")


def _check_records(records: bytes, first_offset: int) -> int:
    """Every batch of `records` whole, its CRC good, each record the value written at
    its offset, from `first_offset` on without a gap; returns the offset after the last."""
    expected = first_offset
    at = 0
    while at < len(records):
        header = BatchHeader.parse(records, at)
        batch = records[at:at + header.size]
        assert len(batch) == header.size >= HEADER_SIZE, f"a torn batch at byte {at}"
        assert crc_is_valid(batch, header), f"the batch at offset {header.base_offset} is not as it was written"
        for record in iter_records(batch):
            assert record.offset == expected and record.value == _value(expected), f"record {expected} differs"
            expected += 1
        at += header.size
    return expected


def _read_frame(client: WireClient) -> bytes:
    size = int.from_bytes(recv_exactly(client.sock, 4), "big")
    return recv_exactly(client.sock, size)


def test_an_answer_being_sent_outlives_the_deletion_of_its_segments(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, 1)
    with WireClient(broker.bootstrap) as producer:
        end = _produce(producer, topic_name, 18)  # about 16 MiB: more than the sockets' buffers hold
    partition_dir = os.path.join(broker.data_dir, f"{topic_name}-0")
    with WireClient(broker.bootstrap, timeout=60, receive_buffer=SLOW_READER) as client:
        sent = client.send(_fetch(topic_name, 0, 64 << 20))
        size = int.from_bytes(recv_exactly(client.sock, 4), "big")  # the answer has begun
        assert size > 16_000_000
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.delete_topics([topic_name])[topic_name].result(15)
        deadline = time.monotonic() + 30
        while os.path.exists(partition_dir) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not os.path.exists(partition_dir), "the topic's segment files were not deleted"
        # The socket buffers hold a few MiB at most: most of the answer is still to be
        # sent from the (now deleted) files.
        correlation_id, body = decode_response(FETCH, 12, recv_exactly(client.sock, size))
    assert correlation_id == sent
    partition = body.responses[0].partitions[0]
    assert partition.error_code == ErrorCode.none and partition.high_watermark == end
    assert _check_records(partition.records, 0) == end


def test_pipelined_answers_keep_their_order_around_answers_sent_from_files(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, 1)
    with WireClient(broker.bootstrap) as producer:
        end = _produce(producer, topic_name, 6)
    per_batch = RECORDS_PER_BATCH
    asked = [
        (FETCH, _fetch(topic_name, 0, 3 << 20)),  # three batches, from the file
        (API_VERSIONS, request(API_VERSIONS, 3, client_software_name="t", client_software_version="1")),
        (FETCH, _fetch(topic_name, per_batch, 1 << 20)),  # one batch
        (FETCH, _fetch(topic_name, end, 1 << 20)),  # nothing yet: a short answer
        (API_VERSIONS, request(API_VERSIONS, 3, client_software_name="t", client_software_version="1")),
        (FETCH, _fetch(topic_name, 3 * per_batch, 8 << 20)),  # the last three
    ]
    with WireClient(broker.bootstrap, timeout=60, receive_buffer=SLOW_READER) as client:
        # All in one send, so that the broker reads them at once, as a pipelining
        # client's requests arrive.
        client.send_raw(b"".join(encode_request(i, "wire-test", entity) for i, (_, entity) in enumerate(asked)))
        answers = [decode_response(api, 3 if api == API_VERSIONS else 12, _read_frame(client)) for api, _ in asked]
    assert [correlation_id for correlation_id, _ in answers] == list(range(len(asked)))
    fetched = [body.responses[0].partitions[0] for (api, _), (_, body) in zip(asked, answers, strict=True)
               if api == FETCH]
    assert all(p.error_code == ErrorCode.none for p in fetched)
    assert _check_records(fetched[0].records, 0) == 3 * per_batch
    assert _check_records(fetched[1].records, per_batch) == 2 * per_batch
    assert fetched[2].records in (b"", None)
    assert _check_records(fetched[3].records, 3 * per_batch) == end
    assert all(body.error_code == ErrorCode.none for (api, _), (_, body) in zip(asked, answers, strict=True)
               if api == API_VERSIONS)
