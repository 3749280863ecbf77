"""The seed's Figure 5 over the wire: six batches in flight, the first acknowledgement
lost, its retry arriving after the other five. The partition remembers five batches per
producer, so the retry matches none of them; its sequence is behind the producer's last
one, so it was written already and is refused with OUT_OF_ORDER_SEQUENCE_NUMBER, as in
Kafka 4. Each record is stored once, and a restart (kill -9, snapshot plus log replay)
gives the same answer to the same retries."""

from __future__ import annotations

import os
import time

from ottla.protocol.batch import build_batch, encode_record
from ottla.protocol.errors import ErrorCode
from tests.clients import consume_partitions, create_topic
from tests.wire import WireClient, request

PRODUCE, LIST_OFFSETS, INIT_PRODUCER_ID = 0, 2, 22
RECORDS_PER_BATCH = 2


def _init_producer_id(client: WireClient) -> int:
    response = client.call(request(INIT_PRODUCER_ID, 4, transactional_id=None, transaction_timeout=60000,
                                   producer_id=-1, producer_epoch=-1))
    assert response.error_code == ErrorCode.none
    return response.producer_id


def _produce(topic: str, batch: bytes):
    return request(PRODUCE, 9, transactional_id=None, acks=-1, timeout=30000, topic_data=[
        {"name": topic, "partition_data": [{"index": 0, "records": batch}]}])


def _answer(client: WireClient, topic: str, batch: bytes) -> tuple[int, int, str | None]:
    response = client.call(_produce(topic, batch)).responses[0].partition_responses[0]
    return response.error_code, response.base_offset, response.error_message


def _log_end_offset(client: WireClient, topic: str) -> int:
    response = client.call(request(LIST_OFFSETS, 7, replica_id=-1, isolation_level=0, topics=[
        {"name": topic, "partitions": [{"partition_index": 0, "timestamp": -1}]}]))
    return response.topics[0].partitions[0].offset


def _batches(producer_id: int, count: int, first_value_size: int = 0) -> list[bytes]:
    """`count` batches of RECORDS_PER_BATCH records with consecutive sequences; the first
    batch's values padded to `first_value_size` bytes (to make it fill a segment)."""
    now = int(time.time() * 1000)
    batches = []
    for n in range(count):
        sequence = n * RECORDS_PER_BATCH
        values = [b"r%d" % (sequence + i) for i in range(RECORDS_PER_BATCH)]
        if n == 0 and first_value_size:
            values = [v.ljust(first_value_size, b".") for v in values]
        batches.append(build_batch([encode_record(None, v, offset_delta=i) for i, v in enumerate(values)],
                                   timestamp=now, producer_id=producer_id, producer_epoch=0,
                                   base_sequence=sequence))
    return batches


def _six_in_flight_first_ack_lost(client: WireClient, topic: str, batches: list[bytes]) -> list[int]:
    """Send the six batches without waiting (six in flight), then read the answers; the
    first one is 'lost' by the producer. Returns the base offsets the broker gave."""
    sent = [client.send(_produce(topic, batch)) for batch in batches]
    offsets = []
    for correlation_id in sent:
        got_id, body = client.receive(PRODUCE, 9)
        assert got_id == correlation_id
        partition = body.responses[0].partition_responses[0]
        assert partition.error_code == ErrorCode.none
        offsets.append(partition.base_offset)
    return offsets


def _values(bootstrap: str, topic: str, count: int) -> list[bytes]:
    got = consume_partitions(bootstrap, topic, [0], count)
    return [m.value().rstrip(b".") for m in got[0]]


def test_a_retry_older_than_the_five_cached_batches_is_refused_not_written_again(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, 1)
    with WireClient(broker.bootstrap) as client:
        producer_id = _init_producer_id(client)
        batches = _batches(producer_id, 6)
        assert _six_in_flight_first_ack_lost(client, topic_name, batches) == [0, 2, 4, 6, 8, 10]

        # The retry of the first batch arrives after the other five were appended.
        code, offset, message = _answer(client, topic_name, batches[0])
        assert code == ErrorCode.out_of_order_sequence_number and offset == -1
        assert message == (f"Out of order sequence number for producer {producer_id} at offset 12 in partition "
                           f"{topic_name}-0: 0 (incoming seq. number), 11 (current end sequence number)")
        assert _log_end_offset(client, topic_name) == 12

        # A retry of any of the five cached batches still gets its original offset.
        for n in range(1, 6):
            assert _answer(client, topic_name, batches[n])[:2] == (ErrorCode.none, 2 * n)
        # The refusal changed nothing: the producer's next batch follows.
        next_batch = _batches(producer_id, 7)[6]
        assert _answer(client, topic_name, next_batch)[:2] == (ErrorCode.none, 12)
        assert _log_end_offset(client, topic_name) == 14

    assert _values(broker.bootstrap, topic_name, 14) == [b"r%d" % i for i in range(14)]


def test_after_a_kill_9_snapshot_and_log_replay_give_the_same_answers_to_the_same_retries(fresh_broker, topic_name):
    # The first batch fills a segment of its own: the second one rolls the log, which
    # snapshots the producer state (batch 0 as its last batch); batches 1-5 are in the
    # active segment, replayed after the snapshot at start-up.
    broker = fresh_broker()
    create_topic(broker.bootstrap, topic_name, 1, config={"segment.bytes": "4096"})
    with WireClient(broker.bootstrap) as client:
        producer_id = _init_producer_id(client)
        batches = _batches(producer_id, 6, first_value_size=2000)
        assert _six_in_flight_first_ack_lost(client, topic_name, batches) == [0, 2, 4, 6, 8, 10]
        gap = _batches(producer_id, 9)[8]
        before = [_answer(client, topic_name, batch)[:2] for batch in batches + [gap]]
    assert before == [(ErrorCode.out_of_order_sequence_number, -1)] + [(ErrorCode.none, 2 * n) for n in range(1, 6)] \
        + [(ErrorCode.out_of_order_sequence_number, -1)]
    partition_dir = os.path.join(broker.data_dir, f"{topic_name}-0")
    assert f"{2:020d}.snapshot" in os.listdir(partition_dir)

    broker.kill()
    broker.start()
    assert "clean_start=False" in broker.log()

    with WireClient(broker.bootstrap) as client:
        after = [_answer(client, topic_name, batch)[:2] for batch in batches + [gap]]
        assert after == before
        next_batch = _batches(producer_id, 7)[6]
        assert _answer(client, topic_name, next_batch)[:2] == (ErrorCode.none, 12)
        assert _log_end_offset(client, topic_name) == 14
    assert _values(broker.bootstrap, topic_name, 14) == [b"r%d" % i for i in range(14)]
