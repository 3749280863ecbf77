"""Request and response headers, and message bodies through kio.

Decoding a request is: `parse_request_header` (by hand, with `struct`: it is on every
request and needs nothing from kio), then `decode_request` with the kio reader cached
for that (api_key, version). Encoding a response is `encode_response`, with the writer
compiled from the kio class (protocol/compiled_writers.py); it returns a list of byte
chunks, size prefix first, ready for `transport.writelines`: large values (record data)
are passed through as their own chunk, never copied into a bigger buffer.

Each of the three runs in C where the extension was built (compiled_codec.py says how
the path is chosen): `parse_request_header`, `decode_request` (the length check and the
reading of the body, in one pass) and `encode_response` are then _codec's; the Python
functions beside them (`parse_request_header_in_python`, `decode_request_in_python`,
`encode_response_in_python`) are the reference the tests compare the compiled path
with, and the path taken without a compiler.
"""

from __future__ import annotations

import struct
from dataclasses import fields
from functools import cache
from typing import Any, NamedTuple

from kio.index import UnknownAPIKey, UnknownEntity, load_request_schema, load_response_schema
from kio.serial import entity_reader
from kio.serial.errors import SerialError
from kio.static.protocol import Entity, Payload

from . import compiled_codec
from .apis import API_VERSIONS
from .compiled_writers import compiled_writer
from .kio_schema import (
    EntityField,
    EntityTupleField,
    PrimitiveTupleField,
    classify_field,
    get_field_tag,
    get_reader,
    get_schema_field_type,
    is_optional,
)
from .request_bounds import LengthError, check_request_body, request_plan
from .varint import VarintError, read_uvarint, write_uvarint
from .views import install_absent_defaults
from .views.apis import ABSENT

_HEADER_PREFIX = struct.Struct(">hhih")  # api_key, api_version, correlation_id, client_id length
_INT32 = struct.Struct(">i")


class MalformedRequest(Exception):
    """A frame whose header or body cannot be decoded."""


