"""The PROTOBUF type's canonical text (schema_registry/protobuf.py `render`): a
compiled FileDescriptorProto written back as .proto text must compile to the same
descriptor, or a schema sent as a descriptor would change meaning in the registry and a
deserializer would be handed another schema than the one the serializer used.

Checked on protobuf's own descriptor files (descriptor.proto: proto2 with defaults,
extension ranges, reserved ranges, enums and many options) and on a file using what
those lack (groups, extensions, maps, oneofs, proto3 optional, streaming services).

Break-and-see-it-fail: with `render` leaving out `extensions N to M;`,
test_descriptor_files_round_trip[descriptor] failed; with `default = ...` left out, it
failed too (the structures differed).
"""

from __future__ import annotations

import base64
import os
import resource

import pytest
from google.protobuf import (
    any_pb2,
    api_pb2,
    descriptor_pb2,
    duration_pb2,
    struct_pb2,
    timestamp_pb2,
    type_pb2,
    wrappers_pb2,
)

from ottla.schema_registry.protobuf import compile_files, render
from ottla.schema_registry.protoc import ProtocProcess
from ottla.schema_registry.schema_types import SchemaText, parse

EVERYTHING = """syntax = "proto2";
package ottla.unit;
import "google/protobuf/any.proto";
option java_package = "org.ottla.unit";
option optimize_for = CODE_SIZE;

message Outer {
  option deprecated = true;
  required string name = 1 [default = "a \\"quoted\\" name"];
  optional bytes blob = 2 [default = "\\001\\377"];
  optional double ratio = 3 [default = -1.5];
  optional Kind kind = 4 [default = SECOND];
  repeated int32 numbers = 5 [packed = true];
  optional group Legacy = 6 { optional int64 id = 7; }
  map<string, Inner> by_name = 8;
  oneof choice { string text = 9; Inner inner = 10; }
  optional google.protobuf.Any any = 11 [json_name = "anything"];
  extensions 100 to 199, 1000 to max;
  reserved 20 to 25, 30;
  reserved "gone", "went";
  message Inner { optional sint64 delta = 1; }
  enum Kind { option allow_alias = true; FIRST = 0; SECOND = 1; ALSO_SECOND = 1 [deprecated = true]; }
  extend Outer { optional string nested_extension = 150; }
}
extend Outer { repeated fixed32 top_extension = 1000; }
service Things {
  option deprecated = true;
  rpc One(Outer) returns (Outer.Inner);
  rpc Many(stream Outer) returns (stream Outer) { option idempotency_level = NO_SIDE_EFFECTS; }
}
"""

PROTO3 = """syntax = "proto3";
package ottla.unit3;
message M {
  optional string maybe = 1;
  repeated string many = 2;
  oneof either { int32 a = 3; string b = 4; }
  map<int64, M> children = 5;
  enum E { ZERO = 0; ONE = 1; reserved 5 to 9, 12; reserved "OLD"; }
  E e = 6;
}
"""


def _structure(file: descriptor_pb2.FileDescriptorProto) -> descriptor_pb2.FileDescriptorProto:
    """The descriptor less what no schema means: its file name, source positions, and
    the json names protoc fills in by default."""
    found = descriptor_pb2.FileDescriptorProto.FromString(file.SerializeToString())
    found.ClearField("name")
    found.ClearField("source_code_info")

    def clear(fields: list[descriptor_pb2.FieldDescriptorProto]) -> None:
        for entry in fields:
            if entry.json_name == "".join(p.capitalize() if i else p for i, p in enumerate(entry.name.split("_"))):
                entry.ClearField("json_name")

    def walk(messages: list[descriptor_pb2.DescriptorProto]) -> None:
        for message in messages:
            clear(list(message.field))
            clear(list(message.extension))
            walk(list(message.nested_type))

    walk(list(found.message_type))
    clear(list(found.extension))
    return found


@pytest.mark.parametrize("module", [descriptor_pb2, any_pb2, timestamp_pb2, struct_pb2, wrappers_pb2, duration_pb2,
                                    type_pb2, api_pb2],
                         ids=["descriptor", "any", "timestamp", "struct", "wrappers", "duration", "type", "api"])
def test_descriptor_files_round_trip(module: object) -> None:
    """Sent as a base64 descriptor (as confluent-kafka's serializer sends a schema): the
    canonical text compiles back to the same descriptor, and is its own canonical text."""
    serialized = module.DESCRIPTOR.serialized_pb  # type: ignore[attr-defined]
    parsed = parse(SchemaText("PROTOBUF", base64.b64encode(serialized).decode()), lambda reference: None)
    original = descriptor_pb2.FileDescriptorProto.FromString(serialized)
    assert _structure(parsed.parsed.file) == _structure(original)  # type: ignore[attr-defined]
    assert parse(parsed.canonical, lambda reference: None).canonical == parsed.canonical


@pytest.mark.parametrize("text", [EVERYTHING, PROTO3], ids=["proto2", "proto3"])
def test_text_round_trips(text: str) -> None:
    compiled = compile_files(text, []).file
    canonical = render(compiled)
    assert _structure(compile_files(canonical, []).file) == _structure(compiled), canonical
    assert render(compile_files(canonical, []).file) == canonical


def test_protoc_pipes_numbered_past_select_limit() -> None:
    """A broker holding over 1,024 descriptors (connections, segments) gets pipes to its
    protoc worker numbered past what select() can wait on: the worker's answer is waited
    for with poll. Break-and-see-it-fail: with select.select back in protoc._read, this
    failed with "ValueError: filedescriptor out of range in select()"."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = 1_400
    if soft < wanted:
        assert hard == resource.RLIM_INFINITY or hard >= wanted, f"needs {wanted} descriptors, hard limit {hard}"
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
    held = [os.open(os.devnull, os.O_RDONLY) for _ in range(1_100)]
    worker = ProtocProcess()  # a worker of its own: its pipes are opened now, past 1,024
    try:
        compiled = worker.compile('syntax = "proto3"; message M { int32 a = 1; }', [])
        assert compiled
    finally:
        worker._stop()
        for descriptor in held:
            os.close(descriptor)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
