"""Headers, cached schemas, the version-agnostic builder, and unknown tagged fields."""

from __future__ import annotations

import struct

from kio.serial import entity_writer

from ottla.protocol.codec import ChunkWriter, decode_request, encode_response, parse_request_header, request_class
from ottla.protocol.entities import make
from ottla.protocol.errors import ErrorCode


def _encode_body(entity) -> bytes:
    out = ChunkWriter()
    entity_writer(type(entity))(out, entity)
    return b"".join(bytes(c) for c in out.frame())[4:]


def test_request_header_v2_with_tagged_fields_is_skipped():
    frame = struct.pack(">hhih", 3, 12, 42, 3) + b"cli" + b"\x01\x05\x02ab"  # one tagged field in the header
    body = _encode_body(make(request_class(3, 12), topics=None, allow_auto_topic_creation=True))
    header = parse_request_header(frame + body)
    assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == (3, 12, 42, "cli")
    request = decode_request(request_class(3, 12), frame + body, header.body_offset)
    assert request.topics is None and request.allow_auto_topic_creation is True


def test_unknown_tagged_fields_in_a_body_are_skipped():
    cls = request_class(3, 12)
    body = bytearray(_encode_body(make(cls, topics=[{"name": "orders"}], allow_auto_topic_creation=False)))
    # The topic entry's tagged-field count is the byte after its name; give it an unknown tag 77.
    name_end = body.index(b"orders") + len(b"orders")
    assert body[name_end] == 0
    body[name_end:name_end + 1] = b"\x01\x4d\x03xyz"
    assert body[-1] == 0  # and one at the top level too
    body[-1:] = b"\x01\x4e\x00"
    request = decode_request(cls, bytes(body), 0)
    assert request.topics[0].name == "orders"
    assert request.allow_auto_topic_creation is False


def test_make_fills_what_a_version_has_and_drops_what_it_lacks():
    v0 = make(request_class(3, 0), topics=[{"name": "a", "topic_id": None}], allow_auto_topic_creation=False)
    assert v0.topics[0].name == "a"
    from ottla.protocol.codec import response_class
    produce_v3 = make(response_class(0, 3), responses=[{"name": "t", "partition_responses": [
        {"index": 0, "error_code": ErrorCode.none, "base_offset": 5, "log_append_time": None,
         "error_message": "dropped in v3", "record_errors": []}]}])
    assert produce_v3.responses[0].partition_responses[0].base_offset == 5


def test_encoded_response_is_size_prefixed_chunks_with_records_uncopied():
    from ottla.protocol.codec import response_class
    records = b"r" * 10_000
    response = make(response_class(1, 12), responses=[{"topic": "t", "partitions": [
        {"partition_index": 0, "records": records, "aborted_transactions": None}]}])
    chunks = encode_response(7, response)
    assert any(c is records for c in chunks), "record bytes are passed through as their own chunk"
    assert len(chunks) == 3  # size prefix and header and fields, the records, what follows
    data = b"".join(bytes(c) for c in chunks)
    assert struct.unpack(">i", data[:4])[0] == len(data) - 4
    assert struct.unpack(">i", data[4:8])[0] == 7
    assert data[8] == 0, "flexible response header v1: empty tagged fields"


def test_a_small_response_is_one_chunk():
    from ottla.protocol.codec import response_class
    chunks = encode_response(3, make(response_class(26, 1), error_code=ErrorCode.none))
    assert len(chunks) == 1 and struct.unpack(">i", chunks[0][:4])[0] == len(chunks[0]) - 4


def test_api_versions_response_always_uses_header_v0():
    from ottla.protocol.codec import response_class
    chunks = encode_response(9, make(response_class(18, 3), error_code=ErrorCode.none, api_keys=[]))
    data = b"".join(bytes(c) for c in chunks)
    assert struct.unpack(">i", data[4:8])[0] == 9
    assert struct.unpack(">h", data[8:10])[0] == 0, "the error code follows the correlation id directly"
