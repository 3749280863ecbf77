"""The built-in schema registry's REST API, over raw HTTP, against a real broker: each
endpoint's answer in Confluent's shape, and each error path with Confluent's status,
error_code and nothing else disturbed (the registry and the broker serve on after it).

Break-and-see-it-fail checks made while writing these: registering without looking for
the schema's existing id (always max_id + 1) fails test_same_schema_gets_the_same_id;
checking compatibility against nothing (`check` returning []) fails
test_incompatible_schema_is_refused_with_409; dropping the `deleted` test in
delete_version fails test_version_deletes_soft_then_permanent.
"""

from __future__ import annotations

import json
import uuid

import pytest
from confluent_kafka import Producer

from ottla.testing import BrokerProcess

from ..schema_registry_http import CONTENT_TYPE, RegistryHttp, registry_over_copied_schemas
from ..slow_http import send_part_of_a_body, trickle_headers_while

USER_V1 = {"type": "record", "name": "User", "namespace": "ottla.test",
           "fields": [{"name": "name", "type": "string"}]}
USER_V2 = {**USER_V1, "fields": [*USER_V1["fields"], {"name": "age", "type": "int", "default": 0}]}
USER_NO_DEFAULT = {**USER_V1, "fields": [*USER_V1["fields"], {"name": "email", "type": "string"}]}


@pytest.fixture(scope="module")
def registry_broker(tmp_path_factory: pytest.TempPathFactory):
    process = BrokerProcess(str(tmp_path_factory.mktemp("registry")),
                            {"schema.registry.listeners": "http://127.0.0.1:0", "admin.port": "0"}).start()
    yield process
    process.cleanup()


@pytest.fixture
def http(registry_broker: BrokerProcess) -> RegistryHttp:
    assert registry_broker.schema_registry_url is not None
    return RegistryHttp(registry_broker.schema_registry_url)


@pytest.fixture
def subject() -> str:
    return f"s-{uuid.uuid4().hex[:10]}-value"


def _own(schema: dict, subject: str) -> dict:
    """`schema` in a namespace of the test's own: ids are global, so a schema another test
    registered would come back with that test's id and versions."""
    return {**schema, "namespace": "ns_" + subject.replace("-", "_")}


def _still_serves(http: RegistryHttp, registry_broker: BrokerProcess) -> None:
    """Nothing else disturbed: the registry answers and the broker still takes records."""
    status, subjects = http.get("/subjects")
    assert status == 200 and isinstance(subjects, list)
    producer = Producer({"bootstrap.servers": registry_broker.bootstrap})
    producer.produce("still-serving", b"x")
    assert producer.flush(30) == 0


def test_same_schema_gets_the_same_id(http: RegistryHttp, subject: str) -> None:
    status, first = http.register(subject, USER_V1)
    assert status == 200 and set(first) == {"id"}
    assert http.register(subject, USER_V1) == (200, first)
    # Whitespace and key order are not part of the schema: the canonical text is.
    reordered = json.dumps({"fields": USER_V1["fields"], "namespace": "ottla.test", "name": "User",
                            "type": "record"}, indent=2)
    assert http.register(subject, reordered) == (200, first)
    # Ids are global: the same schema under another subject has the same id.
    assert http.register(subject + "-other", USER_V1) == (200, first)
    assert http.get(f"/subjects/{subject}/versions") == (200, [1])
    status, second = http.register(subject, USER_V2)
    assert status == 200 and second["id"] != first["id"]
    assert http.get(f"/subjects/{subject}/versions") == (200, [1, 2])


