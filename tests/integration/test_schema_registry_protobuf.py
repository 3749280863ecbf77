"""The registry's PROTOBUF type: .proto text compiled by protoc (grpcio-tools), the
canonical text written back from the descriptor, references as imports, the
`?format=serialized` descriptors confluent-kafka's deserializer asks for, Ottla's
Protobuf compatibility rules; raw HTTP and confluent-kafka's ProtobufSerializer /
ProtobufDeserializer end to end through the broker.

Break-and-see-it-fail: with `format=serialized` ignored (the text answered),
test_protobuf_serializers_end_to_end failed in ProtobufDeserializer (it could not parse
the schema); with `render` dropping field labels ("repeated "), test_text_and_descriptor
_get_the_same_id failed (the descriptor sent back differed); with FIELD_SCALAR_KIND_CHANGED
never reported, test_protobuf_compatibility[int64 to string] and the 409 of the end-to-end
test failed; with references named google/protobuf/... refused (as they first were),
test_well_known_types_registered_as_references failed; with protoc run in the broker's
process (protoc.py's worker bypassed), test_deep_huge_and_cyclic_protobuf killed the
broker (a segmentation fault) and failed; without compile_schema's comparison of the
descriptor sent with the one compiled back, test_invalid_protobuf_schemas[descriptor
injecting text] failed (registered as two fields).
"""

from __future__ import annotations

import base64
import json
import os
import tempfile
import threading
import time
import uuid

import grpc_tools
import pytest
from confluent_kafka import Producer
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, timestamp_pb2
from grpc_tools import _protoc_compiler

from ottla.testing import BrokerProcess

from ..clients import consume_values
from ..schema_registry_http import RegistryHttp, registry_over_copied_schemas
from ..wire import WireClient, request

COMMON = """syntax = "proto3";
package ottla.common;

message Money {
  int64 units = 1;
  string currency = 2;
}
"""

ORDER_V1 = """syntax = "proto3";
package ottla.orders;
import "google/protobuf/timestamp.proto";
import "ottla/common.proto";

message Order {
  int64 id = 1;
  string customer = 2;
  ottla.common.Money total = 3;
  google.protobuf.Timestamp at = 4;
  repeated string tags = 5;
}
"""
ORDER_V2 = ORDER_V1.replace("repeated string tags = 5;", "repeated string tags = 5;\n  map<string, int32> counts = 6;")
ORDER_BROKEN = ORDER_V1.replace("int64 id = 1;", "string id = 1;")


def _compile(files: dict[str, str], main: str) -> list[descriptor_pb2.FileDescriptorProto]:
    """The FileDescriptorProtos protoc makes of `files` (path -> text): what a build's
    generated code would carry."""
    with tempfile.TemporaryDirectory() as folder:
        for name, text in files.items():
            os.makedirs(os.path.dirname(os.path.join(folder, name)), exist_ok=True)
            with open(os.path.join(folder, name), "w") as out:
                out.write(text)
        well_known = os.path.join(os.path.dirname(grpc_tools.__file__), "_proto")
        out_path = os.path.join(folder, "set.pb")
        assert _protoc_compiler.run_main([b"protoc", f"-I{folder}".encode(), f"-I{well_known}".encode(),
                                          f"--descriptor_set_out={out_path}".encode(), b"--include_imports",
                                          main.encode()]) == 0
        found = descriptor_pb2.FileDescriptorSet()
        with open(out_path, "rb") as source:
            found.ParseFromString(source.read())
    return list(found.file)


def _message_class(order_text: str) -> type:
    """A generated message class for ottla.orders.Order, made at test time."""
    pool = descriptor_pool.DescriptorPool()
    pool.AddSerializedFile(timestamp_pb2.DESCRIPTOR.serialized_pb)
    for file in _compile({"ottla/common.proto": COMMON, "ottla/orders.proto": order_text}, "ottla/orders.proto"):
        if not file.name.startswith("google/"):
            pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("ottla.orders.Order"))


@pytest.fixture
def subject() -> str:
    return f"p-{uuid.uuid4().hex[:10]}-value"


def _own(text: str, subject: str) -> str:
    """`text` in a package of the test's own: ids are global."""
    return text.replace("package ottla.orders;", f"package ns_{subject.replace('-', '_')};")


def _register(registry_http: RegistryHttp, subject: str, text: str, **extra: object) -> tuple[int, dict]:
    return registry_http.register(subject, text, schemaType="PROTOBUF", **extra)


