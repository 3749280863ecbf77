"""The schema registry on a broker with SASL users and ACLs: every request signs in with
HTTP Basic as one of the broker's users, and each subject is authorized through the
broker's ACLs on its topic (schema_registry/access.py: DESCRIBE to read, WRITE
to change, ALTER on the cluster for the global config and mode).

Break-and-see-it-fail: with `_authorize` returning at once, the 403 tests failed; with
the access marked unsecured, the 401 test failed.
"""

from __future__ import annotations

import base64
import json

import pytest
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.error import SchemaRegistryError

from ottla.testing import BrokerProcess

from ..sasl_brokers import sasl_plain_client_config, start_sasl_plain_broker
from ..schema_registry_http import RegistryHttp

USERS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret", "mallory": "mallory-secret"}
SCHEMA = json.dumps({"type": "record", "name": "Order", "fields": [{"name": "id", "type": "long"}]})


def _basic(user: str, password: str | None = None) -> dict[str, str]:
    token = base64.b64encode(f"{user}:{password or USERS[user]}".encode()).decode()
    return {"Authorization": f"Basic {token}"}


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    broker = start_sasl_plain_broker(str(tmp_path_factory.mktemp("registry-security") / "data"), USERS,
                                     {"schema.registry.listeners": "http://127.0.0.1:0", "admin.port": "0"})
    admin = AdminClient(sasl_plain_client_config(broker.bootstrap, "admin", USERS["admin"]))

    def allow(principal: str, operation: AclOperation, name: str) -> AclBinding:
        return AclBinding(ResourceType.TOPIC, name, ResourcePatternType.LITERAL, principal, "*", operation,
                          AclPermissionType.ALLOW)

    for future in admin.create_acls([allow("User:alice", AclOperation.WRITE, "orders"),
                                     allow("User:bob", AclOperation.READ, "orders")]).values():
        future.result(10)
    yield broker
    broker.cleanup()


@pytest.fixture
def http(secured: BrokerProcess) -> RegistryHttp:
    return RegistryHttp(secured.schema_registry_url)


def test_every_request_signs_in(http: RegistryHttp) -> None:
    status, body, _ = http.call("GET", "/subjects")
    assert (status, body) == (401, {"error_code": 401, "message": "Unauthorized"})
    status, body, _ = http.call("GET", "/subjects", headers=_basic("alice", "wrong"))
    assert status == 401
    assert http.call("GET", "/schemas/types", headers=_basic("mallory"))[0] == 200


def test_subjects_are_authorized_by_their_topic(http: RegistryHttp) -> None:
    register = {"schema": SCHEMA}
    status, answer, _ = http.call("POST", "/subjects/orders-value/versions", register, headers=_basic("alice"))
    assert status == 200
    # bob may READ orders: he reads its schemas, by subject and by id, but registers none.
    status, body, _ = http.call("POST", "/subjects/orders-value/versions", register, headers=_basic("bob"))
    assert (status, body["error_code"]) == (403, 40301)
    assert http.call("GET", "/subjects/orders-value/versions", headers=_basic("bob"))[:2] == (200, [1])
    assert http.call("GET", f"/schemas/ids/{answer['id']}", headers=_basic("bob"))[0] == 200
    # mallory has no ACL on orders.
    for path in ("/subjects/orders-value/versions", f"/schemas/ids/{answer['id']}", "/config/orders-value"):
        status, body, _ = http.call("GET", path, headers=_basic("mallory"))
        assert (status, body["error_code"]) == (403, 40301), path
    # A subject of another topic, registered by the super user, is listed to nobody else.
    assert http.call("POST", "/subjects/secret-value/versions", register, headers=_basic("admin"))[0] == 200
    assert http.call("GET", "/subjects", headers=_basic("alice"))[:2] == (200, ["orders-value"])
    assert http.call("GET", "/subjects", headers=_basic("mallory"))[:2] == (200, [])
    assert sorted(http.call("GET", "/subjects", headers=_basic("admin"))[1]) == ["orders-value", "secret-value"]
    assert http.call("GET", f"/schemas/ids/{answer['id']}/subjects", headers=_basic("alice"))[:2] == \
        (200, ["orders-value"])


def test_global_config_needs_alter_on_the_cluster(http: RegistryHttp) -> None:
    status, body, _ = http.call("PUT", "/config", {"compatibility": "NONE"}, headers=_basic("alice"))
    assert (status, body["error_code"]) == (403, 40301)
    assert http.call("GET", "/config", headers=_basic("alice"))[:2] == (200, {"compatibilityLevel": "BACKWARD"})
    assert http.call("PUT", "/config", {"compatibility": "FULL"}, headers=_basic("admin"))[:2] == \
        (200, {"compatibility": "FULL"})
    assert http.call("PUT", "/config", {"compatibility": "BACKWARD"}, headers=_basic("admin"))[0] == 200


