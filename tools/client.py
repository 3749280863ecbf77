"""A small blocking Kafka client, for Ottla's own tools: `ottla topics|groups|
transactions|produce|consume` and the pytest plugin.

It speaks the wire protocol with the broker's own codecs (protocol.codec for frames,
protocol.entities.make for version-agnostic requests), so the package needs no Kafka
client library. It works against any Kafka-protocol broker, as Kafka's scripts do:
versions are negotiated with ApiVersions, partition requests go to the partition's
leader and group or transaction requests to their coordinator, as Metadata and
FindCoordinator say.

Requests are sent one at a time and answered before the next: these are
administration tools, not a producer built for throughput.
"""

from __future__ import annotations

import socket
import ssl
import struct
from typing import Any

from ottla.protocol import apis
from ottla.protocol.apis import Api
from ottla.protocol.codec import decode_response, encode_request, request_class
from ottla.protocol.entities import make
from ottla.protocol.errors import ErrorCode

from .client_security import ClientSecurity, SaslFailed, authenticate

# The highest version the tools are written for, where it is below Ottla's own: from
# Fetch v13 on, topics are named by id, and the tools name them.
_VERSION_CAPS = {apis.FETCH.key: 12}
PLAINTEXT = ClientSecurity()
# How long the broker may take over a request that waits on the broker's side (CreateTopics,
# DeleteTopics, an acks=all Produce): Kafka's request.timeout.ms default.
REQUEST_TIMEOUT_MS = 30_000
_SIZE = struct.Struct(">i")

GROUP_KEY, TRANSACTION_KEY = 0, 1


class ClientError(Exception):
    """A request that failed: the broker's error code, or a connection problem."""

    def __init__(self, message: str, code: ErrorCode | None = None) -> None:
        super().__init__(message)
        self.code = code


def check(code: Any, what: str, message: str | None = None) -> None:
    """Raise ClientError unless `code` is no error."""
    code = ErrorCode(code)
    if code is not ErrorCode.none:
        detail = f" ({message})" if message else ""
        raise ClientError(f"{what}: {code.name.upper()}{detail}", code)


def split_address(address: str) -> tuple[str, int]:
    host, _, port = address.strip().rpartition(":")
    if not host or not port.isdigit():
        raise ClientError(f"expected HOST:PORT, got {address!r}")
    return host.strip("[]"), int(port)


def recv_exactly(sock: socket.socket, n: int) -> bytes:
    """`n` bytes from a socket; ConnectionError if the broker closes it first."""
    chunks = []
    while n:
        chunk = sock.recv(min(n, 1 << 20))
        if not chunk:
            raise ConnectionError("connection closed by the broker")
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


class BrokerConnection:
    """One connection to one broker, with the API versions both sides speak."""

    def __init__(self, host: str, port: int, client_id: str, timeout: float,
                 security: ClientSecurity = PLAINTEXT) -> None:
        self.address = f"{host}:{port}"
        self.client_id = client_id
        try:
            self._sock = security.wrap(socket.create_connection((host, port), timeout=timeout), host)
        except (OSError, ssl.SSLError) as exc:
            raise ClientError(f"cannot connect to {self.address}: {exc}") from None
        self._correlation_id = 0
        # ApiVersions v0 is the one every broker answers, whatever it supports.
        v0 = request_class(apis.API_VERSIONS.key, 0)
        assert v0 is not None, "kio has every version of ApiVersions"
        answer = self._exchange(apis.API_VERSIONS.key, 0, make(v0))
        check(answer.error_code, f"ApiVersions from {self.address}")
        self._versions = {int(k.api_key): (int(k.min_version), int(k.max_version)) for k in answer.api_keys}
        if security.uses_sasl:
            self._authenticate(security)

    def _authenticate(self, security: ClientSecurity) -> None:
        answer = self.call(apis.SASL_HANDSHAKE, mechanism=security.mechanism)
        check(answer.error_code, f"SaslHandshake with {self.address} ({security.mechanism}; the broker offers "
                                 f"{', '.join(answer.mechanisms)})")

        def step(token: bytes) -> bytes:
            reply = self.call(apis.SASL_AUTHENTICATE, auth_bytes=token)
            check(reply.error_code, f"authentication with {self.address}", reply.error_message)
            return bytes(reply.auth_bytes)

        try:
            authenticate(security, step)
        except SaslFailed as exc:
            raise ClientError(f"authentication with {self.address}: {exc}") from None

    def version(self, api: Api) -> int:
        """The highest version of `api` that the broker and these tools both speak."""
        theirs = self._versions.get(api.key)
        ours_max = min(api.max_version, _VERSION_CAPS.get(api.key, api.max_version))
        if theirs is None or max(theirs[0], api.min_version) > min(theirs[1], ours_max):
            raise ClientError(f"{self.address} does not speak a version of {api.name} these tools know")
        return min(theirs[1], ours_max)

    def call(self, api: Api, **values: Any) -> Any:
        version = self.version(api)
        cls = request_class(api.key, version)
        if cls is None:
            raise ClientError(f"no schema for {api.name} v{version}")
        return self._exchange(api.key, version, make(cls, **values))

    def _exchange(self, api_key: int, version: int, request: Any) -> Any:
        self._correlation_id += 1
        try:
            self._sock.sendall(encode_request(self._correlation_id, self.client_id, request))
            (size,) = _SIZE.unpack(self._read(_SIZE.size))
            frame = self._read(size)
        except OSError as exc:
            raise ClientError(f"{self.address}: {exc}") from None
        try:
            correlation_id, body = decode_response(api_key, version, frame)
        except Exception as exc:  # kio's reader errors have no common base
            # kio refuses some values Kafka sends, such as a start time of -1 ("none").
            raise ClientError(f"cannot decode the answer of {self.address}: {exc}") from None
        if correlation_id != self._correlation_id:
            raise ClientError(f"{self.address} answered request {correlation_id}, expected {self._correlation_id}")
        return body

    def _read(self, n: int) -> bytes:
        return recv_exactly(self._sock, n)

    def close(self) -> None:
        self._sock.close()


