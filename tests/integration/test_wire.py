"""Raw requests on a socket: retries, pipelining, and bad input."""

from __future__ import annotations

import os
import socket
import struct
import time

from ottla.protocol.batch import build_batch, encode_record
from ottla.protocol.errors import ErrorCode
from tests.clients import consume_partitions, create_topic, idempotent_producer, produce_all
from tests.wire import WireClient, request

PRODUCE, FETCH, LIST_OFFSETS, METADATA, API_VERSIONS, INIT_PRODUCER_ID = 0, 1, 2, 3, 18, 22


def _init_producer_id(client: WireClient) -> int:
    response = client.call(request(INIT_PRODUCER_ID, 4, transactional_id=None,
                                                         transaction_timeout=60000, producer_id=-1,
                                                         producer_epoch=-1))
    assert response.error_code == ErrorCode.none
    return response.producer_id


def _produce_request(topic: str, records: bytes, version: int = 9, acks: int = -1):
    return request(PRODUCE, version, transactional_id=None, acks=acks, timeout=30000, topic_data=[
        {"name": topic, "partition_data": [{"index": 0, "records": records}]}
    ])


def _latest_offset(client: WireClient, topic: str) -> int:
    response = client.call(request(LIST_OFFSETS, 7, replica_id=-1, isolation_level=0, topics=[
        {"name": topic, "partitions": [{"partition_index": 0, "timestamp": -1}]}
    ]))
    return response.topics[0].partitions[0].offset


def _batch(producer_id: int, sequence: int, count: int = 3, epoch: int = 0) -> bytes:
    return build_batch(
        [encode_record(f"k{i}".encode(), f"v{sequence + i}".encode(), offset_delta=i) for i in range(count)],
        timestamp=int(time.time() * 1000), producer_id=producer_id, producer_epoch=epoch, base_sequence=sequence,
    )


def test_a_retried_produce_is_stored_once_and_answered_with_the_same_offset(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, 1)
    with WireClient(broker.bootstrap) as client:
        producer_id = _init_producer_id(client)
        first_batch = _batch(producer_id, 0)
        client.call(_produce_request(topic_name, first_batch))
        batch = _batch(producer_id, 3)

        first = client.call(_produce_request(topic_name, batch))
        # The acknowledgement was "lost": the producer sends the same bytes again.
        retry = client.call(_produce_request(topic_name, batch))

        p1 = first.responses[0].partition_responses[0]
        p2 = retry.responses[0].partition_responses[0]
        assert p1.error_code == ErrorCode.none and p2.error_code == ErrorCode.none
        assert p1.base_offset == p2.base_offset == 3
        assert _latest_offset(client, topic_name) == 6

    got = consume_partitions(broker.bootstrap, topic_name, [0], 6)
    assert [m.value() for m in got[0]] == [f"v{i}".encode() for i in range(6)]


def _fetch(topic: str, offset: int, max_wait_ms: int, min_bytes: int):
    return request(FETCH, 12, replica_id=-1, max_wait=max_wait_ms, min_bytes=min_bytes, max_bytes=1 << 20,
                   isolation_level=0, session_id=0, session_epoch=-1, topics=[
                       {"topic": topic, "partitions": [
                           {"partition": 0, "fetch_offset": offset, "partition_max_bytes": 1 << 20,
                            "current_leader_epoch": -1, "last_fetched_epoch": -1, "log_start_offset": -1}]}],
                   forgotten_topics_data=[], rack_id="")


def test_a_long_poll_fetch_is_answered_by_the_next_append_and_requests_behind_it_wait(broker, topic_name):
    # A Fetch that finds nothing is begun as it is read and left to the connection's
    # worker to wait; an append from another connection ends the wait (max_wait is far
    # longer than the socket's timeout: a lost wake-up fails the test), and a request
    # pipelined behind the Fetch is answered after it.
    create_topic(broker.bootstrap, topic_name, 1)
    with WireClient(broker.bootstrap, timeout=30) as consumer, WireClient(broker.bootstrap) as producer:
        empty = consumer.call(_fetch(topic_name, 0, 0, 0))  # answered at once: nothing to wait for
        assert empty.responses[0].partitions[0].records in (b"", None)
        waiting = consumer.send(_fetch(topic_name, 0, 120_000, 1))
        behind = consumer.send(request(LIST_OFFSETS, 7, replica_id=-1, isolation_level=0, topics=[
            {"name": topic_name, "partitions": [{"partition_index": 0, "timestamp": -1}]}]))
        producer_id = _init_producer_id(producer)
        producer.call(_produce_request(topic_name, _batch(producer_id, 0)))
        correlation_id, fetched = consumer.receive(FETCH, 12)
        assert correlation_id == waiting
        assert fetched.responses[0].partitions[0].high_watermark == 3 and fetched.responses[0].partitions[0].records
        correlation_id, offsets = consumer.receive(LIST_OFFSETS, 7)
        assert correlation_id == behind and offsets.topics[0].partitions[0].offset == 3