def test_reads_by_subject_version_and_id(http: RegistryHttp, subject: str) -> None:
    schema_id = http.register(subject, _own(USER_V1, subject))[1]["id"]
    http.register(subject, _own(USER_V2, subject))
    status, body, content_type = http.call("GET", f"/subjects/{subject}/versions/1")
    assert status == 200 and content_type.startswith(CONTENT_TYPE)
    assert body["subject"] == subject and body["version"] == 1 and body["id"] == schema_id
    assert json.loads(body["schema"]) == {"type": "record", "name": "User", "namespace": _own({}, subject)["namespace"],
                                          "fields": [{"name": "name", "type": "string"}]}
    assert "schemaType" not in body  # AVRO, the default, is left out as Confluent does
    latest = http.get(f"/subjects/{subject}/versions/latest")[1]
    assert latest["version"] == 2 and http.get(f"/subjects/{subject}/versions/-1")[1] == latest
    assert http.get(f"/subjects/{subject}/versions/1/schema") == (200, json.loads(body["schema"]))
    assert http.get(f"/schemas/ids/{schema_id}") == (200, {"schema": body["schema"]})
    assert http.get(f"/schemas/ids/{schema_id}/schema") == (200, json.loads(body["schema"]))
    assert http.get(f"/schemas/ids/{schema_id}/versions") == (200, [{"subject": subject, "version": 1}])
    assert http.get(f"/schemas/ids/{schema_id}/subjects") == (200, [subject])
    status, subjects = http.get("/subjects")
    assert status == 200 and subject in subjects
    assert http.get(f"/subjects?subjectPrefix={subject}") == (200, [subject])
    assert http.get("/schemas/types") == (200, ["JSON", "PROTOBUF", "AVRO"])


def test_lookup(http: RegistryHttp, subject: str) -> None:
    schema_id = http.register(subject, USER_V1)[1]["id"]
    status, found = http.post(f"/subjects/{subject}", {"schema": json.dumps(USER_V1)})
    assert status == 200
    assert (found["subject"], found["version"], found["id"]) == (subject, 1, schema_id)
    assert http.post(f"/subjects/{subject}", {"schema": json.dumps(USER_V2)}) == \
        (404, {"error_code": 40403, "message": "Schema not found"})
    assert http.post("/subjects/no-such-subject", {"schema": json.dumps(USER_V1)}) == \
        (404, {"error_code": 40401, "message": "Subject 'no-such-subject' not found."})


@pytest.mark.parametrize("path,status,code", [
    ("/subjects/no-such-subject/versions", 404, 40401),
    ("/subjects/no-such-subject/versions/1", 404, 40401),
    ("/schemas/ids/987654", 404, 40403),
    ("/schemas/ids/987654/versions", 404, 40403),
    ("/schemas/ids/abc", 404, 40403),
    ("/no/such/route", 404, 404),
])
def test_unknown_things(http: RegistryHttp, registry_broker: BrokerProcess, path: str, status: int,
                        code: int) -> None:
    answer_status, body = http.get(path)
    assert answer_status == status and body["error_code"] == code and set(body) == {"error_code", "message"}
    _still_serves(http, registry_broker)


@pytest.mark.parametrize("version", ["7", "abc", "0", "2147483648"])
def test_unknown_or_invalid_version(http: RegistryHttp, subject: str, version: str) -> None:
    http.register(subject, USER_V1)
    status, body = http.get(f"/subjects/{subject}/versions/{version}")
    if version == "7":
        assert (status, body) == (404, {"error_code": 40402, "message": "Version 7 not found."})
    else:
        assert status == 422 and body["error_code"] == 42202


@pytest.mark.parametrize("raw", [b"{not json", b"", b"[1,2", b"\xff\xfe"])
def test_malformed_json(http: RegistryHttp, registry_broker: BrokerProcess, subject: str, raw: bytes) -> None:
    status, body, _ = http.call("POST", f"/subjects/{subject}/versions", raw=raw)
    assert status == 400 and body["error_code"] == 400
    _still_serves(http, registry_broker)


def test_a_body_that_is_not_json_by_its_content_type_is_refused(http: RegistryHttp, subject: str) -> None:
    """A cross-site form (text/plain) cannot register or delete anything."""
    status, body, _ = http.call("POST", f"/subjects/{subject}/versions", {"schema": json.dumps(USER_V1)},
                                content_type="text/plain")
    assert (status, body["error_code"]) == (415, 415)
    assert http.get(f"/subjects/{subject}/versions")[0] == 404


@pytest.mark.parametrize("schema", [
    '{"type": "nope"}',
    '{"type": "record", "name": "R"}',  # no fields
    '{"type": "record", "name": "1bad", "fields": []}',
    "not json at all",
    '{"type": "enum", "name": "E", "symbols": ["A", "A"]}',
    "42",
])
def test_invalid_schemas(http: RegistryHttp, registry_broker: BrokerProcess, subject: str, schema: str) -> None:
    status, body = http.register(subject, schema)
    assert status == 422 and body["error_code"] == 42201, body
    assert body["message"].startswith("Invalid schema")
    assert http.get(f"/subjects/{subject}/versions")[0] == 404
    _still_serves(http, registry_broker)


