"""The compiled request path (protocol/_codec.c) against its Python reference, over every
request and response class of every version kio knows: the same request headers, the
same body length checks (valid, truncated at every byte, and randomly corrupted input
accepted or refused alike, never a crash or a read past the frame), and the same
response bytes.

Break-and-see-it-fail checks made once by hand: writing a flexible array's length as
the count instead of count + 1 in _codec.c's put_length failed
test_every_class_encodes_as_the_python_path; dropping the `if (!nullable && n < 0)`
refusal of the C check failed test_body_check_refuses_what_python_refuses; skipping the
header's tagged fields in C failed test_request_headers_agree.
"""

from __future__ import annotations

import random
import struct
from typing import Any

import pytest
from kio.index import UnknownAPIKey, UnknownEntity, load_request_schema

from ottla.protocol import codec, compiled_codec
from ottla.protocol.codec import MalformedRequest, encode_response_in_python, parse_request_header_in_python
from ottla.protocol.compiled_writers import compiled_writer
from ottla.protocol.request_bounds import LengthError, _checker, request_plan

from .extensions import compiled_extension
from .test_compiled_writers import CLASSES, LARGE_RECORDS, _instance

C = compiled_extension("_codec")
REQUESTS = [cls for cls in CLASSES if cls.__name__.endswith("Request")]
RESPONSES = [cls for cls in CLASSES if cls.__name__.endswith("Response")]


def _python_bytes(cls: type, entity: Any) -> bytes:
    pieces: list[Any] = []
    compiled_writer(cls)(pieces.append, entity)
    return b"".join(bytes(p) for p in pieces)


def _c_bytes(cls: type, entity: Any) -> bytes:
    """The body as _codec writes it (behind a non-flexible response header)."""
    chunks = C.encode_response(7, False, compiled_codec.encode_plan(cls), entity)
    whole = b"".join(bytes(c) for c in chunks)
    assert struct.unpack_from(">ii", whole) == (len(whole) - 4, 7)
    return whole[8:]


# --- responses (and every other class): the encoder ------------------------------------------


def test_the_path_is_selectable() -> None:
    assert compiled_codec.ENABLED == (codec.parse_request_header is C.parse_header)


@pytest.mark.parametrize("nulls", [False, True], ids=["filled", "nulls"])
def test_every_class_encodes_as_the_python_path(nulls: bool) -> None:
    mismatches = []
    for cls in CLASSES:
        entity = _instance(cls, nulls)
        if _c_bytes(cls, entity) != _python_bytes(cls, entity):
            mismatches.append(f"{cls.__module__}.{cls.__name__}")
    assert not mismatches, f"{len(mismatches)} classes differ: {mismatches[:10]}"


def test_defaults_encode_as_the_python_path() -> None:
    """A class built from its defaults: tagged fields left out as kio leaves them out."""
    checked = 0
    for cls in CLASSES:
        try:
            entity = cls()
        except TypeError:
            continue
        assert _c_bytes(cls, entity) == _python_bytes(cls, entity), cls
        checked += 1
    assert checked > 0


def test_responses_frame_as_the_python_path() -> None:
    """The whole frame: size prefix, header v0 or v1 (ApiVersions always v0), body; a
    record set of LARGE bytes or more leaves as its own chunk, uncopied."""
    for cls in RESPONSES:
        entity = _instance(cls, False)
        got = codec._encode_response_in_c  # the module's choice may be Python (OTTLA_PURE_PYTHON)
        chunks = C.encode_response(-3, codec.response_header_is_flexible(cls.__api_key__, cls.__version__, cls),
                                   compiled_codec.encode_plan(cls), entity)
        expected = encode_response_in_python(-3, entity)
        assert b"".join(bytes(c) for c in chunks) == b"".join(bytes(c) for c in expected), cls
        if got is not None:
            assert b"".join(bytes(c) for c in codec.encode_response(-3, entity)) == b"".join(
                bytes(c) for c in expected)
    from kio.schema.fetch.v12.response import FetchResponse

    chunks = C.encode_response(1, True, compiled_codec.encode_plan(FetchResponse), _instance(FetchResponse, False))
    assert any(chunk is LARGE_RECORDS for chunk in chunks)
    from kio.schema.end_txn.v3.response import EndTxnResponse

    small = C.encode_response(1, True, compiled_codec.encode_plan(EndTxnResponse), _instance(EndTxnResponse, False))
    assert len(small) == 1 and isinstance(small[0], bytes)


