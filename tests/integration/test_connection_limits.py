"""What one client's connection may hold (issue 12 points 8 and 12), over the wire.

Before: a client that sent a long-polling Fetch and closed left its socket in
CLOSE_WAIT (and its queued requests in memory) until the wait ended; queued requests
had no bound in bytes; an idle connection was kept forever."""

from __future__ import annotations

import contextlib
import socket
import threading
import time

from tests.clients import create_topic, idempotent_producer, produce_all
from tests.process_stats import open_descriptors, resident_mib
from tests.wire import WireClient, filler_produce_frame, long_poll, request

API_VERSIONS = 18
MiB = 1024 * 1024


def _until(condition, what: str, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.1)


def test_clients_that_vanish_behind_a_long_poll_leave_nothing_behind(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, 1)
    pid = broker.process.pid
    with WireClient(broker.bootstrap):
        pass
    baseline_fds = open_descriptors(pid)
    for _ in range(300):
        client = WireClient(broker.bootstrap)
        client.send(long_poll(topic_name))
        client.close()
    # Each closed socket is closed by the broker too, not left in CLOSE_WAIT until the
    # Fetch's wait (24 days) ends.
    _until(lambda: open_descriptors(pid) <= baseline_fds + 5, "descriptors of vanished clients were kept")

    # Clients that queue requests behind a long poll (within what the broker reads on
    # behind it, frame_intake.PIPELINED_BYTES) and vanish leave no memory or descriptor
    # held. (Those that queue more leave their FIN behind bytes the broker does not read:
    # test_half_sent_frames.)
    before = resident_mib(pid)
    for _ in range(8):
        client = WireClient(broker.bootstrap)
        client.send(long_poll(topic_name))
        client.send_raw(filler_produce_frame(MiB) * 3)
        client.close()
    _until(lambda: resident_mib(pid) < before + 64, "queued requests of vanished clients are still held")
    _until(lambda: open_descriptors(pid) <= baseline_fds + 5, "descriptors of vanished clients were kept")
    producer = idempotent_producer(broker.bootstrap)
    produce_all(producer, [(topic_name, 0, None, b"served")])


def test_queued_request_bytes_are_bounded_across_connections(fresh_broker, topic_name):
    """Twelve clients offer 96 MiB each behind a long poll; the broker reads the load (at
    least the 16 MiB bound: checked first, so an upper bound met by a broker that read
    nothing cannot pass), then stops reading, short of what was offered (and of the 4 MiB
    each it would read on behind a long poll without the bound), and holds about the
    bound in memory.

    Checked by breaking it: RequestMemory.full made `return False` (no bound): the
    broker reads far past the bound and the test fails; the connection made to pause
    reading on its first bytes (`self._over_limits()` made `True` in Connection._take):
    nothing like the bound is read and the first assertion fails, where the old sleep
    and upper bound passed."""
    broker = fresh_broker(queued_max_request_bytes=16 * MiB, admin_port=0)
    create_topic(broker.bootstrap, topic_name, 1)
    pid = broker.process.pid
    before = resident_mib(pid)
    read_before = broker.admin.metric("ottla_bytes_in_total")
    clients = []

    def flood(client: WireClient) -> None:
        # Never reads: the broker stops reading too once the bound is reached, and
        # this send blocks in TCP until the test closes the socket.
        try:
            client.send_raw(filler_produce_frame(16 * MiB) * 6)
        except OSError:
            pass

    for _ in range(12):  # 12 x 96 MiB offered
        client = WireClient(broker.bootstrap, timeout=30)
        client.send(long_poll(topic_name))
        clients.append(client)
        threading.Thread(target=flood, args=(client,), daemon=True).start()

    def read_mib() -> float:
        return (broker.admin.metric("ottla_bytes_in_total") - read_before) / MiB

    _until(lambda: read_mib() >= 16, "the broker never read the load (the bound's 16 MiB)")
    # Then it stops reading: what it has read stays put for a second.
    previous = -1.0
    deadline = time.monotonic() + 30
    while (now := read_mib()) != previous:
        assert time.monotonic() < deadline, f"the broker kept reading: {now:.0f} MiB"
        previous = now
        time.sleep(1)
    # The bound (16 MiB) plus one request being finished and a read (256 KiB) per
    # connection, of the 1,152 MiB offered (48 MiB read behind the long polls without the
    # bound); and about as much held in memory.
    assert previous < 16 + 16 + 4, f"the broker read {previous:.0f} MiB of the 1,152 offered"
    held = resident_mib(pid) - before
    assert held < 16 + 16 + 4 + 32, f"the broker holds {held:.0f} MiB of queued requests"
    # Everyone else is still served meanwhile.
    producer = idempotent_producer(broker.bootstrap)
    produce_all(producer, [(topic_name, 0, None, b"served")])
    for client in clients:
        # The produce above may have ended a client's long poll, and the broker then
        # closed that connection over the malformed filler behind it: already closed.
        with contextlib.suppress(OSError):
            client.sock.shutdown(socket.SHUT_RDWR)
        client.close()
    _until(lambda: resident_mib(pid) < before + 48, "queued requests of closed clients are still held")


def test_an_idle_connection_is_closed_after_connections_max_idle_ms(fresh_broker):
    broker = fresh_broker(connections_max_idle_ms=1000)
    with WireClient(broker.bootstrap) as idle, WireClient(broker.bootstrap) as active:
        deadline = time.monotonic() + 4
        while time.monotonic() < deadline:
            active.call(request(API_VERSIONS, 3, client_software_name="t", client_software_version="1"))
            time.sleep(0.3)
        assert idle.is_closed(timeout=1), "an idle connection outlived connections.max.idle.ms"
        assert not active.is_closed(timeout=0.1), "a connection in use was closed as idle"
    assert "closing idle connection" in broker.log()
