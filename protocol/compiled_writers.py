"""Message bodies encoded by writers compiled from kio's schema classes.

kio describes every message as a dataclass whose field metadata names the Kafka type
(int16, compact string, array of entities...), and its own writer interprets that
description on every call: a function call and a range check per field, a temporary
buffer for the tagged fields. For a small response that is most of the broker's share
of a transactional round trip.

`compiled_writer(cls)` reads the same description once and turns it into the Python
source of a function that writes the fields directly: each run of fixed-size fields
becomes one `struct.pack`, an array becomes a loop over its item's compiled writer, and
a flexible version's empty tag section becomes one constant byte of that pack. Tagged
fields, which only a few messages have, are written by kio's own field writers, the way
kio writes them. The bytes are kio's: tests/unit/test_compiled_writers.py encodes
every request and response class of every version both ways and compares them.

A compiled writer takes `write` (a callable given each piece of bytes in order; see
codec.ChunkWriter) and the entity. Record data is passed to `write` on its own,
uncopied, so that the caller can send it as its own chunk.
"""

from __future__ import annotations

import io
import struct
from collections.abc import Callable
from dataclasses import MISSING, Field, fields
from functools import cache
from typing import Any
from uuid import UUID

from kio.static.protocol import Entity

from .kio_schema import (
    EntityField,
    EntityTupleField,
    PrimitiveField,
    PrimitiveTupleField,
    classify_field,
    get_field_tag,
    get_field_writer,
    get_schema_field_type,
    get_tagged_field_default,
    is_optional,
)
from .varint import write_uvarint

Write = Callable[[Any], None]
EntityWriter = Callable[[Write, Any], None]

# struct codes of the fixed-size Kafka types, and how a field's value becomes the
# packed number (kio's conversions: durations and times in whole milliseconds).
_FIXED: dict[str, str] = {
    "int8": "b", "int16": "h", "int32": "i", "int64": "q",
    "uint8": "B", "uint16": "H", "uint32": "I", "uint64": "Q",
    "float64": "d", "bool": "?", "error_code": "h",
    "timedelta_i32": "i", "timedelta_i64": "q", "datetime_i64": "q", "uuid": "16s",
}
_UUID_ZERO = UUID(int=0).bytes
# The null forms of the legacy (non-flexible) lengths: int16 -1 for a string, int32 -1
# for bytes and arrays. A flexible null is a zero varint.
_NULL_INT16 = b"\xff\xff"
_NULL_INT32 = b"\xff\xff\xff\xff"


def _fixed_value(kafka_type: str, value: str, optional: bool) -> str:
    """The expression that turns `value` (source text) into what struct packs."""
    if kafka_type in ("timedelta_i32", "timedelta_i64"):
        return f"round({value}.total_seconds() * 1000)"
    if kafka_type == "datetime_i64":
        converted = f"round({value}.timestamp() * 1000)"
        return f"(-1 if {value} is None else {converted})" if optional else converted
    if kafka_type == "uuid":
        return f"(_UUID_ZERO if {value} is None else {value}.bytes)"
    return value


class _Source:
    """The lines of one generated function, with the struct formats and helpers it
    refers to by name."""

    def __init__(self, namespace: dict[str, Any]) -> None:
        self.lines: list[str] = []
        self.namespace = namespace
        self._pending_codes: list[str] = []
        self._pending_args: list[str] = []
        self._temporaries = 0

    def temporary(self) -> str:
        self._temporaries += 1
        return f"_t{self._temporaries}"

    def name(self, prefix: str, value: Any) -> str:
        """A global of the generated code holding `value`."""
        key = f"_{prefix}{len(self.namespace)}"
        self.namespace[key] = value
        return key

    def fixed(self, code: str, arg: str) -> None:
        """A fixed-size value: packed together with its neighbours."""
        self._pending_codes.append(code)
        self._pending_args.append(arg)

    def emit(self, line: str, indent: int) -> None:
        self.flush(indent)
        self.lines.append("    " * indent + line)

    def flush(self, indent: int) -> None:
        if not self._pending_codes:
            return
        packer = self.name("pack", struct.Struct(">" + "".join(self._pending_codes)).pack)
        self.lines.append("    " * indent + f"write({packer}({', '.join(self._pending_args)}))")
        self._pending_codes.clear()
        self._pending_args.clear()


def _write_length(src: _Source, length: str, flexible: bool, legacy_code: str, indent: int) -> None:
    """A length prefix: a compact varint of length + 1, or a legacy int16/int32. (The
    caller writes the null form itself.)"""
    if flexible:
        src.emit(f"write(_uvarint({length} + 1))", indent)
    else:
        src.fixed(legacy_code, length)
        src.flush(indent)


