"""The PROTOBUF schema type: a .proto file (proto2 or proto3), as Confluent's registry
takes it: as the file's text, or as a base64 FileDescriptorProto (what confluent-kafka's
Python ProtobufSerializer sends). Its references are the files it imports, each
`{"name": <the import path>, "subject", "version"}`; google/protobuf/*.proto are known
without one.

The text is compiled by protoc itself, the one in `grpcio-tools` (Google's compiler),
in a process of its own (protoc.py): whatever protoc refuses, or dies or hangs on, is an
invalid schema (42201) with protoc's messages. The schema's file is compiled as
`schema.proto` (a reference may not take that name). The canonical text, on which two registrations
compare equal, is the compiled FileDescriptorProto written back as .proto text by
`render`, so the file sent as text and the same file sent as a descriptor get the same
id. `serialized` is the other way: the canonical text compiled back to a base64
FileDescriptorProto (`?format=serialized`).

Compatibility (`differences`) is Ottla's own code, after the rules of Confluent's
Protobuf checker: wire-compatible changes pass (fields added or removed, scalar types
within one wire group, names and labels, the package, oneofs added or removed), while a
removed message, a field's kind (scalar, message, enum, map) or named type changed, a
scalar moved out of its wire group, a required field added or removed, a field removed
from a oneof that stays, and fields moved into a oneof are incompatible. Messages and
named types are compared by their names within the package.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from google.protobuf import descriptor_pb2, descriptor_pool, text_format
from google.protobuf.message import DecodeError, Message

from .errors import invalid_schema
from .protoc import MAIN_FILE, CompileFailed, ProtocProcess

PROTOBUF = "PROTOBUF"
_PROTOC = ProtocProcess()
_IMPORT_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-]*(/[A-Za-z0-9_][A-Za-z0-9_.\-]*)*\.proto")
_BASE64 = re.compile(r"[A-Za-z0-9+/]+={0,2}")
_MAX_FIELD_NUMBER = 536870911

FDP = descriptor_pb2.FileDescriptorProto
_F = descriptor_pb2.FieldDescriptorProto


@dataclass(frozen=True)
class ProtobufSchema:
    """A compiled schema: its own file and every file it imports (by import path)."""

    file: descriptor_pb2.FileDescriptorProto
    imports: dict[str, descriptor_pb2.FileDescriptorProto] = field(default_factory=dict)
    _pool: list[descriptor_pool.DescriptorPool] = field(default_factory=list, compare=False, repr=False)

    @property
    def has_pool(self) -> bool:
        return bool(self._pool)

    def pool(self) -> descriptor_pool.DescriptorPool:
        """The runtime's descriptors of the file and its imports, built once (tens of
        milliseconds for thousands of messages: the registry builds it in its worker
        before a reader on the event loop, the console's decoder, asks)."""
        if not self._pool:
            pool = descriptor_pool.DescriptorPool()
            for file in self.imports.values():  # in the order protoc wrote them: each after its own imports
                pool.Add(file)
            pool.Add(self.file)
            self._pool.append(pool)
        return self._pool[0]


# (import path, .proto text) of each file a schema imports through its references
ReferencedFiles = list[tuple[str, str]]


def is_descriptor(text: str) -> bool:
    """A schema sent as base64 FileDescriptorProto (.proto text always has spaces or `;`)."""
    return len(text) >= 4 and _BASE64.fullmatch(text) is not None


def _decode_descriptor(text: str) -> descriptor_pb2.FileDescriptorProto:
    try:
        raw = base64.b64decode(text, validate=True)
        found = descriptor_pb2.FileDescriptorProto()
        found.ParseFromString(raw)
    except (binascii.Error, DecodeError, ValueError, RecursionError) as exc:
        raise invalid_schema(f"neither .proto text nor a base64 FileDescriptorProto: {exc}") from None
    return found