def test_a_request_without_a_schema(http: RegistryHttp, subject: str) -> None:
    assert http.post(f"/subjects/{subject}/versions", {"schemaa": "{}"})[1]["error_code"] == 42201
    assert http.post(f"/subjects/{subject}/versions", ["x"])[1]["error_code"] == 422


def test_unknown_schema_type(http: RegistryHttp, subject: str) -> None:
    status, body = http.register(subject, '{"type": "object"}', schemaType="XML")
    assert (status, body["error_code"]) == (422, 42201)


def test_deeply_nested_schema_and_body(http: RegistryHttp, registry_broker: BrokerProcess, subject: str) -> None:
    deep_schema = '{"type": "array", "items": ' * 20000 + '"int"' + "}" * 20000
    status, body = http.register(subject, deep_schema)
    assert (status, body["error_code"]) == (422, 42201)
    deep_body = b'{"schema": ' + b"[" * 100000 + b"]" * 100000 + b"}"
    status, body, _ = http.call("POST", f"/subjects/{subject}/versions", raw=deep_body)
    assert (status, body["error_code"]) == (400, 400)
    _still_serves(http, registry_broker)


def test_huge_schema(http: RegistryHttp, registry_broker: BrokerProcess, subject: str) -> None:
    """A record of 5,000 fields (about 300 KB) registers and reads back whole; a body over
    the registry's limit is refused with Confluent's error shape."""
    wide = {"type": "record", "name": "Wide",
            "fields": [{"name": f"field_{i}", "type": ["null", "string"], "default": None,
                        "doc": "x" * 20} for i in range(5000)]}
    status, answer = http.register(subject, wide)
    assert status == 200
    stored = http.get(f"/schemas/ids/{answer['id']}")[1]["schema"]
    assert len(json.loads(stored)["fields"]) == 5000
    status, body, _ = http.call("POST", f"/subjects/{subject}/versions", raw=b'{"schema": "' + b"x" * (5 << 20)
                                + b'"}')
    assert status == 413 and body["error_code"] == 413
    _still_serves(http, registry_broker)


def test_incompatible_schema_is_refused_with_409(http: RegistryHttp, subject: str) -> None:
    http.register(subject, USER_V1)
    status, body = http.register(subject, USER_NO_DEFAULT)
    assert (status, body["error_code"]) == (409, 409)
    assert body["message"].startswith(
        f'Schema being registered is incompatible with an earlier schema for subject "{subject}"')
    assert "READER_FIELD_MISSING_DEFAULT_VALUE" in body["message"]
    assert http.get(f"/subjects/{subject}/versions") == (200, [1])
    # A compatible evolution passes.
    assert http.register(subject, USER_V2)[0] == 200


def test_compatibility_endpoint(http: RegistryHttp, subject: str) -> None:
    http.register(subject, USER_V1)
    path = f"/compatibility/subjects/{subject}/versions/latest"
    assert http.post(path, {"schema": json.dumps(USER_V2)}) == (200, {"is_compatible": True})
    assert http.post(path, {"schema": json.dumps(USER_NO_DEFAULT)}) == (200, {"is_compatible": False})
    status, verbose = http.post(path + "?verbose=true", {"schema": json.dumps(USER_NO_DEFAULT)})
    assert status == 200 and verbose["is_compatible"] is False
    assert any("READER_FIELD_MISSING_DEFAULT_VALUE" in m for m in verbose["messages"])
    assert http.post(f"/compatibility/subjects/{subject}/versions/9", {"schema": json.dumps(USER_V2)})[1][
        "error_code"] == 40402
    assert http.post("/compatibility/subjects/nothing-here/versions/latest", {"schema": json.dumps(USER_V2)})[1][
        "error_code"] == 40401
    assert http.post(path, {"schema": '{"type": "nope"}'})[1]["error_code"] == 42201


