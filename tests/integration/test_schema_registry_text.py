"""A schema's text, as the registry answers it, is what Confluent's registry answers: for
AVRO, what Apache Avro's Java library prints for it (Schema.toString()); for JSON, the
document as Jackson writes it back (JsonSchema.canonicalString()). Each schema below is
registered with Ottla's registry and printed by org.apache.avro:avro 1.12.1 or its
Jackson (tests/java/SchemaText.java; `make avro` copies the jars), and the two texts must
be equal. AVRO: records, errors, enums, fixed, arrays, maps, unions, logical types,
defaults of every type, docs, aliases, orders, properties and namespaces nested every way.
JSON: non-ASCII text, escapes, nesting, key order as written."""

from __future__ import annotations

import json
import os
import subprocess
import uuid

import pytest

from tests.reference.kafka import java
from tests.schema_registry_http import RegistryHttp

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
AVRO_LIBS = os.path.join(ROOT, ".cache", "avro", "libs")
PRINTER = os.path.join(ROOT, "tests", "java", "SchemaText.java")

ORDER = {"type": "record", "name": "Order", "fields": [{"name": "id", "type": "long"}]}
SCHEMAS = [
    ORDER,
    "long",
    {"type": "string"},
    {"type": "long", "logicalType": "timestamp-millis"},
    {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2},
    {"type": "int", "logicalType": "date", "x-custom": 1, "doc": "a primitive's doc is not kept"},
    {"type": "array", "items": "string"},
    {"type": "map", "values": {"type": "array", "items": "int"}},
    ["null", "string", {"type": "fixed", "name": "F", "size": 4}],
    {"type": "enum", "name": "Suit", "namespace": "cards", "doc": "a suit", "symbols": ["S", "H"], "default": "S",
     "aliases": ["Colour", "old.Suit"], "x": "y"},
    {"type": "fixed", "name": "MD5", "namespace": "h", "size": 16, "aliases": ["Hash"], "doc": "d", "p": True},
    {"name": "R", "namespace": "ns", "type": "record", "doc": "rec doc", "aliases": ["Old", "x.Older"],
     "prop": {"a": [1, 2]}, "fields": [
         {"type": "string", "name": "s", "doc": "field doc", "default": "x", "order": "descending", "aliases": ["ss"],
          "fprop": 3},
         {"name": "d", "type": "double", "default": 1},
         {"name": "f", "type": "float", "default": 1.5},
         {"name": "n", "type": ["null", "int"], "default": None},
         {"name": "b", "type": "boolean", "default": True},
         {"name": "by", "type": "bytes", "default": "\u00ff"},
         {"name": "a", "type": {"type": "array", "items": "long"}, "default": [1, 2]},
         {"name": "m", "type": {"type": "map", "values": "string"}, "default": {"k": "v"}},
         {"name": "inner", "type": {"type": "record", "name": "Inner", "fields": [{"name": "x", "type": "int"}]}},
         {"name": "inner2", "type": "Inner"},
         {"name": "other", "type": {"type": "record", "name": "O", "namespace": "other.ns", "fields": [
             {"name": "r", "type": "ns.Inner"}, {"name": "self", "type": ["null", "O"]}]}},
         {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["A", "B"]}, "default": "A"},
         {"name": "fx", "type": {"type": "fixed", "name": "Fx", "size": 2}},
         {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-micros"}},
         {"name": "u", "type": {"type": "string", "logicalType": "uuid"}},
         {"name": "ign", "type": "int", "order": "ignore"},
         {"name": "asc", "type": "int", "order": "ascending"},
     ]},
    {"type": "error", "name": "Err", "fields": [{"name": "msg", "type": "string"}]},
    {"type": "record", "name": "a.b.C", "fields": [
        {"name": "x", "type": {"type": "record", "name": "D", "fields": []}}, {"name": "y", "type": "a.b.D"}]},
    {"type": "record", "name": "N", "namespace": "", "fields": [
        {"name": "x", "type": {"type": "record", "name": "q.M", "fields": [
            {"name": "z", "type": {"type": "record", "name": "Z", "fields": []}}]}}]},
    {"type": "record", "name": "Top", "namespace": "t", "fields": [
        {"name": "g", "type": {"type": "record", "name": "G", "namespace": "", "fields": []}}]},
    {"type": "record", "name": "Nulls", "namespace": "n", "fields": [
        {"name": "i", "type": {"type": "record", "name": "I", "namespace": None, "fields": []}}]},
    {"type": "fixed", "name": "Money", "namespace": "m", "size": 8, "logicalType": "decimal", "precision": 18,
     "scale": 4},
    {"type": "fixed", "name": "Span", "size": 12, "logicalType": "duration"},
    {"type": "record", "name": "Choice", "namespace": "c", "fields": [
        {"name": "either", "type": ["null", {"type": "record", "name": "A", "namespace": "x.y", "fields": [
            {"name": "e", "type": {"type": "enum", "name": "K", "symbols": ["P"]}}]},
            {"type": "record", "name": "B", "fields": [{"name": "k", "type": "x.y.K"}]}]},
        {"name": "list", "type": {"type": "array", "items": "x.y.A", "doc": "dropped"}, "doc": "kept"}]},
    {"type": "record", "name": "U", "fields": [{"name": "t", "type": "string",
                                                 "doc": "\u00e9\u4e2d \" \\ / \n\t\u0001 \u2028"}]},
    {"type": "record", "name": "L", "fields": [{"name": "next", "type": ["null", "L"], "default": None}]},
    {"type": "record", "name": "Dec", "fields": [
        {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 4, "scale": 2}},
        {"name": "big", "type": "double", "default": 1e20}, {"name": "small", "type": "double", "default": 0.00012},
        {"name": "mid", "type": "double", "default": 12345678.5}, {"name": "neg", "type": "long", "default": -5},
        {"name": "zero", "type": "float", "default": 0.0}]},
    {"type": "map", "values": "long", "extra": None},
    {"type": "array", "items": {"type": "enum", "name": "X", "symbols": []}, "p": [True, None]},
]


