"""The compiled request decoder (_codec.c's decode, over compiled_codec.decode_plan)
against its reference, codec.decode_request_in_python (the length check, then kio's
reader), over every request class of every version kio knows: the same entity, every
value of the same type, and the same refusal (or the same entity) for every truncation
and for random corruptions of valid bodies.

Break-and-see-it-fail checks made once by hand: reading a nullable string's null as ""
in _codec.c's decode_text failed test_every_request_decodes_as_the_python_path[nulls];
setting a tagged field's slot to None in place of its default in decode_entity failed
test_defaults_decode_as_the_python_path; refusing a legacy array's count only when it is
below -1 (dropping request_bounds' "null for an array that cannot be null") failed
test_broken_bodies_are_refused_as_the_python_path_refuses_them; taking out request_bounds'
refusal of a tagged value shorter than its size failed
test_a_padded_tagged_value_does_not_take_the_process_down[python] (kio aborted the
process), and taking it out of _codec.c's check_body failed its [compiled] case and
test_compiled_codec's test_body_check_refuses_what_python_refuses.
"""

from __future__ import annotations

import glob
import random
import struct
from dataclasses import fields
from datetime import timedelta
from typing import Any

import pytest

from ottla.protocol import codec, compiled_codec
from ottla.protocol.codec import MalformedRequest, decode_request_in_python, parse_request_header_in_python
from ottla.protocol.compiled_writers import compiled_writer
from ottla.protocol.kio_schema import get_field_tag, get_tagged_field_default
from ottla.protocol.varint import write_uvarint

from .extensions import compiled_extension
from .test_compiled_writers import CLASSES, _instance

C = compiled_extension("_codec")
REQUESTS = [cls for cls in CLASSES if cls.__name__.endswith("Request")]
CAPTURED = sorted(glob.glob("tests/data/captured/*/*.bin"))


def _body(cls: type, entity: Any) -> bytes:
    pieces: list[Any] = []
    compiled_writer(cls)(pieces.append, entity)
    return b"".join(bytes(p) for p in pieces)


def _compiled(cls: type, frame: Any, offset: int) -> Any:
    """decode_request on the compiled path (whatever path the module chose)."""
    plan = compiled_codec.decode_plan(cls)
    assert plan is not None, cls
    original = codec._decode_in_c
    codec._decode_in_c = C.decode
    try:
        return codec.decode_request(cls, frame, offset)
    finally:
        codec._decode_in_c = original


def _outcome(decode: Any, cls: type, frame: Any, offset: int = 0) -> Any:
    """("read", the entity's repr, the types in it) or ("refused", the exception type).
    The repr stands for the entity: a corrupted float64 may be a NaN, which no entity
    holding it equals."""
    try:
        entity = decode(cls, frame, offset)
    except Exception as exc:  # the type is what is compared
        return ("refused", type(exc))
    return ("read", repr(entity), _types(entity))


def _types(value: Any) -> Any:
    """The type of `value` and, inside entities and tuples, of everything in it."""
    if isinstance(value, tuple):
        return (tuple, tuple(_types(item) for item in value))
    if hasattr(type(value), "__dataclass_fields__"):
        return (type(value), tuple((f.name, _types(getattr(value, f.name))) for f in fields(value)))
    return type(value)


def _assert_same(cls: type, frame: Any, offset: int = 0) -> Any:
    expected = decode_request_in_python(cls, frame, offset)
    got = _compiled(cls, frame, offset)
    assert got == expected, cls
    assert _types(got) == _types(expected), cls
    return got


def test_every_request_class_has_a_decode_plan() -> None:
    """No request falls back to kio's reader for want of a plan."""
    assert len(REQUESTS) > 250
    assert all(compiled_codec.decode_plan(cls) is not None for cls in REQUESTS)