@pytest.mark.parametrize("level,accepted", [
    ("NONE", [USER_NO_DEFAULT]),
    ("FORWARD", [USER_NO_DEFAULT]),  # the old schema reads the new one's data (email ignored)
    ("FULL", [USER_V2]),
])
def test_subject_compatibility_levels(http: RegistryHttp, subject: str, level: str, accepted: list) -> None:
    http.register(subject, USER_V1)
    assert http.put(f"/config/{subject}", {"compatibility": level}) == (200, {"compatibility": level})
    assert http.get(f"/config/{subject}") == (200, {"compatibilityLevel": level})
    for schema in accepted:
        assert http.register(subject, schema)[0] == 200


def test_forward_refuses_a_removed_field_without_default(http: RegistryHttp, subject: str) -> None:
    http.put(f"/config/{subject}", {"compatibility": "FORWARD"})
    http.register(subject, USER_NO_DEFAULT)
    status, body = http.register(subject, USER_V1)  # the old reader needs email, the new writer has none
    assert (status, body["error_code"]) == (409, 409)


def test_transitive_levels_check_every_version(http: RegistryHttp, subject: str) -> None:
    v1 = {"type": "record", "name": "T", "fields": [{"name": "a", "type": "int"}]}
    v2 = {"type": "record", "name": "T", "fields": [{"name": "a", "type": "int", "default": 1}]}
    v3 = {"type": "record", "name": "T", "fields": [{"name": "b", "type": "int", "default": 1}]}
    http.put(f"/config/{subject}", {"compatibility": "FORWARD_TRANSITIVE"})
    assert http.register(subject, v1)[0] == 200
    assert http.register(subject, v2)[0] == 200
    # v2 (the latest) reads v3's data (a has a default), but v1 cannot: refused transitively.
    assert http.register(subject, v3)[0] == 409
    http.put(f"/config/{subject}", {"compatibility": "FORWARD"})
    assert http.register(subject, v3)[0] == 200


def test_global_and_subject_config(http: RegistryHttp, subject: str) -> None:
    assert http.get("/config") == (200, {"compatibilityLevel": "BACKWARD"})
    assert http.get(f"/config/{subject}") == (404, {
        "error_code": 40408, "message": f"Subject '{subject}' does not have subject-level compatibility configured"})
    assert http.get(f"/config/{subject}?defaultToGlobal=true") == (200, {"compatibilityLevel": "BACKWARD"})
    for bad in ({"compatibility": "SIDEWAYS"}, {"compatibility": 3}, {}):
        status, body = http.put("/config", bad)
        assert (status, body["error_code"]) == (422, 42203)
    assert http.put(f"/config/{subject}", {"compatibility": "none", "normalize": True}) == \
        (200, {"compatibility": "NONE", "normalize": True})
    assert http.get(f"/config/{subject}") == (200, {"compatibilityLevel": "NONE", "normalize": True})
    assert http.delete(f"/config/{subject}") == (200, {"compatibilityLevel": "NONE", "normalize": True})
    assert http.get(f"/config/{subject}")[0] == 404
    assert http.get("/config") == (200, {"compatibilityLevel": "BACKWARD"})


def test_normalize_makes_key_order_of_a_field_irrelevant(http: RegistryHttp, subject: str) -> None:
    http.put(f"/config/{subject}", {"compatibility": "BACKWARD", "normalize": True})
    first = http.register(subject, USER_V2)[1]
    same = {**USER_V2, "fields": [{"type": "string", "name": "name"}, {"default": 0, "type": "int", "name": "age"}]}
    assert http.register(subject, same)[1] == first
    assert http.get(f"/subjects/{subject}/versions") == (200, [1])


def test_modes(http: RegistryHttp, subject: str) -> None:
    assert http.get("/mode") == (200, {"mode": "READWRITE"})
    http.register(subject, USER_V1)
    assert http.put(f"/mode/{subject}", {"mode": "READONLY"}) == (200, {"mode": "READONLY"})
    assert http.get(f"/mode/{subject}") == (200, {"mode": "READONLY"})
    status, body = http.register(subject, USER_V2)
    assert (status, body["error_code"]) == (422, 42205)
    assert http.delete(f"/subjects/{subject}")[1]["error_code"] == 42205
    assert http.get(f"/subjects/{subject}/versions/latest")[0] == 200  # reads go on
    status, body = http.put(f"/mode/{subject}", {"mode": "SIDEWAYS"})
    assert (status, body["error_code"]) == (422, 42204)
    assert http.put(f"/mode/{subject}", {"mode": "IMPORT"})[1]["error_code"] == 42205  # it has schemas
    assert http.delete(f"/mode/{subject}") == (200, {"mode": "READONLY"})
    assert http.register(subject, USER_V2)[0] == 200


