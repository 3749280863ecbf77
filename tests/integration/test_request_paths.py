"""The compiled request path (protocol/_codec.c) and the pure-Python one
(OTTLA_PURE_PYTHON=1), each in a real broker: the same requests get byte-identical
answers, the same lying and truncated requests close the connection, and a real client
produces and reads through either.

The unit tests (tests/unit/test_compiled_codec.py) compare the two codecs over every
class; this shows the broker runs the path it says it runs and that both serve clients.
Break-and-see-it-fail, made once by hand: making compiled_codec.ENABLED ignore
OTTLA_PURE_PYTHON failed test_each_broker_runs_the_path_it_was_given; packing every int64
as 0 in _codec.c's put_fixed (Produce's base offsets, Fetch's high watermarks) failed
test_answers_are_byte_identical.

The inline path in C (broker/network/_pipeline.c) runs in the compiled broker only:
test_pipelined_answers_are_byte_identical sends many requests in one write, so that one
read serves them all through it, then a frame it must leave to the Python path to refuse.
Break-and-see-it-fail, made once by hand: encoding every response with correlation id
1 in _pipeline.c failed test_pipelined_answers_are_byte_identical and
test_answers_are_byte_identical; the error codes of its responses left uncounted there
failed test_pipelined_answers_are_byte_identical (the two paths' metrics); its take()
serving a read without the worker idle (the wake-up's checks taken out: the worker
finishing a long poll) failed test_a_request_behind_a_long_poll_is_answered_after_it."""

from __future__ import annotations

import struct
import time
from collections.abc import Iterator

import pytest

from ottla.protocol.batch import build_batch, encode_record
from ottla.testing import BrokerProcess
from tests.clients import create_topic, idempotent_producer, produce_all, read_all
from tests.unit.extensions import compiled_extension
from tests.wire import WireClient, request

from .test_malformed_requests import LIES

TOPIC = "paths"
COMPACTED = "paths-compacted"
SMALL = "paths-small-batches"
PRODUCE, FETCH, API_VERSIONS = 0, 1, 18
LIST_OFFSETS, OFFSET_FETCH, HEARTBEAT, JOIN_GROUP, DESCRIBE_GROUPS = 2, 9, 12, 11, 15


@pytest.fixture(scope="module")
def brokers() -> Iterator[tuple[BrokerProcess, BrokerProcess]]:
    compiled_extension("_codec")  # a machine with a compiler must have built it
    compiled_extension("_pipeline", "ottla.broker.network")
    # Explicitly "0": the suite itself may run with OTTLA_PURE_PYTHON=1 in its environment.
    # The admin endpoint: the metrics of both paths are compared too.
    compiled = BrokerProcess(properties={"admin.port": "0"}, env={"OTTLA_PURE_PYTHON": "0"}).start()
    python = BrokerProcess(properties={"admin.port": "0"}, env={"OTTLA_PURE_PYTHON": "1"})
    try:
        python.start()
        for broker in (compiled, python):
            create_topic(broker.bootstrap, TOPIC, 1)
        yield compiled, python
    finally:
        for broker in (compiled, python):
            if broker.process is not None:
                broker.stop()
            broker.cleanup()


def _raw_call(client: WireClient, frame: bytes) -> bytes:
    client.send_raw(frame)
    return client.read_frame()


def _frame(entity: object, correlation_id: int) -> bytes:
    from ottla.protocol.codec import encode_request

    return encode_request(correlation_id, "paths-test", entity)