def test_types_list_protobuf(registry_http: RegistryHttp) -> None:
    assert registry_http.get("/schemas/types") == (200, ["JSON", "PROTOBUF", "AVRO"])


def test_text_and_descriptor_get_the_same_id(registry_http: RegistryHttp, subject: str) -> None:
    """The same file as text, as canonical text, and as a base64 FileDescriptorProto (what
    the Python serializer sends) is one schema, one id; `format=serialized` gives back a
    descriptor that protobuf's runtime loads with the same messages."""
    common_subject = f"{subject}-common"
    assert _register(registry_http, common_subject, COMMON)[0] == 200
    references = [{"name": "ottla/common.proto", "subject": common_subject, "version": 1}]
    text = _own(ORDER_V1, subject)
    status, answer = _register(registry_http, subject, text, references=references)
    assert status == 200, answer
    schema_id = answer["id"]
    stored = registry_http.get(f"/schemas/ids/{schema_id}")[1]
    assert stored["schemaType"] == "PROTOBUF" and stored["references"] == references
    canonical = stored["schema"]
    assert "message Order {" in canonical and "repeated string tags = 5;" in canonical
    assert _register(registry_http, subject, canonical, references=references) == (200, {"id": schema_id})
    files = _compile({"ottla/common.proto": COMMON, "ottla/orders.proto": text}, "ottla/orders.proto")
    descriptor = base64.b64encode(files[-1].SerializeToString()).decode()
    assert _register(registry_http, subject, descriptor, references=references) == (200, {"id": schema_id})
    assert registry_http.get(f"/subjects/{subject}/versions") == (200, [1])
    serialized = registry_http.get(f"/schemas/ids/{schema_id}?format=serialized")[1]["schema"]
    loaded = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(serialized))
    assert [m.name for m in loaded.message_type] == ["Order"]
    assert [(f.name, f.number) for f in loaded.message_type[0].field] == \
        [(f.name, f.number) for f in files[-1].message_type[0].field]
    version = registry_http.get(f"/subjects/{subject}/versions/1?format=serialized")[1]
    assert version["schema"] == serialized
    # AVRO and JSON ignore the format.
    assert registry_http.get(f"/subjects/{common_subject}/versions/1?format=serialized")[1]["schema"] != COMMON


def _descriptor_with_a_field_named(name: str) -> str:
    file = descriptor_pb2.FileDescriptorProto(name="odd.proto", syntax="proto3")
    message = file.message_type.add(name="Odd")
    message.field.add(name=name, number=2, type=descriptor_pb2.FieldDescriptorProto.TYPE_INT32,
                      label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL)
    return base64.b64encode(file.SerializeToString()).decode()


@pytest.mark.parametrize("schema", [
    'syntax = "proto3"; message A { int32 a = 1; int32 b = 1; }',  # a field number used twice
    'syntax = "proto3"; message A { Missing m = 1; }',  # an unknown type
    'syntax = "proto3"; message {',  # a syntax error
    'syntax = "proto3"; import "not/registered.proto"; message A { int32 a = 1; }',  # an import with no reference
    'syntax = "proto4"; message A {}',
    "AAAAAAAA",  # base64, but no FileDescriptorProto
    'edition = "2023"; message A { int32 a = 1; }',  # editions: not supported
    _descriptor_with_a_field_named("a = 1; int32 b"),  # a descriptor whose text would say two fields
], ids=["number twice", "unknown type", "syntax error", "unreferenced import", "proto4", "bad descriptor",
        "editions", "descriptor injecting text"])
def test_invalid_protobuf_schemas(registry_http: RegistryHttp, subject: str, schema: str) -> None:
    status, body = _register(registry_http, subject, schema)
    assert (status, body["error_code"]) == (422, 42201), body
    assert registry_http.get(f"/subjects/{subject}/versions")[0] == 404


def test_proto2_groups_defaults_and_extensions(registry_http: RegistryHttp, subject: str) -> None:
    text = f"""syntax = "proto2";
package ns_{subject.replace("-", "_")};
message Legacy {{
  required string name = 1 [default = "none"];
  optional group Details = 2 {{ optional int32 size = 3 [default = 7]; }}
  extensions 100 to 199;
}}
extend Legacy {{ optional bytes blob = 100; }}
"""
    status, answer = _register(registry_http, subject, text)
    assert status == 200, answer
    canonical = registry_http.get(f"/schemas/ids/{answer['id']}")[1]["schema"]
    assert 'required string name = 1 [default = "none"];' in canonical
    assert "optional group Details = 2 {" in canonical and "extensions 100 to 199;" in canonical
    assert _register(registry_http, subject, canonical) == (200, answer)


