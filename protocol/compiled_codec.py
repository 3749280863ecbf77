"""The compiled request path: which path codec.py takes, and the plans its C code walks.

Every request costs a header decode, a length check of its body, the building of its
response entity and the encoding of that response: Python work on every request, whose
cost grows with the fields of the answer (bench/RESULTS.md has the instruction counts of
both paths). `_codec.c` does the same work in C, following plans computed here once per
kio class:

- the length check walks request_bounds' own plan (`_plan`), so both check one
  description of the body;
- the encoder walks `encode_plan(cls)`: each field's attribute name and how
  compiled_writers.py writes it;
- the builder walks entities.build_plan(cls);
- the request decoder walks `decode_plan(cls)`: it checks every length and count as the
  length check does and builds the entity kio's reader builds, in one pass.

The Python code stays the reference (codec.parse_request_header_in_python,
request_bounds.check_request_body, codec.decode_request_in_python,
codec.encode_response_in_python, entities.compiled_builder), and the path where
the extension could not be built (no C compiler at install time). OTTLA_PURE_PYTHON=1 in
the environment selects it even where the extension exists (read at import, so set it
before the broker starts): the unit tests compare both paths
(tests/unit/test_compiled_codec.py, test_entities.py), tests/integration/test_request_paths.py
runs a broker on each, and the integration tests can run on either.
"""

from __future__ import annotations

import importlib
import os
import uuid
from collections.abc import Callable
from dataclasses import MISSING, fields
from functools import cache
from typing import Any

from kio.schema.errors import ErrorCode
from kio.serial.readers import tz_aware_from_i64
from kio.static.protocol import Entity

from .kio_schema import (
    EntityField,
    EntityTupleField,
    PrimitiveField,
    PrimitiveTupleField,
    classify_field,
    get_field_tag,
    get_schema_field_type,
    get_tagged_field_default,
    is_optional,
)

compiled: Any  # the extension module, or None
try:
    compiled = importlib.import_module("._codec", __package__)
except ImportError:  # installed without a C compiler: Python alone
    compiled = None

PURE_PYTHON_VARIABLE = "OTTLA_PURE_PYTHON"
# Whether codec.py takes the compiled path.
ENABLED = compiled is not None and os.environ.get(PURE_PYTHON_VARIABLE, "") in ("", "0")

# The steps of an encode plan (their layout is documented in _codec.c).
(E_FIXED, E_CONVERT, E_UUID, E_STRING, E_BYTES, E_STRUCT, E_ARRAY, E_ENTITIES, E_TAGS, E_NO_TAGS, E_DURATION,
 E_OPTIONAL_TIMESTAMP) = range(12)

# struct codes of the fixed-size Kafka types, as compiled_writers packs them.
_FIXED = {
    "int8": "b", "int16": "h", "int32": "i", "int64": "q",
    "uint8": "B", "uint16": "H", "uint32": "I", "uint64": "Q",
    "float64": "d", "bool": "?", "error_code": "h",
    "timedelta_i32": "i", "timedelta_i64": "q", "datetime_i64": "q",
}

Plan = tuple[bool, tuple[tuple[Any, ...], ...]]


def _milliseconds(value: Any) -> int:
    return round(value.total_seconds() * 1000)


def _timestamp(value: Any) -> int:
    return round(value.timestamp() * 1000)


def _optional_timestamp(value: Any) -> int:
    return -1 if value is None else round(value.timestamp() * 1000)


def _converter(kafka_type: str, optional: bool) -> Callable[[Any], int] | None:
    if kafka_type in ("timedelta_i32", "timedelta_i64"):
        return _milliseconds
    if kafka_type == "datetime_i64":
        return _optional_timestamp if optional else _timestamp
    return None


def _value_step(name: str | None, kafka_type: str, optional: bool) -> tuple[Any, ...]:
    if kafka_type == "uuid":
        return (E_UUID, name)
    if kafka_type in _FIXED:
        code = ord(_FIXED[kafka_type])
        convert = _converter(kafka_type, optional)
        if convert is None:
            return (E_FIXED, name, code)
        # A duration (throttle_time_ms is in nearly every response) is converted in C;
        # `convert` is what C's conversion is compared with, and calls where it does not.
        # An optional timestamp's None (Produce's log_append_time, nearly always) is
        # written as -1 in C too, without calling `convert`.
        op = E_DURATION if convert is _milliseconds else E_OPTIONAL_TIMESTAMP if convert is _optional_timestamp \
            else E_CONVERT
        return (op, name, code, convert)
    if kafka_type == "string":
        return (E_STRING, name, optional)
    if kafka_type in ("bytes", "records"):
        return (E_BYTES, name, optional)
    # Every type of the pinned kio is handled above; a kio upgrade that adds one must be
    # taught here, not guessed at.
    raise TypeError(f"kio declares Kafka type {kafka_type!r}, which the compiled encoder does not know")


def _field_step(f: Any) -> tuple[Any, ...]:
    kind = classify_field(f)
    optional = is_optional(f)
    if isinstance(kind, EntityField):
        return (E_STRUCT, f.name, optional, encode_plan(kind.type_))
    if isinstance(kind, EntityTupleField):
        return (E_ENTITIES, f.name, encode_plan(kind.type_))
    if isinstance(kind, PrimitiveTupleField):
        return (E_ARRAY, f.name, _value_step(None, get_schema_field_type(f), False))
    assert isinstance(kind, PrimitiveField)
    return _value_step(f.name, get_schema_field_type(f), optional)


