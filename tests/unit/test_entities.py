"""entities.make: one description of a response, built for whichever version was asked."""

from __future__ import annotations

from dataclasses import fields
from datetime import timedelta
from typing import Any
from uuid import UUID

import pytest

from ottla.protocol.codec import response_class
from ottla.protocol.entities import _plan, make
from ottla.protocol.errors import ErrorCode
from ottla.protocol.kio_schema import (EntityField, EntityTupleField, PrimitiveTupleField, classify_field,
                                       get_schema_field_type)

from .test_compiled_writers import CLASSES

FETCH, FIND_COORDINATOR = 1, 10


def test_a_field_the_version_lacks_is_dropped() -> None:
    # FindCoordinator v0 has no error_message; v1 has. The same call builds both.
    v0 = make(response_class(FIND_COORDINATOR, 0), error_code=ErrorCode.none, node_id=1, host="h", port=9,
              error_message="x", throttle_time=0)
    v1 = make(response_class(FIND_COORDINATOR, 1), error_code=ErrorCode.none, node_id=1, host="h", port=9,
              error_message="x", throttle_time=0)
    assert not hasattr(v0, "error_message") and v1.error_message == "x"


def test_a_name_no_version_has_is_refused() -> None:
    with pytest.raises(TypeError, match="no field eror_code"):
        make(response_class(FIND_COORDINATOR, 1), eror_code=ErrorCode.none)


def test_nested_entities_are_checked_too() -> None:
    # session_id exists in later versions only; partition_index in every version.
    make(response_class(FETCH, 4), responses=[{"topic": "t", "partitions": [{"partition_index": 0}]}], session_id=0)
    with pytest.raises(TypeError, match="no field partition"):
        make(response_class(FETCH, 12), responses=[{"topic": "t", "partitions": [{"partition": 0}]}])


# --- the compiled builders against the obvious way ------------------------------------------

# A plain value of each Kafka type, as handlers give them (ints for codes and milliseconds).
_PLAIN = {"string": "s", "bytes": b"b", "records": b"r", "uuid": UUID(int=5), "bool": True, "float64": 1.5,
          "error_code": 3, "timedelta_i32": 1500, "timedelta_i64": 1500, "datetime_i64": 1_700_000_000_000}


def _plain(cls: type) -> dict[str, Any]:
    """A handler's description of an entity of `cls` with every field given."""
    values: dict[str, Any] = {}
    for f in fields(cls):
        kind = classify_field(f)
        if isinstance(kind, EntityField):
            values[f.name] = _plain(kind.type_)
        elif isinstance(kind, EntityTupleField):
            values[f.name] = [_plain(kind.type_), {}]
        else:
            sample = _PLAIN.get(get_schema_field_type(f), 7)
            values[f.name] = [sample, sample] if isinstance(kind, PrimitiveTupleField) else sample
    return values


def _interpreted(cls: type, values: dict[str, Any]) -> Any:
    """What a compiled builder does, the obvious (slower) way: walk the plan per call."""
    kwargs = {}
    for f, (name, convert, default) in zip(fields(cls), _plan(cls), strict=True):
        if name not in values:
            kwargs[name] = default
            continue
        value, kind = values[name], classify_field(f)
        if isinstance(kind, EntityField):
            kwargs[name] = _interpreted(kind.type_, value) if isinstance(value, dict) else value
        elif isinstance(kind, EntityTupleField):
            kwargs[name] = None if value is None else tuple(
                _interpreted(kind.type_, v) if isinstance(v, dict) else v for v in value)
        else:
            kwargs[name] = convert(value)
    return cls(**kwargs)


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: f"{c.__module__}.{c.__name__}")
def test_compiled_builders_build_what_the_plan_says(cls: type) -> None:
    for values in ({}, _plain(cls)):
        built = make(cls, **values)
        assert built == _interpreted(cls, values)
        assert type(built) is cls


def test_plain_values_are_converted() -> None:
    built = make(response_class(FIND_COORDINATOR, 4), coordinators=[{"key": "k", "error_code": 15}])
    assert built.coordinators[0].error_code is ErrorCode.coordinator_not_available
    assert built.throttle_time == timedelta(0)
