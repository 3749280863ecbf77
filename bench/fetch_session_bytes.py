"""Bytes per Fetch for a consumer of 1,000 partitions, with and without a fetch session
(issue 14): the request and the answer when nothing is new, and when one partition has
one new record. Raw requests (Fetch v12) against Ottla; run as
`python -m bench.fetch_session_bytes`.
"""

from __future__ import annotations

import tempfile
import time

from ottla.protocol.batch import build_batch, encode_record
from ottla.protocol.codec import decode_response, encode_request
from ottla.testing import BrokerProcess
from tests.clients import create_topic
from tests.wire import WireClient, request

PARTITIONS = 1000
TOPIC = "fetch-session-bytes"


def _fetch(session_id: int, epoch: int, offsets: dict[int, int]):  # type: ignore[no-untyped-def]
    return request(1, 12, replica_id=-1, max_wait=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0,
                   session_id=session_id, session_epoch=epoch,
                   topics=[{"topic": TOPIC, "partitions": [
                       {"partition": p, "fetch_offset": o, "partition_max_bytes": 1 << 20, "current_leader_epoch": -1,
                        "last_fetched_epoch": -1, "log_start_offset": -1} for p, o in offsets.items()]}]
                   if offsets else [], forgotten_topics_data=[], rack_id="")


def _exchange(client: WireClient, entity: object) -> tuple[int, int, object]:
    """(request bytes, response bytes, decoded response) of one Fetch."""
    client.correlation_id += 1
    data = encode_request(client.correlation_id, "fetch-session-bytes", entity)
    client.send_raw(data)
    frame = client.read_frame()
    return len(data), 4 + len(frame), decode_response(1, 12, frame)[1]


def measure() -> list[tuple[str, int, int]]:
    broker = BrokerProcess(tempfile.mkdtemp(prefix="fetch-session-bytes-") + "/data").start()
    try:
        create_topic(broker.bootstrap, TOPIC, PARTITIONS)
        everything = dict.fromkeys(range(PARTITIONS), 0)
        rows = []
        with WireClient(broker.bootstrap, timeout=30) as client:
            sent, got, _ = _exchange(client, _fetch(0, -1, everything))
            rows.append(("without a session, nothing new", sent, got))
            _, _, opened = _exchange(client, _fetch(0, 0, everything))
            session = opened.session_id  # type: ignore[attr-defined]
            sent, got, _ = _exchange(client, _fetch(session, 1, {}))
            rows.append(("in a session, nothing new", sent, got))
            batch = build_batch([encode_record(None, b"n" * 100)], timestamp=int(time.time() * 1000))
            client.call(request(0, 9, transactional_id=None, acks=-1, timeout=30000, topic_data=[
                {"name": TOPIC, "partition_data": [{"index": 7, "records": batch}]}]))
            sent, got, _ = _exchange(client, _fetch(session, 2, {}))
            rows.append(("in a session, one new record in one partition", sent, got))
            sent, got, _ = _exchange(client, _fetch(0, -1, everything))
            rows.append(("without a session, one new record in one partition", sent, got))
        return rows
    finally:
        broker.cleanup()


def lines(rows: list[tuple[str, int, int]]) -> list[str]:
    out = [f"Bytes per Fetch (v12) for one consumer of {PARTITIONS:,} partitions (bench/fetch_session_bytes.py):", "",
           "| fetch | request bytes | response bytes |", "|---|---:|---:|"]
    out += [f"| {name} | {sent:,} | {got:,} |" for name, sent, got in rows]
    return out


if __name__ == "__main__":
    print("\n".join(lines(measure())))