JSON_SCHEMAS = [
    {"type": "object", "properties": {"name": {"type": "string", "description": "é, 中, \u2028 and \u0001 / \""}},
     "required": ["name"], "additionalProperties": False},
    {"$schema": "http://json-schema.org/draft-07/schema#", "title": "Ünïcode", "type": "array",
     "items": {"enum": [1, "two", None, True, {"z": [], "a": {}}]}, "maxItems": 12345678901234},
]


def java_texts(schemas: list[object], kind: str = "avro") -> list[str]:
    if not os.path.isdir(AVRO_LIBS):
        pytest.fail(f"Apache Avro's Java jars are not in {AVRO_LIBS}: run `make avro` (`make test` does it first)",
                    pytrace=False)
    lines = "".join(json.dumps(schema, ensure_ascii=False) + "\n" for schema in schemas)
    done = subprocess.run([java(), "-cp", os.path.join(AVRO_LIBS, "*"), PRINTER, kind], input=lines.encode(),
                          capture_output=True, timeout=300)
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    printed = done.stdout.decode().split("\n")[:-1]  # not splitlines: a doc may hold U+2028
    assert len(printed) == len(schemas) and not any(line.startswith("ERROR ") for line in printed), printed
    return printed


def test_the_registry_answers_the_text_avros_java_library_prints(registry_http: RegistryHttp):
    expected = java_texts(SCHEMAS)
    assert expected[0] == '{"type":"record","name":"Order","fields":[{"name":"id","type":"long"}]}'
    for schema, java_text in zip(SCHEMAS, expected, strict=True):
        subject = f"avro-text-{uuid.uuid4().hex[:8]}"
        status, answer = registry_http.register(subject, json.dumps(schema, ensure_ascii=False))
        assert status == 200, answer
        version = registry_http.get(f"/subjects/{subject}/versions/1")[1]
        assert version["schema"] == java_text, schema
        assert registry_http.get(f"/schemas/ids/{answer['id']}")[1]["schema"] == java_text
        # The same schema, as written or as printed, is the same id.
        assert registry_http.register(subject, java_text)[1] == {"id": answer["id"]}
        assert registry_http.register(f"{subject}-again", json.dumps(schema, indent=2))[1] == {"id": answer["id"]}


def test_the_registry_answers_a_json_schema_as_jackson_writes_it(registry_http: RegistryHttp):
    for schema, java_text in zip(JSON_SCHEMAS, java_texts(JSON_SCHEMAS, "json"), strict=True):
        subject = f"json-text-{uuid.uuid4().hex[:8]}"
        status, answer = registry_http.register(subject, json.dumps(schema, indent=1), schemaType="JSON")
        assert status == 200, answer
        assert registry_http.get(f"/subjects/{subject}/versions/1")[1]["schema"] == java_text, schema
        assert registry_http.register(subject, java_text, schemaType="JSON")[1] == {"id": answer["id"]}
