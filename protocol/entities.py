"""Build kio entities without caring which version's class they are.

Every API version is its own kio dataclass with its own nested classes, and a field
may be missing from one version and present in the next. Handlers describe a response
once, as keyword arguments with plain values (ints, strings, dicts for nested
entities, lists of dicts for arrays); `make(cls, **values)` builds the instance of
whichever version the client asked for:

- a value for a field this version does not have is dropped (older versions simply
  cannot say it), but a name that no version of the class has is refused with a
  TypeError: that is a typo in a handler, and dropping it would hide it;
- a field the handler did not mention takes the schema's default, else the type's
  zero (0, "", None for nullable, an empty array, ErrorCode.none...);
- ints given for millisecond durations and timestamps are converted to the
  timedelta/datetime that kio's writers expect.

The plan for each class (field, converter, default) is computed once, and compiled
into one Python function per class (`compiled_builder`) that builds the entity from a
dict in a single call: a converter only where a value needs one, nested dicts handed
straight to the nested class's builder, instead of interpreting the plan field by field
with a **kwargs copy per nested entity on every response.
tests/unit/test_entities.py builds every class both ways, compiled and by walking the
plan, and compares them.

Where the C extension was built (compiled_codec.py), `builder(cls)` is _codec's `build`
over `build_plan(cls)`, the same plan as data: it sets the new instance's slots without
the dataclass's keyword call. The compiled Python builder stays the reference and the
path without a compiler; tests/unit/test_entities.py compares the two over every class.
"""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Callable
from dataclasses import MISSING, fields
from functools import cache, partial
from typing import Any

from kio.schema.errors import ErrorCode

from . import compiled_codec
from .kio_schema import (
    EntityField,
    EntityTupleField,
    PrimitiveField,
    PrimitiveTupleField,
    classify_field,
    field_names_of_any_version,
    is_optional,
)

_EPOCH = datetime.datetime.fromtimestamp(0, datetime.UTC)


def _ms_timedelta(value: Any) -> datetime.timedelta:
    if isinstance(value, datetime.timedelta):
        return value
    return datetime.timedelta(milliseconds=value)


def _ms_datetime(value: Any) -> datetime.datetime | None:
    if value is None or isinstance(value, datetime.datetime):
        return value
    if value < 0:
        return None
    return _EPOCH + datetime.timedelta(milliseconds=value)


def _ms_datetime_required(value: Any) -> datetime.datetime:
    """A timestamp field that cannot be null: Kafka's -1 ("none") is written as -1,
    a datetime 1 ms before the epoch, since kio's writer needs a datetime."""
    if isinstance(value, datetime.datetime):
        return value
    return _EPOCH + datetime.timedelta(milliseconds=-1 if value is None else value)


def _identity(value: Any) -> Any:
    return value


def _zero(kafka_type: str, optional: bool, is_array: bool) -> Any:
    if is_array:
        return ()
    if optional:
        return None
    return {
        "bool": False,
        "string": "",
        "bytes": b"",
        "records": b"",
        "uuid": uuid.UUID(int=0),
        "error_code": ErrorCode.none,
        "timedelta_i32": datetime.timedelta(0),
        "timedelta_i64": datetime.timedelta(0),
        "datetime_i64": _EPOCH,
        "float64": 0.0,
    }.get(kafka_type, 0)


@cache
def _plan(cls: type) -> tuple[tuple[str, Callable[[Any], Any], Any], ...]:
    """(field name, converter, default) per field of `cls`."""
    plan = []
    for f in fields(cls):
        kind = classify_field(f)
        kafka_type = f.metadata.get("kafka_type", "")
        optional = is_optional(f)
        if f.default is not MISSING:
            default = f.default
        elif f.default_factory is not MISSING:
            default = f.default_factory()
        else:
            default = MISSING
        convert: Callable[[Any], Any]
        match kind:
            case EntityField(nested):
                if default is MISSING and not optional:
                    default = make(nested)
                convert = _entity_converter(nested)
            case EntityTupleField(nested):
                convert = _tuple_converter(_entity_converter(nested))
            case PrimitiveTupleField():
                convert = _tuple_converter(_identity)
            case PrimitiveField():
                if kafka_type.startswith("timedelta"):
                    convert = _ms_timedelta
                elif kafka_type == "datetime_i64":
                    convert = _ms_datetime if optional else _ms_datetime_required
                elif kafka_type == "error_code":
                    convert = _error_code
                else:
                    convert = _identity
        if default is MISSING:
            default = _zero(kafka_type, optional, kind.is_array)
        plan.append((f.name, convert, default))
    return tuple(plan)


def _entity_converter(nested: type) -> Callable[[Any], Any]:
    build = compiled_builder(nested)

    def convert(value: Any) -> Any:
        if value is None or not isinstance(value, dict):
            return value  # None for a nullable struct, or an entity built already
        return build(value)

    return convert


