"""A minimal raw Kafka client for tests that need to control the bytes on the socket:
build a request with kio, frame it, send it, read framed responses."""

from __future__ import annotations

import socket
import struct
from typing import Any

from kio.serial import entity_reader, entity_writer

from protocol.codec import ChunkWriter, request_class, response_class, skip_tagged_fields
from protocol.entities import make


def encode_request(api_key: int, version: int, correlation_id: int, request: Any, client_id: str = "wire-test") -> bytes:
    cls = type(request)
    out = ChunkWriter()
    raw_id = client_id.encode()
    out.write(struct.pack(">hhih", api_key, version, correlation_id, len(raw_id)) + raw_id)
    if cls.__flexible__:
        out.write(b"\x00")
    entity_writer(cls)(out, request)
    body = b"".join(bytes(c) for c in out.finish())
    return struct.pack(">i", len(body)) + body


def request(api_key: int, version: int, **values: Any) -> Any:
    return make(request_class(api_key, version), **values)


class WireClient:
    def __init__(self, bootstrap: str, timeout: float = 10) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self.correlation_id = 0

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def send(self, api_key: int, version: int, entity: Any) -> int:
        self.correlation_id += 1
        self.sock.sendall(encode_request(api_key, version, self.correlation_id, entity))
        return self.correlation_id

    def read_frame(self) -> bytes:
        size = struct.unpack(">i", self._read_exactly(4))[0]
        return self._read_exactly(size)

    def receive(self, api_key: int, version: int) -> tuple[int, Any]:
        """The next response: (correlation id, decoded body)."""
        frame = self.read_frame()
        (correlation_id,) = struct.unpack_from(">i", frame)
        cls = response_class(api_key, version)
        offset = 4
        if cls.__flexible__ and api_key != 18:
            offset = skip_tagged_fields(frame, offset)
        body, _ = entity_reader(cls)(frame, offset)
        return correlation_id, body

    def call(self, api_key: int, version: int, entity: Any) -> Any:
        sent = self.send(api_key, version, entity)
        correlation_id, body = self.receive(api_key, version)
        assert correlation_id == sent
        return body

    def is_closed(self, timeout: float = 5) -> bool:
        """True if the broker closed this connection (EOF or reset)."""
        self.sock.settimeout(timeout)
        try:
            return self.sock.recv(1) == b""
        except ConnectionResetError:
            return True
        except socket.timeout:
            return False

    def _read_exactly(self, n: int) -> bytes:
        chunks = []
        while n:
            chunk = self.sock.recv(n)
            if not chunk:
                raise ConnectionError("connection closed by the broker")
            chunks.append(chunk)
            n -= len(chunk)
        return b"".join(chunks)

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> "WireClient":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