def _requests() -> list[bytes]:
    """ApiVersions v0-v4 and v5 (answered in v0: a version we do not speak), Produce v3-v11
    of one batch each, Fetch v4-v12 from the start."""
    frames = []
    cid = 0
    for version in range(0, 6):
        values = {"client_software_name": "paths", "client_software_version": "1"} if version >= 3 else {}
        if version == 5:  # kio has no v5: a raw v5 header with a v3 body
            body = _frame(request(API_VERSIONS, 3, **values), cid)[4:]
            raw = body[:2] + struct.pack(">h", 5) + body[4:]
            frames.append(struct.pack(">i", len(raw)) + raw)
        else:
            frames.append(_frame(request(API_VERSIONS, version, **values), cid))
        cid += 1
    for version in range(3, 12):
        batch = build_batch([encode_record(b"k", b"v%d" % version)], timestamp=1_700_000_000_000 + version)
        frames.append(_frame(request(PRODUCE, version, transactional_id=None, acks=-1, timeout=30000, topic_data=[
            {"name": TOPIC, "partition_data": [{"index": 0, "records": batch}]}]), cid))
        cid += 1
    for version in range(4, 13):
        values = {"replica_id": -1, "max_wait": 0, "min_bytes": 0, "max_bytes": 1 << 20, "isolation_level": 0,
                  "session_id": 0, "session_epoch": -1, "forgotten_topics_data": [], "rack_id": ""}
        partition = {"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0, "last_fetched_epoch": -1,
                     "log_start_offset": -1, "partition_max_bytes": 1 << 20}
        frames.append(_frame(request(FETCH, version, topics=[{"topic": TOPIC, "partitions": [partition]}],
                                     **values), cid))
        cid += 1
    return frames


def test_each_broker_runs_the_path_it_was_given(brokers: tuple[BrokerProcess, BrokerProcess]) -> None:
    compiled, python = brokers
    assert "request_path=compiled" in compiled.log()
    assert "request_path=python" in python.log()


def test_answers_are_byte_identical(brokers: tuple[BrokerProcess, BrokerProcess]) -> None:
    answers = []
    for broker in brokers:
        with WireClient(broker.bootstrap) as client:
            answers.append([_raw_call(client, frame) for frame in _requests()])
    compiled, python = answers
    assert len(compiled) == len(_requests())
    for i, (c, p) in enumerate(zip(compiled, python, strict=True)):
        assert c == p, f"request {i}: the compiled path answered {c[:64]!r}..., the Python path {p[:64]!r}..."
    # Fetch answers carry the records produced above (Fetch v4 is the first Fetch).
    assert b"v11" in compiled[-1]


def _produce_batches() -> list[tuple[str, bytes]]:
    """(topic, batch) for Produce: good ones (plain, idempotent, gzip),
    their retries (duplicates, sequence gaps), and every kind of bad one the handler's
    checks refuse, in C on one broker and in Python on the other."""
    from ottla.protocol.batch import CONTROL_FLAG, BatchHeader, recompressed
    from tests.unit.test_produced_batch_check import _patched, _raw_batch
    from tests.unit.test_records import DAMAGED, GOOD

    ts = 1_700_000_000_000
    good = build_batch(GOOD, timestamp=ts)
    keyed = build_batch([encode_record(b"k", b"v")], timestamp=ts)
    idempotent = [build_batch([encode_record(b"k", b"i%d" % seq)], timestamp=ts, producer_id=1000, producer_epoch=0,
                              base_sequence=seq) for seq in range(3)]
    batches = [(TOPIC, good), (TOPIC, idempotent[0]), (TOPIC, idempotent[1]), (TOPIC, idempotent[1]),
               (TOPIC, idempotent[0]), (TOPIC, _patched(idempotent[2], ">i", 53, 7)),
               (TOPIC, _patched(idempotent[2], ">h", 51, 1)), (TOPIC, idempotent[2]),
               (TOPIC, recompressed(good, BatchHeader.parse(good), 1, None, 1 << 24)),
               (TOPIC, _patched(good, ">I", 17, 1, crc=False)), (TOPIC, _patched(good, ">b", 16, 1, crc=False)),
               (TOPIC, _patched(good, ">h", 21, CONTROL_FLAG)), (TOPIC, _patched(good, ">i", 57, 0)),
               (TOPIC, _patched(good, ">i", 23, 4)), (TOPIC, _patched(idempotent[0], ">i", 53, -1)),
               (TOPIC, _patched(good, ">h", 21, 6)), (TOPIC, good[:-1]), (TOPIC, good + good), (TOPIC, good[:30]),
               (TOPIC, b""), (COMPACTED, good), (COMPACTED, keyed), (SMALL, good), (SMALL, keyed)]
    batches += [(TOPIC, _raw_batch(section, count, timestamp=ts)) for _name, section, count, _message in DAMAGED]
    return batches


