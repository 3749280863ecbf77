"""Round trip of one request at a time (issue 15): Ottla next to the peers, on one
connection, over a raw socket, so that what is measured is the broker's own time per
request plus the loopback, not a client's batching or timers.

Each round sends, in order and each after the previous answer: FindCoordinator (a
transactional id), Metadata (one topic), InitProducerId (the transactional id: a new
epoch each round), AddPartitionsToTxn (one partition), Produce (one 100-byte record,
transactional), EndTxn (commit) and Fetch (at the log end, no wait: an empty answer).
A request's time runs from its send to its whole answer read (encoding the request
and decoding the answer are the client's work and left out). WARMUP rounds first, then ROUNDS measured ones; p50 and p99
per request. Target: Ottla within 1.2x noida-db at each.
"""

from __future__ import annotations

import socket
import statistics
import time
from dataclasses import dataclass
from typing import Callable

from ottla.protocol.batch import TRANSACTIONAL_FLAG, build_batch, encode_record
from ottla.protocol.codec import decode_response, encode_request
from tests.clients import create_topic
from tests.wire import WireClient, request

from .peers import Ottla, Peer, peak_resident, peers

WARMUP, ROUNDS = 200, 2000
TARGET = 1.2  # Ottla's time at most this multiple of noida-db's
TOPIC = "round-trips"
TXN_ID = "round-trips"
REQUESTS = ("FindCoordinator", "Metadata", "InitProducerId", "AddPartitionsToTxn", "Produce", "EndTxn", "Fetch")


@dataclass
class RoundTrips:
    broker: str
    # request name -> seconds of each measured round
    times: dict[str, list[float]]
    rss_peak: int | None = None  # Ottla's peak resident memory (VmHWM) over the run, bytes

    def percentile(self, name: str, p: float) -> float:
        ordered = sorted(self.times[name])
        return ordered[min(len(ordered) - 1, int(len(ordered) * p))]


def _read_frame_spinning(sock: socket.socket) -> bytes:
    """One response frame, read by polling the non-blocking socket: the client never
    sleeps, so its own wake-up (a few hundred microseconds on a small VM) is not in the
    figure, only the broker's."""
    got = bytearray()
    need = 4
    deadline = time.monotonic() + 30
    while len(got) < need:
        try:
            chunk = sock.recv(65536)
        except BlockingIOError:
            if time.monotonic() > deadline:
                raise TimeoutError("no answer within 30 s") from None
            continue
        if not chunk:
            raise ConnectionError("the broker closed the connection")
        got += chunk
        if len(got) >= 4:
            need = 4 + int.from_bytes(got[:4], "big")
    return bytes(got[4:need])


def _timed(client: WireClient, entity: object) -> tuple[float, object]:
    api_key, version = type(entity).__api_key__, type(entity).__version__  # type: ignore[attr-defined]
    client.correlation_id += 1
    data = encode_request(client.correlation_id, "round-trips", entity)  # the client's work, before the clock
    started = time.perf_counter()
    client.sock.sendall(data)
    frame = _read_frame_spinning(client.sock)
    elapsed = time.perf_counter() - started
    _, body = decode_response(api_key, version, frame)
    return elapsed, body


def _round(client: WireClient) -> dict[str, float]:
    """One round: the time of each request."""
    times: dict[str, float] = {}
    times["FindCoordinator"], _ = _timed(client, request(10, 4, key_type=1, coordinator_keys=[TXN_ID]))
    times["Metadata"], _ = _timed(client, request(3, 12, topics=[{"name": TOPIC, "topic_id": None}],
                                                  allow_auto_topic_creation=False,
                                                  include_topic_authorized_operations=False))
    times["InitProducerId"], init = _timed(client, request(22, 4, transactional_id=TXN_ID, transaction_timeout=60000,
                                                           producer_id=-1, producer_epoch=-1))
    assert init.error_code == 0, init  # type: ignore[attr-defined]
    pid, epoch = init.producer_id, init.producer_epoch  # type: ignore[attr-defined]
    times["AddPartitionsToTxn"], added = _timed(client, request(
        24, 3, v3_and_below_transactional_id=TXN_ID, v3_and_below_producer_id=pid, v3_and_below_producer_epoch=epoch,
        v3_and_below_topics=[{"name": TOPIC, "partitions": [0]}]))
    batch = build_batch([encode_record(None, b"r" * 100)], timestamp=int(time.time() * 1000), producer_id=pid,
                        producer_epoch=epoch, base_sequence=0, attributes=TRANSACTIONAL_FLAG)
    times["Produce"], produced = _timed(client, request(0, 9, transactional_id=TXN_ID, acks=-1, timeout=30000,
                                                        topic_data=[{"name": TOPIC, "partition_data": [
                                                            {"index": 0, "records": batch}]}]))
    result = produced.responses[0].partition_responses[0]  # type: ignore[attr-defined]
    assert result.error_code == 0, result
    times["EndTxn"], ended = _timed(client, request(26, 3, transactional_id=TXN_ID, producer_id=pid,
                                                    producer_epoch=epoch, committed=True))
    assert ended.error_code == 0, ended  # type: ignore[attr-defined]
    log_end = result.base_offset + 2  # the record and the commit marker
    times["Fetch"], _ = _timed(client, request(1, 12, replica_id=-1, max_wait=0, min_bytes=0, max_bytes=1 << 20,
                                               isolation_level=0, session_id=0, session_epoch=-1, topics=[
                                                   {"topic": TOPIC, "partitions": [
                                                       {"partition": 0, "fetch_offset": log_end,
                                                        "partition_max_bytes": 1 << 20, "current_leader_epoch": -1,
                                                        "last_fetched_epoch": -1, "log_start_offset": -1}]}],
                                               forgotten_topics_data=[], rack_id=""))
    return times