def as_text(text: str) -> str:
    """The .proto text of a schema sent either way."""
    return render(_decode_descriptor(text)) if is_descriptor(text) else text


def compile_schema(text: str, files: ReferencedFiles) -> ProtobufSchema:
    """A schema sent either way, compiled. A descriptor is written as text and compiled
    back, and must come back the same: names that are no identifiers (`a = 1; int32 b`)
    would otherwise make the text say another schema than the descriptor."""
    if not is_descriptor(text):
        return compile_files(text, files)
    sent = _decode_descriptor(text)
    compiled = compile_files(render(sent), files)
    if _structure(compiled.file) != _structure(sent):
        raise invalid_schema("the FileDescriptorProto does not describe a .proto file protoc compiles the same")
    return compiled


def _structure(file: descriptor_pb2.FileDescriptorProto) -> descriptor_pb2.FileDescriptorProto:
    """What of a descriptor a schema means: not its file name, source positions, default
    json names, `syntax = "proto2"` said or not, nor custom options (which the registry's
    runtime does not know, and the canonical text leaves out)."""
    found = descriptor_pb2.FileDescriptorProto()
    found.CopyFrom(file)
    found.ClearField("name")
    found.ClearField("source_code_info")
    if found.syntax == "proto2":
        found.ClearField("syntax")
    found.DiscardUnknownFields()

    def clear(fields: Iterable[descriptor_pb2.FieldDescriptorProto]) -> None:
        for entry in fields:
            if entry.json_name == _json_name(entry.name):
                entry.ClearField("json_name")

    def walk(messages: Iterable[descriptor_pb2.DescriptorProto]) -> None:
        for message in messages:
            clear(message.field)
            clear(message.extension)
            walk(message.nested_type)

    walk(found.message_type)
    clear(found.extension)
    return found


def compile_files(main: str, files: ReferencedFiles) -> ProtobufSchema:
    """Compile `main` (.proto text) with `files` ((import path, .proto text)) beside it,
    through protoc (in its own process: protoc.py); 42201 with protoc's messages if it
    refuses, dies or hangs."""
    for text in [main, *(text for _, text in files)]:
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise invalid_schema(f"{_short(main)}, details: not UTF-8 text ({exc.reason})") from None
    try:
        compiled = _PROTOC.compile(main, files)
    except CompileFailed as exc:
        raise invalid_schema(f"{_short(main)}, details: {exc}") from None
    found = descriptor_pb2.FileDescriptorSet.FromString(compiled)
    by_name = {file.name: file for file in found.file}
    main_file = by_name.pop(MAIN_FILE)
    if main_file.syntax not in ("", "proto2", "proto3"):
        raise invalid_schema(f"{_short(main)}, details: syntax {main_file.syntax!r} (editions) is not supported")
    return ProtobufSchema(main_file, by_name)


def check_reference_name(name: str) -> None:
    if name == MAIN_FILE or _IMPORT_NAME.fullmatch(name) is None or ".." in name.split("/"):
        raise invalid_schema(f"a PROTOBUF reference's name is the path its schema imports (a relative "
                             f"'....proto' path, not {MAIN_FILE!r}): {name!r}")


def is_well_known(name: str) -> bool:
    """google/protobuf/*.proto: compiled from protoc's own copy, even when a client
    registered it as a reference (confluent-kafka's `skip.known.types=False`)."""
    return name.startswith("google/protobuf/")


def serialized(schema: ProtobufSchema) -> str:
    """The base64 FileDescriptorProto of a compiled schema (`?format=serialized`)."""
    return base64.b64encode(schema.file.SerializeToString()).decode("ascii")


# --- writing a FileDescriptorProto back as .proto text -----------------------------------