def test_import_mode_keeps_given_ids_and_versions(fresh_broker) -> None:
    broker = fresh_broker(schema_registry_listeners="http://127.0.0.1:0")
    http = RegistryHttp(broker.schema_registry_url)
    assert http.put("/mode", {"mode": "IMPORT"}) == (200, {"mode": "IMPORT"})
    assert http.register("imported", USER_V1, id=100, version=3) == (200, {"id": 100})
    # Compatibility is not checked while importing.
    assert http.register("imported", USER_NO_DEFAULT, id=101, version=4) == (200, {"id": 101})
    status, body = http.register("other", USER_V2, id=100, version=1)  # 100 is another schema's
    assert (status, body["error_code"]) == (422, 42207)
    assert http.get("/subjects/imported/versions") == (200, [3, 4])
    assert http.put("/mode", {"mode": "READWRITE"}) == (200, {"mode": "READWRITE"})
    status, body = http.register("imported", USER_V1, id=5)
    assert (status, body["error_code"]) == (422, 42205)
    # New ids continue after the imported ones.
    assert http.register("fresh", USER_V2) == (200, {"id": 102})


@pytest.mark.parametrize("given", [2**40, 2**31, 0, -2, "7", 7.5, True])
def test_import_refuses_an_id_outside_int32(fresh_broker, given: object) -> None:
    """An id is the 4-byte integer of Confluent's wire format: 1..2^31-1 (issue 40 point
    4: 1099511627776 was taken, and every later schema got an id past the format).
    Break-and-see-it-fail: without the range check in `register`, every one of these
    ids was taken (200) and each case failed."""
    broker = fresh_broker(schema_registry_listeners="http://127.0.0.1:0")
    http = RegistryHttp(broker.schema_registry_url)
    assert http.put("/mode/imported?force=true", {"mode": "IMPORT"}) == (200, {"mode": "IMPORT"})
    status, body = http.register("imported", USER_V1, id=given)
    assert (status, body["error_code"]) == (422, 422), body
    assert http.register("imported", USER_V1, id=2**31 - 2) == (200, {"id": 2**31 - 2})
    assert http.register("fresh", USER_V2) == (200, {"id": 2**31 - 1})
    status, body = http.register("fresh2", USER_NO_DEFAULT)  # no id left in the format
    assert (status, body["error_code"]) == (500, 50001), body


def test_version_deletes_soft_then_permanent(http: RegistryHttp, subject: str) -> None:
    first = http.register(subject, _own(USER_V1, subject))[1]["id"]
    http.register(subject, _own(USER_V2, subject))
    assert http.delete(f"/subjects/{subject}/versions/1?permanent=true") == (404, {
        "error_code": 40407,
        "message": f"Subject '{subject}' Version 1 was not deleted first before being permanently deleted"})
    assert http.delete(f"/subjects/{subject}/versions/1") == (200, 1)
    assert http.delete(f"/subjects/{subject}/versions/1")[1]["error_code"] == 40406
    assert http.get(f"/subjects/{subject}/versions") == (200, [2])
    assert http.get(f"/subjects/{subject}/versions?deleted=true") == (200, [1, 2])
    assert http.get(f"/subjects/{subject}/versions/1")[1]["error_code"] == 40402
    assert http.get(f"/subjects/{subject}/versions/1?deleted=true")[1]["version"] == 1
    assert http.get(f"/schemas/ids/{first}")[0] == 200  # a soft-deleted version's id still resolves
    assert http.delete(f"/subjects/{subject}/versions/1?permanent=true") == (200, 1)
    assert http.get(f"/subjects/{subject}/versions?deleted=true") == (200, [2])
    assert http.get(f"/schemas/ids/{first}")[1]["error_code"] == 40403
    assert http.delete(f"/subjects/{subject}/versions/9")[1]["error_code"] == 40402
    assert http.delete("/subjects/nothing-here/versions/1")[1]["error_code"] == 40401