@pytest.mark.parametrize("nulls", [False, True], ids=["filled", "nulls"])
def test_every_request_decodes_as_the_python_path(nulls: bool) -> None:
    """Every field filled (tagged fields with values other than their defaults), then
    every nullable field null; read in C without the Python path's help."""
    for cls in REQUESTS:
        entity = _instance(cls, nulls)
        body = _body(cls, entity)
        assert C.decode(cls, body, 0) is not None, cls
        assert _assert_same(cls, body) == decode_request_in_python(cls, body, 0)
        frame = memoryview(b"HEADER" + body)
        _assert_same(cls, frame, 6)


def _with_default_tags(entity: Any) -> Any:
    """`entity` with every tagged field in it (nested ones too) at its default, which the
    writer leaves out of the body."""
    if isinstance(entity, tuple):
        return tuple(_with_default_tags(item) for item in entity)
    if not hasattr(type(entity), "__dataclass_fields__"):
        return entity
    values = {}
    for f in fields(entity):
        if get_field_tag(f) is not None:
            values[f.name] = get_tagged_field_default(f)
        else:
            values[f.name] = _with_default_tags(getattr(entity, f.name))
    return type(entity)(**values)


def test_defaults_decode_as_the_python_path() -> None:
    """Every request with its tagged fields at their defaults, left out of the body: read
    back as kio's defaults."""
    checked = 0
    for cls in REQUESTS:
        entity = _with_default_tags(_instance(cls, False))
        if entity == _instance(cls, False):
            continue  # no tagged field anywhere in it
        body = _body(cls, entity)
        assert C.decode(cls, body, 0) is not None, cls
        assert _assert_same(cls, body) == entity, cls
        checked += 1
    assert checked >= 10  # the request versions with tagged fields


def test_captured_requests_decode_as_the_python_path() -> None:
    """Real clients' requests (librdkafka and the others captured under tests/data)."""
    assert len(CAPTURED) >= 20
    for path in CAPTURED:
        with open(path, "rb") as file:
            frame = file.read()[4:]
        header = parse_request_header_in_python(frame)
        cls = codec.request_class(header.api_key, header.api_version)
        assert cls is not None, path
        _assert_same(cls, frame, header.body_offset)


def _variants(body: bytes, rng: random.Random) -> list[bytes]:
    variants = [body[:end] for end in range(len(body))]
    for _ in range(25 if body else 0):
        corrupt = bytearray(body)
        for _ in range(rng.randrange(1, 4)):
            corrupt[rng.randrange(len(corrupt))] = rng.choice((0, 1, 2, 0x7F, 0x80, 0xFF, rng.getrandbits(8)))
        variants.append(bytes(corrupt))
    variants.append(body + bytes(rng.getrandbits(8) for _ in range(6)))
    return variants


def test_broken_bodies_are_refused_as_the_python_path_refuses_them() -> None:
    """Every truncation of every request body (filled and with nulls), and random
    corruptions of a byte or a few: the same exception type on both paths, or equal
    entities of the same types."""
    rng = random.Random(23)
    compared = refused = 0
    for cls in REQUESTS:
        for nulls in (False, True):
            for variant in _variants(_body(cls, _instance(cls, nulls)), rng):
                expected = _outcome(decode_request_in_python, cls, variant)
                got = _outcome(_compiled, cls, variant)
                assert got == expected, (cls, variant)
                if got[0] == "refused":
                    assert got[1] is MalformedRequest, (cls, variant, got)
                    refused += 1
                compared += 1
    assert refused > compared // 2


def test_random_bytes_are_refused_as_the_python_path_refuses_them() -> None:
    rng = random.Random(29)
    for cls in REQUESTS[::2]:
        for _ in range(15):
            frame = bytes(rng.getrandbits(8) for _ in range(rng.randrange(0, 48)))
            assert _outcome(_compiled, cls, frame) == _outcome(decode_request_in_python, cls, frame), (cls, frame)


# --- tagged fields the decoder leaves to the Python path -----------------------------------------


def _with_tag_section(body: bytes, section: bytes) -> bytes:
    """`body` (ending in an empty top-level tag section) with `section` in its place."""
    assert body.endswith(b"\x00")
    return body[:-1] + section