def _tuple_converter(item: Callable[[Any], Any]) -> Callable[[Any], Any]:
    if item is _identity:
        def convert(values: Any) -> Any:
            return None if values is None else tuple(values)
    else:
        def convert(values: Any) -> Any:
            return None if values is None else tuple(map(item, values))
    return convert


def _error_code(value: Any) -> ErrorCode:
    # Handlers pass ErrorCode members already; the Enum call is the slow way to say so.
    return value if value.__class__ is ErrorCode else ErrorCode(value)


def make(cls: type, **values: Any) -> Any:
    """An instance of kio class `cls` from version-agnostic keyword values."""
    return builder(cls)(values)


@cache
def builder(cls: type) -> Callable[[dict[str, Any]], Any]:
    """What builds an instance of `cls` from a dict of version-agnostic values: C's
    build over `build_plan(cls)` on the compiled path, else `compiled_builder(cls)`."""
    plan = build_plan(cls) if compiled_codec.ENABLED else None
    if plan is None:
        return compiled_builder(cls)
    return partial(compiled_codec.compiled.build, plan)


# build_plan's field kinds (_codec.c's build).
B_VALUE, B_CONVERT, B_ENTITY, B_TUPLE, B_ENTITIES, B_ERROR_CODE, B_DURATION, B_TIMESTAMP = range(8)
# The converters _codec.c's build runs itself for their commonest values (the rest are
# passed to them), by kind, with the type each returns values of unchanged.
_CONVERTED_IN_C = {_error_code: (B_ERROR_CODE, ErrorCode), _ms_timedelta: (B_DURATION, datetime.timedelta),
                   _ms_datetime: (B_TIMESTAMP, datetime.datetime)}


@cache
def build_plan(cls: type) -> tuple[Any, ...] | None:
    """_codec's build plan of `cls`: (cls, its field names, _check_names, per field (name,
    slot offset, kind, default, converter or nested plan)); None where a field is not a
    plain slot (then the Python builder builds it)."""
    compiled = compiled_codec.compiled
    if compiled is None:
        return None
    planned = []
    for f, (name, convert, default) in zip(fields(cls), _plan(cls), strict=True):
        offset = compiled.member_offset(cls, name)
        if offset < 0:
            return None
        kind = classify_field(f)
        extra: Any = None
        if isinstance(kind, (EntityField, EntityTupleField)):
            extra = build_plan(kind.type_)
            if extra is None:
                return None
            code = B_ENTITY if isinstance(kind, EntityField) else B_ENTITIES
        elif isinstance(kind, PrimitiveTupleField):
            code = B_TUPLE
        elif convert is _identity:
            code = B_VALUE
        elif convert in _CONVERTED_IN_C:
            code, returned_as_is = _CONVERTED_IN_C[convert]
            extra = (convert, returned_as_is)
        else:
            code, extra = B_CONVERT, convert
        planned.append((name, offset, code, default, extra))
    return (cls, frozenset(f.name for f in fields(cls)), _check_names, tuple(planned))


@cache
def compiled_builder(cls: type) -> Callable[[dict[str, Any]], Any]:
    """The function that builds an instance of `cls` from a dict of version-agnostic
    values (what `make` does). Generated once per class: for each field, the value
    given (converted, where its type needs it) or the field's default."""
    namespace: dict[str, Any] = {"_cls": cls, "_names": frozenset(f.name for f in fields(cls)),
                                 "_check_names": _check_names}
    arguments = []
    for i, (name, convert, default) in enumerate(_plan(cls)):
        namespace[f"_d{i}"] = default
        if convert is _identity:
            arguments.append(f"{name}=v.get({name!r}, _d{i})")
        else:
            namespace[f"_c{i}"] = convert
            arguments.append(f"{name}=_c{i}(v[{name!r}]) if {name!r} in v else _d{i}")
    function_name = f"build_{cls.__module__.replace('.', '_')}_{cls.__name__}"
    # A name this version lacks is dropped, unless no version has it (a handler's typo).
    code = (f"def {function_name}(v):\n"
            f"    if not v.keys() <= _names:\n"
            f"        _check_names(_cls, v)\n"
            f"    return _cls({', '.join(arguments)})\n")
    exec(compile(code, f"<compiled builder of {cls.__module__}.{cls.__name__}>", "exec"), namespace)
    builder = namespace[function_name]
    builder.source = code  # for reading what was generated
    return builder


def _check_names(cls: type, values: dict[str, Any]) -> None:
    """Raise TypeError for a name that no version of `cls` has."""
    unknown = sorted(set(values) - field_names_of_any_version(cls))
    if unknown:
        raise TypeError(f"{cls.__module__}.{cls.__qualname__} has no field {', '.join(unknown)} in any version")