_SCALARS = {
    _F.TYPE_DOUBLE: "double", _F.TYPE_FLOAT: "float", _F.TYPE_INT64: "int64", _F.TYPE_UINT64: "uint64",
    _F.TYPE_INT32: "int32", _F.TYPE_FIXED64: "fixed64", _F.TYPE_FIXED32: "fixed32", _F.TYPE_BOOL: "bool",
    _F.TYPE_STRING: "string", _F.TYPE_BYTES: "bytes", _F.TYPE_UINT32: "uint32", _F.TYPE_SFIXED32: "sfixed32",
    _F.TYPE_SFIXED64: "sfixed64", _F.TYPE_SINT32: "sint32", _F.TYPE_SINT64: "sint64",
}


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _option_value(value: object, descriptor: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return _quote(value)
    if isinstance(value, bytes):
        return '"' + text_format.CEscape(value, as_utf8=False) + '"'
    if isinstance(value, Message):
        return "{ " + text_format.MessageToString(value, as_one_line=True) + " }"
    enum_type = getattr(descriptor, "enum_type", None)
    if enum_type is not None and isinstance(value, int):
        found = enum_type.values_by_number.get(value)
        return found.name if found is not None else str(value)
    return repr(value)


def _options(options: Message) -> list[str]:
    """`name = value` of every option set (custom options of the schema's own files, which
    the registry's descriptor runtime does not know, are left out)."""
    found = []
    for descriptor, value in options.ListFields():
        name = f"({descriptor.full_name})" if descriptor.is_extension else descriptor.name
        values = value if descriptor.is_repeated else [value]
        found += [f"{name} = {_option_value(item, descriptor)}" for item in values]
    return found


def _json_name(name: str) -> str:
    parts = name.split("_")
    return parts[0] + "".join(part[:1].upper() + part[1:] for part in parts[1:])


def _ranges(ranges: Iterable[descriptor_pb2.DescriptorProto.ReservedRange], exclusive: bool) -> str:
    found = []
    for item in ranges:
        end = item.end - 1 if exclusive else item.end
        if end == item.start:
            found.append(str(item.start))
        else:
            found.append(f"{item.start} to {'max' if end >= _MAX_FIELD_NUMBER else end}")
    return ", ".join(found)


def _field_type(entry: descriptor_pb2.FieldDescriptorProto) -> str:
    return _SCALARS.get(entry.type) or entry.type_name


class _Writer:
    def __init__(self, proto3: bool) -> None:
        self.proto3 = proto3
        self.lines: list[str] = []

    def line(self, depth: int, text: str) -> None:
        self.lines.append("  " * depth + text)

    def field(self, depth: int, entry: descriptor_pb2.FieldDescriptorProto,
              nested: dict[str, descriptor_pb2.DescriptorProto], in_oneof: bool = False) -> None:
        short = entry.type_name.rpartition(".")[2]
        map_entry = nested.get(short) if entry.type == _F.TYPE_MESSAGE else None
        extra = []
        if entry.HasField("default_value"):
            value = entry.default_value
            if entry.type == _F.TYPE_STRING:
                value = _quote(value)
            elif entry.type == _F.TYPE_BYTES:
                value = f'"{value}"'  # already C-escaped in the descriptor
            extra.append(f"default = {value}")
        if entry.HasField("json_name") and entry.json_name != _json_name(entry.name):
            extra.append(f"json_name = {_quote(entry.json_name)}")
        extra += _options(entry.options)
        suffix = f" [{', '.join(extra)}]" if extra else ""
        if map_entry is not None and map_entry.options.map_entry and entry.label == _F.LABEL_REPEATED:
            key, value_field = map_entry.field[0], map_entry.field[1]
            self.line(depth, f"map<{_field_type(key)}, {_field_type(value_field)}> {entry.name} = "
                             f"{entry.number}{suffix};")
            return
        label = ""
        if entry.label == _F.LABEL_REPEATED:
            label = "repeated "
        elif entry.label == _F.LABEL_REQUIRED:
            label = "required "
        elif not in_oneof and (entry.proto3_optional or not self.proto3):
            label = "optional "
        if entry.type == _F.TYPE_GROUP and short in nested:
            self.line(depth, f"{label}group {short} = {entry.number}{suffix} {{")
            self.message_body(depth + 1, nested[short])
            self.line(depth, "}")
            return
        self.line(depth, f"{label}{_field_type(entry)} {entry.name} = {entry.number}{suffix};")

    def extensions(self, depth: int, extensions: Iterable[descriptor_pb2.FieldDescriptorProto]) -> None:
        by_extendee: dict[str, list[descriptor_pb2.FieldDescriptorProto]] = {}
        for entry in extensions:
            by_extendee.setdefault(entry.extendee, []).append(entry)
        for extendee, entries in by_extendee.items():
            self.line(depth, f"extend {extendee} {{")
            for entry in entries:
                self.field(depth + 1, entry, {})
            self.line(depth, "}")

    def enum(self, depth: int, enum: descriptor_pb2.EnumDescriptorProto) -> None:
        self.line(depth, f"enum {enum.name} {{")
        for option in _options(enum.options):
            self.line(depth + 1, f"option {option};")
        for value in enum.value:
            options = _options(value.options)
            suffix = f" [{', '.join(options)}]" if options else ""
            self.line(depth + 1, f"{value.name} = {value.number}{suffix};")
        if enum.reserved_range:
            self.line(depth + 1, f"reserved {_ranges(enum.reserved_range, exclusive=False)};")
        if enum.reserved_name:
            self.line(depth + 1, f"reserved {', '.join(_quote(n) for n in enum.reserved_name)};")
        self.line(depth, "}")

    def message(self, depth: int, message: descriptor_pb2.DescriptorProto) -> None:
        self.line(depth, f"message {message.name} {{")
        self.message_body(depth + 1, message)
        self.line(depth, "}")

    def message_body(self, depth: int, message: descriptor_pb2.DescriptorProto) -> None:
        for option in _options(message.options):
            self.line(depth, f"option {option};")
        nested = {item.name: item for item in message.nested_type}
        inline = {entry.type_name.rpartition(".")[2] for entry in message.field
                  if entry.type == _F.TYPE_GROUP or (entry.type == _F.TYPE_MESSAGE and entry.label == _F.LABEL_REPEATED
                                                     and nested.get(entry.type_name.rpartition(".")[2],
                                                                    descriptor_pb2.DescriptorProto())
                                                     .options.map_entry)}
        written_oneofs: set[int] = set()
        for entry in message.field:
            real_oneof = entry.HasField("oneof_index") and not entry.proto3_optional
            if not real_oneof:
                self.field(depth, entry, nested)
                continue
            if entry.oneof_index in written_oneofs:
                continue
            written_oneofs.add(entry.oneof_index)
            oneof = message.oneof_decl[entry.oneof_index]
            self.line(depth, f"oneof {oneof.name} {{")
            for option in _options(oneof.options):
                self.line(depth + 1, f"option {option};")
            for member in message.field:
                if member.HasField("oneof_index") and member.oneof_index == entry.oneof_index \
                        and not member.proto3_optional:
                    self.field(depth + 1, member, nested, in_oneof=True)
            self.line(depth, "}")
        if message.reserved_range:
            self.line(depth, f"reserved {_ranges(message.reserved_range, exclusive=True)};")
        if message.reserved_name:
            self.line(depth, f"reserved {', '.join(_quote(n) for n in message.reserved_name)};")
        for extension_range in message.extension_range:
            options = _options(extension_range.options)
            suffix = f" [{', '.join(options)}]" if options else ""
            self.line(depth, f"extensions {_ranges([extension_range], exclusive=True)}{suffix};")
        for item in message.nested_type:
            if item.name not in inline:
                self.message(depth, item)
        for enum in message.enum_type:
            self.enum(depth, enum)
        self.extensions(depth, message.extension)


def render(file: descriptor_pb2.FileDescriptorProto) -> str:
    """`file` as .proto text: the registry's canonical text of a PROTOBUF schema."""
    writer = _Writer(proto3=file.syntax == "proto3")
    writer.line(0, f'syntax = "{file.syntax or "proto2"}";')
    if file.package:
        writer.line(0, f"package {file.package};")
    if file.dependency:
        writer.line(0, "")
    for index, name in enumerate(file.dependency):
        kind = "public " if index in file.public_dependency else "weak " if index in file.weak_dependency else ""
        writer.line(0, f"import {kind}{_quote(name)};")
    options = _options(file.options)
    if options:
        writer.line(0, "")
    for option in options:
        writer.line(0, f"option {option};")
    for message in file.message_type:
        writer.line(0, "")
        writer.message(0, message)
    for enum in file.enum_type:
        writer.line(0, "")
        writer.enum(0, enum)
    for service in file.service:
        writer.line(0, "")
        writer.line(0, f"service {service.name} {{")
        for option in _options(service.options):
            writer.line(1, f"option {option};")
        for method in service.method:
            into = "stream " if method.client_streaming else ""
            out = "stream " if method.server_streaming else ""
            options = _options(method.options)
            body = " {\n" + "".join(f"    option {o};\n" for o in options) + "  }" if options else ";"
            writer.line(1, f"rpc {method.name}({into}{method.input_type}) returns ({out}{method.output_type}){body}")
        writer.line(0, "}")
    if file.extension:
        writer.line(0, "")
        writer.extensions(0, file.extension)
    return "\n".join(writer.lines) + "\n"


# --- compatibility -----------------------------------------------------------------------

# Scalars one wire type carries, readable one as the other (Confluent's groups).
_WIRE_GROUPS = [
    {_F.TYPE_INT32, _F.TYPE_UINT32, _F.TYPE_INT64, _F.TYPE_UINT64, _F.TYPE_BOOL},
    {_F.TYPE_SINT32, _F.TYPE_SINT64},
    {_F.TYPE_FIXED32, _F.TYPE_SFIXED32},
    {_F.TYPE_FIXED64, _F.TYPE_SFIXED64},
    {_F.TYPE_STRING, _F.TYPE_BYTES},
]


def _messages(schema: ProtobufSchema) -> dict[str, descriptor_pb2.DescriptorProto]:
    """Every message type of the schema's own file, by its name within the package
    ("Outer.Inner")."""
    found: dict[str, descriptor_pb2.DescriptorProto] = {}

    def walk(prefix: str, messages: Iterable[descriptor_pb2.DescriptorProto]) -> None:
        for message in messages:
            name = f"{prefix}{message.name}"
            found[name] = message
            walk(name + ".", message.nested_type)

    walk("", schema.file.message_type)
    return found


def _type_name(schema: ProtobufSchema, entry: descriptor_pb2.FieldDescriptorProto) -> str:
    """A field's message or enum type, within the schema's package if it is of it."""
    own = f".{schema.file.package}." if schema.file.package else "."
    return entry.type_name.removeprefix(own) if entry.type_name.startswith(own) else entry.type_name.lstrip(".")


def _kind(entry: descriptor_pb2.FieldDescriptorProto, message: descriptor_pb2.DescriptorProto) -> str:
    if entry.type in (_F.TYPE_MESSAGE, _F.TYPE_GROUP):
        short = entry.type_name.rpartition(".")[2]
        for item in message.nested_type:
            if item.name == short and item.options.map_entry and entry.label == _F.LABEL_REPEATED:
                return "MAP"
        return "MESSAGE"
    if entry.type == _F.TYPE_ENUM:
        return "ENUM"
    return "SCALAR"


def differences(reader: ProtobufSchema, writer: ProtobufSchema) -> list[tuple[str, str, str]]:
    """(kind, path, what) of each way data `writer` wrote may not read as `reader`'s;
    empty when the change is compatible in that direction."""
    found: list[tuple[str, str, str]] = []
    readers = _messages(reader)
    for name, written in _messages(writer).items():
        path = "#/" + name.replace(".", "/")
        read = readers.get(name)
        if read is None:
            found.append(("MESSAGE_REMOVED", path, f"The message {name} is missing"))
            continue
        read_fields = {entry.number: entry for entry in read.field}
        written_fields = {entry.number: entry for entry in written.field}
        for number in sorted(set(read_fields) | set(written_fields)):
            at = f"{path}/{number}"
            old, new = written_fields.get(number), read_fields.get(number)
            if old is None or new is None:
                present = old if new is None else new
                assert present is not None
                if present.label == _F.LABEL_REQUIRED:
                    found.append(("REQUIRED_FIELD_ADDED" if old is None else "REQUIRED_FIELD_REMOVED", at,
                                  f"The required field {present.name} is on one side only"))
                elif new is None and old is not None and old.HasField("oneof_index") and not old.proto3_optional \
                        and written.oneof_decl[old.oneof_index].name in {o.name for o in read.oneof_decl}:
                    found.append(("ONEOF_FIELD_REMOVED", at, f"The field {old.name} of a oneof is missing"))
                continue
            if (old.label == _F.LABEL_REQUIRED) != (new.label == _F.LABEL_REQUIRED):
                found.append(("REQUIRED_FIELD_ADDED" if new.label == _F.LABEL_REQUIRED else "REQUIRED_FIELD_REMOVED",
                              at, f"The field {new.name} changed to or from required"))
            old_kind, new_kind = _kind(old, written), _kind(new, read)
            if old_kind != new_kind:
                found.append(("FIELD_KIND_CHANGED", at, f"The kind of the field changed from {old_kind} to "
                                                        f"{new_kind}"))
            elif old_kind == "SCALAR" and old.type != new.type \
                    and not any(old.type in group and new.type in group for group in _WIRE_GROUPS):
                found.append(("FIELD_SCALAR_KIND_CHANGED", at, f"The scalar type changed from "
                                                               f"{_SCALARS[old.type]} to {_SCALARS[new.type]}"))
            elif old_kind in ("MESSAGE", "ENUM") and _type_name(writer, old) != _type_name(reader, new):
                found.append(("FIELD_NAMED_TYPE_CHANGED", at, f"The type changed from {_type_name(writer, old)} "
                                                              f"to {_type_name(reader, new)}"))
        found += _oneof_moves(read, written, path)
    return found


def _oneof_moves(read: descriptor_pb2.DescriptorProto, written: descriptor_pb2.DescriptorProto,
                 path: str) -> list[tuple[str, str, str]]:
    def oneof_of(message: descriptor_pb2.DescriptorProto) -> dict[int, str]:
        return {entry.number: message.oneof_decl[entry.oneof_index].name for entry in message.field
                if entry.HasField("oneof_index") and not entry.proto3_optional}

    read_oneofs, written_oneofs = oneof_of(read), oneof_of(written)
    written_numbers = {entry.number for entry in written.field}
    moved: dict[str, list[int]] = {}
    for number, oneof in read_oneofs.items():
        if number in written_numbers and number not in written_oneofs:
            moved.setdefault(oneof, []).append(number)
    found = []
    for oneof, numbers in sorted(moved.items()):
        if oneof in written_oneofs.values():
            found.append(("FIELD_MOVED_TO_EXISTING_ONEOF", f"{path}/{numbers[0]}",
                          f"A field moved into the existing oneof {oneof}"))
        elif len(numbers) > 1:
            found.append(("MULTIPLE_FIELDS_MOVED_TO_ONEOF", f"{path}/{numbers[0]}",
                          f"Fields {numbers} moved into the new oneof {oneof}"))
    return found


def _short(text: str) -> str:
    return text if len(text) <= 200 else text[:200] + "..."