@cache
def encode_plan(cls: type[Entity]) -> Plan:
    """How `cls` (a message, or an entity nested in one) is written, for _codec."""
    steps = [_field_step(f) for f in fields(cls) if get_field_tag(f) is None]
    if cls.__flexible__:
        tagged = []
        for f in fields(cls):
            tag = get_field_tag(f)
            if tag is not None:
                # kio leaves out a tagged field equal to its default (compiled_writers._write_tags).
                skipped = f.default if f.default is not MISSING else get_tagged_field_default(f)
                tagged.append((int(tag), f.name, skipped, _field_step(f)))
        tagged.sort(key=lambda entry: entry[0])
        steps.append((E_TAGS, tuple(tagged)) if tagged else (E_NO_TAGS,))
    return (bool(cls.__flexible__), tuple(steps))


# --- the decode plan of a request ------------------------------------------------------------

# The steps of a decode plan: (op, slot offset, argument, argument); their layout is
# documented in _codec.c.
D_FIXED, D_STRING, D_BYTES, D_UUID, D_ERROR_CODE, D_TIMEDELTA, D_DATETIME, D_STRUCT, D_ARRAY, D_ENTITIES = range(10)

# The fixed-size types kio reads as plain ints, floats and bools.
_PLAIN = {kafka_type: code for kafka_type, code in _FIXED.items()
          if kafka_type not in ("error_code", "timedelta_i32", "timedelta_i64", "datetime_i64")}

DecodePlan = tuple[Any, ...]


class _NotASlot(Exception):
    """A field that is no plain slot: that class is left to kio's reader."""


def _decode_value_step(offset: int, kafka_type: str, nullable: bool) -> tuple[Any, ...]:
    if kafka_type in _PLAIN:
        return (D_FIXED, offset, ord(_PLAIN[kafka_type]), None)
    if kafka_type == "error_code":
        return (D_ERROR_CODE, offset, ErrorCode, None)
    if kafka_type in ("timedelta_i32", "timedelta_i64"):
        return (D_TIMEDELTA, offset, 4 if kafka_type == "timedelta_i32" else 8, None)
    if kafka_type == "datetime_i64":
        # kio's own conversion (TZAware.truncate of fromtimestamp), called as kio calls it.
        return (D_DATETIME, offset, nullable, tz_aware_from_i64)
    if kafka_type == "uuid":
        return (D_UUID, offset, uuid.UUID, uuid.SafeUUID.unknown)
    if kafka_type == "string":
        return (D_STRING, offset, nullable, None)
    if kafka_type in ("bytes", "records"):  # kio reads records as bytes too
        return (D_BYTES, offset, nullable, None)
    # Every type of the pinned kio is handled above; a kio upgrade that adds one must be
    # taught here, not guessed at.
    raise TypeError(f"kio declares Kafka type {kafka_type!r}, which the compiled decoder does not know")


def _decode_field_step(cls: type[Entity], f: Any, tagged: bool) -> tuple[Any, ...]:
    assert compiled is not None
    offset = compiled.member_offset(cls, f.name)
    if offset < 0:
        raise _NotASlot(f.name)
    kind = classify_field(f)
    optional = is_optional(f)
    if isinstance(kind, EntityField):
        return (D_STRUCT, offset, optional, _decode_plan(kind.type_))
    if isinstance(kind, EntityTupleField):
        return (D_ENTITIES, offset, optional, _decode_plan(kind.type_))
    if isinstance(kind, PrimitiveTupleField):
        # kio reads an array's elements as never null (a uuid's zeros still read as None).
        return (D_ARRAY, offset, optional, _decode_value_step(-1, get_schema_field_type(f), False))
    assert isinstance(kind, PrimitiveField)
    # kio reads a tagged value as never null: a null there is refused, not read as None.
    return _decode_value_step(offset, get_schema_field_type(f), optional and not tagged)


@cache
def _decode_plan(cls: type[Entity]) -> DecodePlan:
    flexible = bool(cls.__flexible__)
    steps = tuple(_decode_field_step(cls, f, False) for f in fields(cls) if get_field_tag(f) is None)
    tagged: dict[int, tuple[Any, ...]] | None = None
    defaults: list[tuple[int, Any]] = []
    if flexible:
        tagged = {}
        for f in fields(cls):
            tag = get_field_tag(f)
            if tag is not None:
                step = _decode_field_step(cls, f, True)
                tagged[int(tag)] = step
                # kio's default for a tagged field the request leaves out, the same object
                # in every request as in kio's reader.
                defaults.append((step[1], get_tagged_field_default(f)))
    return (cls, flexible, steps, tagged, tuple(defaults))


@cache
def decode_plan(cls: type[Entity]) -> DecodePlan | None:
    """How a `cls` request body is read, for _codec's decode; None where some class in it
    keeps a field outside a plain slot (then kio's reader reads that request)."""
    if compiled is None:
        return None
    try:
        return _decode_plan(cls)
    except _NotASlot:
        return None