def test_deep_huge_and_cyclic_protobuf(registry_http: RegistryHttp, ottla_broker: BrokerProcess, subject: str) -> None:
    """Messages nested past protoc's limit, an option nested past its stack, text that is
    not UTF-8: 42201; 3,000 fields: registered and read back whole; references in a cycle
    (below); and the registry and broker serve on."""
    deep = 'syntax = "proto3"; ' + "message M { " * 3000 + "}" * 3000
    status, body = _register(registry_http, subject, deep)
    assert (status, body["error_code"]) == (422, 42201) and "recursion" in body["message"]
    # An option value nested past protoc's stack: it kills the compiler's process (not the
    # broker's), and the next schema gets a new one.
    crash = ('syntax = "proto2"; import "google/protobuf/descriptor.proto"; message O { optional O o = 1; } '
             'extend google.protobuf.MessageOptions { optional O opt = 50000; } message M { option (opt) = '
             + "{ o " * 200000 + "}" * 200000 + "; }")
    status, body = _register(registry_http, subject, crash)
    assert (status, body["error_code"]) == (422, 42201) and "protoc stopped" in body["message"]
    status, body = _register(registry_http, subject,
                             'syntax = "proto3"; message A { int32 a = 1 [default = "\udcff"]; }')
    assert (status, body["error_code"]) == (422, 42201), body
    wide = 'syntax = "proto3"; package ns_wide_%s; message Wide { %s }' % (
        subject.replace("-", "_"), " ".join(f"string field_{i} = {i};" for i in range(1, 3001)))
    status, answer = _register(registry_http, subject, wide)
    assert status == 200, answer
    assert registry_http.get(f"/schemas/ids/{answer['id']}")[1]["schema"].count(" = ") == 3001  # syntax + 3000 fields
    assert _register(registry_http, subject + "-ok", 'syntax = "proto3"; package ns_ok; message Ok {}')[0] == 200
    producer = Producer({"bootstrap.servers": ottla_broker.bootstrap})
    producer.produce("still-serving", b"x")
    assert producer.flush(30) == 0


def test_cyclic_protobuf_references_of_a_copied_schemas(tmp_path) -> None:
    """A cycle cannot be registered, but a copy of another registry's `_schemas` may
    hold one: two versions importing each other (produced while the registry was off;
    with it on, clients may not write `_schemas`). A schema importing them is 42201."""
    records = []
    for name, other in (("a", "b"), ("b", "a")):
        key = {"keytype": "SCHEMA", "subject": name, "version": 1, "magic": 1}
        value = {"subject": name, "version": 1, "id": 800000 + (name == "b"), "schemaType": "PROTOBUF",
                 "references": [{"name": f"{other}.proto", "subject": other, "version": 1}],
                 "schema": f'syntax = "proto3"; import "{other}.proto"; message {name.upper()} {{}}',
                 "deleted": False}
        records.append((json.dumps(key).encode(), json.dumps(value).encode()))
    broker, errors = registry_over_copied_schemas(str(tmp_path / "data"), records)
    try:
        assert errors == [None, None]
        http = RegistryHttp(broker.schema_registry_url)
        status, body = _register(http, "top", 'syntax = "proto3"; import "a.proto"; message T {}',
                                 references=[{"name": "a.proto", "subject": "a", "version": 1}])
        assert (status, body["error_code"]) == (422, 42201) and "cycle" in body["message"], body
        assert _register(http, "ok", 'syntax = "proto3"; package ns_ok; message Ok {}')[0] == 200
    finally:
        broker.stop()
        broker.cleanup()


BASE = """syntax = "proto3";
package PKG;
message Event {
  int64 id = 1;
  string name = 2;
  Kind kind = 3;
  oneof target { string user = 4; string group = 5; }
  int32 size = 6;
  int32 weight = 7;
}
message Kind { string label = 1; }
message Extra { int32 x = 1; }
"""


