"""Capture the requests real clients send, as bytes, for tests/unit/test_captured_requests.py.

    python -m tests.capture_requests      # rewrites tests/data/captured/

A recording TCP proxy sits in front of an Ottla broker that advertises the proxy's
address, so every connection a client opens (bootstrap, then the broker it learns from
Metadata, the coordinators) goes through it. librdkafka (confluent-kafka) then runs an
admin client, a transactional producer with a consumer group's offsets in the
transaction, a read_committed group consumer (classic), then one of KIP-848's protocol.
The first request of each API and version is kept as its whole frame (size prefix included) in
tests/data/captured/librdkafka/<api key>-<api name>-v<version>.bin.

The files are the evidence, not this script: the unit test reads them, decodes each
with Ottla's codec and encodes it back, and a bug shared by Ottla's encoder and decoder
cannot make bytes that librdkafka wrote come back the same. Run again only to capture
a client version's new requests (and say which in the commit).
"""

from __future__ import annotations

import os
import shutil
import socket
import threading
import uuid

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic, OffsetSpec

from ottla.protocol.codec import request_class
from ottla.testing import BrokerProcess

CAPTURED_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "captured")


class RecordingProxy:
    """Forwards each accepted connection to `upstream` and keeps every frame the client
    sends, in arrival order per connection."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self.frames: list[bytes] = []
        self._lock = threading.Lock()
        self._server = socket.create_server(("127.0.0.1", 0))
        self.port = self._server.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            broker = socket.create_connection(self.upstream)
            threading.Thread(target=self._requests, args=(client, broker), daemon=True).start()
            threading.Thread(target=self._pump, args=(broker, client), daemon=True).start()

    def _requests(self, source: socket.socket, sink: socket.socket) -> None:
        pending = b""
        while chunk := _receive(source):
            if not _send(sink, chunk):
                break
            pending += chunk
            while len(pending) >= 4 and len(pending) >= 4 + int.from_bytes(pending[:4], "big"):
                size = 4 + int.from_bytes(pending[:4], "big")
                with self._lock:
                    self.frames.append(pending[:size])
                pending = pending[size:]
        _close(sink)

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket) -> None:
        while (chunk := _receive(source)) and _send(sink, chunk):
            pass
        _close(sink)

    def close(self) -> None:
        self._server.close()


def _receive(sock: socket.socket) -> bytes:
    try:
        return sock.recv(65536)
    except OSError:
        return b""


def _send(sock: socket.socket, data: bytes) -> bool:
    try:
        sock.sendall(data)
        return True
    except OSError:
        return False


def _close(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


def run_librdkafka(bootstrap: str) -> None:
    """Admin, a transaction with a group's offsets in it, a group consumer."""
    topic, group = f"captured-{uuid.uuid4().hex[:6]}", "captured-group"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, 2, 1)]).values():
        future.result(30)
    for future in admin.describe_configs([ConfigResource("topic", topic)]).values():
        future.result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "captured-txn", "linger.ms": 5})
    producer.init_transactions(30)
    producer.begin_transaction()
    for i in range(10):
        producer.produce(topic, key=b"k%d" % i, value=b"v%d" % i, partition=i % 2, headers=[("h", b"1")])
    producer.flush(30)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "isolation.level": "read_committed",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    producer.send_offsets_to_transaction([TopicPartition(topic, 0, 5)], consumer.consumer_group_metadata(), 30)
    producer.commit_transaction(30)
    consumer.subscribe([topic])
    got = 0
    while got < 5:  # partition 1's five: partition 0's offset 5, committed in the transaction, is its end
        message = consumer.poll(10)
        assert message is not None, "the group consumer read nothing"
        if not message.error():
            got += 1
    consumer.commit(asynchronous=False)
    consumer.close()
    # The same group's records through KIP-848's protocol (ConsumerGroupHeartbeat).
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"{group}-848", "group.protocol": "consumer",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    message = None
    while message is None or message.error():
        message = consumer.poll(30)
        assert message is not None, "the KIP-848 consumer read nothing"
    consumer.commit(asynchronous=False)
    consumer.close()
    for future in admin.list_offsets({TopicPartition(topic, 0): OffsetSpec.latest()}).values():
        future.result(30)
    for future in admin.delete_topics([topic]).values():
        future.result(30)


def write_captured(frames: list[bytes], directory: str) -> list[str]:
    """The first frame of each API and version into `directory`; the names written."""
    shutil.rmtree(directory, ignore_errors=True)
    os.makedirs(directory)
    written: list[str] = []
    for frame in frames:
        api_key, version = int.from_bytes(frame[4:6], "big"), int.from_bytes(frame[6:8], "big")
        cls = request_class(api_key, version)
        name = f"{api_key:02d}-{cls.__name__.removesuffix('Request') if cls else 'Unknown'}-v{version}.bin"
        if name in written:
            continue
        with open(os.path.join(directory, name), "wb") as f:
            f.write(frame)
        written.append(name)
    return sorted(written)


def main() -> None:
    broker = BrokerProcess(None)
    broker.start()
    host, port = broker.bootstrap.rsplit(":", 1)
    proxy = RecordingProxy((host, int(port)))
    broker.stop()
    broker.properties["advertised.listeners"] = f"PLAINTEXT://127.0.0.1:{proxy.port}"
    broker.start()
    try:
        run_librdkafka(f"127.0.0.1:{proxy.port}")
    finally:
        proxy.close()
        broker.cleanup()
    for name in write_captured(proxy.frames, os.path.join(CAPTURED_DIR, "librdkafka")):
        print(name)


if __name__ == "__main__":
    main()
