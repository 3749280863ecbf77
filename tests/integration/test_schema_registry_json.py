"""The registry's JSON type (JSON Schema): parsed and checked by the `jsonschema`
package, compatibility by Ottla's own rules (schema_registry/compatibility.py),
raw HTTP and confluent-kafka's JSONSerializer/JSONDeserializer through the broker.

Break-and-see-it-fail: with the `required` rule of `_json_reads` removed,
test_json_compatibility[required property added] failed; with JSON parsed as an
unknown type, every test here but the invalid-schema ones failed.
"""

from __future__ import annotations

import json
import uuid

import pytest
from confluent_kafka import Producer
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from ottla.testing import BrokerProcess

from ..clients import consume_values
from ..schema_registry_http import RegistryHttp

CLOSED_V1 = {"type": "object", "additionalProperties": False,
             "properties": {"name": {"type": "string"}, "size": {"type": "integer"}}, "required": ["name"]}
CLOSED_V2 = {**CLOSED_V1, "properties": {**CLOSED_V1["properties"], "color": {"type": "string"}}}


@pytest.fixture
def subject() -> str:
    return f"j-{uuid.uuid4().hex[:10]}-value"


def _register(registry_http: RegistryHttp, subject: str, schema: object) -> tuple[int, dict]:
    return registry_http.register(subject, json.dumps(schema), schemaType="JSON")


def test_json_register_read_and_same_id(registry_http: RegistryHttp, subject: str) -> None:
    schema = {**CLOSED_V1, "title": subject}
    status, answer = _register(registry_http, subject, schema)
    assert status == 200
    assert _register(registry_http, subject, schema) == (200, answer)
    got = registry_http.get(f"/subjects/{subject}/versions/1")[1]
    assert got["schemaType"] == "JSON" and json.loads(got["schema"]) == schema
    assert registry_http.get(f"/schemas/ids/{answer['id']}")[1]["schemaType"] == "JSON"
    # The same text as AVRO is not the same schema (and is no Avro schema either).
    assert registry_http.register(subject + "-avro", json.dumps(schema))[1]["error_code"] == 42201


@pytest.mark.parametrize("schema", ['{"type": 5}', '{"required": "name"}', "[1, 2]", '"a string"', "{nope",
                                    '{"properties": {"a": {"minimum": "ten"}}}'])
def test_invalid_json_schemas(registry_http: RegistryHttp, subject: str, schema: str) -> None:
    status, body = registry_http.register(subject, schema, schemaType="JSON")
    assert (status, body["error_code"]) == (422, 42201), body


@pytest.mark.parametrize("level,old,new,compatible", [
    ("BACKWARD", CLOSED_V1, CLOSED_V2, True),  # an optional property added to a closed model
    ("BACKWARD", CLOSED_V2, CLOSED_V1, False),  # a property removed from a closed model
    ("FORWARD", CLOSED_V2, CLOSED_V1, True),
    ("BACKWARD", CLOSED_V1, {**CLOSED_V2, "required": ["name", "color"]}, False),  # required property added
    ("BACKWARD", {"type": "object", "properties": {"a": {"type": "string"}}},
     {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}}}, False),  # open model
    ("BACKWARD", {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}}},
     {"type": "object", "properties": {"a": {"type": "string"}}}, True),
    ("BACKWARD", {"enum": ["a", "b"]}, {"enum": ["a", "b", "c"]}, True),
    ("BACKWARD", {"enum": ["a", "b"]}, {"enum": ["a"]}, False),
    ("BACKWARD", {"type": "integer"}, {"type": "number"}, True),
    ("BACKWARD", {"type": "number"}, {"type": "integer"}, False),
    ("BACKWARD", {"type": "string", "maxLength": 5}, {"type": "string", "maxLength": 10}, True),
    ("BACKWARD", {"type": "string", "maxLength": 10}, {"type": "string", "maxLength": 5}, False),
    ("FULL", CLOSED_V1, CLOSED_V2, False),
    ("NONE", CLOSED_V2, {"type": "string"}, True),
], ids=["optional added closed", "removed closed", "forward removed", "required property added",
        "added open", "removed open", "enum widened", "enum narrowed", "integer to number", "number to integer",
        "bound loosened", "bound tightened", "full", "none"])
def test_json_compatibility(registry_http: RegistryHttp, subject: str, level: str, old: dict, new: dict,
                            compatible: bool) -> None:
    registry_http.put(f"/config/{subject}", {"compatibility": level})
    assert _register(registry_http, subject, old)[0] == 200
    path = f"/compatibility/subjects/{subject}/versions/latest?verbose=true"
    status, answer = registry_http.post(path, {"schema": json.dumps(new), "schemaType": "JSON"})
    assert status == 200 and answer["is_compatible"] is compatible, answer
    status, body = _register(registry_http, subject, new)
    assert status == (200 if compatible else 409), body


def test_changing_the_type_of_a_subject_is_incompatible(registry_http: RegistryHttp, subject: str) -> None:
    registry_http.register(subject, {"type": "record", "name": "R", "fields": []})
    status, body = _register(registry_http, subject, {"type": "object"})
    assert (status, body["error_code"]) == (409, 409) and "TYPE_CHANGED" in body["message"]


def test_json_serializers_end_to_end(ottla_broker: BrokerProcess, ottla_schema_registry: str,
                                     ottla_topic: str) -> None:
    client = SchemaRegistryClient({"url": ottla_schema_registry})
    context = SerializationContext(ottla_topic, MessageField.VALUE)
    producer = Producer({"bootstrap.servers": ottla_broker.bootstrap})
    first = JSONSerializer(json.dumps(CLOSED_V1), client)({"name": "ada", "size": 3}, context)
    second = JSONSerializer(json.dumps(CLOSED_V2), client)({"name": "bo", "color": "red"}, context)
    producer.produce(ottla_topic, first)
    producer.produce(ottla_topic, second)
    assert producer.flush(30) == 0
    assert client.get_versions(f"{ottla_topic}-value") == [1, 2]
    assert int.from_bytes(second[1:5], "big") == client.get_latest_version(f"{ottla_topic}-value").schema_id
    with pytest.raises(SchemaRegistryError) as refused:
        JSONSerializer(json.dumps({**CLOSED_V2, "required": ["name", "weight"],
                                   "properties": {**CLOSED_V2["properties"], "weight": {"type": "number"}}}),
                       SchemaRegistryClient({"url": ottla_schema_registry}))({"name": "x", "weight": 1}, context)
    assert (refused.value.http_status_code, refused.value.error_code) == (409, 409)
    deserialize = JSONDeserializer(None, schema_registry_client=SchemaRegistryClient({"url": ottla_schema_registry}))
    values = [deserialize(value, context) for value in consume_values(ottla_broker.bootstrap, ottla_topic, 2)]
    assert values == [{"name": "ada", "size": 3}, {"name": "bo", "color": "red"}]
