"""Half-sent frames and connection counts, as an attacker sends them (issue 40, points 1
and 8): raw sockets announcing large frames and sending little or nothing of them, before
and after authentication; clients that queue large frames behind a long poll and vanish;
more connections from one address than the broker allows.

Request memory counts what a connection has received, not what its size prefix
promises; a connection whose frame stalls is closed after connections.max.idle.ms as any
idle one; frames read before authentication take nothing from queued.max.request.bytes;
max.connections.per.ip (and its overrides) close a connection over the bound right after
it is accepted, and max.connections stops accepting until one closes, as Kafka's
ConnectionQuotas do."""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
import time

from confluent_kafka import Producer

from ottla.testing import BrokerProcess
from tests.clients import create_topic, idempotent_producer, produce_all
from tests.process_stats import resident_mib
from tests.wire import WireClient, filler_produce_frame, long_poll, request

API_VERSIONS = 18
MiB = 1024 * 1024
PASSWORD = "alice-secret"


def _until(condition, what: str, timeout: float = 60) -> None:
    """Poll for `condition`; the timeout only bounds the test."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.1)


def _answers(client: WireClient) -> bool:
    return client.call(request(API_VERSIONS, 3, client_software_name="t", client_software_version="1")).error_code == 0


def _half_frames(bootstrap: str, count: int, size: int, body: bytes = b"\0") -> list[WireClient]:
    """`count` sockets each announcing a `size`-byte frame and sending `body` of it."""
    clients = [WireClient(bootstrap) for _ in range(count)]
    for client in clients:
        client.send_raw(struct.pack(">i", size) + body)
    return clients


def test_announced_frames_hold_no_memory_and_starve_no_one(fresh_broker, topic_name):
    """Three sockets each announce a 100 MiB frame and send one byte of it. Before: the
    broker took 300 MiB of the 256 MiB pool (and of RSS, a zeroed buffer per prefix) at
    the prefixes, so another client's 200 KB produce waited unread until it timed out."""
    broker = fresh_broker()
    create_topic(broker.bootstrap, topic_name, 1)
    before = resident_mib(broker.process.pid)
    attackers = _half_frames(broker.bootstrap, 3, 100 * MiB)
    with WireClient(broker.bootstrap) as probe:
        assert _answers(probe)  # the prefixes were read
    producer = idempotent_producer(broker.bootstrap, **{"message.timeout.ms": 60000})
    produce_all(producer, [(topic_name, 0, None, b"v" * 200_000)])
    grown = resident_mib(broker.process.pid) - before
    assert grown < 64, f"three announced frames grew the broker by {grown:.0f} MiB"
    for attacker in attackers:
        attacker.close()


def test_a_stalled_half_frame_is_closed_after_connections_max_idle_ms(fresh_broker):
    """A 50 MiB frame announced, 1 MiB of it sent, then nothing: the connection is idle
    (nothing in or out) and is closed as Kafka closes it, by its last I/O, mid-frame or
    not. Before: it stayed open as long as the client liked."""
    broker = fresh_broker(connections_max_idle_ms=2000)
    (stalled,) = _half_frames(broker.bootstrap, 1, 50 * MiB, b"\0" * MiB)
    _until(lambda: stalled.is_closed(timeout=1), "a stalled half frame outlived connections.max.idle.ms")
    assert "closing idle connection" in broker.log()
    stalled.close()


def test_a_half_frame_waiting_for_the_pool_is_closed_after_connections_max_idle_ms(fresh_broker):
    """With the pool (1 MiB) full of a request another client keeps sending a byte at a
    time, a client that sent part of its own and stalled is closed by its last I/O, as
    Kafka's channel muted for memory expires. Before: a connection the pool made wait
    was never idle, and stalled ones were closed one at a time as each got its turn."""
    broker = fresh_broker(queued_max_request_bytes=MiB, connections_max_idle_ms=2000)
    (trickler,) = _half_frames(broker.bootstrap, 1, 8 * MiB, b"\0" * (2 * MiB))  # fills the pool
    with WireClient(broker.bootstrap) as probe:
        assert _answers(probe)  # the trickler's bytes are read
    (stalled,) = _half_frames(broker.bootstrap, 1, 300_000, b"\0" * 100_000)  # waits for the pool
    stop = threading.Event()

    def trickle() -> None:
        with contextlib.suppress(OSError):
            while not stop.wait(0.3):
                trickler.send_raw(b"\0")

    threading.Thread(target=trickle, daemon=True).start()
    try:
        _until(lambda: stalled.is_closed(timeout=1), "a stalled half frame waiting for the pool was never closed")
    finally:
        stop.set()
    assert not trickler.is_closed(timeout=0.2), "the client sending its request was closed as idle"
    trickler.close()
    stalled.close()


