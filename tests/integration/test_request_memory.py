"""Request memory (issue 28, points 3 and 13): frames before authentication bounded by
`sasl.server.max.receive.size`, closed at the size prefix as Kafka's
SaslServerAuthenticator does; all request memory, read or queued, in one pool bounded by
`queued.max.request.bytes`; memory given back once a burst is over."""

from __future__ import annotations

import struct

import pytest
from confluent_kafka import Producer

from ottla.protocol.errors import ErrorCode
from ottla.testing import BrokerProcess
from tests.wire import WireClient, request

PASSWORD = "alice-secret"
SASL_HANDSHAKE, SASL_AUTHENTICATE = 17, 36


@pytest.fixture(scope="module")
def sasl_broker(tmp_path_factory):
    broker = BrokerProcess(str(tmp_path_factory.mktemp("preauth") / "data"), {
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config":
            f'org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="{PASSWORD}";',
    }).start()
    yield broker
    broker.cleanup()


def test_a_frame_over_sasl_server_max_receive_size_before_authentication_is_closed_at_its_prefix(sasl_broker):
    """Point 3. Three unauthenticated sockets each announcing a 40 MiB frame are closed at
    the size prefix, before their bodies; one announcing exactly 512 KiB is read on.
    Broken by not bounding frames in _bound_frames: the 40 MiB sockets stayed open."""
    clients = [WireClient(sasl_broker.bootstrap) for _ in range(3)]
    for client in clients:
        client.send_raw(struct.pack(">i", 40 << 20) + b"\0" * 65536)
    assert all(client.is_closed(timeout=5) for client in clients)
    assert "exceeds sasl.server.max.receive.size (524288)" in sasl_broker.log()
    with WireClient(sasl_broker.bootstrap) as at_the_bound:
        at_the_bound.send_raw(struct.pack(">i", 524288) + b"\0" * 1000)
        assert not at_the_bound.is_closed(timeout=1)
    for client in clients:
        client.close()


def test_after_authentication_frames_are_bounded_by_socket_request_max_bytes(sasl_broker, topic_name):
    """A real client authenticates, then produces a 900 KB record (a frame over 512 KiB)."""
    producer = Producer({"bootstrap.servers": sasl_broker.bootstrap, "security.protocol": "SASL_PLAINTEXT",
                         "sasl.mechanism": "PLAIN", "sasl.username": "alice", "sasl.password": PASSWORD})
    errors: list[object] = []
    producer.produce(topic_name, b"x" * 900_000, on_delivery=lambda error, message: errors.append(error))
    assert producer.flush(20) == 0 and errors == [None]
    # And a raw one: authenticated, a 600 KB ApiVersions-sized frame is read whole (and
    # refused for what it is, not for its size).
    with WireClient(sasl_broker.bootstrap) as client:
        assert client.call(request(SASL_HANDSHAKE, 1, mechanism="PLAIN")).error_code == ErrorCode.none
        answer = client.call(request(SASL_AUTHENTICATE, 2, auth_bytes=f"\0alice\0{PASSWORD}".encode()))
        assert answer.error_code == ErrorCode.none
        client.send_raw(struct.pack(">i", 600_000) + b"\0" * 600_000)
        assert client.is_closed(timeout=5)
    assert "frame of 600000 bytes exceeds" not in sasl_broker.log()


def _frame(topic: str, records_bytes: int) -> bytes:
    from ottla.protocol.codec import encode_request

    entity = request(0, 9, acks=1, timeout=5000, topic_data=[{"name": topic, "partition_data": [
        {"index": 0, "records": b"\0" * records_bytes}]}])
    return encode_request(7, "memory-test", entity)


def test_no_request_is_read_while_the_pool_is_exhausted(fresh_broker, topic_name):
    """Point 13. With queued.max.request.bytes at 8 MiB, a client that announces a 16 MiB
    request and sends 9 MiB of it holds the pool (counted by the bytes received, issue
    40): another client's 1 MiB request waits unread, and is read and answered once the
    first client goes. Broken by letting a connection that holds nothing start any
    request (the rule before): the 1 MiB request was answered at once."""
    broker = fresh_broker(queued_max_request_bytes=8 << 20)
    broker.create_topic(topic_name, 1, {"max.message.bytes": str(4 << 20)})
    hog = WireClient(broker.bootstrap)
    hog.send_raw(struct.pack(">i", 16 << 20) + b"\0" * (9 << 20))
    with WireClient(broker.bootstrap) as probe:  # the hog's bytes are read: the pool is full
        assert probe.call(request(18, 3, client_software_name="t", client_software_version="1")).error_code == 0
    with WireClient(broker.bootstrap) as client:
        client.send_raw(_frame(topic_name, 1 << 20))
        client.sock.settimeout(2)
        with pytest.raises(TimeoutError):
            client.read_frame()  # not read, so not answered
        hog.close()
        client.sock.settimeout(10)
        (_, response) = client.receive(0, 9)
    assert response.responses[0].partition_responses[0].error_code != ErrorCode.none  # zeros: not a batch
    # A small request is still read, the pool exhausted or not.
    with WireClient(broker.bootstrap) as small:
        assert small.call(request(18, 3, client_software_name="t", client_software_version="1")).error_code == 0


def test_a_burst_of_large_frames_leaves_no_memory_behind(fresh_broker, topic_name):
    """Point 13's acceptance: eight clients each send four 48 MB requests and vanish; the
    broker is back under 150 MB resident within 10 s of the last leaving."""
    import threading
    import time

    from tests.process_stats import resident_mib

    broker = fresh_broker()
    broker.create_topic(topic_name, 1, {"max.message.bytes": str(64 << 20)})
    frame = _frame(topic_name, 48_000_000)

    def client() -> None:
        with WireClient(broker.bootstrap) as c:
            try:
                for _ in range(4):
                    c.send_raw(frame)
            except OSError:
                pass

    threads = [threading.Thread(target=client) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    pid = broker.process.pid
    deadline = time.monotonic() + 10
    resident = resident_mib(pid)
    while resident >= 150 and time.monotonic() < deadline:
        time.sleep(0.5)
        resident = resident_mib(pid)
    assert resident < 150, f"{resident:.0f} MiB resident 10 s after the burst"