@pytest.mark.parametrize("level,change,compatible", [
    ("BACKWARD", ("  int32 weight = 7;", "  int32 weight = 7;\n  string added = 8;"), True),  # field added
    ("BACKWARD", ("  string name = 2;\n", ""), True),  # field removed
    ("BACKWARD", ("int64 id = 1;", "uint64 id = 1;"), True),  # the same wire group
    ("BACKWARD", ("string name = 2;", "bytes name = 2;"), True),
    ("BACKWARD", ("int64 id = 1;", "string id = 1;"), False),  # scalar out of its group
    ("BACKWARD", ("int64 id = 1;", "Kind id = 1;"), False),  # scalar to message
    ("BACKWARD", ("Kind kind = 3;", "Event kind = 3;"), False),  # another named type
    ("BACKWARD", ("message Extra { int32 x = 1; }", ""), False),  # a message removed
    ("BACKWARD", ("_value;", "_value.v2;"), True),  # the package changed: names within it compared
    ("BACKWARD", (" oneof target { string user = 4; string group = 5; }", ""), True),  # a whole oneof removed
    ("BACKWARD", (" string group = 5; ", " "), False),  # a field removed from a oneof
    ("BACKWARD", ("  int32 size = 6;\n  int32 weight = 7;",
                  "  oneof dims { int32 size = 6; int32 weight = 7; }"), False),  # fields moved to a oneof
    ("FORWARD", ("  int32 weight = 7;", "  int32 weight = 7;\n  string added = 8;"), True),
    ("FULL", ("int64 id = 1;", "string id = 1;"), False),
    ("NONE", ("int64 id = 1;", "string id = 1;"), True),
], ids=["field added", "field removed", "int64 to uint64", "string to bytes", "int64 to string",
        "scalar to message", "named type", "message removed", "package", "oneof removed", "oneof field removed",
        "moved to oneof", "forward added", "full", "none"])
def test_protobuf_compatibility(registry_http: RegistryHttp, subject: str, level: str, change: tuple[str, str],
                                compatible: bool) -> None:
    old = BASE.replace("PKG", "ns_" + subject.replace("-", "_"))
    new = old.replace(*change)
    assert new != old
    registry_http.put(f"/config/{subject}", {"compatibility": level})
    assert _register(registry_http, subject, old)[0] == 200
    status, answer = registry_http.post(f"/compatibility/subjects/{subject}/versions/latest?verbose=true",
                               {"schema": new, "schemaType": "PROTOBUF"})
    assert status == 200 and answer["is_compatible"] is compatible, answer
    status, body = _register(registry_http, subject, new)
    assert status == (200 if compatible else 409), body


def test_protobuf_serializers_end_to_end(ottla_broker: BrokerProcess, ottla_schema_registry: str,
                                         ottla_topic: str) -> None:
    """ProtobufSerializer registers ottla/common.proto as a reference (google/protobuf is
    known, skipped) and the Order schema, v1 then an evolved v2; ProtobufDeserializer
    fetches each record's writer schema (`format=serialized`) and its reference; a
    changed field type is refused with the 409 the client reports."""
    client = SchemaRegistryClient({"url": ottla_schema_registry})
    context = SerializationContext(ottla_topic, MessageField.VALUE)
    order_v1, order_v2 = _message_class(ORDER_V1), _message_class(ORDER_V2)
    first = order_v1(id=7, customer="ada", tags=["a", "b"])
    first.total.units, first.total.currency = 12, "EUR"
    first.at.seconds = 1700000000
    second = order_v2(id=8, customer="grace", counts={"x": 3})
    producer = Producer({"bootstrap.servers": ottla_broker.bootstrap})
    serialized_first = ProtobufSerializer(order_v1, client)(first, context)
    serialized_second = ProtobufSerializer(order_v2, SchemaRegistryClient({"url": ottla_schema_registry}))(
        second, context)
    producer.produce(ottla_topic, serialized_first)
    producer.produce(ottla_topic, serialized_second)
    assert producer.flush(30) == 0
    subject = f"{ottla_topic}-value"
    assert client.get_versions(subject) == [1, 2]
    assert client.get_versions("ottla/common.proto") == [1]
    latest = client.get_latest_version(subject)
    assert latest.schema.schema_type == "PROTOBUF"
    assert [r.name for r in latest.schema.references] == ["ottla/common.proto"]
    assert int.from_bytes(serialized_second[1:5], "big") == latest.schema_id
    order_broken = _message_class(ORDER_BROKEN)
    with pytest.raises(SchemaRegistryError) as refused:
        ProtobufSerializer(order_broken, SchemaRegistryClient({"url": ottla_schema_registry}))(
            order_broken(id="x"), context)
    assert (refused.value.http_status_code, refused.value.error_code) == (409, 409)
    assert "FIELD_SCALAR_KIND_CHANGED" in refused.value.error_message
    deserialize = ProtobufDeserializer(order_v2, {}, SchemaRegistryClient({"url": ottla_schema_registry}))
    values = [deserialize(value, context) for value in consume_values(ottla_broker.bootstrap, ottla_topic, 2)]
    assert [(v.id, v.customer, list(v.tags), v.total.units, v.at.seconds, dict(v.counts)) for v in values] == \
        [(7, "ada", ["a", "b"], 12, 1700000000, {}), (8, "grace", [], 0, 0, {"x": 3})]