def test_frames_before_authentication_take_nothing_from_the_pool(tmp_path, topic_name):
    """Nine unauthenticated sockets each announce a 512 KiB frame (the most
    sasl.server.max.receive.size allows) and send 500 KiB of it, with the pool at 4 MiB.
    Before: they held 4.5 MiB of it from their prefixes on, and an authenticated
    client's 200 KB produce waited unread until it timed out (with the 256 MiB default,
    about 512 such prefixes did it, with no credentials)."""
    broker = BrokerProcess(str(tmp_path / "data"), {
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config":
            f'org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="{PASSWORD}";',
        "queued.max.request.bytes": str(4 * MiB),
    }).start()
    try:
        attackers = _half_frames(broker.bootstrap, 9, 512 * 1024, b"\0" * (500 * 1024))
        time.sleep(0.5)  # let the broker read them (the produce must come after them)
        producer = Producer({"bootstrap.servers": broker.bootstrap, "security.protocol": "SASL_PLAINTEXT",
                             "sasl.mechanism": "PLAIN", "sasl.username": "alice", "sasl.password": PASSWORD,
                             "message.timeout.ms": 60000})
        errors: list[object] = []
        producer.produce(topic_name, b"v" * 200_000, on_delivery=lambda error, message: errors.append(error))
        assert producer.flush(90) == 0 and errors == [None], errors
        for attacker in attackers:
            assert not attacker.is_closed(timeout=0.2), "a frame at the bound was refused"
            attacker.close()
    finally:
        broker.cleanup()


def test_memory_goes_back_after_clients_vanish_behind_along_poll(fresh_broker, topic_name):
    """Eight clients each queue four 48 MB frames behind a long-polling Fetch, and vanish:
    the broker is back under 150 MB resident within 10 s. Before: it read up to its 256
    MiB pool and held it (349 MB resident) as long as the sockets lived, and a socket
    whose client vanished behind unread bytes lives until it is closed as idle: the
    client's FIN waits behind them."""
    broker = fresh_broker(admin_port=0)
    create_topic(broker.bootstrap, topic_name, 1)
    pid = broker.process.pid
    frame = filler_produce_frame(48_000_000)
    clients = []
    read_before = broker.admin.metric("ottla_bytes_in_total")

    def flood(client: WireClient) -> None:
        with contextlib.suppress(OSError):
            for _ in range(4):
                client.send_raw(frame)

    threads = []
    for _ in range(8):
        client = WireClient(broker.bootstrap, timeout=120)
        client.send(long_poll(topic_name))
        clients.append(client)
        threads.append(threading.Thread(target=flood, args=(client,), daemon=True))
        threads[-1].start()

    def read_mib() -> float:
        return (broker.admin.metric("ottla_bytes_in_total") - read_before) / MiB

    # The broker reads a few MiB behind each long poll, then stops reading: wait for both.
    _until(lambda: read_mib() >= 8 * 2, "the broker never read the burst")
    previous, deadline = -1.0, time.monotonic() + 60
    while (now := read_mib()) != previous:
        assert time.monotonic() < deadline, f"the broker kept reading: {now:.0f} MiB"
        previous = now
        time.sleep(1)
    for client in clients:
        with contextlib.suppress(OSError):
            client.sock.shutdown(socket.SHUT_RDWR)
        client.close()
    for thread in threads:
        thread.join(30)
    deadline = time.monotonic() + 10
    resident = resident_mib(pid)
    while resident >= 150 and time.monotonic() < deadline:
        time.sleep(0.5)
        resident = resident_mib(pid)
    assert resident < 150, f"{resident:.0f} MiB resident 10 s after the clients vanished"


def test_connections_over_max_connections_per_ip_are_closed_after_accept(fresh_broker):
    """max.connections.per.ip=3: a fourth connection from 127.0.0.1 is closed at once
    (Kafka's "Rejected connection from ... already has the configured maximum"); one
    closing makes room. Before: every connection was served."""
    broker = fresh_broker(max_connections_per_ip=3)
    kept = [WireClient(broker.bootstrap) for _ in range(3)]
    assert all(_answers(client) for client in kept)
    with WireClient(broker.bootstrap) as fourth:
        assert fourth.is_closed(timeout=30), "a fourth connection from one address was served"
    assert "already has the configured maximum of 3 connections" in broker.log()
    kept.pop().close()

    def fresh_one_answers() -> bool:
        with WireClient(broker.bootstrap) as again:
            try:
                return _answers(again)
            except (OSError, EOFError):
                return False
    _until(fresh_one_answers, "a closed connection's slot was not given back")
    for client in kept:
        client.close()


def test_max_connections_per_ip_overrides_raise_the_bound_for_one_address(fresh_broker):
    broker = fresh_broker(max_connections_per_ip=1, max_connections_per_ip_overrides="127.0.0.1:3")
    kept = [WireClient(broker.bootstrap) for _ in range(3)]
    assert all(_answers(client) for client in kept)
    with WireClient(broker.bootstrap) as fourth:
        assert fourth.is_closed(timeout=30), "the override's bound was not kept"
    for client in kept:
        client.close()


def test_max_connections_stops_accepting_until_one_closes(fresh_broker):
    """max.connections=2: a third connection waits unaccepted (Kafka's acceptor blocks)
    and is served once one of the two closes."""
    broker = fresh_broker(max_connections=2)
    kept = [WireClient(broker.bootstrap) for _ in range(2)]
    assert all(_answers(client) for client in kept)
    third = WireClient(broker.bootstrap, timeout=2)
    third.send(request(API_VERSIONS, 3, client_software_name="t", client_software_version="1"))
    try:
        third.read_frame()
        raise AssertionError("a connection past max.connections was served")
    except TimeoutError:
        pass
    kept.pop().close()
    third.sock.settimeout(60)
    assert third.read_frame()  # answered once a slot is free
    third.close()
    for client in kept:
        client.close()