class RequestHeader(NamedTuple):
    """A named tuple, which _codec builds without calling back into Python."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body_offset: int


# --- schema classes, cached per (api_key, version) --------------------------------------


@cache
def request_class(api_key: int, version: int) -> type[Entity] | None:
    """The kio class of a request, with the fields other served versions of it have read
    as their defaults where this version lacks them (protocol/views)."""
    try:
        cls = load_request_schema(api_key, version)
    except (UnknownAPIKey, UnknownEntity):
        return None
    install_absent_defaults(cls, ABSENT.get(api_key, {}))
    return cls


@cache
def response_class(api_key: int, version: int) -> type[Entity] | None:
    try:
        return load_response_schema(api_key, version)
    except (UnknownAPIKey, UnknownEntity):
        return None


@cache
def _reader(cls: type[Entity]) -> Any:
    return entity_reader(cls)


# --- request side ---------------------------------------------------------------------


def skip_tagged_fields(buf: bytes | memoryview, offset: int) -> int:
    try:
        count, offset = read_uvarint(buf, offset)
        for _ in range(count):
            _tag, offset = read_uvarint(buf, offset)
            size, offset = read_uvarint(buf, offset)
            offset += size
    except VarintError as exc:
        raise MalformedRequest(f"bad tagged fields: {exc}") from exc
    if offset > len(buf):
        raise MalformedRequest("truncated tagged fields")
    return offset


def parse_request_header_in_python(frame: bytes | memoryview) -> RequestHeader:
    """Header v1 (api key, version, correlation id, client id) plus, for flexible
    requests, header v2's tagged fields. The client id is always a legacy int16 string,
    even in flexible versions (Kafka special-cases it)."""
    if len(frame) < _HEADER_PREFIX.size:
        raise MalformedRequest(f"request header needs {_HEADER_PREFIX.size} bytes, got {len(frame)}")
    api_key, api_version, correlation_id, client_len = _HEADER_PREFIX.unpack_from(frame)
    offset = _HEADER_PREFIX.size
    client_id = None
    if client_len >= 0:
        end = offset + client_len
        if end > len(frame):
            raise MalformedRequest("client id runs past the frame")
        client_id = str(frame[offset:end], "utf-8", "replace")
        offset = end
    cls = request_class(api_key, api_version)
    if cls is not None and cls.__flexible__:
        offset = skip_tagged_fields(frame, offset)
    return RequestHeader(api_key, api_version, correlation_id, client_id, offset)


def decode_request(cls: type[Entity], frame: bytes | memoryview, offset: int) -> Any:
    """The request body at `offset` as an instance of `cls`: on the compiled path, _codec's
    decode reads it in one pass (compiled_codec.decode_plan), and leaves to the Python
    path only what it does not read itself (an unknown tagged field, a writable buffer);
    its refusals are MalformedRequest, as there."""
    if _decode_in_c is not None:
        try:
            entity = _decode_in_c(cls, frame, offset)
        except (ValueError, OverflowError) as exc:
            # a value kio refuses too: a bool other than 0 or 1, an error code no one
            # defined, invalid UTF-8, a duration or a time kio cannot hold
            raise MalformedRequest(f"undecodable {cls.__name__}: {exc}") from exc
        if entity is not None:
            return entity
    return decode_request_in_python(cls, frame, offset)


def decode_request_in_python(cls: type[Entity], frame: bytes | memoryview, offset: int) -> Any:
    """decode_request through kio's reader: the reference.

    Every length and count is checked against the frame first (request_bounds.py): kio
    would reserve memory for whatever an array's count claims.

    kio refuses tagged fields it does not know (KeyError); KIP-482 says a receiver skips
    them. On that (rare) path the body is rewritten without the unknown tags and read
    again."""
    try:
        if _check_body_in_c is not None:
            _check_body_in_c(request_plan(cls), frame, offset)
        else:
            check_request_body(cls, frame, offset)
    except LengthError as exc:
        raise MalformedRequest(f"{cls.__name__}: {exc}") from exc
    read = _reader(cls)
    try:
        entity, _ = read(frame, offset)
        return entity
    except KeyError as exc:
        if "tagged field" not in str(exc):
            raise MalformedRequest(str(exc)) from exc
        cleaned = bytearray()
        try:
            _strip_unknown_tags(cls, frame, offset, cleaned)
            entity, _ = read(bytes(cleaned), 0)
        except Exception as again:  # any failure here means a bad frame
            raise MalformedRequest(f"undecodable {cls.__name__}: {again}") from again
        return entity
    except (SerialError, ValueError, IndexError, UnicodeDecodeError, OverflowError) as exc:
        # SerialError: kio's own (a buffer underflow, a null where none may be...).
        raise MalformedRequest(f"undecodable {cls.__name__}: {exc}") from exc


# --- unknown tagged fields ---------------------------------------------------------------


def _strip_unknown_tags(cls: type[Entity], buf: bytes | memoryview, offset: int, out: bytearray) -> int:
    """Copy the entity at `offset` into `out`, dropping tagged fields `cls` does not
    declare. Returns the offset after the entity in `buf`."""
    flexible = cls.__flexible__
    known_tags = set()
    for f in fields(cls):
        declared = get_field_tag(f)
        if declared is not None:
            known_tags.add(int(declared))
            continue
        kind = classify_field(f)
        if isinstance(kind, EntityField):
            if is_optional(f):  # KIP-893 nullable struct: int8 marker
                marker = buf[offset]
                out.append(marker)
                offset += 1
                if marker == 0xFF:
                    continue
            offset = _strip_unknown_tags(kind.type_, buf, offset, out)
        elif isinstance(kind, (EntityTupleField, PrimitiveTupleField)):
            start = offset
            if flexible:
                length, offset = read_uvarint(buf, offset)
                length -= 1
            else:
                (length,) = _INT32.unpack_from(buf, offset)
                offset += 4
            out += buf[start:offset]
            for _ in range(max(length, 0)):
                if isinstance(kind, EntityTupleField):
                    offset = _strip_unknown_tags(kind.type_, buf, offset, out)
                else:
                    read = get_reader(get_schema_field_type(f), flexible, False)
                    _, used = read(buf, offset)
                    out += buf[offset : offset + used]
                    offset += used
        else:
            read = get_reader(get_schema_field_type(f), flexible, is_optional(f))
            _, used = read(buf, offset)
            out += buf[offset : offset + used]
            offset += used
    if not flexible:
        return offset
    count, offset = read_uvarint(buf, offset)
    kept = []
    for _ in range(count):
        start = offset
        tag, offset = read_uvarint(buf, offset)
        size, offset = read_uvarint(buf, offset)
        offset += size
        if tag in known_tags:
            kept.append(buf[start:offset])
    out += write_uvarint(len(kept))
    for chunk in kept:
        out += chunk
    return offset


# --- response side ----------------------------------------------------------------------


class ChunkWriter:
    """The write() target of the compiled writers. `write` is a list's append, so a
    piece costs no Python call; `frame()` joins the pieces once, keeping large ones
    (record data) as their own chunks, uncopied. A small response leaves as one bytes
    object, size prefix included: one chunk, one send."""

    __slots__ = ("pieces", "write")
    LARGE = 4096

    def __init__(self) -> None:
        self.pieces: list[bytes | bytearray | memoryview] = [b""]  # [0]: the size prefix, set by frame()
        self.write = self.pieces.append

    def frame(self) -> list[bytes | bytearray | memoryview]:
        """The chunks of the whole frame: size prefix, then everything written."""
        pieces = self.pieces
        size = sum(map(len, pieces))
        pieces[0] = _INT32.pack(size)
        if size < self.LARGE:
            return [b"".join(pieces)]
        chunks: list[bytes | bytearray | memoryview] = []
        small: list[bytes | bytearray | memoryview] = []
        for piece in pieces:
            if len(piece) < self.LARGE:
                small.append(piece)
                continue
            if small:
                chunks.append(b"".join(small))
                small = []
            chunks.append(piece)
        if small:
            chunks.append(b"".join(small))
        return chunks


def response_header_is_flexible(api_key: int, version: int, cls: type[Entity]) -> bool:
    # ApiVersions responses always use header v0, so that a client that does not yet
    # know the broker's versions can read the answer.
    return cls.__flexible__ and api_key != API_VERSIONS.key


class Encoded:
    """A response encoded ahead of time, for a handler that answers the same again and
    again (Metadata's kept answers): the entity (what the metrics count the errors of),
    whether its header is flexible, and the body's bytes, after the header. Each request's
    answer is then only its header, its correlation id's, before those bytes
    (encode_response; _pipeline.c's `encoded` on the compiled path), not the entity
    encoded again. Its body must be all bytes (no file slices)."""

    __slots__ = ("entity", "flexible", "body")

    def __init__(self, entity: Any) -> None:
        cls: type[Payload] = type(entity)
        self.entity = entity
        self.flexible = response_header_is_flexible(cls.__api_key__, cls.__version__, cls)
        chunks = encode_response(0, entity)
        if not all(isinstance(chunk, bytes) for chunk in chunks):
            raise TypeError(f"{cls.__qualname__}: only a response of bytes is encoded ahead of time")
        self.body = b"".join(chunks)[_INT32.size * 2 + self.flexible:]  # after the size, correlation id, tags


def _encoded_ahead(correlation_id: int, response: Encoded) -> list:
    """encode_response of an Encoded: its header and its bytes, in one chunk."""
    header = _INT32.size + response.flexible
    return [_INT32.pack(header + len(response.body)) + _INT32.pack(correlation_id)
            + (b"\x00" if response.flexible else b"") + response.body]


def encode_response(correlation_id: int, response: Any, api_key: int | None = None) -> list:
    """Size prefix + response header + body, as chunks for `transport.writelines`."""
    if response.__class__ is Encoded:
        return _encoded_ahead(correlation_id, response)
    if _encode_response_in_c is None:
        return encode_response_in_python(correlation_id, response, api_key)
    cls: type[Payload] = type(response)
    if api_key is None:
        how = _encoding.get(cls)
        if how is None:
            how = _encoding[cls] = (response_header_is_flexible(cls.__api_key__, cls.__version__, cls),
                                    compiled_codec.encode_plan(cls))
        return _encode_response_in_c(correlation_id, how[0], how[1], response)
    return _encode_response_in_c(correlation_id, response_header_is_flexible(api_key, cls.__version__, cls),
                                 compiled_codec.encode_plan(cls), response)


# Response class -> (whether its header is flexible, its encode plan), on the compiled
# path: both asked once per class, not on every response.
_encoding: dict[type, tuple[bool, Any]] = {}


def encode_response_in_python(correlation_id: int, response: Any, api_key: int | None = None) -> list:
    """encode_response in Python: the reference."""
    if response.__class__ is Encoded:
        return _encoded_ahead(correlation_id, response)
    cls: type[Payload] = type(response)
    key = cls.__api_key__ if api_key is None else api_key
    out = ChunkWriter()
    header = _INT32.pack(correlation_id)
    if response_header_is_flexible(key, cls.__version__, cls):
        header += b"\x00"  # no tagged fields in the response header
    out.write(header)
    compiled_writer(cls)(out.write, response)
    return out.frame()


# --- the client side: requests out, responses in (for Ottla's own tools) ----------------


def encode_request(correlation_id: int, client_id: str, request: Any) -> bytes:
    """A whole request frame, size prefix included: header v1, or v2 (with its empty
    tagged fields) for a flexible request, then the body."""
    cls: type[Payload] = type(request)
    raw_id = client_id.encode()
    out = ChunkWriter()
    out.write(_HEADER_PREFIX.pack(cls.__api_key__, cls.__version__, correlation_id, len(raw_id)) + raw_id)
    if cls.__flexible__:
        out.write(b"\x00")
    compiled_writer(cls)(out.write, request)
    return b"".join(out.frame())


def decode_response(api_key: int, version: int, frame: bytes) -> tuple[int, Any]:
    """A response frame (without its size prefix): (correlation id, body entity)."""
    cls = response_class(api_key, version)
    if cls is None:
        raise ValueError(f"no schema for version {version} of API {api_key} responses")
    (correlation_id,) = _INT32.unpack_from(frame)
    offset = _INT32.size
    if response_header_is_flexible(api_key, version, cls):
        offset = skip_tagged_fields(frame, offset)
    body, _ = _reader(cls)(frame, offset)
    return correlation_id, body


# --- the compiled path (compiled_codec.py) ------------------------------------------------


def _request_is_flexible(api_key: int, version: int) -> bool:
    cls = request_class(api_key, version)
    return cls is not None and bool(cls.__flexible__)


if compiled_codec.compiled is not None:
    compiled_codec.compiled.configure(_request_is_flexible, RequestHeader, MalformedRequest, LengthError,
                                      compiled_codec.decode_plan)
if compiled_codec.ENABLED:
    assert compiled_codec.compiled is not None
    parse_request_header = compiled_codec.compiled.parse_header
    _check_body_in_c = compiled_codec.compiled.check_body
    _encode_response_in_c = compiled_codec.compiled.encode_response
    _decode_in_c = compiled_codec.compiled.decode
else:
    parse_request_header = parse_request_header_in_python
    _check_body_in_c = None
    _encode_response_in_c = None
    _decode_in_c = None