def test_a_sequence_gap_is_refused_as_out_of_order(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, 1)
    with WireClient(broker.bootstrap) as client:
        producer_id = _init_producer_id(client)
        client.call(_produce_request(topic_name, _batch(producer_id, 0)))
        response = client.call(_produce_request(topic_name, _batch(producer_id, 7)))
        assert response.responses[0].partition_responses[0].error_code == ErrorCode.out_of_order_sequence_number
        assert _latest_offset(client, topic_name) == 3


def test_ten_pipelined_requests_come_back_in_order(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, 1)
    with WireClient(broker.bootstrap) as client:
        producer_id = _init_producer_id(client)
        first_id = client.correlation_id + 1
        kinds = []
        sequence = 0
        for i in range(10):
            if i % 3 == 2:
                client.send(request(METADATA, 12, topics=None, allow_auto_topic_creation=False))
                kinds.append((METADATA, 12))
            elif i % 3 == 1:
                client.send(request(API_VERSIONS, 3, client_software_name="wire",
                                                      client_software_version="1"))
                kinds.append((API_VERSIONS, 3))
            else:
                client.send(_produce_request(topic_name, _batch(producer_id, sequence)))
                sequence += 3
                kinds.append((PRODUCE, 9))
        correlation_ids = []
        for api_key, version in kinds:
            correlation_id, body = client.receive(api_key, version)
            correlation_ids.append(correlation_id)
            if api_key == PRODUCE:
                assert body.responses[0].partition_responses[0].error_code == ErrorCode.none
        assert correlation_ids == list(range(first_id, first_id + 10))
        assert _latest_offset(client, topic_name) == sequence


def test_unknown_api_versions_version_gets_a_v0_unsupported_version_answer(broker):
    with WireClient(broker.bootstrap) as client:
        # ApiVersions v99 with a v2 header: the broker cannot decode the body and must not.
        raw = struct.pack(">hhih", API_VERSIONS, 99, 7, 4) + b"test" + b"\x00" + b"\x00\x00\x00"
        client.send_raw(struct.pack(">i", len(raw)) + raw)
        correlation_id, body = client.receive(API_VERSIONS, 0)
        assert correlation_id == 7
        assert body.error_code == ErrorCode.unsupported_version
        # As Kafka (KIP-511): ApiVersions' own range only, for the client to retry with.
        keys = {k.api_key: (k.min_version, k.max_version) for k in body.api_keys}
        assert keys == {API_VERSIONS: (0, 4)}


def _assert_broker_still_serves(broker, topic: str, expected: int) -> None:
    got = consume_partitions(broker.bootstrap, topic, [0], expected, timeout=20)
    assert len(got[0]) == expected
    producer = idempotent_producer(broker.bootstrap)
    produce_all(producer, [(topic, 0, None, b"after")])


def test_bad_input_closes_only_that_connection_and_loses_nothing(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, 1)
    produce_all(idempotent_producer(broker.bootstrap), [(topic_name, 0, None, b"kept-%d" % i) for i in range(50)])
    bystander = WireClient(broker.bootstrap)
    bystander.call(request(METADATA, 12, topics=None, allow_auto_topic_creation=False))

    bad_inputs = {
        # Random, but never a plausible size prefix (one of 0 to 100 MiB would rightly
        # be waited for: about one run in 40 before this was fixed).
        "random bytes": b"\xde" + os.urandom(63),
        "negative length": struct.pack(">i", -5) + b"abc",
        "huge length": struct.pack(">i", 2**31 - 1) + b"abc",
        "unknown api key": struct.pack(">i", 10) + struct.pack(">hhih", 9999, 0, 1, 0),
        "unknown version": struct.pack(">i", 10) + struct.pack(">hhih", METADATA, 99, 1, 0),
        "garbage body": struct.pack(">i", 14) + struct.pack(">hhih", METADATA, 1, 1, 0) + b"\xff\xff\xff\xf0",
    }
    for name, payload in bad_inputs.items():
        with WireClient(broker.bootstrap) as client:
            client.send_raw(payload)
            assert client.is_closed(), f"{name}: connection was not closed"

    # A truncated frame followed by the client vanishing mid-request.
    with socket.create_connection(("127.0.0.1", broker.port)) as sock:
        sock.sendall(struct.pack(">i", 100) + b"only a few bytes")

    # The bystander's connection was not disturbed.
    bystander.call(request(METADATA, 12, topics=None, allow_auto_topic_creation=False))
    bystander.close()
    _assert_broker_still_serves(broker, topic_name, 50)
    log = broker.log()
    assert "closing connection" in log and "bad frame" in log and "unknown api key 9999" in log


