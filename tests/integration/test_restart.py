"""Acknowledged data survives a restart, clean or kill -9, and producer state with it."""

from __future__ import annotations

import os
import time

import pytest

from ottla.protocol.batch import build_batch, encode_record
from ottla.protocol.errors import ErrorCode
from tests.clients import consume_partitions, create_topic, idempotent_producer, produce_all
from tests.wire import WireClient, request


@pytest.mark.parametrize("how", ["kill", "stop"])
def test_acknowledged_records_survive_a_restart(fresh_broker, topic_name, how):
    broker = fresh_broker(log_segment_bytes=1024 * 1024)
    create_topic(broker.bootstrap, topic_name, 2)
    messages = [(topic_name, i % 2, None, b"before-%d" % i) for i in range(20_000)]
    produce_all(idempotent_producer(broker.bootstrap), messages)

    broker.kill() if how == "kill" else broker.stop()
    if how == "kill":
        assert not os.path.exists(os.path.join(broker.data_dir, ".kafka_cleanshutdown"))
    broker.start()
    first_start, restart = [line for line in broker.log().splitlines() if "ottla ready" in line]
    assert "clean_start=True" in first_start  # a brand-new data directory has nothing to recover
    assert ("clean_start=True" in restart) == (how == "stop")

    produce_all(idempotent_producer(broker.bootstrap), [(topic_name, 0, None, b"after")])
    got = consume_partitions(broker.bootstrap, topic_name, [0, 1], 20_001)
    assert [m.value() for m in got[0]] == [b"before-%d" % i for i in range(0, 20_000, 2)] + [b"after"]
    assert [m.value() for m in got[1]] == [b"before-%d" % i for i in range(1, 20_000, 2)]


@pytest.mark.parametrize("how", ["kill", "stop"])
def test_a_retry_sent_before_the_restart_gets_its_original_offset_after_it(fresh_broker, topic_name, how):
    broker = fresh_broker()
    create_topic(broker.bootstrap, topic_name, 1)

    def produce(client: WireClient, batch: bytes):
        response = client.call(request(0, 9, transactional_id=None, acks=-1, timeout=30000, topic_data=[
            {"name": topic_name, "partition_data": [{"index": 0, "records": batch}]}]))
        return response.responses[0].partition_responses[0]

    with WireClient(broker.bootstrap) as client:
        producer_id = client.call(request(22, 4, transactional_id=None, transaction_timeout=60000,
                                                 producer_id=-1, producer_epoch=-1)).producer_id
        batches = [
            build_batch([encode_record(None, b"v%d" % (s + i), offset_delta=i) for i in range(2)],
                        timestamp=int(time.time() * 1000), producer_id=producer_id, producer_epoch=0,
                        base_sequence=s)
            for s in (0, 2, 4)
        ]
        offsets = [produce(client, b).base_offset for b in batches]
    assert offsets == [0, 2, 4]

    broker.kill() if how == "kill" else broker.stop()
    broker.start()

    with WireClient(broker.bootstrap) as client:
        retried = produce(client, batches[2])
        assert retried.error_code == ErrorCode.none and retried.base_offset == 4
        gap = produce(client, build_batch([encode_record(None, b"x")], timestamp=0, producer_id=producer_id,
                                          producer_epoch=0, base_sequence=9))
        assert gap.error_code == ErrorCode.out_of_order_sequence_number
    got = consume_partitions(broker.bootstrap, topic_name, [0], 6)
    assert [m.value() for m in got[0]] == [b"v%d" % i for i in range(6)]