def test_a_records_value_that_is_not_a_buffer_is_a_file_slice_or_refused(tmp_path, monkeypatch) -> None:
    """A FileSlice (Fetch's records left in their file) leaves as a chunk of its own; any
    other value that is not a buffer is a handler's bug, refused at once by the encoder
    rather than found later by the connection's write."""
    import os

    from kio.schema.fetch.v12.response import FetchResponse

    from ottla.storage.file_slice import FileSlice

    from . import test_compiled_writers

    plan = compiled_codec.encode_plan(FetchResponse)
    path = tmp_path / "segment"
    path.write_bytes(LARGE_RECORDS)
    fd = os.open(path, os.O_RDONLY)
    try:
        in_file = FileSlice(fd, 0, len(LARGE_RECORDS))
    finally:
        os.close(fd)
    monkeypatch.setitem(test_compiled_writers.SAMPLES, "records", in_file)
    assert any(chunk is in_file for chunk in C.encode_response(1, True, plan, _instance(FetchResponse, False)))
    in_file.close()

    class Sized:  # what a handler's bug could put there: sized, but no buffer and no file
        def __len__(self) -> int:
            return len(LARGE_RECORDS)

    monkeypatch.setitem(test_compiled_writers.SAMPLES, "records", Sized())
    with pytest.raises(TypeError, match="neither a buffer nor a FileSlice"):
        C.encode_response(1, True, plan, _instance(FetchResponse, False))


def test_out_of_range_values_are_refused_as_struct_refuses_them() -> None:
    """A value its Kafka type cannot hold (a handler's bug) raises struct.error on both
    paths, never wraps around."""
    from datetime import timedelta

    from kio.schema.init_producer_id.v4.response import InitProducerIdResponse

    plan = compiled_codec.encode_plan(InitProducerIdResponse)
    good = {"throttle_time": timedelta(0), "error_code": 0, "producer_id": 5, "producer_epoch": 1}
    bad_values = [("producer_epoch", 2**15), ("producer_epoch", -(2**15) - 1), ("producer_id", 2**63),
                  ("producer_id", "1"), ("producer_epoch", 1.5), ("throttle_time", timedelta(days=30))]
    for name, bad in bad_values:
        entity = InitProducerIdResponse(**{**good, name: bad})
        with pytest.raises(struct.error):
            _python_bytes(InitProducerIdResponse, entity)
        with pytest.raises(struct.error):
            C.encode_response(1, True, plan, entity)
    with pytest.raises(struct.error):
        C.encode_response(2**31, True, plan, InitProducerIdResponse(**good))