def test_produce_answers_are_byte_identical_for_good_and_bad_batches(
        brokers: tuple[BrokerProcess, BrokerProcess]) -> None:
    """The Produce handler's checks run in one C call on the compiled broker, in Python
    on the other (tests/unit/test_produced_batch_check.py compares the two checks): the
    same batches, appended, duplicated, out of sequence or refused, get the same answers,
    errors, messages and offsets."""
    for broker in brokers:
        create_topic(broker.bootstrap, COMPACTED, 1, {"cleanup.policy": "compact"})
        create_topic(broker.bootstrap, SMALL, 1, {"max.message.bytes": "120"})
    answers = []
    for broker in brokers:
        with WireClient(broker.bootstrap) as client:
            answers.append([_raw_call(client, _frame(request(
                PRODUCE, 9, transactional_id=None, acks=-1, timeout=30000,
                topic_data=[{"name": topic, "partition_data": [{"index": 0, "records": batch}]}]), cid))
                for cid, (topic, batch) in enumerate(_produce_batches())])
    compiled, python = answers
    for i, (c, p) in enumerate(zip(compiled, python, strict=True)):
        assert c == p, f"batch {i}: the compiled path answered {c!r}, the Python path {p!r}"
    # Appended, refused as corrupt, refused as invalid, and a keyless record's own error.
    text = b"".join(compiled)
    assert b"CRC mismatch" in text and b"Found invalid record structure" in text
    assert b"Compacted topic cannot accept message without key" in text


def test_lying_requests_close_the_connection_on_both(brokers: tuple[BrokerProcess, BrokerProcess]) -> None:
    for broker in brokers:
        for what, data in LIES.items():
            for cut in (len(data), len(data) - 1):  # whole, and with the frame's last byte missing
                body = data[4:cut]
                with WireClient(broker.bootstrap) as client:
                    client.send_raw(struct.pack(">i", len(body)) + body)
                    assert client.is_closed(), f"{what} (cut at {cut}): left open"
    for broker in brokers:
        assert "elements with" in broker.log()


def test_a_client_round_trip_on_both(brokers: tuple[BrokerProcess, BrokerProcess]) -> None:
    for broker in brokers:
        producer = idempotent_producer(broker.bootstrap)
        produce_all(producer, [("paths-client", 0, b"k", b"through %d" % i) for i in range(5)])
        assert read_all(broker.bootstrap, "paths-client", [0], isolation="read_committed")[0] == [
            b"through %d" % i for i in range(5)]


