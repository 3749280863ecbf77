"""The console's Messages page decodes records in Confluent's wire format with the built-in
registry's schema: records produced through a real broker by confluent-kafka's
AvroSerializer, JSONSerializer and ProtobufSerializer are shown as their values; a
garbage payload, an unknown id or a payload over the bound is shown raw with a note,
never as an error page. (Who may read which schema: test_schema_registry_security.py.)

Break-and-see-it-fail: with `_decoder` in pages/messages.py returning None (no
decoding), test_records_of_the_three_types_are_shown_decoded failed; with DecodeFailed
and the catch-all left out of SchemaDecoder.decode's except clauses, test_garbage_unknown
_ids_and_big_payloads_show_raw_bytes_with_a_note failed with a 500 page.
"""

from __future__ import annotations

import html
import json
import urllib.request
import uuid

from confluent_kafka import Producer
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from ottla.schema_registry.protobuf import compile_files
from ottla.testing import BrokerProcess

USER = {"type": "record", "name": "User", "namespace": "ottla.console",
        "fields": [{"name": "name", "type": "string"}, {"name": "favorite", "type": "long"},
                   {"name": "tags", "type": {"type": "array", "items": "string"}},
                   {"name": "email", "type": ["null", "string"], "default": None}]}
JSON_SCHEMA = {"type": "object", "properties": {"sku": {"type": "string"}, "qty": {"type": "integer"}}}
PROTO = """syntax = "proto3";
package ottla.console;
message Reading {
  string sensor = 1;
  double celsius = 2;
  message Inner { int32 level = 1; }
  Inner inner = 3;
}
"""


def _page(broker: BrokerProcess, topic: str, fmt: str = "auto") -> str:
    url = f"{broker.admin_url}/console/messages?topic={topic}&partition=0&format={fmt}"
    with urllib.request.urlopen(url, timeout=30) as response:
        assert response.status == 200
        return html.unescape(response.read().decode())


def _produce(broker: BrokerProcess, topic: str, *values: bytes) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for value in values:
        producer.produce(topic, value, key=b"k")
    assert producer.flush(30) == 0


def _reading_class() -> type:
    compiled = compile_files(PROTO, [])
    pool = descriptor_pool.DescriptorPool()
    file = descriptor_pb2.FileDescriptorProto()
    file.CopyFrom(compiled.file)
    file.name = "ottla/console/reading.proto"
    pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("ottla.console.Reading"))


def test_records_of_the_three_types_are_shown_decoded(ottla_broker: BrokerProcess, ottla_schema_registry: str,
                                                      ottla_topic: str) -> None:
    client = SchemaRegistryClient({"url": ottla_schema_registry})
    avro_value = AvroSerializer(client, json.dumps(USER))(
        {"name": "ada <b>lovelace</b>", "favorite": 7, "tags": ["x", "y"], "email": None},
        SerializationContext(ottla_topic, MessageField.VALUE))
    _produce(ottla_broker, ottla_topic, avro_value)
    page = _page(ottla_broker, ottla_topic)
    schema_id = client.get_latest_version(f"{ottla_topic}-value").schema_id
    assert f"AVRO, schema id {schema_id} ({ottla_topic}-value v1)" in page
    assert '"name": "ada <b>lovelace</b>"' in page and '"favorite": 7' in page and '"email": null' in page
    # Escaped, never markup: the unescaped page has the text, the raw page does not have the tag.
    with urllib.request.urlopen(f"{ottla_broker.admin_url}/console/messages?topic={ottla_topic}&partition=0",
                                timeout=30) as response:
        assert "<b>lovelace</b>" not in response.read().decode()
    # In hex the page shows the bytes as they are.
    assert "AVRO, schema id" not in _page(ottla_broker, ottla_topic, "hex")

    json_topic = ottla_broker.create_topic(f"console-json-{uuid.uuid4().hex[:8]}", 1)
    json_value = JSONSerializer(json.dumps(JSON_SCHEMA), client)(
        {"sku": "A-1", "qty": 3}, SerializationContext(json_topic, MessageField.VALUE))
    _produce(ottla_broker, json_topic, json_value)
    page = _page(ottla_broker, json_topic)
    assert f"JSON, schema id {int.from_bytes(json_value[1:5], 'big')} ({json_topic}-value v1)" in page
    assert '"sku": "A-1"' in page and '"qty": 3' in page

    proto_topic = ottla_broker.create_topic(f"console-proto-{uuid.uuid4().hex[:8]}", 1)
    reading = _reading_class()
    context = SerializationContext(proto_topic, MessageField.VALUE)
    serializer = ProtobufSerializer(reading, client)
    first = reading(sensor="s1", celsius=21.5)
    first.inner.level = 4
    # A nested message is named by its indexes after the id ([0, 0]: Reading.Inner).
    inner = message_factory.GetMessageClass(reading.DESCRIPTOR.nested_types_by_name["Inner"])
    inner_value = ProtobufSerializer(inner, SchemaRegistryClient({"url": ottla_schema_registry}))(
        inner(level=99), context)
    _produce(ottla_broker, proto_topic, serializer(first, context), inner_value)
    page = _page(ottla_broker, proto_topic)
    assert f"PROTOBUF, schema id {client.get_latest_version(f'{proto_topic}-value').schema_id}" in page
    assert '"sensor": "s1"' in page and '"celsius": 21.5' in page and '"level": 4' in page
    assert '"level": 99' in page and page.count("PROTOBUF, schema id") == 2


def test_garbage_unknown_ids_and_big_payloads_show_raw_bytes_with_a_note(
        ottla_broker: BrokerProcess, ottla_schema_registry: str, ottla_topic: str) -> None:
    client = SchemaRegistryClient({"url": ottla_schema_registry})
    good = AvroSerializer(client, json.dumps(USER))(
        {"name": "ok", "favorite": 1, "tags": [], "email": "e@x"},
        SerializationContext(ottla_topic, MessageField.VALUE))
    header = good[:5]
    _produce(ottla_broker, ottla_topic,
             header + b"\xff\xff\xff",  # a string length past the end
             header + b"\x00\x02\x81\x80\x80\x80\x10\x00",  # an array block claiming 2^31 items
             header + good[5:] + b"trailing",
             b"\x00\x7f\xff\xff\xf0garbage",  # an id the registry does not have
             header + b"\x00" * (70 * 1024),  # over the decoder's bound
             good)
    page = _page(ottla_broker, ottla_topic)
    assert page.count("not decodable with it") == 3
    assert "a length of" in page and "a block of 2,147,483,649 items" in page and "bytes left after the value" in page
    assert f"magic byte 0 and schema id {0x7ffffff0}: the schema registry has no such schema" in page
    assert "payload over 65,536 bytes is not decoded" in page
    assert "ff ff ff" in page  # the raw bytes beside the note
    assert '"email": "e@x"' in page  # the good record after them, decoded
