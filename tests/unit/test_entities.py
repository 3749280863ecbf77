"""entities.make: one description of a response, built for whichever version was asked."""

from __future__ import annotations

from dataclasses import fields
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any
from uuid import UUID

import pytest

from ottla.protocol import compiled_codec
from ottla.protocol.codec import response_class
from ottla.protocol.entities import _plan, build_plan, builder, compiled_builder, make
from ottla.protocol.errors import ErrorCode
from ottla.protocol.kio_schema import (
    EntityField,
    EntityTupleField,
    PrimitiveTupleField,
    classify_field,
    get_schema_field_type,
)

from .extensions import compiled_extension
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


# --- the C builder (protocol/_codec.c) against the compiled Python builder -----------------


def _variants(cls: type) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(values for the Python builder, the same for the C one): {}, every field given,
    nested entities given built already, arrays as lists and as iterators."""
    plain = _plain(cls)
    built = dict(plain)
    iterated = dict(plain)
    for f in fields(cls):
        kind = classify_field(f)
        if isinstance(kind, EntityField):
            built[f.name] = compiled_builder(kind.type_)(plain[f.name])
        elif isinstance(kind, EntityTupleField):
            built[f.name] = [compiled_builder(kind.type_)(plain[f.name][0]), {}]
            iterated[f.name] = iter(list(plain[f.name]))
        elif isinstance(kind, PrimitiveTupleField):
            iterated[f.name] = iter(list(plain[f.name]))
    return [({}, {}), (plain, plain), (built, built), (plain, iterated)]


def test_the_c_builder_builds_what_the_python_builder_builds() -> None:
    c_module = compiled_extension("_codec")
    for cls in CLASSES:
        plan = build_plan(cls)
        assert plan is not None, f"{cls.__module__}.{cls.__name__}: no C build plan"
        for python_values, c_values in _variants(cls):
            expected = compiled_builder(cls)(python_values)
            got = c_module.build(plan, c_values)
            assert type(got) is cls and got == expected, cls
            assert repr(got) == repr(expected)


def test_the_c_builder_refuses_what_the_python_builder_refuses() -> None:
    c_module = compiled_extension("_codec")
    cls = response_class(FIND_COORDINATOR, 4)
    plan = build_plan(cls)
    with pytest.raises(TypeError, match="no field eror_code"):
        c_module.build(plan, {"eror_code": ErrorCode.none})
    with pytest.raises(TypeError, match="no field eror_code"):
        compiled_builder(cls)({"eror_code": ErrorCode.none})
    # A name of another version is dropped by both: FindCoordinator v4 has no top-level host.
    assert c_module.build(plan, {"host": "h"}) == compiled_builder(cls)({"host": "h"})
    fetch = response_class(FETCH, 12)
    bad = {"responses": [{"topic": "t", "partitions": [{"partition": 0}]}]}
    with pytest.raises(TypeError, match="no field partition"):
        c_module.build(build_plan(fetch), bad)
    with pytest.raises(ValueError):  # an error code no ErrorCode member has: the converter's error
        c_module.build(plan, {"coordinators": [{"key": "k", "error_code": 12345}]})
    with pytest.raises(TypeError):
        c_module.build(plan, {"coordinators": 5})


def test_the_c_builder_converts_as_the_python_converters_do() -> None:
    """The error codes, durations and timestamps _codec's build converts itself (an
    ErrorCode member, milliseconds as ints, -1 or None for no timestamp), and what it
    leaves to the Python converters, come out as the Python builder makes them."""
    c_module = compiled_extension("_codec")
    produce = response_class(0, 9)
    plan = build_plan(produce)
    durations: list[Any] = [0, 1, -1, 1500, 2**31 - 1, -(2**31), 10**15, -(10**15), 9_223_372_036_854_775,
                            9_223_372_036_854_776, 86_400_000 * 999_999_999, True, timedelta(seconds=3)]
    timestamps: list[Any] = [None, -1, -(2**63), 0, 1, 1_700_000_000_000, 2**40, True,
                             datetime(2026, 11, 27, tzinfo=UTC)]
    codes: list[Any] = [ErrorCode.none, ErrorCode.invalid_record, 0, 87, True]
    for throttle, append_time, code in zip(durations, timestamps * 2, codes * 3, strict=False):
        values = {"throttle_time": throttle, "responses": [{"name": "t", "partition_responses": [
            {"index": 0, "error_code": code, "base_offset": 5, "log_append_time": append_time,
             "log_start_offset": 0}]}]}
        expected = compiled_builder(produce)(values)
        got = c_module.build(plan, values)
        assert got == expected and repr(got) == repr(expected), values
    for too_long in (86_400_000 * 1_000_000_000, 2**70):  # timedelta's own OverflowError
        with pytest.raises(OverflowError):
            compiled_builder(produce)({"throttle_time": too_long})
        with pytest.raises(OverflowError):
            c_module.build(plan, {"throttle_time": too_long})


def test_make_takes_the_selected_path() -> None:
    cls = response_class(FIND_COORDINATOR, 4)
    c_module = compiled_codec.compiled
    if compiled_codec.ENABLED:
        assert isinstance(builder(cls), partial) and builder(cls).func is c_module.build
    else:
        assert builder(cls) is compiled_builder(cls)
