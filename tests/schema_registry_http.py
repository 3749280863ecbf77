"""Raw HTTP to the built-in schema registry, for the tests: every answer as (status,
decoded JSON body, Content-Type); and a registry started over a `_schemas` a client
wrote."""

from __future__ import annotations

import http.client
import json
from typing import Any
from urllib.parse import urlsplit

from confluent_kafka import Producer

from ottla.testing import BrokerProcess

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"


class RegistryHttp:
    def __init__(self, url: str, source: str | None = None) -> None:
        parts = urlsplit(url)
        self.host = parts.hostname or "127.0.0.1"
        self.port = parts.port or 80
        # The client's address (any of 127.0.0.0/8 on Linux): tests of what the broker
        # counts per client address.
        self.source = (source, 0) if source is not None else None

    def call(self, method: str, path: str, body: Any = None, *, raw: bytes | None = None,
             content_type: str = CONTENT_TYPE, headers: dict[str, str] | None = None) -> tuple[int, Any, str]:
        connection = http.client.HTTPConnection(self.host, self.port, timeout=60, source_address=self.source)
        try:
            data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
            sent = {"Content-Type": content_type} if data is not None else {}
            sent.update(headers or {})
            connection.request(method, path, body=data, headers=sent)
            response = connection.getresponse()
            text = response.read()
            return response.status, json.loads(text) if text else None, response.getheader("Content-Type", "")
        finally:
            connection.close()

    def get(self, path: str) -> tuple[int, Any]:
        return self.call("GET", path)[:2]

    def post(self, path: str, body: Any) -> tuple[int, Any]:
        return self.call("POST", path, body)[:2]

    def put(self, path: str, body: Any) -> tuple[int, Any]:
        return self.call("PUT", path, body)[:2]

    def delete(self, path: str) -> tuple[int, Any]:
        return self.call("DELETE", path)[:2]

    def register(self, subject: str, schema: dict[str, Any] | str, **extra: Any) -> tuple[int, Any]:
        text = schema if isinstance(schema, str) else json.dumps(schema)
        return self.post(f"/subjects/{subject}/versions", {"schema": text, **extra})


REGISTRY_ON = {"schema.registry.listeners": "http://127.0.0.1:0"}


def registry_over_copied_schemas(data_dir: str, records: list[tuple[bytes, bytes]]) -> tuple[BrokerProcess,
                                                                                              list[object]]:
    """A broker with the registry on, over a `_schemas` holding `records` ((key, value),
    produced by confluent-kafka while the registry was off: a copy of another
    registry's topic, or an attacker's records; with the registry on, clients may not
    write it). The broker, and each record's delivery error (None: delivered)."""
    plain = BrokerProcess(data_dir).start()
    try:
        plain.create_topic("_schemas", 1, {"cleanup.policy": "compact"})
        errors = produce_to_schemas(plain.bootstrap, records)
    finally:
        plain.stop()
    return BrokerProcess(data_dir, REGISTRY_ON).start(), errors


def produce_to_schemas(bootstrap: str, records: list[tuple[bytes, bytes]]) -> list[object]:
    """Produce (key, value) records to `_schemas` with confluent-kafka; each record's
    delivery error (None: delivered)."""
    producer = Producer({"bootstrap.servers": bootstrap, "message.max.bytes": 2_000_000, "retries": 0})
    errors: list[object] = []
    for key, value in records:
        producer.produce("_schemas", value=value, key=key, on_delivery=lambda err, msg: errors.append(err))
    assert producer.flush(30) == 0
    return errors