def run_round_trips(say: Callable[[str], None], rounds: int = ROUNDS, warmup: int = WARMUP) -> list[RoundTrips]:
    """Ottla and noida-db (when installed) side by side: both run at once and the
    rounds alternate between them, so drift of the machine falls on both alike."""
    available = peers()
    contenders: list[Peer] = [Ottla()]
    noida = available.get("noida-db")
    if callable(noida):
        contenders.append(noida())
    else:
        say(f"round trips: noida-db left out: {noida}")
    say(f"round trips: {', '.join(p.name for p in contenders)}, {rounds:,} rounds of {len(REQUESTS)} requests each")
    results = [RoundTrips(peer.name, {name: [] for name in REQUESTS}) for peer in contenders]
    clients: list[WireClient] = []
    try:
        for peer in contenders:
            peer.start()
            create_topic(peer.bootstrap, TOPIC, 1)
            client = WireClient(peer.bootstrap, timeout=30)
            client.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            client.sock.setblocking(False)
            clients.append(client)
        for i in range(warmup + rounds):
            order = range(len(clients)) if i % 2 == 0 else reversed(range(len(clients)))
            for k in order:
                times = _round(clients[k])
                if i >= warmup:
                    for name, seconds in times.items():
                        results[k].times[name].append(seconds)
        results[0].rss_peak = peak_resident(contenders[0].pid)
    finally:
        for client in clients:
            client.close()
        for peer in contenders:
            peer.stop()
    return results


def round_trip_lines(results: list[RoundTrips] | None) -> list[str]:
    if not results:
        return []
    ottla, others = results[0], results[1:]
    header = "| request | Ottla p50 | Ottla p99 |" + "".join(f" {o.broker} p50 | {o.broker} p99 | p50 ratio | verdict |"
                                                            for o in others)
    lines = [f"Round trip of one request at a time, raw socket, {len(ottla.times['Produce']):,} rounds "
             f"(bench/round_trips.py; target: Ottla's p50 within {TARGET}x noida-db's), microseconds", "",
             header, "|---" * (3 + 4 * len(others)) + "|"]
    for name in REQUESTS:
        row = f"| {name} | {ottla.percentile(name, 0.5) * 1e6:,.0f} | {ottla.percentile(name, 0.99) * 1e6:,.0f} |"
        for other in others:
            ratio = ottla.percentile(name, 0.5) / other.percentile(name, 0.5)
            row += (f" {other.percentile(name, 0.5) * 1e6:,.0f} | {other.percentile(name, 0.99) * 1e6:,.0f} |"
                    f" {ratio:.2f}x | {'met' if ratio <= TARGET else '**missed**'} |")
        lines.append(row)
    total = sum(statistics.median(ottla.times[name]) for name in REQUESTS)
    lines += ["", f"A whole round (the medians summed): Ottla {total * 1e6:,.0f} us"
              + "".join(f", {o.broker} {sum(statistics.median(o.times[n]) for n in REQUESTS) * 1e6:,.0f} us"
                        for o in others) + "."]
    return lines


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(prog="python -m bench.round_trips", description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    args = parser.parse_args()
    outcome = run_round_trips(lambda line: print(line, flush=True), args.rounds)
    print("\n".join(round_trip_lines(outcome)))