def test_import_mode_needs_alter_on_the_cluster(http: RegistryHttp) -> None:
    """IMPORT lets a client choose the ids every consumer decodes with: a registry-wide
    right, as in Confluent (ALTER on the cluster), not the WRITE on a topic that sets the
    subject's other modes (issue 40 point 4). Break-and-see-it-fail: with PUT
    /mode/<subject> authorized as any subject write, alice put orders-value in IMPORT
    (200) and the test failed."""
    for path in ("/mode/orders-value?force=true", "/mode/orders-value"):
        status, body, _ = http.call("PUT", path, {"mode": "import"}, headers=_basic("alice"))
        assert (status, body["error_code"]) == (403, 40301), body
    assert http.call("GET", "/mode/orders-value?defaultToGlobal=true", headers=_basic("alice"))[:2] == \
        (200, {"mode": "READWRITE"})
    # The subject's other modes stay the topic writer's.
    assert http.call("PUT", "/mode/orders-value", {"mode": "READONLY"}, headers=_basic("alice"))[:2] == \
        (200, {"mode": "READONLY"})
    assert http.call("DELETE", "/mode/orders-value", headers=_basic("alice"))[0] == 200
    assert http.call("PUT", "/mode/orders-value?force=true", {"mode": "IMPORT"}, headers=_basic("admin"))[:2] == \
        (200, {"mode": "IMPORT"})
    assert http.call("DELETE", "/mode/orders-value", headers=_basic("admin"))[0] == 200


def test_confluent_client_with_basic_auth(secured: BrokerProcess) -> None:
    alice = SchemaRegistryClient({"url": secured.schema_registry_url,
                                  "basic.auth.user.info": f"alice:{USERS['alice']}"})
    schema_id = alice.register_schema("orders-key", Schema('"string"', "AVRO"))
    bob = SchemaRegistryClient({"url": secured.schema_registry_url, "basic.auth.user.info": f"bob:{USERS['bob']}"})
    assert bob.get_schema(schema_id).schema_str == '"string"'
    with pytest.raises(SchemaRegistryError) as refused:
        bob.register_schema("orders-key", Schema('"long"', "AVRO"))
    assert (refused.value.http_status_code, refused.value.error_code) == (403, 40301)


def test_console_shows_a_principal_the_subjects_it_may_read(secured: BrokerProcess, http: RegistryHttp) -> None:
    """The console's schema pages filter as the registry does: alice (WRITE on orders)
    sees orders-value, not the super user's secret-value."""
    import urllib.error
    import urllib.request

    register = {"schema": SCHEMA}
    http.call("POST", "/subjects/orders-value/versions", register, headers=_basic("alice"))
    http.call("POST", "/subjects/secret-value/versions", register, headers=_basic("admin"))

    def get(path: str, user: str) -> tuple[int, str]:
        request = urllib.request.Request(secured.admin_url + path, headers=_basic(user))
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return response.status, response.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode()

    status, listing = get("/console/schemas", "alice")
    assert status == 200 and "orders-value" in listing and "secret-value" not in listing
    assert get("/console/subject?name=secret-value", "alice")[0] == 404
    status, page = get("/console/subject?name=orders-value", "alice")
    assert status == 200 and "version 1" in page and "&quot;Order&quot;" in page
    assert "secret-value" in get("/console/schemas", "admin")[1]


def test_console_decodes_records_with_the_schemas_the_viewer_may_read(secured: BrokerProcess,
                                                                      http: RegistryHttp) -> None:
    """The Messages page reads a record's schema as the registry would let the viewer:
    bob (READ on orders) sees orders' records decoded with orders-value's schema, but a
    record there carrying the id of vault-value's schema stays raw bytes, its schema
    unknown to him, while the super user sees it decoded.

    Break-and-see-it-fail: with the decoder handed `lambda subject: True` in
    pages/messages.py, the secret record was decoded for bob and this test failed."""
    import urllib.error
    import urllib.request

    from confluent_kafka import Producer

    secret_schema = json.dumps({"type": "record", "name": "Secret", "fields": [{"name": "code", "type": "string"}]})
    order_id = http.call("POST", "/subjects/orders-value/versions", {"schema": SCHEMA},
                         headers=_basic("alice"))[1]["id"]
    secret_id = http.call("POST", "/subjects/vault-value/versions", {"schema": secret_schema},
                          headers=_basic("admin"))[1]["id"]
    producer = Producer({"bootstrap.servers": secured.bootstrap, "security.protocol": "SASL_PLAINTEXT",
                         "sasl.mechanism": "PLAIN", "sasl.username": "admin", "sasl.password": USERS["admin"]})
    producer.produce("orders", b"\x00" + order_id.to_bytes(4, "big") + b"\x54", partition=0)  # id 42
    producer.produce("orders", b"\x00" + secret_id.to_bytes(4, "big") + b"\x0ehunter2", partition=0)
    assert producer.flush(30) == 0

    def page(user: str) -> str:
        request = urllib.request.Request(secured.admin_url + "/console/messages?topic=orders&partition=0",
                                         headers=_basic(user))
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.read().decode().replace("&quot;", '"')

    seen = page("bob")
    assert f"AVRO, schema id {order_id} (orders-value v1)" in seen and '"id": 42' in seen
    assert f"schema id {secret_id}: the schema registry has no such schema" in seen
    assert '"code": "hunter2"' not in seen and "vault-value" not in seen
    assert '"code": "hunter2"' in page("admin")