def test_subject_deletes_soft_then_permanent(http: RegistryHttp, subject: str) -> None:
    http.register(subject, USER_V1)
    http.register(subject, USER_V2)
    assert http.delete(f"/subjects/{subject}?permanent=true")[1]["error_code"] == 40405
    assert http.delete(f"/subjects/{subject}") == (200, [1, 2])
    assert http.delete(f"/subjects/{subject}")[1]["error_code"] == 40404
    assert subject not in http.get("/subjects")[1]
    assert subject in http.get("/subjects?deleted=true")[1]
    assert http.get(f"/subjects/{subject}/versions")[1]["error_code"] == 40401
    # Registered again after a soft delete: the next version, the same id as before.
    status, again = http.register(subject, USER_V1)
    assert status == 200 and http.get(f"/subjects/{subject}/versions") == (200, [3])
    http.delete(f"/subjects/{subject}")
    assert http.delete(f"/subjects/{subject}?permanent=true") == (200, [1, 2, 3])
    assert subject not in http.get("/subjects?deleted=true")[1]
    assert http.delete(f"/subjects/{subject}")[1]["error_code"] == 40401


def test_references(http: RegistryHttp, subject: str) -> None:
    address = {"type": "record", "name": "Address", "namespace": "ottla.ref",
               "fields": [{"name": "street", "type": "string"}]}
    person = {"type": "record", "name": "Person", "namespace": "ottla.ref",
              "fields": [{"name": "home", "type": "ottla.ref.Address"}]}
    assert http.register(subject + "-address", address)[0] == 200
    references = [{"name": "ottla.ref.Address", "subject": subject + "-address", "version": 1}]
    # Without its reference the name is unknown.
    assert http.register(subject, person)[1]["error_code"] == 42201
    status, answer = http.register(subject, person, references=references)
    assert status == 200
    got = http.get(f"/subjects/{subject}/versions/1")[1]
    assert got["references"] == references
    # A name, not the definition; within Person's namespace, as Avro's Java printer writes it.
    assert json.loads(got["schema"])["fields"][0]["type"] == "Address"
    assert http.get(f"/schemas/ids/{answer['id']}")[1]["references"] == references
    assert http.post(f"/subjects/{subject}", {"schema": json.dumps(person), "references": references})[1][
        "id"] == answer["id"]
    assert http.get(f"/subjects/{subject}-address/versions/1/referencedby") == (200, [answer["id"]])
    assert http.delete(f"/subjects/{subject}-address/versions/1")[1]["error_code"] == 42206
    missing = [{"name": "ottla.ref.Address", "subject": subject + "-address", "version": 5}]
    assert http.register(subject + "-2", person, references=missing)[1]["error_code"] == 42201


def test_reference_cycle(tmp_path) -> None:
    """A cycle cannot be registered (a reference must exist first), but a copy of another
    registry's `_schemas` may carry one: two versions referencing each other (produced
    while the registry was off; with it on, clients may not write `_schemas`). A schema
    referencing them is refused (42201) and nothing else changes."""
    records = []
    for name, other in (("a", "b"), ("b", "a")):
        key = {"keytype": "SCHEMA", "subject": name, "version": 1, "magic": 1}
        value = {"subject": name, "version": 1, "id": 900000 + (name == "b"),
                 "references": [{"name": f"c.{other.upper()}", "subject": other, "version": 1}],
                 "schema": json.dumps({"type": "record", "name": f"c.{name.upper()}",
                                       "fields": [{"name": "f", "type": f"c.{other.upper()}"}]}),
                 "deleted": False}
        records.append((json.dumps(key).encode(), json.dumps(value).encode()))
    broker, errors = registry_over_copied_schemas(str(tmp_path / "data"), records)
    try:
        assert errors == [None, None]
        http = RegistryHttp(broker.schema_registry_url)
        assert http.get("/subjects/a/versions") == (200, [1])
        schema = {"type": "record", "name": "c.Top", "fields": [{"name": "x", "type": "c.A"}]}
        status, body = http.register("top", schema, references=[{"name": "c.A", "subject": "a", "version": 1}])
        assert (status, body["error_code"]) == (422, 42201) and "cycle" in body["message"]
        _still_serves(http, broker)
    finally:
        broker.stop()
        broker.cleanup()


