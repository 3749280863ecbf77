"""Requests as real Kafka software sent them, kept as the bytes captured on the wire
(tcpdump in /work/shared/seeds/001: a Java producer's EndTxn v1 to its transaction
coordinator, and the coordinator's WriteTxnMarkers v1 to the partition's broker).
Ottla's codec must read each as the fields Kafka meant, and write those fields back
as the very same bytes: a bug shared by Ottla's encoder and decoder cannot pass, as it
could in a test that builds its request with Ottla's own codec (tests/wire.py).

Beside the seed's two, tests/data/captured/librdkafka/ holds the first request of each
API and version librdkafka (confluent-kafka) sent through a recording proxy while it
created topics, ran a transaction with a group's offsets in it and two group consumers
(classic and KIP-848): tests/capture_requests.py made them."""

from __future__ import annotations

import glob
import os

import pytest

from ottla.protocol.codec import decode_request, encode_request, parse_request_header, request_class

CAPTURED = {
    "EndTxn v1, commit, epoch 2": bytes.fromhex(
        "00000046001a0001000000050014746869735f69735f6d795f636c69656e745f6964001b746869735f69735f6d795f7472"
        "616e73616374696f6e616c5f69640000000000000000000201"),
    "EndTxn v1, commit, epoch 7": bytes.fromhex(
        "00000046001a0001000000050014746869735f69735f6d795f636c69656e745f6964001b746869735f69735f6d795f7472"
        "616e73616374696f6e616c5f69640000000000000000000701"),
    "WriteTxnMarkers v1, commit of test-1": bytes.fromhex(
        "00000043001b000100000007001a62726f6b65722d312d74786e2d6d61726b65722d73656e6465720002000000000000000000"
        "0701020574657374020000000100000000000000"),
}

EXPECTED = {
    "EndTxn v1, commit, epoch 2": (26, 1, 5, "this_is_my_client_id", {
        "transactional_id": "this_is_my_transactional_id", "producer_id": 0, "producer_epoch": 2,
        "committed": True}),
    "EndTxn v1, commit, epoch 7": (26, 1, 5, "this_is_my_client_id", {
        "transactional_id": "this_is_my_transactional_id", "producer_id": 0, "producer_epoch": 7,
        "committed": True}),
    "WriteTxnMarkers v1, commit of test-1": (27, 1, 7, "broker-1-txn-marker-sender", {}),
}


@pytest.mark.parametrize("name", sorted(CAPTURED))
def test_a_captured_request_decodes_to_its_fields_and_encodes_to_the_same_bytes(name):
    """Checked by breaking it: with the compiled writer writing booleans inverted
    (protocol/compiled_writers.py, _fixed_value), all three fail."""
    frame = CAPTURED[name]
    assert int.from_bytes(frame[:4], "big") == len(frame) - 4
    api_key, version, correlation_id, client_id, fields = EXPECTED[name]
    header = parse_request_header(frame[4:])
    assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == \
        (api_key, version, correlation_id, client_id)
    body = decode_request(request_class(api_key, version), frame[4:], header.body_offset)
    for field, value in fields.items():
        assert getattr(body, field) == value, field
    if api_key == 27:
        (marker,) = body.markers
        assert (marker.producer_id, marker.producer_epoch, marker.transaction_result, marker.coordinator_epoch) == \
            (0, 7, True, 0)
        assert [(t.name, list(t.partition_indexes)) for t in marker.topics] == [("test", [1])]
    assert encode_request(correlation_id, client_id, body) == frame


CAPTURED_FILES = sorted(glob.glob(os.path.join(os.path.dirname(os.path.dirname(__file__)), "data", "captured", "*",
                                               "*.bin")))
# What the capture run meant, where a field says it: the decoded request must say it too.
MEANT = {
    "Produce": {"transactional_id": "captured-txn", "acks": -1},
    "InitProducerId": {"transactional_id": "captured-txn"},
    "AddOffsetsToTxn": {"transactional_id": "captured-txn", "group_id": "captured-group"},
    "EndTxn": {"transactional_id": "captured-txn", "committed": True},
    "TxnOffsetCommit": {"transactional_id": "captured-txn", "group_id": "captured-group"},
    "JoinGroup": {"group_id": "captured-group", "protocol_type": "consumer"},
    "ConsumerGroupHeartbeat": {"group_id": "captured-group-848", "member_epoch": 0},
    "Fetch": {"isolation_level": 1},
}


def test_the_captured_files_are_there():
    """Every API a transaction and a group consumer need, from librdkafka."""
    names = {os.path.basename(path).split("-")[1] for path in CAPTURED_FILES}
    assert {"Produce", "Fetch", "InitProducerId", "AddPartitionsToTxn", "EndTxn", "TxnOffsetCommit", "JoinGroup",
            "SyncGroup", "Heartbeat", "OffsetCommit", "OffsetFetch", "ConsumerGroupHeartbeat"} <= names, names


@pytest.mark.parametrize("path", CAPTURED_FILES, ids=lambda path: os.path.relpath(path, os.path.dirname(path) + "/.."))
def test_a_request_librdkafka_sent_decodes_and_encodes_to_the_same_bytes(path):
    """Break-and-see-it-fail: with the compiled writer writing booleans inverted, the five
    files holding a boolean fail (Metadata, OffsetFetch, CreateTopics, EndTxn,
    DescribeConfigs); with encode_request writing header v1 for flexible versions too,
    the twelve flexible ones fail."""
    with open(path, "rb") as f:
        frame = f.read()
    assert int.from_bytes(frame[:4], "big") == len(frame) - 4
    header = parse_request_header(frame[4:])
    cls = request_class(header.api_key, header.api_version)
    assert cls is not None
    body = decode_request(cls, frame[4:], header.body_offset)
    for field, value in MEANT.get(os.path.basename(path).split("-")[1], {}).items():
        assert getattr(body, field) == value, field
    assert header.client_id is not None
    assert encode_request(header.correlation_id, header.client_id, body) == frame
