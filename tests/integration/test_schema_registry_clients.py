"""The built-in schema registry with confluent-kafka's own SchemaRegistryClient and its
Avro serializers, end to end through the broker; and the registry's memory, the
`_schemas` topic, across a restart and a kill -9.

Break-and-see-it-fail: with SchemaStore.open not reading the topic (catch_up removed),
test_restart_and_kill_keep_schemas_and_ids failed (the subjects were gone); with the
409's error_code changed to 42201 the client reported 42201 and
test_incompatible_schema_refused_as_the_client_reports failed.
"""

from __future__ import annotations

import json
import uuid

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.serialization import MessageField, SerializationContext

from ottla.testing import BrokerProcess

from ..clients import consume_values
from ..schema_registry_http import RegistryHttp

USER_V1 = {"type": "record", "name": "User", "namespace": "ottla.clients",
           "fields": [{"name": "name", "type": "string"}, {"name": "favorite", "type": "long"}]}
USER_V2 = {**USER_V1, "fields": [*USER_V1["fields"],
                                 {"name": "email", "type": ["null", "string"], "default": None}]}
USER_BROKEN = {**USER_V1, "fields": [{"name": "name", "type": "string"}, {"name": "favorite", "type": "string"}]}


def test_avro_serializers_end_to_end(ottla_broker: BrokerProcess, ottla_schema_registry: str,
                                     ottla_topic: str) -> None:
    """Produce with AvroSerializer (auto-registering v1, then an evolved v2), consume with
    AvroDeserializer, which fetches each record's writer schema by the id in its header."""
    client = SchemaRegistryClient({"url": ottla_schema_registry})
    subject = f"{ottla_topic}-value"
    producer = Producer({"bootstrap.servers": ottla_broker.bootstrap})
    serialize_v1 = AvroSerializer(client, json.dumps(USER_V1))
    serialize_v2 = AvroSerializer(client, json.dumps(USER_V2))
    context = SerializationContext(ottla_topic, MessageField.VALUE)
    first = serialize_v1({"name": "ada", "favorite": 7}, context)
    producer.produce(ottla_topic, first)
    second = serialize_v2({"name": "grace", "favorite": 9, "email": "g@example.org"}, context)
    producer.produce(ottla_topic, second)
    assert producer.flush(30) == 0
    # Confluent's wire format: magic byte 0, then the 4-byte id the registry gave.
    v1 = client.get_version(subject, 1)
    v2 = client.get_latest_version(subject)
    assert v2.version == 2 and v1.schema_id != v2.schema_id
    assert first[0] == 0 and int.from_bytes(first[1:5], "big") == v1.schema_id
    assert int.from_bytes(second[1:5], "big") == v2.schema_id
    deserialize = AvroDeserializer(SchemaRegistryClient({"url": ottla_schema_registry}))
    values = [deserialize(value, context) for value in consume_values(ottla_broker.bootstrap, ottla_topic, 2)]
    assert values == [{"name": "ada", "favorite": 7}, {"name": "grace", "favorite": 9, "email": "g@example.org"}]
    # A reader on v2 reads v1's record too (the evolution is backward compatible).
    reader = AvroDeserializer(SchemaRegistryClient({"url": ottla_schema_registry}), json.dumps(USER_V2))
    assert reader(first, context) == {"name": "ada", "favorite": 7, "email": None}


def test_client_register_lookup_and_config(ottla_schema_registry: str) -> None:
    client = SchemaRegistryClient({"url": ottla_schema_registry})
    subject = f"c-{uuid.uuid4().hex[:8]}"
    schema = Schema(json.dumps({**USER_V1, "namespace": subject.replace("-", "_")}), "AVRO")
    schema_id = client.register_schema(subject, schema)
    assert SchemaRegistryClient({"url": ottla_schema_registry}).register_schema(subject, schema) == schema_id
    found = client.lookup_schema(subject, schema)
    assert (found.schema_id, found.version, found.subject) == (schema_id, 1, subject)
    assert client.get_subjects().count(subject) == 1
    assert client.get_versions(subject) == [1]
    assert client.set_compatibility(subject, "FULL_TRANSITIVE") == {"compatibility": "FULL_TRANSITIVE"}
    assert client.get_compatibility(subject) == "FULL_TRANSITIVE"
    assert client.test_compatibility(subject, schema) is True
    assert client.delete_subject(subject) == [1]
    with pytest.raises(SchemaRegistryError) as missing:
        client.get_latest_version(subject)
    assert (missing.value.http_status_code, missing.value.error_code) == (404, 40401)