def test_a_batch_with_a_wrong_crc_is_refused_with_corrupt_message(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, 1)
    with WireClient(broker.bootstrap) as client:
        producer_id = _init_producer_id(client)
        batch = bytearray(_batch(producer_id, 0))
        batch[-1] ^= 0xFF  # flip bits in the last record: the CRC no longer matches
        response = client.call(_produce_request(topic_name, bytes(batch)))
        assert response.responses[0].partition_responses[0].error_code == ErrorCode.corrupt_message
        assert _latest_offset(client, topic_name) == 0
        # The same connection and producer carry on.
        ok = client.call(_produce_request(topic_name, _batch(producer_id, 0)))
        assert ok.responses[0].partition_responses[0].error_code == ErrorCode.none
    assert "CRC mismatch" in broker.log()


def test_acks_0_gets_no_response_but_the_data_is_stored(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, 1)
    with WireClient(broker.bootstrap) as client:
        client.send(_produce_request(topic_name, _batch(-1, -1), acks=0))
        # The next answer on the connection belongs to the next request.
        assert _latest_offset(client, topic_name) == 3


def test_the_api_versions_answer_is_the_api_table(broker):
    """What the running broker advertises is protocol/apis.py (whose table in
    docs/conformance.md tests/unit/test_conformance.py checks), nothing more or less."""
    from ottla.protocol.apis import SUPPORTED

    with WireClient(broker.bootstrap) as client:
        body = client.call(request(API_VERSIONS, 3, client_software_name="t", client_software_version="1"))
    advertised = {k.api_key: (k.min_version, k.max_version) for k in body.api_keys}
    assert advertised == {key: (api.min_version if api.advertised_min is None else api.advertised_min,
                                api.max_version) for key, api in SUPPORTED.items()}


def test_api_versions_reports_the_finalized_features_of_what_is_served(broker):
    """metadata.version 4.1-IV1 (27), transaction.version 2 (KIP-890 part 2: Produce
    v12, EndTxn v5), group.version 1 (KIP-848 consumer groups), share.version 1
    (KIP-932 share groups), streams.version 1 (KIP-1071 streams groups, 0-1 as Kafka
    4.3.1 supports it), as KIP-584
    has them; versions 0-2 have no feature fields at all, and v3 lists only the supported
    features whose lowest level is above 0 (KIP-1022; Kafka 4.3.1 answers v3 with
    metadata.version alone)."""
    with WireClient(broker.bootstrap) as client:
        body = client.call(request(API_VERSIONS, 4, client_software_name="t", client_software_version="1"))
        v3 = client.call(request(API_VERSIONS, 3, client_software_name="t", client_software_version="1"))
        old = client.call(request(API_VERSIONS, 2))
    assert [(f.name, f.min_version, f.max_version) for f in v3.supported_features] == [("metadata.version", 7, 27)]
    assert [(f.name, f.min_version_level, f.max_version_level) for f in v3.finalized_features] == \
        [(f.name, f.min_version_level, f.max_version_level) for f in body.finalized_features]
    supported = {f.name: (f.min_version, f.max_version) for f in body.supported_features}
    finalized = {f.name: (f.min_version_level, f.max_version_level) for f in body.finalized_features}
    assert supported == {"metadata.version": (7, 27), "transaction.version": (0, 2), "group.version": (0, 1),
                         "share.version": (0, 1), "streams.version": (0, 1)}
    assert finalized == {"metadata.version": (27, 27), "transaction.version": (2, 2), "group.version": (1, 1),
                         "share.version": (1, 1), "streams.version": (1, 1)}
    # -1 would say "none finalized" (clients then ignore the levels); the levels never
    # change, so neither does the epoch: the same on another connection.
    assert body.finalized_features_epoch != -1
    with WireClient(broker.bootstrap) as other:
        again = other.call(request(API_VERSIONS, 3, client_software_name="t", client_software_version="1"))
    assert again.finalized_features_epoch == body.finalized_features_epoch
    assert old.error_code == ErrorCode.none and len(old.api_keys) == len(body.api_keys)


def test_metadata_answers_the_clusters_authorized_operations_in_the_versions_that_have_them(broker, topic_name):
    # Versions 8 to 10 carry the cluster's authorized operations (KIP-430; KIP-700 moved
    # them to DescribeCluster from v11): with no authorizer, every operation on a
    # cluster (CREATE, DESCRIBE, CLUSTER_ACTION, ALTER, DESCRIBE_CONFIGS, ALTER_CONFIGS,
    # IDEMPOTENT_WRITE, Kafka's AclOperation codes 5 and 7 to 12: 8096), and Kafka's "not asked" value when not asked.
    create_topic(broker.bootstrap, topic_name, 1)
    with WireClient(broker.bootstrap) as client:
        for version in (8, 9, 10, 11, 12):
            for asked in (True, False):
                topic = {"name": topic_name, "topic_id": None} if version >= 10 else {"name": topic_name}
                fields = {"include_cluster_authorized_operations": asked} if version <= 10 else {}
                answer = client.call(request(3, version, topics=[topic], allow_auto_topic_creation=False,
                                             include_topic_authorized_operations=False, **fields))
                assert [t.name for t in answer.topics] == [topic_name], version
                if version <= 10:
                    assert answer.cluster_authorized_operations == (8096 if asked else -(2**31)), version