class Cluster:
    """The brokers behind a bootstrap address, reached as requests need them."""

    def __init__(self, bootstrap: str, client_id: str = "ottla-tools", timeout: float = 30,
                 security: ClientSecurity = PLAINTEXT) -> None:
        self.client_id = client_id
        self.timeout = timeout
        self.security = security
        self._connections: dict[str, BrokerConnection] = {}
        self._brokers: dict[int, str] = {}
        errors = []
        for address in bootstrap.split(","):
            try:
                self.bootstrap = self._connect(address)
                break
            except ClientError as exc:
                errors.append(str(exc))
        else:
            raise ClientError("no bootstrap server reachable: " + "; ".join(errors))

    def _connect(self, address: str) -> BrokerConnection:
        connection = self._connections.get(address)
        if connection is None:
            connection = BrokerConnection(*split_address(address), self.client_id, self.timeout, self.security)
            self._connections[address] = connection
        return connection

    def broker(self, node_id: int) -> BrokerConnection:
        if node_id not in self._brokers:
            self.metadata([])
        if node_id not in self._brokers:
            raise ClientError(f"broker {node_id} is not in the cluster metadata")
        return self._connect(self._brokers[node_id])

    def call(self, api: Api, **values: Any) -> Any:
        """A request any broker can answer (topic administration, listings)."""
        return self.bootstrap.call(api, **values)

    def metadata(self, topics: list[str] | None, allow_create: bool = False) -> Any:
        """Metadata for `topics` (None: every topic). With `allow_create`, a broker with
        auto.create.topics.enable creates the missing ones, as for a producer."""
        wanted = None if topics is None else [{"name": name} for name in topics]
        answer = self.bootstrap.call(apis.METADATA, topics=wanted, allow_auto_topic_creation=allow_create)
        self._brokers = {b.node_id: f"{b.host}:{b.port}" for b in answer.brokers}
        return answer

    def partitions(self, topic: str, allow_create: bool = False) -> dict[int, int]:
        """{partition: leader node id} of a topic."""
        answer = self.metadata([topic], allow_create)
        (described,) = answer.topics
        check(described.error_code, f"topic {topic}")
        return {int(p.partition_index): int(p.leader_id) for p in described.partitions}

    def leader(self, topic: str, partition: int) -> BrokerConnection:
        leaders = self.partitions(topic)
        if partition not in leaders:
            raise ClientError(f"topic {topic} has no partition {partition}")
        return self.broker(leaders[partition])

    def list_offsets(self, topic: str, partitions: list[int], timestamp: int,
                     read_committed: bool = False) -> dict[int, int]:
        """{partition: offset} for a ListOffsets timestamp (-2 earliest, -1 latest: the
        last stable offset when `read_committed`), asked of each partition's leader."""
        leaders = self.partitions(topic)
        by_leader: dict[int, list[int]] = {}
        for partition in partitions:
            if partition not in leaders:
                raise ClientError(f"topic {topic} has no partition {partition}")
            by_leader.setdefault(leaders[partition], []).append(partition)
        offsets = {}
        for node_id, asked in by_leader.items():
            answer = self.broker(node_id).call(
                apis.LIST_OFFSETS, replica_id=-1, isolation_level=int(read_committed),
                topics=[{"name": topic, "partitions": [{"partition_index": p, "timestamp": timestamp,
                                                          "current_leader_epoch": -1} for p in asked]}],
            )
            for answered in answer.topics:
                for p in answered.partitions:
                    check(p.error_code, f"ListOffsets {topic}-{p.partition_index}")
                    offsets[int(p.partition_index)] = int(p.offset)
        return offsets

    def coordinator(self, key: str, key_type: int) -> BrokerConnection:
        connection = self.bootstrap
        if connection.version(apis.FIND_COORDINATOR) >= 4:
            (answer,) = connection.call(apis.FIND_COORDINATOR, key_type=key_type, coordinator_keys=[key]).coordinators
        else:
            answer = connection.call(apis.FIND_COORDINATOR, key_type=key_type, key=key)
        check(answer.error_code, f"FindCoordinator for {key}")
        return self._connect(f"{answer.host}:{answer.port}")

    def close(self) -> None:
        for connection in self._connections.values():
            connection.close()
        self._connections.clear()

    def __enter__(self) -> Cluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
