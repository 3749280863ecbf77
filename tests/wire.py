"""A raw Kafka connection for tests that need to control the bytes on the socket: send
any request (or any bytes), read framed responses, see the connection close. The
broker's own codecs frame and parse; broker.client is the tools' higher-level client."""

from __future__ import annotations

import socket
import struct
from typing import Any

from ottla.protocol.codec import decode_response, encode_request, request_class
from ottla.protocol.entities import make
from ottla.tools.client import recv_exactly


def request(api_key: int, version: int, **values: Any) -> Any:
    return make(request_class(api_key, version), **values)


def long_poll(topic: str) -> Any:
    """A Fetch of partition 0 of `topic` that waits as long as a Fetch can (2^31-1 ms)
    for a record: a request in hand that others queue behind."""
    return request(1, 12, replica_id=-1, max_wait=2**31 - 1, min_bytes=1, max_bytes=1 << 20,
                   isolation_level=0, session_id=0, session_epoch=-1, topics=[
                       {"topic": topic, "partitions": [
                           {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20,
                            "current_leader_epoch": -1, "last_fetched_epoch": -1, "log_start_offset": -1}]}],
                   forgotten_topics_data=[], rack_id="")


def filler_produce_frame(size: int) -> bytes:
    """A whole frame of `size` bytes that starts as a Produce v9 and is zeros after its
    header: bytes to queue (behind a long poll), refused if ever served."""
    header = struct.pack(">hhih", 0, 9, 99, 1) + b"x"
    return struct.pack(">i", size) + header + b"\x00" * (size - len(header))


class WireClient:
    def __init__(self, bootstrap: str, timeout: float = 10, receive_buffer: int | None = None,
                 source: str | None = None) -> None:
        """`receive_buffer`: SO_RCVBUF, set before connecting (so the window is small
        from the start): a client that reads slowly holds the broker's answers back.
        `source`: the address to connect from (127.0.0.2: another host to ACLs)."""
        host, port = bootstrap.rsplit(":", 1)
        if receive_buffer is None:
            self.sock = socket.create_connection((host, int(port)), timeout=timeout,
                                                 source_address=None if source is None else (source, 0))
        else:
            family, kind, proto, _, address = socket.getaddrinfo(host.strip("[]"), int(port),
                                                                 type=socket.SOCK_STREAM)[0]
            self.sock = socket.socket(family, kind, proto)
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
            self.sock.settimeout(timeout)
            self.sock.connect(address)
        self.correlation_id = 0

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def send(self, entity: Any) -> int:
        self.correlation_id += 1
        self.sock.sendall(encode_request(self.correlation_id, "wire-test", entity))
        return self.correlation_id

    def read_frame(self) -> bytes:
        size = struct.unpack(">i", recv_exactly(self.sock, 4))[0]
        return recv_exactly(self.sock, size)

    def receive(self, api_key: int, version: int) -> tuple[int, Any]:
        """The next response: (correlation id, decoded body)."""
        return decode_response(api_key, version, self.read_frame())

    def call(self, entity: Any) -> Any:
        """Send a request and read its response."""
        sent = self.send(entity)
        correlation_id, body = self.receive(type(entity).__api_key__, type(entity).__version__)
        assert correlation_id == sent
        return body

    def is_closed(self, timeout: float = 5) -> bool:
        """True if the broker closed this connection (EOF or reset)."""
        self.sock.settimeout(timeout)
        try:
            return self.sock.recv(1) == b""
        except ConnectionResetError:
            return True
        except TimeoutError:
            return False

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> WireClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