def test_durations_are_written_as_the_python_path_writes_them() -> None:
    """throttle_time and the other durations: _codec converts a timedelta itself
    (E_DURATION), as round(total_seconds() * 1000), half to even; past what it converts
    exactly, and for what is no timedelta, it calls the Python converter."""
    from datetime import timedelta

    from kio.schema.heartbeat.v4.response import HeartbeatResponse

    plan = compiled_codec.encode_plan(HeartbeatResponse)
    assert plan[1][0][0] == compiled_codec.E_DURATION
    durations = [timedelta(0), timedelta(milliseconds=1), timedelta(milliseconds=-1), timedelta(microseconds=500),
                 timedelta(microseconds=1500), timedelta(microseconds=2500), timedelta(microseconds=-500),
                 timedelta(microseconds=-1500), timedelta(microseconds=499), timedelta(microseconds=501),
                 timedelta(seconds=2**31 // 1000), timedelta(milliseconds=2**31 - 1), timedelta(milliseconds=-(2**31)),
                 timedelta(days=24, seconds=74_483, microseconds=647_499), timedelta(days=999_999_999),
                 timedelta(days=-999_999_999), timedelta(microseconds=2**53 - 1), timedelta(microseconds=2**53 + 1)]
    rng = random.Random(45)
    durations += [timedelta(microseconds=rng.randrange(-(2**31) * 1000, 2**31 * 1000)) for _ in range(2000)]
    for duration in durations:
        entity = HeartbeatResponse(throttle_time=duration, error_code=0)
        try:
            expected: Any = _python_bytes(HeartbeatResponse, entity)
        except struct.error:
            expected = "refused"
        try:
            got: Any = _c_bytes(HeartbeatResponse, entity)
        except struct.error:
            got = "refused"
        assert got == expected, duration
    with pytest.raises(AttributeError):  # no timedelta: the converter's own error
        C.encode_response(1, True, plan, HeartbeatResponse(throttle_time=5, error_code=0))  # type: ignore[arg-type]


def test_optional_timestamps_are_written_as_the_python_path_writes_them() -> None:
    """Produce's log_append_time (an optional datetime): _codec writes None as -1 itself
    (E_OPTIONAL_TIMESTAMP), without calling the converter, and a datetime through it;
    both as the Python path writes them."""
    from datetime import UTC, datetime, timedelta

    from kio.schema.produce.v9.response import PartitionProduceResponse, ProduceResponse, TopicProduceResponse

    plan = compiled_codec.encode_plan(PartitionProduceResponse)
    steps = [step for step in plan[1] if len(step) > 1 and step[1] == "log_append_time"]
    assert [step[0] for step in steps] == [compiled_codec.E_OPTIONAL_TIMESTAMP]
    epoch = datetime.fromtimestamp(0, UTC)
    for stamp in (None, epoch, epoch + timedelta(milliseconds=1_795_797_555_933), epoch - timedelta(milliseconds=1)):
        entity = ProduceResponse(responses=(TopicProduceResponse(name="t", partition_responses=(
            PartitionProduceResponse(index=0, error_code=0, base_offset=5, log_append_time=stamp, log_start_offset=0,
                                     record_errors=(), error_message=None),)),), throttle_time=timedelta(0))
        assert _c_bytes(ProduceResponse, entity) == _python_bytes(ProduceResponse, entity), stamp
    with pytest.raises(AttributeError):  # no datetime and not None: the converter's own error
        C.encode_response(1, False, compiled_codec.encode_plan(ProduceResponse), ProduceResponse(
            responses=(TopicProduceResponse(name="t", partition_responses=(PartitionProduceResponse(
                index=0, error_code=0, base_offset=5, log_append_time=5, log_start_offset=0,  # type: ignore[arg-type]
                record_errors=(), error_message=None),)),), throttle_time=timedelta(0)))


# --- requests: the header ------------------------------------------------------------------


def _outcome(parse: Any, frame: Any) -> Any:
    try:
        return tuple(parse(frame))
    except MalformedRequest:
        return "refused"


def _header(api_key: int, version: int, client_id: bytes | None, tags: bytes = b"") -> bytes:
    raw = struct.pack(">hhi", api_key, version, 99)
    raw += struct.pack(">h", -1) if client_id is None else struct.pack(">h", len(client_id)) + client_id
    return raw + tags


def _keys_and_versions() -> list[tuple[int, int]]:
    found = []
    for api_key in range(-1, 100):
        for version in range(-1, 25):
            found.append((api_key, version))
    return found


def test_request_headers_agree() -> None:
    """Every API and version kio knows (and some it does not), with and without a client
    id, an invalid UTF-8 one, header tagged fields, a body behind; then every prefix."""
    tag_sections = [b"\x00", b"\x01\x05\x02ab", b"\x02\x01\x00\x03\x01z", b"\x01\x05\x7f"]
    checked = 0
    for api_key, version in _keys_and_versions():
        for client_id in (None, b"", b"client-1", "h\u00e9".encode(), b"\xff\xfe"):
            for tags in tag_sections:
                frame = _header(api_key, version, client_id, tags) + b"\x00\x01body"
                for end in range(len(frame) + 1):
                    part = memoryview(frame)[:end]
                    assert _outcome(C.parse_header, part) == _outcome(parse_request_header_in_python, part), (
                        api_key, version, bytes(part))
                    checked += 1
    assert checked > 100_000


def test_random_headers_agree() -> None:
    rng = random.Random(31)
    for _ in range(50_000):
        frame = bytes(rng.getrandbits(8) for _ in range(rng.randrange(0, 30)))
        if len(frame) >= 4 and rng.random() < 0.7:  # a known API and version, to reach the tagged fields
            frame = struct.pack(">hh", rng.randrange(0, 70), rng.randrange(0, 14)) + frame[4:]
        assert _outcome(C.parse_header, frame) == _outcome(parse_request_header_in_python, frame), frame


# --- requests: the body's length check -------------------------------------------------------


def _check_outcome(check: Any, cls: type, frame: bytes, offset: int) -> Any:
    try:
        return check(cls, frame, offset)
    except LengthError:
        return "refused"


def _python_check(cls: type, frame: bytes, offset: int) -> Any:
    try:
        return _checker(cls)(frame, offset, len(frame))
    except (struct.error, IndexError, ValueError) as exc:
        raise LengthError(str(exc)) from exc


def _c_check(cls: type, frame: bytes, offset: int) -> Any:
    return C.check_body(request_plan(cls), frame, offset)


def _request_bodies() -> list[tuple[type, bytes]]:
    bodies = []
    for cls in REQUESTS:
        for nulls in (False, True):
            entity = _instance(cls, nulls)
            bodies.append((cls, _python_bytes(cls, entity)))
    return bodies


BODIES = _request_bodies()


def test_valid_bodies_pass_both_checks() -> None:
    for cls, body in BODIES:
        frame = b"HEAD" + body
        assert _c_check(cls, frame, 4) == _python_check(cls, frame, 4) == len(frame), cls


def test_body_check_refuses_what_python_refuses() -> None:
    """Every truncation of every body, then random corruptions of a byte or a few."""
    rng = random.Random(5)
    compared = refused = 0
    for cls, body in BODIES:
        frame = b"HEAD" + body
        variants = [frame[:end] for end in range(4, len(frame))]
        for _ in range(30 if body else 0):
            corrupt = bytearray(frame)
            for _ in range(rng.randrange(1, 4)):
                corrupt[rng.randrange(4, len(corrupt))] = rng.choice((0, 1, 0x7F, 0x80, 0xFF, rng.getrandbits(8)))
            variants.append(bytes(corrupt))
        variants.append(frame + bytes(rng.getrandbits(8) for _ in range(8)))
        for variant in variants:
            c = _check_outcome(_c_check, cls, variant, 4)
            assert c == _check_outcome(_python_check, cls, variant, 4), (cls, variant)
            compared += 1
            refused += c == "refused"
    assert refused > compared // 3


def test_random_bodies_agree() -> None:
    rng = random.Random(7)
    for cls, _ in BODIES[::3]:
        for _ in range(20):
            frame = bytes(rng.getrandbits(8) for _ in range(rng.randrange(0, 64)))
            assert _check_outcome(_c_check, cls, frame, 0) == _check_outcome(_python_check, cls, frame, 0), (
                cls, frame)


def test_decode_request_is_the_same_on_both_paths(monkeypatch: pytest.MonkeyPatch) -> None:
    """decode_request through kio's reader with the C check and with the Python one: the
    same entity or the same refusal, on valid, truncated and corrupted bodies (the
    compiled decoder, which checks as it reads, has test_compiled_decode.py)."""
    rng = random.Random(11)
    monkeypatch.setattr(codec, "_decode_in_c", None)

    def decode(cls: type, frame: bytes) -> Any:
        try:
            return codec.decode_request(cls, frame, 0)
        except MalformedRequest:
            return "refused"

    for cls, body in BODIES[::2]:
        variants = [body, body[: len(body) // 2], body[:-1]]
        corrupt = bytearray(body)
        if corrupt:
            corrupt[rng.randrange(len(corrupt))] ^= 0xFF
        variants.append(bytes(corrupt))
        for frame in variants:
            monkeypatch.setattr(codec, "_check_body_in_c", C.check_body)
            with_c = decode(cls, frame)
            monkeypatch.setattr(codec, "_check_body_in_c", None)
            assert decode(cls, frame) == with_c, cls


def test_request_plans_cover_every_request_version() -> None:
    """Every request version kio knows has a plan the C check walks."""
    count = 0
    for api_key in range(100):
        for version in range(25):
            try:
                cls = load_request_schema(api_key, version)
            except (UnknownAPIKey, UnknownEntity):
                continue
            assert isinstance(request_plan(cls), tuple)
            count += 1
    assert count > 250


# --- the error codes of a response (the metrics of every request) ----------------------------


def test_error_codes_are_found_as_the_python_walk_finds_them() -> None:
    """Every response class, filled (every error code set), with nulls, and from its
    defaults (every code NONE): the same counts from C as from metrics._count_errors."""
    from collections import Counter

    from ottla.broker.metrics import _count_errors, _nested_error_plan

    with_errors = 0
    for cls in RESPONSES:
        entities = [_instance(cls, False), _instance(cls, True)]
        try:
            entities.append(cls())
        except TypeError:
            pass
        for entity in entities:
            expected: Counter[Any] = Counter()
            _count_errors(entity, cls, expected)
            found = C.error_codes(_nested_error_plan(cls), entity)
            assert Counter(found or ()) == expected, cls
            assert found is None or found, cls  # None when there is none, never []
            with_errors += bool(expected)
    assert with_errors > 100


def test_the_metrics_count_on_the_selected_path() -> None:
    from kio.schema.errors import ErrorCode

    from ottla.broker import metrics as metrics_module
    from ottla.protocol.codec import response_class
    from ottla.protocol.entities import make

    assert (metrics_module._error_codes_in_c is not None) == compiled_codec.ENABLED
    response = make(response_class(0, 9), responses=[{"name": "t", "partition_responses": [
        {"index": 0, "error_code": ErrorCode.not_leader_or_follower},
        {"index": 1, "error_code": ErrorCode.none},
        {"index": 2, "error_code": ErrorCode.not_leader_or_follower}]}])
    served = metrics_module.Metrics()
    served.request_served(0, 0.001, response)
    assert served.apis[0].errors == {ErrorCode.not_leader_or_follower: 2}