def test_requests_not_addressed_to_the_registry_are_refused(http: RegistryHttp, subject: str) -> None:
    """A DNS-rebinding page reaches the port under its own name: refused."""
    status, body, _ = http.call("GET", "/subjects", headers={"Host": "attacker.example"})
    assert (status, body["error_code"]) == (403, 40301)
    status, body, _ = http.call("POST", f"/subjects/{subject}/versions", {"schema": json.dumps(USER_V1)},
                                headers={"Origin": "http://attacker.example"})
    assert (status, body["error_code"]) == (403, 40301)
    assert http.get(f"/subjects/{subject}/versions")[0] == 404


def test_console_schema_pages(http: RegistryHttp, registry_broker: BrokerProcess, subject: str) -> None:
    import urllib.request

    http.register(subject, _own(USER_V1, subject))
    http.register(subject, _own(USER_V2, subject))
    http.delete(f"/subjects/{subject}/versions/1")

    def get(path: str) -> str:
        with urllib.request.urlopen(registry_broker.admin_url + path, timeout=30) as response:
            return response.read().decode()

    assert subject in get(f"/console/schemas?q={subject}")
    page = get(f"/console/subject?name={subject}")
    assert "version 2" in page and "version 1 (soft-deleted)" in page and "&quot;age&quot;" in page


def test_console_says_when_the_registry_is_off(fresh_broker) -> None:
    import urllib.request

    broker = fresh_broker(admin_port=0)
    with urllib.request.urlopen(broker.admin_url + "/console/schemas", timeout=30) as response:
        assert "schema registry is off" in response.read().decode()


def test_a_subject_with_any_characters(http: RegistryHttp) -> None:
    """A subject holding "/" and spaces, percent-encoded in the path, is one subject."""
    name = f"odd/subject {uuid.uuid4().hex[:6]}"
    encoded = name.replace("/", "%2F").replace(" ", "%20")
    assert http.register(encoded, USER_V1)[0] == 200
    assert name in http.get("/subjects")[1]
    assert http.get(f"/subjects/{encoded}/versions") == (200, [1])
    assert http.get(f"/subjects/{encoded}/versions/latest")[1]["subject"] == name


def test_confluents_documented_examples(fresh_broker) -> None:
    """The request/response examples of Confluent's API reference, walked in order on an
    empty registry, answered with the same bodies (ids and versions as the docs count
    them; the schema text is the canonical one: `{"type": "string"}` is `"string"`)."""
    broker = fresh_broker(schema_registry_listeners="http://127.0.0.1:0")
    http = RegistryHttp(broker.schema_registry_url)
    string = json.dumps({"type": "string"})
    assert http.get("/subjects") == (200, [])
    assert http.post("/subjects/test/versions", {"schema": string}) == (200, {"id": 1})
    assert http.get("/schemas/ids/1") == (200, {"schema": '"string"'})
    assert http.get("/schemas/ids/1/versions") == (200, [{"subject": "test", "version": 1}])
    assert http.get("/schemas/ids/1/subjects") == (200, ["test"])
    assert http.get("/subjects") == (200, ["test"])
    assert http.get("/subjects/test/versions") == (200, [1])
    assert http.get("/subjects/test/versions/1") == (200, {"subject": "test", "version": 1, "id": 1,
                                                           "schema": '"string"'})
    assert http.get("/subjects/test/versions/latest/schema") == (200, "string")
    assert http.post("/subjects/test", {"schema": string}) == (200, {"subject": "test", "id": 1, "version": 1,
                                                                      "schema": '"string"'})
    assert http.post("/compatibility/subjects/test/versions/latest", {"schema": string}) == \
        (200, {"is_compatible": True})
    assert http.put("/config", {"compatibility": "FULL"}) == (200, {"compatibility": "FULL"})
    assert http.get("/config") == (200, {"compatibilityLevel": "FULL"})
    assert http.put("/config/test", {"compatibility": "FULL"}) == (200, {"compatibility": "FULL"})
    assert http.get("/config/test") == (200, {"compatibilityLevel": "FULL"})
    assert http.get("/mode") == (200, {"mode": "READWRITE"})
    assert http.put("/mode", {"mode": "READONLY"}) == (200, {"mode": "READONLY"})
    assert http.put("/mode", {"mode": "READWRITE"}) == (200, {"mode": "READWRITE"})
    assert http.delete("/subjects/test/versions/1") == (200, 1)
    assert http.delete("/subjects/test") == (404, {"error_code": 40404, "message": "Subject 'test' was soft "
                                                   "deleted.Set permanent=true to delete permanently"})
    assert http.delete("/subjects/test?permanent=true") == (200, [1])
    assert http.get("/subjects/test/versions") == (404, {"error_code": 40401, "message": "Subject 'test' not found."})
    assert http.get("/schemas/ids/1") == (404, {"error_code": 40403, "message": "Schema 1 not found"})