def _tag(tag: int, value: bytes) -> bytes:
    return bytes(write_uvarint(tag)) + bytes(write_uvarint(len(value))) + value


def test_an_unknown_tagged_field_is_skipped_as_on_the_python_path() -> None:
    """KIP-482: a tag the class does not know is skipped; C leaves such a request to the
    Python path, which strips it and reads the rest."""
    from kio.schema.heartbeat.v4.request import HeartbeatRequest

    entity = HeartbeatRequest(group_id="g", generation_id=3, member_id="m", group_instance_id="i")
    body = _with_tag_section(_body(HeartbeatRequest, entity), b"\x01" + _tag(9, b"\x05\x06"))
    assert C.decode(HeartbeatRequest, body, 0) is None
    assert _assert_same(HeartbeatRequest, body) == entity


def _fetch_without_tags() -> tuple[Any, bytes]:
    """A Fetch v16 body whose tagged fields (cluster_id: 0, replica_state: 1) are left at
    their defaults, so that its tag section is empty."""
    from kio.schema.fetch.v16.request import FetchRequest

    entity = FetchRequest(max_wait=timedelta(milliseconds=500), min_bytes=1, topics=(), forgotten_topics_data=())
    return FetchRequest, _body(FetchRequest, entity)


def test_a_known_tag_beside_an_unknown_one_is_read_as_on_the_python_path() -> None:
    cls, plain = _fetch_without_tags()
    body = _with_tag_section(plain, b"\x02" + _tag(0, b"\x03ab") + _tag(77, b"zz"))
    assert C.decode(cls, body, 0) is None
    assert _assert_same(cls, body).cluster_id == "ab"


def test_known_tags_are_read_in_c() -> None:
    """Both tags, in either order; a repeated tag's last value wins, as in kio."""
    cls, plain = _fetch_without_tags()
    state = b"\x00\x00\x00\x07" + b"\x00\x00\x00\x00\x00\x00\x00\x09" + b"\x00"  # id 7, epoch 9
    for section in (b"\x02" + _tag(0, b"\x03ab") + _tag(1, state), b"\x02" + _tag(1, state) + _tag(0, b"\x03ab"),
                    b"\x03" + _tag(0, b"\x02x") + _tag(1, state) + _tag(0, b"\x03ab")):
        body = _with_tag_section(plain, section)
        assert C.decode(cls, body, 0) is not None
        got = _assert_same(cls, body)
        assert got.cluster_id == "ab"
        assert (got.replica_state.replica_id, got.replica_state.replica_epoch) == (7, 9)


def test_a_tagged_value_shorter_than_its_size_is_refused_on_both_paths() -> None:
    """kio reads on from the value's end, the length check from the declared end: both
    paths refuse such a value (request_bounds, and C as it reads)."""
    cls, plain = _fetch_without_tags()
    # cluster_id (tag 0) "ab" declared as 5 bytes: two more than its value takes
    body = _with_tag_section(plain, b"\x01" + b"\x00\x05" + b"\x03ab" + b"\x00\x00")
    with pytest.raises(MalformedRequest):
        C.decode(cls, body, 0)
    assert _outcome(decode_request_in_python, cls, body) == ("refused", MalformedRequest)
    assert _outcome(_compiled, cls, body) == ("refused", MalformedRequest)