def _pipelined() -> list[bytes]:
    """Requests whose answers hold nothing that differs between two brokers (no member
    ids, addresses or times): ListOffsets, OffsetFetch, Heartbeat and DescribeGroups of
    an unknown group (answered with errors, which the metrics count) three times (the
    first time each is the Python path's, which gives the C path its route), then
    `_requests()` (a Produce waits for its records' check: what follows is the worker's),
    and a JoinGroup (its handler may wait) with a Heartbeat behind it."""
    frames: list[bytes] = []
    cid = 0
    more = [
        request(LIST_OFFSETS, 7, replica_id=-1, isolation_level=0, topics=[
            {"name": TOPIC, "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}]}]),
        request(OFFSET_FETCH, 8, groups=[{"group_id": "paths-group", "topics": [
            {"name": TOPIC, "partition_indexes": [0]}]}], require_stable=False),
        request(HEARTBEAT, 4, group_id="paths-group", generation_id=1, member_id="nobody", group_instance_id=None),
        request(DESCRIBE_GROUPS, 5, groups=["paths-group"], include_authorized_operations=False),
    ]
    for _ in range(3):
        for entity in more:
            frames.append(_frame(entity, cid))
            cid += 1
    for frame in _requests():
        frames.append(frame[:8] + struct.pack(">i", cid) + frame[12:])
        cid += 1
    frames.append(_frame(request(JOIN_GROUP, 5, group_id="", session_timeout=10_000, rebalance_timeout=10_000,
                                 member_id="", group_instance_id=None, protocol_type="consumer",
                                 protocols=[{"name": "range", "metadata": b""}]), cid))
    frames.append(_frame(more[2], cid + 1))
    return frames


def test_pipelined_answers_are_byte_identical(brokers: tuple[BrokerProcess, BrokerProcess]) -> None:
    """Many requests in one write, then an unknown API key: the same answers in the same
    order from both paths, then the connection closed by both."""
    frames = _pipelined()
    unknown = struct.pack(">hhih", 32000, 0, 99, -1)
    answers, counted = [], []
    for broker in brokers:
        before = _counters(broker)
        with WireClient(broker.bootstrap) as client:
            client.send_raw(b"".join(frames) + struct.pack(">i", len(unknown)) + unknown)
            answers.append([client.read_frame() for _ in frames])
            assert client.is_closed(), "an unknown API key after the pipelined requests left the connection open"
        after = _counters(broker)
        counted.append({series: value - before.get(series, 0) for series, value in after.items()})
    assert counted[0] == counted[1], "the two paths counted these requests differently"
    assert counted[0]['ottla_request_errors_total{api="Heartbeat",error="UNKNOWN_MEMBER_ID"}'] == 4
    compiled, python = answers
    for i, (c, p) in enumerate(zip(compiled, python, strict=True)):
        assert c == p, f"request {i}: the compiled path answered {c[:64]!r}..., the Python path {p[:64]!r}..."
    assert [struct.unpack_from(">i", answer)[0] for answer in compiled] == list(range(len(frames)))


# The counters a request moves (Metrics.request_served, and the connection's bytes).
COUNTERS = ("ottla_requests_total", "ottla_request_errors_total", "ottla_request_duration_seconds_count",
            "ottla_bytes_in_total", "ottla_bytes_out_total", "ottla_connection_errors_total")


def _counters(broker: BrokerProcess) -> dict[str, float]:
    assert broker.admin is not None
    samples = {}
    for line in broker.admin.metrics().splitlines():
        if line.startswith(COUNTERS):
            series, value = line.rsplit(" ", 1)
            samples[series] = float(value)
    return samples


def test_a_request_behind_a_long_poll_is_answered_after_it(brokers: tuple[BrokerProcess, BrokerProcess]) -> None:
    """A Fetch that waits for records (served at once, its answer left to the worker) and a
    request in a read of its own behind it: answered in the order asked, on both paths."""
    for broker in brokers:
        create_topic(broker.bootstrap, "paths-waiting", 1)
        fetch = request(FETCH, 12, replica_id=-1, max_wait=500, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
                        session_id=0, session_epoch=-1, forgotten_topics_data=[], rack_id="", topics=[
                            {"topic": "paths-waiting", "partitions": [
                                {"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0,
                                 "last_fetched_epoch": -1, "log_start_offset": -1,
                                 "partition_max_bytes": 1 << 20}]}])
        versions = request(API_VERSIONS, 3, client_software_name="paths", client_software_version="1")
        with WireClient(broker.bootstrap) as client:
            client.send_raw(_frame(fetch, 1))
            time.sleep(0.1)  # most likely a read of its own (the order holds either way)
            client.send_raw(_frame(versions, 2))
            assert [struct.unpack_from(">i", client.read_frame())[0] for _ in range(2)] == [1, 2]
