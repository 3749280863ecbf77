"""The compiled writers write exactly kio's bytes, for every request and response class
of every version kio knows, with every field filled in and with every nullable field
null."""

from __future__ import annotations

import io
from dataclasses import MISSING, fields
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID

import pytest
from kio.index import UnknownAPIKey, UnknownEntity, load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode
from kio.serial import entity_writer

from ottla.protocol.compiled_writers import compiled_writer
from ottla.protocol.kio_schema import (
    EntityField,
    EntityTupleField,
    PrimitiveField,
    PrimitiveTupleField,
    classify_field,
    get_field_tag,
    get_schema_field_type,
    is_optional,
)

LARGE_RECORDS = bytes(range(256)) * 40  # over ChunkWriter.LARGE: passed on as its own piece

SAMPLES: dict[str, Any] = {
    "int8": -5, "int16": -300, "int32": 70_000, "int64": 2**40 + 3,
    "uint8": 200, "uint16": 60_000, "uint32": 3_000_000_000, "uint64": 2**63 + 5,
    "float64": 1.5, "bool": True, "error_code": ErrorCode.coordinator_not_available,
    "timedelta_i32": timedelta(milliseconds=1234), "timedelta_i64": timedelta(milliseconds=2**33),
    "datetime_i64": datetime.fromtimestamp(1_700_000_000.123, tz=UTC),
    "uuid": UUID(int=0x1234_5678_9ABC), "string": "h\u00e9llo", "bytes": b"\x00\x01abc",
    "records": LARGE_RECORDS,
}


def _classes() -> list[type]:
    found = []
    for api_key in range(100):
        for version in range(25):
            for load in (load_request_schema, load_response_schema):
                try:
                    found.append(load(api_key, version))
                except (UnknownAPIKey, UnknownEntity):
                    pass
    return found


CLASSES = _classes()


def _value(f: Any, kind: Any, nulls: bool) -> Any:
    optional = is_optional(f) and get_field_tag(f) is None
    if nulls and optional:
        return None
    if isinstance(kind, EntityField):
        return _instance(kind.type_, nulls)
    if isinstance(kind, EntityTupleField):
        return (_instance(kind.type_, nulls), _instance(kind.type_, not nulls))
    sample = SAMPLES[get_schema_field_type(f)]
    if isinstance(kind, PrimitiveTupleField):
        return (sample, sample) if get_schema_field_type(f) != "uuid" else (sample, UUID(int=7))
    assert isinstance(kind, PrimitiveField)
    return sample


def _instance(cls: type, nulls: bool) -> Any:
    return cls(**{f.name: _value(f, classify_field(f), nulls) for f in fields(cls)})


def _kio_bytes(cls: type, entity: Any) -> bytes:
    buffer = io.BytesIO()
    entity_writer(cls)(buffer, entity)
    return buffer.getvalue()


def _compiled_pieces(cls: type, entity: Any) -> list[Any]:
    pieces: list[Any] = []
    compiled_writer(cls)(pieces.append, entity)
    return pieces


def test_there_are_many_classes() -> None:
    assert len(CLASSES) > 500


@pytest.mark.parametrize("nulls", [False, True], ids=["filled", "nulls"])
def test_every_class_encodes_as_kio_does(nulls: bool) -> None:
    mismatches = []
    for cls in CLASSES:
        entity = _instance(cls, nulls)
        expected = _kio_bytes(cls, entity)
        got = b"".join(bytes(p) for p in _compiled_pieces(cls, entity))
        if got != expected:
            mismatches.append(f"{cls.__module__}.{cls.__name__}")
    assert not mismatches, f"{len(mismatches)} classes differ: {mismatches[:10]}"


def test_defaults_encode_as_kio_does() -> None:
    """Tagged fields left at their defaults are not written (kio's rule); a class built
    from defaults (where it has them) is the common case of a response."""
    checked = 0
    for cls in CLASSES:
        if any(f.default is MISSING and f.default_factory is MISSING for f in fields(cls)):
            continue
        entity = cls()
        assert b"".join(_compiled_pieces(cls, entity)) == _kio_bytes(cls, entity), cls
        checked += 1
    assert checked > 0


def test_record_data_is_passed_on_uncopied() -> None:
    from kio.schema.fetch.v12.response import FetchResponse

    entity = _instance(FetchResponse, nulls=False)
    pieces = _compiled_pieces(FetchResponse, entity)
    assert any(piece is LARGE_RECORDS for piece in pieces)


def test_generated_source_is_kept_for_reading() -> None:
    from kio.schema.end_txn.v3.response import EndTxnResponse

    source = compiled_writer(EndTxnResponse).source
    # throttle time, error code, producer id, epoch and the empty tag section: one pack.
    assert source.count("write(") == 1
