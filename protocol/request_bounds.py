"""Every length and count in a request body checked against the bytes left in its frame,
before kio reads a byte of it.

kio's native readers reserve room for an array as soon as they read its count: a
20-byte Metadata request whose topic count says 4,294,967,295 makes them ask for 32 GiB,
and the allocation failure aborts the whole process. No reader can be trusted with a
count it has not seen checked, so every request body is walked here first, following
its schema class, and refused (MalformedRequest in codec.py) when:

- an array claims more elements than there are bytes left (every element of every
  array takes at least one byte), or
- a string, a byte array, records or a tagged field claims more bytes than are left,
- an array the schema does not let be null is null (Kafka refuses that too, and a
  handler would meet None where it iterates),
- the value of a tagged field kio knows is shorter than the size its tag gives: kio reads
  on from where the value ends, this walk from where the size says it ends, so the two
  would read different bytes, and kio would meet counts no one checked,
- or anything runs past the end of the frame.

With that, the most a request can make the broker allocate is a small multiple of its
own size. The walk reads lengths and counts only; values are kio's to read. Its plan is
computed once per schema class.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import fields
from functools import cache
from typing import Any

from kio.static.protocol import Entity

from .kio_schema import (
    EntityField,
    EntityTupleField,
    PrimitiveTupleField,
    classify_field,
    get_field_tag,
    is_optional,
)
from .varint import VarintError, read_uvarint

_FIXED_SIZES = {
    "int8": 1, "int16": 2, "int32": 4, "int64": 8,
    "uint8": 1, "uint16": 2, "uint32": 4, "uint64": 8,
    "float64": 8, "bool": 1, "error_code": 2,
    "timedelta_i32": 4, "timedelta_i64": 8, "datetime_i64": 8, "uuid": 16,
}
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")

# The steps of a plan: (op, argument).
_SKIP = 0  # a fixed-size value: argument = its size
_STRING = 1  # a legacy string: int16 length, -1 for null
_BYTES = 2  # legacy bytes or records: int32 length, -1 for null
_COMPACT = 3  # a flexible string, bytes or records: uvarint length + 1, 0 for null
_ARRAY = 4  # argument = (flexible, element: an int size or a plan, nullable)
_STRUCT = 5  # argument = (nullable, plan)
_TAGS = 6  # a flexible entity's tagged fields: argument = {tag: plan of its value}

Step = tuple[int, Any]
Plan = tuple[Step, ...]


class LengthError(ValueError):
    """A length or count that claims more than the frame holds."""


def check_request_body(cls: type[Entity], buf: bytes | memoryview, offset: int) -> None:
    """Raise LengthError unless every length and count of the `cls` body at `offset`
    fits in `buf`."""
    try:
        _checker(cls)(buf, offset, len(buf))
    except VarintError as exc:
        raise LengthError(f"bad varint: {exc}") from exc
    except (struct.error, IndexError) as exc:
        raise LengthError("truncated") from exc


@cache
def _checker(cls: type[Entity]) -> Callable[[Any, int, int], int]:
    """The walk of `cls`'s plan as straight-line Python, compiled once: this runs
    before every request, and interpreting the plan step by step cost more than kio's
    own decoding."""
    namespace: dict[str, Any] = {
        "read_uvarint": read_uvarint, "LengthError": LengthError, "_INT16": _INT16, "_INT32": _INT32,
        "_tags": _check_tags,
    }
    return _compile(_plan(cls), namespace)


# An unsigned varint into n: most are one byte, read inline.
_UVARINT = ("    n = buf[offset]", "    if n < 0x80:", "        offset += 1", "    else:",
            "        n, offset = read_uvarint(buf, offset)")


def _compile(plan: Plan, namespace: dict[str, Any]) -> Callable[[Any, int, int], int]:
    lines = ["def check(buf, offset, end):"]
    for op, arg in plan:
        if op == _SKIP:
            lines.append(f"    offset += {arg}")
        elif op == _COMPACT:
            lines += [*_UVARINT,
                      "    if n > 1:",
                      "        if n - 1 > end - offset:",
                      "            raise LengthError(f'a string or bytes of {n - 1} bytes with {end - offset} left')",
                      "        offset += n - 1"]
        elif op == _STRING or op == _BYTES:
            unpack, size = ("_INT16", 2) if op == _STRING else ("_INT32", 4)
            lines += [f"    (n,) = {unpack}.unpack_from(buf, offset)",
                      f"    offset += {size}",
                      "    if n > 0:",
                      "        if n > end - offset:",
                      "            raise LengthError(f'a string or bytes of {n} bytes with {end - offset} left')",
                      "        offset += n"]
        elif op == _ARRAY:
            flexible, element, nullable = arg
            if flexible:
                lines += [*_UVARINT, "    n -= 1"]
            else:
                lines += ["    (n,) = _INT32.unpack_from(buf, offset)", "    offset += 4"]
            if not nullable:
                lines += ["    if n < 0:", "        raise LengthError('null for an array that cannot be null')"]
            # Every element takes at least one byte: a count beyond the bytes left is a lie.
            lines += ["    if n > 0:",
                      "        if n > end - offset:",
                      "            raise LengthError(f'an array of {n} elements with {end - offset} bytes left')"]
            if isinstance(element, int):
                lines.append(f"        offset += n * {element}")
            else:
                name = _reserve(namespace, "_e")
                namespace[name] = _compile(element, namespace)
                lines += ["        for _ in range(n):", f"            offset = {name}(buf, offset, end)"]
        elif op == _STRUCT:
            nullable, nested = arg
            name = _reserve(namespace, "_s")
            namespace[name] = _compile(nested, namespace)
            if nullable:  # an int8 marker, -1 for null
                lines += ["    if offset >= end:", "        raise LengthError('truncated struct marker')",
                          "    offset += 1", "    if buf[offset - 1] != 0xFF:",
                          f"        offset = {name}(buf, offset, end)"]
            else:
                lines.append(f"    offset = {name}(buf, offset, end)")
        else:  # _TAGS
            name = _reserve(namespace, "_k")
            namespace[name] = {tag: _compile(value, namespace) for tag, value in arg.items()}
            # Nearly always none: one zero byte.
            lines += ["    if buf[offset] == 0:", "        offset += 1", "    else:",
                      f"        offset = _tags(buf, offset, end, {name})"]
    lines += ["    if offset > end:", "        raise LengthError('the body runs past the frame')", "    return offset"]
    exec("\n".join(lines), namespace)  # source built above from kio's schema only
    return namespace.pop("check")


def _reserve(namespace: dict[str, Any], prefix: str) -> str:
    """A new global name for the generated code (taken before the nested code that may
    add names of its own is compiled)."""
    name = f"{prefix}{len(namespace)}"
    namespace[name] = None
    return name


def _check_tags(buf: Any, offset: int, end: int, known: dict[int, Callable[[Any, int, int], int]]) -> int:
    """A flexible entity's tagged fields; the value of a tag kio knows is walked too
    (kio reads it, and it may hold arrays)."""
    count, offset = read_uvarint(buf, offset)
    if count > end - offset:
        raise LengthError(f"{count} tagged fields with {end - offset} bytes left in the frame")
    for _ in range(count):
        tag, offset = read_uvarint(buf, offset)
        size, offset = read_uvarint(buf, offset)
        if size > end - offset:
            raise LengthError(f"a tagged field of {size} bytes with {end - offset} left in the frame")
        check = known.get(tag)
        if check is not None and check(buf, offset, offset + size) != offset + size:
            raise LengthError(f"a tagged field of {size} bytes whose value is shorter")
        offset += size
    return offset


# --- the plan: what a class's body holds, in order ------------------------------------


@cache
def _plan(cls: type[Entity]) -> Plan:
    flexible = cls.__flexible__
    steps: list[Step] = []
    tagged: dict[int, Plan] = {}
    for f in fields(cls):
        tag = get_field_tag(f)
        if tag is not None:
            tagged[int(tag)] = (_field_step(f, flexible),)
        else:
            steps.append(_field_step(f, flexible))
    if flexible:
        steps.append((_TAGS, tagged))
    return _merge_skips(steps)


# The plan of a class's body, which _codec.c's check walks too (compiled_codec.py).
request_plan = _plan


def _field_step(f: Any, flexible: bool) -> Step:
    kind = classify_field(f)
    if isinstance(kind, EntityField):
        return (_STRUCT, (is_optional(f), _plan(kind.type_)))
    if isinstance(kind, EntityTupleField):
        return (_ARRAY, (flexible, _plan(kind.type_), is_optional(f)))
    kafka_type = f.metadata.get("kafka_type", "")
    if isinstance(kind, PrimitiveTupleField):
        element = _FIXED_SIZES.get(kafka_type) or (_value_step(kafka_type, flexible),)
        return (_ARRAY, (flexible, element, is_optional(f)))
    return _value_step(kafka_type, flexible)


def _value_step(kafka_type: str, flexible: bool) -> Step:
    if kafka_type in _FIXED_SIZES:
        return (_SKIP, _FIXED_SIZES[kafka_type])
    if kafka_type not in ("string", "bytes", "records"):
        # Every type of the pinned kio is handled above; a kio upgrade that adds one
        # must be taught here, not guessed at.
        raise TypeError(f"kio declares Kafka type {kafka_type!r}, which the request bounds check does not know")
    if flexible:
        return (_COMPACT, None)
    return (_STRING, None) if kafka_type == "string" else (_BYTES, None)


def _merge_skips(steps: list[Step]) -> Plan:
    """Runs of fixed-size fields become one step."""
    merged: list[Step] = []
    for step in steps:
        if step[0] == _SKIP and merged and merged[-1][0] == _SKIP:
            merged[-1] = (_SKIP, merged[-1][1] + step[1])
        else:
            merged.append(step)
    return tuple(merged)
