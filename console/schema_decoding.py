"""Records written in Confluent's wire format (magic byte 0, the 4-byte id of a schema of
the built-in registry, then the payload), decoded for the Messages page with the
registry's schema: AVRO (binary encoding), JSON (the document) and PROTOBUF (the message
indexes, then the message).

A record is anyone's bytes, so decoding is bounded: payloads over MAX_PAYLOAD are not
decoded; Avro is read by a walker of Ottla's own that reads no length past the payload,
no deeper than MAX_DEPTH and no more than MAX_ITEMS values (an array block may claim a
billion nulls in one byte); Protobuf by protobuf's runtime (its own recursion limit);
the rendered JSON stops at MAX_RENDERED characters. Whatever fails (a garbage payload,
an id the registry does not know) is a note beside the raw bytes, never an error page.

The schema is read as the registry would let the viewer read it (its rule for
`/schemas/ids/{id}`): through a subject holding the id whose topic the viewer may
DESCRIBE; any other id is, to the viewer, unknown. Its parse is the registry's
(`SchemaRegistry.stored_parse`), never done here on the event loop: a schema not parsed
yet is noted, the admin endpoint has the registry parse it in its worker and renders
the page again.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import avro.schema
from google.protobuf import json_format, message_factory

from ottla.schema_registry.errors import RegistryError
from ottla.schema_registry.protobuf import ProtobufSchema
from ottla.schema_registry.schema_types import AVRO, JSON, ParsedSchema, SchemaText
from ottla.schema_registry.store import RegistryState

MAX_PAYLOAD = 64 * 1024
MAX_DEPTH = 32
MAX_ITEMS = 20_000
MAX_RENDERED = 16 * 1024


class DecodeFailed(Exception):
    pass


@dataclass(frozen=True, slots=True)
class Decoded:
    note: str  # the schema it was decoded with, or why it was not
    text: str | None = None  # the value as indented JSON; None: not decoded


class SchemaDecoder:
    """Decodes one page's records; each schema is looked up and parsed once per page."""

    def __init__(self, state: RegistryState, may_read_subject: Callable[[str], bool],
                 stored_parse: Callable[[SchemaText], ParsedSchema | RegistryError | None]) -> None:
        self._state = state
        self._may_read = may_read_subject
        self._stored_parse = stored_parse
        self._schemas: dict[int, tuple[ParsedSchema, str] | str] = {}

    def decode(self, data: bytes) -> Decoded | None:
        """None for bytes not in the wire format (the page shows them as it always does)."""
        if len(data) < 5 or data[0] != 0:
            return None
        schema_id = int.from_bytes(data[1:5], "big")
        found = self._schema(schema_id)
        if isinstance(found, str):
            return Decoded(f"magic byte 0 and schema id {schema_id}: {found}; the raw bytes:")
        parsed, described = found
        if len(data) - 5 > MAX_PAYLOAD:
            return Decoded(f"{described}: a payload over {MAX_PAYLOAD:,} bytes is not decoded; the raw bytes:")
        try:
            value = _decode(parsed, memoryview(data)[5:])
            text = json.dumps(value, indent=2, ensure_ascii=False, default=str)
        except (DecodeFailed, RecursionError, ValueError, TypeError, struct.error) as exc:
            return Decoded(f"{described}: not decodable with it ({exc or type(exc).__name__}); the raw bytes:")
        except Exception as exc:  # protobuf's runtime raises its own kinds: a record must never break the page
            return Decoded(f"{described}: not decodable with it ({type(exc).__name__}); the raw bytes:")
        if len(text) > MAX_RENDERED:
            text = text[:MAX_RENDERED] + f"\n… {len(text) - MAX_RENDERED:,} more characters"
        return Decoded(described, text)

    def _schema(self, schema_id: int) -> tuple[ParsedSchema, str] | str:
        if schema_id not in self._schemas:
            self._schemas[schema_id] = self._look_up(schema_id)
        return self._schemas[schema_id]

    def _look_up(self, schema_id: int) -> tuple[ParsedSchema, str] | str:
        holders = sorted((entry.subject, entry.version) for versions in self._state.versions.values()
                         for entry in versions.values() if entry.schema_id == schema_id)
        readable = [(subject, version) for subject, version in holders if self._may_read(subject)]
        schema = self._state.schema_by_id(schema_id)
        if schema is None or not readable:
            return "the schema registry has no such schema"

        subject, version = readable[0]
        described = f"{schema.schema_type}, schema id {schema_id} ({subject} v{version})"
        parsed = self._stored_parse(schema)
        if parsed is None:
            return f"{described} is being parsed (reload the page)"
        if isinstance(parsed, RegistryError):  # a stored schema that no longer parses (a reference deleted for good)
            return f"{described} does not parse ({parsed.message})"
        return parsed, described