def test_compatibility_against_what_the_level_checks(http: RegistryHttp, subject: str) -> None:
    """POST /compatibility/subjects/{s}/versions (no version): against the versions the
    subject's level names, every live one for a _TRANSITIVE level."""
    v1 = {"type": "record", "name": "T", "fields": [{"name": "a", "type": "int"}]}
    v2 = {"type": "record", "name": "T", "fields": [{"name": "a", "type": "int", "default": 1}]}
    v3 = {"type": "record", "name": "T", "fields": [{"name": "b", "type": "int", "default": 1}]}
    http.put(f"/config/{subject}", {"compatibility": "FORWARD"})
    http.register(subject, v1)
    http.register(subject, v2)
    path = f"/compatibility/subjects/{subject}/versions"
    assert http.post(path, {"schema": json.dumps(v3)}) == (200, {"is_compatible": True})
    http.put(f"/config/{subject}", {"compatibility": "FORWARD_TRANSITIVE"})
    assert http.post(path, {"schema": json.dumps(v3)}) == (200, {"is_compatible": False})


def test_deleting_the_global_config_goes_back_to_backward(fresh_broker) -> None:
    broker = fresh_broker(schema_registry_listeners="http://127.0.0.1:0")
    http = RegistryHttp(broker.schema_registry_url)
    http.put("/config", {"compatibility": "NONE"})
    assert http.delete("/config") == (200, {"compatibilityLevel": "NONE"})
    assert http.get("/config") == (200, {"compatibilityLevel": "BACKWARD"})
    http.put("/mode", {"mode": "READONLY"})
    assert http.register("s", USER_V1)[1]["error_code"] == 42205
    assert http.put("/config", {"compatibility": "FULL"})[1]["error_code"] == 42205


def _registry_address(registry_broker: BrokerProcess) -> tuple[str, int]:
    assert registry_broker.schema_registry_url is not None
    host, port = registry_broker.schema_registry_url.removeprefix("http://").rsplit(":", 1)
    return host, int(port)


def test_a_client_sending_its_headers_a_byte_a_second_is_closed(http: RegistryHttp,
                                                                registry_broker: BrokerProcess) -> None:
    """The registry runs aiohttp's server as the admin endpoint does (broker/http_site.py):
    10 s for a request's headers, then the connection is closed, and other clients are
    answered meanwhile. Break-and-see-it-fail: with the registry's runner built with
    aiohttp's defaults again (no keepalive_timeout), the slow client sent its whole
    request and this failed."""
    request = b"GET /subjects HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + b"s" * 60 + b"\r\n\r\n"

    def others() -> None:
        assert http.get("/subjects")[0] == 200

    closed, served = trickle_headers_while(_registry_address(registry_broker), request, others)
    assert closed, "the slow client's connection was never closed"
    assert served > 3


def test_a_body_that_stops_arriving_is_answered_408(http: RegistryHttp, registry_broker: BrokerProcess,
                                                    subject: str) -> None:
    """A registration whose body stops halfway is answered 408 after 10 s, and nothing is
    registered. Break-and-see-it-fail: with the body read without read_body's timeout,
    the request hung until the client's own 60 s timeout."""
    answer = send_part_of_a_body(_registry_address(registry_broker), (
        f"POST /subjects/{subject}/versions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        f"Content-Type: application/vnd.schemaregistry.v1+json\r\nContent-Length: 100\r\n\r\n").encode()
        + b'{"schema": "')
    assert answer.startswith(b"HTTP/1.1 408 "), answer[:200]
    assert json.loads(answer.partition(b"\r\n\r\n")[2])["error_code"] == 408
    assert http.get(f"/subjects/{subject}/versions")[0] == 404
    _still_serves(http, registry_broker)