# A Fetch v17 request whose partition's tagged replica_directory_id (a uuid) declares 22
# bytes: its 16, then 6 that the length check took as the rest of that value and kio read
# as the topic's empty tag section and forgotten_topics_data's count, 2**32 - 2 unchecked:
# kio's reader then asked for 32 GiB and the allocation failure aborted the process.
_PADDED_TAG_PROGRAM = """
import uuid
from datetime import timedelta

from kio.schema.fetch.v17.request import FetchPartition, FetchRequest, FetchTopic

from ottla.protocol import codec
from ottla.protocol.codec import MalformedRequest
from ottla.protocol.compiled_writers import compiled_writer

directory = uuid.UUID(int=5)
partition = FetchPartition(partition=0, current_leader_epoch=-1, fetch_offset=0, last_fetched_epoch=-1,
                           log_start_offset=-1, partition_max_bytes=1000, replica_directory_id=directory)
entity = FetchRequest(max_wait=timedelta(milliseconds=5), min_bytes=1, forgotten_topics_data=(), rack_id="abcdefghij",
                      topics=(FetchTopic(topic_id=uuid.UUID(int=9), partitions=(partition,)),))
pieces = []
compiled_writer(FetchRequest)(pieces.append, entity)
body = b"".join(bytes(p) for p in pieces)
tag = b"\\x01\\x00\\x10" + directory.bytes
padding = b"\\x00\\xff\\xff\\xff\\xff\\x0f"
at = body.index(tag)
body = body[:at] + b"\\x01\\x00" + bytes([16 + len(padding)]) + directory.bytes + padding + body[at + len(tag):]
for decode in (codec.decode_request, codec.decode_request_in_python):
    try:
        decode(FetchRequest, body, 0)
    except MalformedRequest:
        print("refused")
"""


@pytest.mark.parametrize("pure_python", ["0", "1"], ids=["compiled", "python"])
def test_a_padded_tagged_value_does_not_take_the_process_down(pure_python: str) -> None:
    """Run in a process of its own: what it checks is that the process survives."""
    import os
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", _PADDED_TAG_PROGRAM], capture_output=True, text=True, timeout=120,
                          env={**os.environ, compiled_codec.PURE_PYTHON_VARIABLE: pure_python})
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["refused", "refused"]


def test_a_tagged_value_longer_than_its_size_is_refused() -> None:
    cls, plain = _fetch_without_tags()
    body = _with_tag_section(plain, b"\x01" + b"\x00\x02" + b"\x03ab")
    assert _outcome(decode_request_in_python, cls, body) == ("refused", MalformedRequest)
    assert _outcome(_compiled, cls, body) == ("refused", MalformedRequest)


def test_a_null_tagged_string_is_refused_as_kio_refuses_it() -> None:
    """kio reads a tagged value as never null, even of a nullable field."""
    cls, plain = _fetch_without_tags()
    body = _with_tag_section(plain, b"\x01" + _tag(0, b"\x00"))
    assert _outcome(decode_request_in_python, cls, body) == ("refused", MalformedRequest)
    assert _outcome(_compiled, cls, body) == ("refused", MalformedRequest)


def test_the_decoder_is_on_the_selected_path() -> None:
    assert (codec._decode_in_c is C.decode) == compiled_codec.ENABLED


def test_a_writable_buffer_is_refused_as_kio_refuses_it() -> None:
    """kio reads read-only buffers only; C hands a writable one to the Python path."""
    from kio.schema.heartbeat.v4.request import HeartbeatRequest

    body = _body(HeartbeatRequest, HeartbeatRequest(group_id="g", generation_id=3, member_id="m",
                                                    group_instance_id=None))
    assert C.decode(HeartbeatRequest, bytearray(body), 0) is None
    assert _outcome(_compiled, HeartbeatRequest, bytearray(body)) == _outcome(
        decode_request_in_python, HeartbeatRequest, bytearray(body))


def test_values_kio_refuses_are_refused() -> None:
    """A bool other than 0 or 1, invalid UTF-8, a negative legacy length other than -1."""
    from kio.schema.metadata.v4.request import MetadataRequest

    good = _body(MetadataRequest, MetadataRequest(topics=None, allow_auto_topic_creation=True))
    assert good == b"\xff\xff\xff\xff\x01"
    topic = struct.pack(">i", 1) + struct.pack(">h", 2)
    for body in (b"\xff\xff\xff\xff\x02", topic + b"\xc3\x28\x01", struct.pack(">i", 1) + b"\xff\xfe" + b"\x01",
                 struct.pack(">i", -2) + b"\x01"):
        assert _outcome(decode_request_in_python, MetadataRequest, body) == ("refused", MalformedRequest), body
        assert _outcome(_compiled, MetadataRequest, body) == ("refused", MalformedRequest), body