def test_incompatible_schema_refused_as_the_client_reports(ottla_broker: BrokerProcess, ottla_schema_registry: str,
                                                           ottla_topic: str) -> None:
    client = SchemaRegistryClient({"url": ottla_schema_registry})
    context = SerializationContext(ottla_topic, MessageField.VALUE)
    AvroSerializer(client, json.dumps(USER_V1))({"name": "ada", "favorite": 1}, context)
    with pytest.raises(SchemaRegistryError) as refused:
        AvroSerializer(SchemaRegistryClient({"url": ottla_schema_registry}),
                       json.dumps(USER_BROKEN))({"name": "ada", "favorite": "x"}, context)
    assert (refused.value.http_status_code, refused.value.error_code) == (409, 409)
    assert "incompatible" in refused.value.error_message
    assert client.get_versions(f"{ottla_topic}-value") == [1]


@pytest.mark.parametrize("stop", ["restart", "kill"])
def test_restart_and_kill_keep_schemas_and_ids(fresh_broker, stop: str) -> None:
    broker = fresh_broker(schema_registry_listeners="http://127.0.0.1:0")
    http = RegistryHttp(broker.schema_registry_url)
    ids = {}
    for i in range(5):
        schema = {"type": "record", "name": f"R{i}", "fields": [{"name": "a", "type": "int"}]}
        ids[f"s{i}"] = http.register(f"s{i}", schema)[1]["id"]
    http.register("s0", {"type": "record", "name": "R0",
                         "fields": [{"name": "a", "type": "int"}, {"name": "b", "type": "int", "default": 0}]})
    http.put("/config/s1", {"compatibility": "NONE"})
    http.put("/mode/s2", {"mode": "READONLY"})
    http.delete("/subjects/s3")
    http.delete("/subjects/s4")
    http.delete("/subjects/s4?permanent=true")
    before = {path: http.get(path) for path in (
        "/subjects", "/subjects?deleted=true", "/subjects/s0/versions", "/subjects/s0/versions/2",
        "/schemas/ids/1", "/schemas/ids/6", "/config/s1", "/mode/s2", "/subjects/s3/versions?deleted=true")}
    if stop == "kill":
        broker.kill()
        broker.start()
    else:
        broker.restart()
    http = RegistryHttp(broker.schema_registry_url)
    assert {path: http.get(path) for path in before} == before
    # Ids stay stable: the same schema gets its old id, a new one the next.
    assert http.register("s1", {"type": "record", "name": "R1", "fields": [{"name": "a", "type": "int"}]}) == \
        (200, {"id": ids["s1"]})
    assert http.register("new", {"type": "record", "name": "N", "fields": []}) == (200, {"id": 7})


def test_schemas_topic_in_confluents_format(fresh_broker) -> None:
    """What the registry writes to `_schemas`, read back by a plain consumer: Confluent's
    keys and values, so a copy of the topic carries the schemas to another registry."""
    broker = fresh_broker(schema_registry_listeners="http://127.0.0.1:0")
    http = RegistryHttp(broker.schema_registry_url)
    schema = {"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}]}
    http.register("s", schema)
    http.put("/config", {"compatibility": "FULL"})
    http.put("/mode/s", {"mode": "READONLY"})
    http.delete("/mode/s")
    http.delete("/subjects/s")
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "reader", "auto.offset.reset": "earliest"})
    consumer.subscribe(["_schemas"])
    records = []
    try:
        for _ in range(600):
            message = consumer.poll(0.5)
            if message is not None and not message.error():
                key = json.loads(message.key())
                records.append((key, None if message.value() is None else json.loads(message.value())))
            if len(records) == 6:
                break
    finally:
        consumer.close()
    text = '{"type":"record","name":"R","fields":[{"name":"a","type":"int"}]}'  # as Avro's Java printer writes it
    assert records == [
        ({"keytype": "SCHEMA", "subject": "s", "version": 1, "magic": 1},
         {"subject": "s", "version": 1, "id": 1, "schema": text, "deleted": False}),
        ({"keytype": "CONFIG", "subject": None, "magic": 0}, {"compatibilityLevel": "FULL"}),
        ({"keytype": "MODE", "subject": "s", "magic": 0}, {"mode": "READONLY"}),
        ({"keytype": "MODE", "subject": "s", "magic": 0}, None),
        ({"keytype": "SCHEMA", "subject": "s", "version": 1, "magic": 1},
         {"subject": "s", "version": 1, "id": 1, "schema": text, "deleted": True}),
        ({"keytype": "DELETE_SUBJECT", "subject": "s", "magic": 0}, {"subject": "s", "version": 1}),
    ]