def _primitive(src: _Source, kafka_type: str, value: str, optional: bool, flexible: bool, indent: int) -> None:
    """One primitive value (a field, or an item of a primitive array)."""
    if kafka_type in _FIXED:
        src.fixed(_FIXED[kafka_type], _fixed_value(kafka_type, value, optional))
        return
    if kafka_type not in ("string", "bytes", "records"):
        # Every type of the pinned kio is handled above (the unit test encodes all of its
        # classes); a kio upgrade that adds one must be taught here, not guessed at.
        raise TypeError(f"kio declares Kafka type {kafka_type!r}, which compiled writers do not know")
    is_text = kafka_type == "string"
    if optional:
        null = "b'\\x00'" if flexible else "_NULL_INT16" if is_text else "_NULL_INT32"
        src.emit(f"if {value} is None:", indent)
        src.emit(f"write({null})", indent + 1)
        src.emit("else:", indent)
        indent += 1
    if is_text:
        text = src.temporary()
        src.emit(f"{text} = {value}.encode() if {value}.__class__ is str else {value}", indent)
        length = f"_uvarint(len({text}) + 1)" if flexible else f"_pack_int16(len({text}))"
        src.emit(f"write({length} + {text})", indent)  # short: one piece
        return
    _write_length(src, f"len({value})", flexible, "i", indent)
    src.emit(f"write({value})", indent)  # bytes and record data: a piece of their own, uncopied


def _array(src: _Source, f: Field, kind: Any, flexible: bool, indent: int) -> None:
    items = src.temporary()
    src.emit(f"{items} = e.{f.name}", indent)
    src.emit(f"if {items} is None:", indent)
    src.emit("write(b'\\x00')" if flexible else "write(_NULL_INT32)", indent + 1)
    src.emit("else:", indent)
    _write_length(src, f"len({items})", flexible, "i", indent + 1)
    item = src.temporary()
    if isinstance(kind, EntityTupleField):
        writer = src.name("entity", compiled_writer(kind.type_))
        src.emit(f"for {item} in {items}:", indent + 1)
        src.emit(f"{writer}(write, {item})", indent + 2)
        return
    kafka_type = get_schema_field_type(f)
    code = _FIXED.get(kafka_type)
    if code is not None and code != "16s" and _fixed_value(kafka_type, "x", False) == "x":
        # An array of numbers: one pack for all of them.
        src.emit(f"write(_struct_pack('>%d{code}' % len({items}), *{items}))", indent + 1)
        return
    src.emit(f"for {item} in {items}:", indent + 1)
    _primitive(src, kafka_type, item, False, flexible, indent + 2)
    src.flush(indent + 2)


def _tagged(cls: type[Entity]) -> list[tuple[int, Field, Any, Any]]:
    """(tag, field, kio's writer, implicit default) of each tagged field, by tag."""
    tagged = []
    for f in fields(cls):
        tag = get_field_tag(f)
        if tag is not None:
            writer = get_field_writer(f, flexible=True, is_request_header=False, is_tag=True)
            tagged.append((int(tag), f, writer, get_tagged_field_default(f)))
    return sorted(tagged, key=lambda t: t[0])


def _write_tags(write: Write, entity: Any, tagged: list[tuple[int, Field, Any, Any]]) -> None:
    """The tag section, as kio writes it: the fields that differ from their default."""
    parts = []
    for tag, f, writer, implicit_default in tagged:
        value = getattr(entity, f.name)
        if value == f.default or (f.default is MISSING and value == implicit_default):
            continue
        with io.BytesIO() as buffer:
            writer(buffer, value)
            encoded = buffer.getvalue()
        parts.append(write_uvarint(tag) + write_uvarint(len(encoded)) + encoded)
    write(write_uvarint(len(parts)) + b"".join(parts))


@cache
def compiled_writer(cls: type[Entity]) -> EntityWriter:
    """The writer of kio class `cls` (a message, or an entity nested in one)."""
    flexible = cls.__flexible__
    namespace: dict[str, Any] = {"_uvarint": write_uvarint, "_UUID_ZERO": _UUID_ZERO, "_struct_pack": struct.pack,
                                 "_NULL_INT16": _NULL_INT16, "_NULL_INT32": _NULL_INT32,
                                 "_pack_int16": struct.Struct(">h").pack}
    src = _Source(namespace)
    for f in fields(cls):
        if get_field_tag(f) is not None:
            continue
        kind = classify_field(f)
        optional = is_optional(f)
        if isinstance(kind, PrimitiveField):
            _primitive(src, get_schema_field_type(f), f"e.{f.name}", optional, flexible, 1)
        elif isinstance(kind, EntityField):
            writer = src.name("entity", compiled_writer(kind.type_))
            if optional:  # KIP-893 nullable struct: an int8 marker, -1 for null
                src.emit(f"if e.{f.name} is None:", 1)
                src.emit("write(b'\\xff')", 2)
                src.emit("else:", 1)
                src.emit("write(b'\\x01')", 2)
                src.emit(f"{writer}(write, e.{f.name})", 2)
            else:
                src.emit(f"{writer}(write, e.{f.name})", 1)
        elif isinstance(kind, (EntityTupleField, PrimitiveTupleField)):
            _array(src, f, kind, flexible, 1)
    if flexible:
        tagged = _tagged(cls)
        if tagged:
            src.emit(f"_write_tags(write, e, {src.name('tagged', tagged)})", 1)
            namespace["_write_tags"] = _write_tags
        else:
            src.fixed("B", "0")  # no tagged fields: a count of zero
    src.flush(1)
    body = "\n".join(src.lines) or "    pass"
    function_name = f"write_{cls.__module__.replace('.', '_')}_{cls.__name__}"
    code = f"def {function_name}(write, e):\n{body}\n"
    exec(compile(code, f"<compiled writer of {cls.__module__}.{cls.__name__}>", "exec"), namespace)
    writer = namespace[function_name]
    writer.source = code  # for reading what was generated
    return writer
