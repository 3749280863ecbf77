"""Raw HTTP to the built-in schema registry, for the tests: every answer as (status,
decoded JSON body, Content-Type)."""

from __future__ import annotations

import http.client
import json
from typing import Any
from urllib.parse import urlsplit

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"


class RegistryHttp:
    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        self.host = parts.hostname or "127.0.0.1"
        self.port = parts.port or 80

    def call(self, method: str, path: str, body: Any = None, *, raw: bytes | None = None,
             content_type: str = CONTENT_TYPE, headers: dict[str, str] | None = None) -> tuple[int, Any, str]:
        connection = http.client.HTTPConnection(self.host, self.port, timeout=60)
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