def _decode(parsed: ParsedSchema, payload: memoryview) -> Any:
    schema_type = parsed.canonical.schema_type
    if schema_type == AVRO:
        assert isinstance(parsed.parsed, avro.schema.Schema)
        reader = _AvroReader(payload)
        value = reader.read(parsed.parsed, 0)
        if reader.position != len(payload):
            raise DecodeFailed(f"{len(payload) - reader.position} bytes left after the value")
        return value
    if schema_type == JSON:
        try:
            return json.loads(bytes(payload).decode("utf-8"))
        except UnicodeDecodeError as exc:
            raise DecodeFailed(f"not UTF-8: {exc.reason}") from None
    assert isinstance(parsed.parsed, ProtobufSchema)
    return _decode_protobuf(parsed.parsed, payload)


class _AvroReader:
    """Avro's binary encoding, read against an `avro.schema` schema within the bounds."""

    def __init__(self, data: memoryview) -> None:
        self.data = data
        self.position = 0
        self.items = 0

    def take(self, size: int) -> memoryview:
        if size < 0 or self.position + size > len(self.data):
            raise DecodeFailed(f"a length of {size} past the payload's end")
        found = self.data[self.position:self.position + size]
        self.position += size
        return found

    def long(self) -> int:
        result = shift = 0
        while True:
            byte = self.take(1)[0]
            result |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return (result >> 1) ^ -(result & 1)
            shift += 7
            if shift > 63:
                raise DecodeFailed("a varint longer than 10 bytes")

    def read(self, schema: avro.schema.Schema, depth: int) -> Any:
        self.items += 1
        if depth > MAX_DEPTH or self.items > MAX_ITEMS:
            raise DecodeFailed(f"deeper than {MAX_DEPTH} or more than {MAX_ITEMS:,} values")
        kind = schema.type
        if kind == "null":
            return None
        if kind == "boolean":
            return self.take(1)[0] != 0
        if kind in ("int", "long"):
            return self.long()
        if kind == "float":
            return struct.unpack("<f", self.take(4))[0]
        if kind == "double":
            return struct.unpack("<d", self.take(8))[0]
        if kind == "bytes":
            return bytes(self.take(self.long())).decode("latin-1")  # as Avro's JSON encoding shows bytes
        if kind == "string":
            try:
                return bytes(self.take(self.long())).decode("utf-8")
            except UnicodeDecodeError:
                raise DecodeFailed("a string that is not UTF-8") from None
        if isinstance(schema, avro.schema.FixedSchema):
            return bytes(self.take(schema.size)).decode("latin-1")
        if isinstance(schema, avro.schema.EnumSchema):
            index = self.long()
            if not 0 <= index < len(schema.symbols):
                raise DecodeFailed(f"enum index {index} out of range")
            return schema.symbols[index]
        if isinstance(schema, avro.schema.UnionSchema):
            index = self.long()
            if not 0 <= index < len(schema.schemas):
                raise DecodeFailed(f"union branch {index} out of range")
            return self.read(schema.schemas[index], depth + 1)
        if isinstance(schema, avro.schema.RecordSchema):
            return {field.name: self.read(field.type, depth + 1) for field in schema.fields}
        if isinstance(schema, avro.schema.ArraySchema):
            return [self.read(schema.items, depth + 1) for _ in self._blocks()]
        if isinstance(schema, avro.schema.MapSchema):
            found = {}
            for _ in self._blocks():
                key = self.read(_STRING, depth + 1)
                found[key] = self.read(schema.values, depth + 1)
            return found
        raise DecodeFailed(f"an Avro type this page does not read: {kind}")

    def _blocks(self) -> Any:
        while True:
            count = self.long()
            if count == 0:
                return
            if count < 0:
                count = -count
                self.long()  # the block's size in bytes
            if count > MAX_ITEMS:
                raise DecodeFailed(f"a block of {count:,} items")
            for _ in range(count):
                yield None


_STRING = avro.schema.PrimitiveSchema("string")


def _varint(data: memoryview, position: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if position >= len(data) or shift > 63:
            raise DecodeFailed("the message indexes end early")
        byte = data[position]
        position += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return (result >> 1) ^ -(result & 1), position
        shift += 7


def _decode_protobuf(schema: ProtobufSchema, payload: memoryview) -> Any:
    count, position = _varint(payload, 0)
    if count < 0 or count > MAX_DEPTH:
        raise DecodeFailed(f"{count} message indexes")
    indexes = [0]
    if count:
        indexes = []
        for _ in range(count):
            index, position = _varint(payload, position)
            indexes.append(index)
    messages = schema.file.message_type
    name = schema.file.package
    for index in indexes:
        if not 0 <= index < len(messages):
            raise DecodeFailed(f"message index {index} out of range")
        name = f"{name}.{messages[index].name}" if name else messages[index].name
        messages = messages[index].nested_type
    message = message_factory.GetMessageClass(schema.pool().FindMessageTypeByName(name))()
    message.ParseFromString(bytes(payload[position:]))
    return json_format.MessageToDict(message, preserving_proto_field_name=True)