def test_well_known_types_registered_as_references(ottla_broker: BrokerProcess, ottla_schema_registry: str,
                                                   ottla_topic: str) -> None:
    """With `skip.known.types=False` the serializer registers google/protobuf/timestamp.proto
    as a subject of its own and references it; the registry takes the reference (compiling
    with protoc's own copy of the file) and the deserializer reads the record back."""
    client = SchemaRegistryClient({"url": ottla_schema_registry})
    context = SerializationContext(ottla_topic, MessageField.VALUE)
    order = _message_class(ORDER_V1)
    value = order(id=1, customer="kt")
    value.at.seconds = 42
    data = ProtobufSerializer(order, client, {"skip.known.types": False})(value, context)
    latest = client.get_latest_version(f"{ottla_topic}-value")
    assert sorted(r.name for r in latest.schema.references) == ["google/protobuf/timestamp.proto",
                                                                 "ottla/common.proto"]
    read = ProtobufDeserializer(order, {}, SchemaRegistryClient({"url": ottla_schema_registry}))(data, context)
    assert (read.id, read.customer, read.at.seconds) == (1, "kt", 42)


def _protoc_worker_ticks(broker: BrokerProcess) -> int | None:
    """The CPU ticks the broker's protoc worker has used, None while it has none."""
    assert broker.process is not None
    pid = broker.process.pid
    for task in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{task}/children") as listing:
            for child in listing.read().split():
                try:
                    with open(f"/proc/{child}/cmdline", "rb") as cmdline:
                        if b"schema_registry.protoc" not in cmdline.read():
                            continue
                    with open(f"/proc/{child}/stat") as stat:
                        fields = stat.read().rsplit(")", 1)[1].split()
                except FileNotFoundError:
                    continue
                return int(fields[11]) + int(fields[12])  # utime + stime
    return None


def _wait_for_protoc_at_work(broker: BrokerProcess, idle: int | None) -> None:
    """Until the protoc worker (started for this request, or idle at `idle` ticks before
    it) has used CPU since: the schema reached the registry and is being compiled."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        ticks = _protoc_worker_ticks(broker)
        if ticks is not None and (idle is None or ticks > idle):
            return
        time.sleep(0.01)
    raise AssertionError("the protoc worker never started on the schema")


def test_a_schema_slow_to_compile_holds_no_kafka_client(registry_http: RegistryHttp, ottla_broker: BrokerProcess,
                                                        subject: str) -> None:
    """A PROTOBUF schema of 40,000 messages keeps protoc busy for a second or more. The
    registry's handlers run on the broker's event loop, but what they parse is parsed in a
    worker thread first (SchemaRegistry.prepare): a Kafka client's ApiVersions sent once
    the protoc worker is seen at work is answered while it still works. No delay is
    guessed and no time is asserted: the worker's CPU ticks say when it works.
    Break-and-see-it-fail: with the prepare call in rest.py removed, the ApiVersions was
    answered only after the compile, with the worker idle again."""
    big = f'syntax = "proto3"; package ns_big_{subject.replace("-", "_")}; ' + " ".join(
        f"message M{i} {{ int32 a = 1; string b = 2; }}" for i in range(40_000))
    outcome: list[tuple[int, dict]] = []
    registering = threading.Thread(target=lambda: outcome.append(_register(registry_http, subject, big)))
    with WireClient(ottla_broker.bootstrap) as client:
        client.call(request(18, 3, client_software_name="t", client_software_version="1"))  # connected
        idle = _protoc_worker_ticks(ottla_broker)
        registering.start()
        _wait_for_protoc_at_work(ottla_broker, idle)
        client.call(request(18, 3, client_software_name="t", client_software_version="1"))
        answered_at = _protoc_worker_ticks(ottla_broker)
        time.sleep(0.2)
        still_at_work = _protoc_worker_ticks(ottla_broker) != answered_at
    registering.join(120)
    assert outcome and outcome[0][0] == 200, outcome
    assert still_at_work, "the ApiVersions was answered only once protoc had finished"
