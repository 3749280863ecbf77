"""A Fetch response never holds more than fetch.max.bytes of records (issue 12 point 9),
except for the first batch found, which is returned whole as Kafka returns it. Before,
max_bytes = 2^31-1 got a whole partition in one response, however large."""

from __future__ import annotations

import time

from ottla.protocol.batch import build_batch, encode_record
from ottla.protocol.errors import ErrorCode
from tests.clients import create_topic, read_all
from tests.wire import WireClient, request

PRODUCE, FETCH = 0, 1
LIMIT = 100_000
HUGE = 2**31 - 1


def _produce(client: WireClient, topic: str, value: bytes, records: int = 1) -> None:
    batch = build_batch([encode_record(None, value, offset_delta=i) for i in range(records)],
                        timestamp=int(time.time() * 1000))
    response = client.call(request(PRODUCE, 9, transactional_id=None, acks=-1, timeout=30000, topic_data=[
        {"name": topic, "partition_data": [{"index": 0, "records": batch}]}]))
    assert response.responses[0].partition_responses[0].error_code == ErrorCode.none


def _fetch(client: WireClient, topic: str, offset: int):
    response = client.call(request(FETCH, 12, replica_id=-1, max_wait=0, min_bytes=0, max_bytes=HUGE,
                                   isolation_level=0, session_id=0, session_epoch=-1, topics=[
                                       {"topic": topic, "partitions": [
                                           {"partition": 0, "fetch_offset": offset, "partition_max_bytes": HUGE,
                                            "current_leader_epoch": -1, "last_fetched_epoch": -1,
                                            "log_start_offset": -1}]}],
                                   forgotten_topics_data=[], rack_id=""))
    return response.responses[0].partitions[0]


def test_fetch_max_bytes_caps_a_response_but_never_splits_a_batch(fresh_broker, topic_name):
    broker = fresh_broker(fetch_max_bytes=LIMIT)
    create_topic(broker.bootstrap, topic_name, 1)
    with WireClient(broker.bootstrap) as client:
        for _ in range(50):  # 50 batches of ~20 KB: 1 MB in the partition
            _produce(client, topic_name, b"s" * 20_000)
        _produce(client, topic_name, b"B" * 300_000)  # one batch three times the limit
        first = _fetch(client, topic_name, 0)
        assert first.high_watermark == 51
        assert 0 < len(first.records) <= LIMIT, "a client asking for 2 GiB got more than fetch.max.bytes"
        big = _fetch(client, topic_name, 50)
        assert len(big.records) > 300_000, "the first batch must come back whole, even above the limit"
    # A consumer reads everything, in responses of at most the limit each.
    values = read_all(broker.bootstrap, topic_name, [0], isolation="read_uncommitted")[0]
    assert len(values) == 51 and values[-1] == b"B" * 300_000
