"""Requests built from kio's schema classes with every field filled: arrays of two,
strings and bytes of a few characters, nested entities all the way down. The bounds
check's unit tests and the fuzzer start from these."""

from __future__ import annotations

import datetime
import random
import uuid
from dataclasses import fields
from typing import Any

from ottla.protocol import apis
from ottla.protocol.codec import ChunkWriter, request_class
from ottla.protocol.compiled_writers import compiled_writer
from ottla.protocol.entities import make
from ottla.protocol.kio_schema import EntityField, EntityTupleField, PrimitiveTupleField, classify_field, is_optional

_EPOCH = datetime.datetime.fromtimestamp(0, datetime.UTC)


def _primitive(kafka_type: str, rng: random.Random) -> Any:
    if kafka_type == "string":
        return "".join(rng.choice("abcxyz-._") for _ in range(rng.randint(1, 6)))
    if kafka_type in ("bytes", "records"):
        return bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
    if kafka_type == "bool":
        return rng.random() < 0.5
    if kafka_type == "uuid":
        return uuid.UUID(int=rng.getrandbits(128))
    if kafka_type == "float64":
        return rng.random()
    if kafka_type in ("timedelta_i32", "timedelta_i64"):
        return datetime.timedelta(milliseconds=rng.randint(0, 1000))
    if kafka_type == "datetime_i64":
        return _EPOCH + datetime.timedelta(milliseconds=rng.randint(0, 2**40))
    if kafka_type == "error_code":
        return 0
    bits = {"int8": 7, "int16": 15, "int32": 31, "int64": 63, "uint8": 8, "uint16": 16, "uint32": 32,
            "uint64": 64}.get(kafka_type, 7)
    return rng.getrandbits(bits - 1)


def sample_values(cls: type, rng: random.Random, depth: int = 0) -> dict[str, Any]:
    """Keyword values for make(cls, ...) with every field present."""
    values: dict[str, Any] = {}
    for f in fields(cls):
        kind = classify_field(f)
        kafka_type = f.metadata.get("kafka_type", "")
        if isinstance(kind, EntityField):
            values[f.name] = sample_values(kind.type_, rng, depth + 1)
        elif isinstance(kind, EntityTupleField):
            values[f.name] = [sample_values(kind.type_, rng, depth + 1) for _ in range(2 if depth < 3 else 0)]
        elif isinstance(kind, PrimitiveTupleField):
            values[f.name] = [_primitive(kafka_type, rng) for _ in range(2)]
        elif is_optional(f) and kafka_type not in ("string", "bytes", "records", "uuid", "datetime_i64"):
            values[f.name] = None
        else:
            values[f.name] = _primitive(kafka_type, rng)
    return values


def sample_request(api_key: int, version: int, rng: random.Random) -> tuple[Any, bytes]:
    """A filled-in request of this API version and its encoded body."""
    cls = request_class(api_key, version)
    entity = make(cls, **sample_values(cls, rng))
    out = ChunkWriter()
    compiled_writer(cls)(out.write, entity)
    return entity, b"".join(out.frame())[4:]


def sample_body(api_key: int, version: int, rng: random.Random) -> bytes:
    """The encoded body of a filled-in request of this API version."""
    return sample_request(api_key, version, rng)[1]


def every_supported_request() -> list[tuple[int, int]]:
    return [(api.key, version) for api in apis.SUPPORTED.values()
            for version in range(api.min_version, api.max_version + 1)]
