"""Ottla's CPU per request in instructions (issue 31): valgrind's callgrind counts the
instructions the broker process executes for each request, a figure the host's load does
not move (wall-clock and CPU-time figures swing with it; bench/request_cpu.py).

The broker runs under `valgrind --tool=callgrind` through this file as its launcher,
which makes the broker dump callgrind's counters at the start of every
`Connection.data_received`: each dump then holds everything the process executed since
the previous request arrived, that request's decoding, handling, encoding and send, the
tasks it started and the event loop's own turns until the next request came. The
client sends one request at a time and waits for its answer, so each interval is one
request. The dump is made through CALLGRIND_DUMP_STATS_AT, a no-op outside valgrind,
compiled at first use into .cache/ (gcc and valgrind's headers are needed).

A round is one request of each API of REQUESTS, in order, on one connection: ApiVersions,
Metadata, FindCoordinator, a transaction (InitProducerId, AddPartitionsToTxn, Produce of
one 100-byte record, AddOffsetsToTxn, TxnOffsetCommit, EndTxn commit), Fetch (at the log
end, no wait), then a classic group's member (joined beforehand) sends Heartbeat,
OffsetCommit and OffsetFetch, and a KIP-848 member ConsumerGroupHeartbeat. WARMUP rounds
first, then ROUNDS measured ones; the figures are each request's median over the measured
rounds (a timer's turn falling into one interval now and then does not move it) and its
least (the round into which nothing else fell: the steadier figure for comparing two
versions of the code, since whatever else runs in an interval only adds to it).

`--peer noida-db` counts noida-db's idempotent Produce of one record instead: its
native binary runs under callgrind, and `callgrind_control` zeroes the counters before
BURST such requests (one at a time) and dumps them after the last answer, then does the
same around as long a span with no request (the idle threads' share, subtracted).
`--peer ottla` counts Ottla's the same way, for the comparison.

`--peer noida-db --requests` counts each request of TARGET_REQUESTS instead, one at a
time in the rounds' sequence (measure_requests_from_outside): issue 45's bar is each at
most INSTRUCTIONS_OF_PEER times noida-db's. `python -m bench --only instructions` runs
Ottla's rounds and noida-db's requests (run_instructions) and judges them.

    python -m bench.request_instructions [--rounds 20] [--warmup 5] [--peer noida-db|ottla [--requests]]
"""

from __future__ import annotations

import argparse
import glob
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HELPER_C = "#include <valgrind/callgrind.h>\nvoid dump_at(const char *s) { CALLGRIND_DUMP_STATS_AT(s); }\n"
HELPER = os.path.join(ROOT, ".cache", "callgrind-dump", "dump.so")
LABEL = "request="
START_TIMEOUT = 900.0
TOPIC = "instructions"
TXN_ID = "instructions"
TXN_GROUP = "instructions-txn"
CLASSIC_GROUP = "instructions-classic"
CONSUMER_GROUP = "instructions-consumer"
REQUESTS = {"ApiVersions": 18, "Metadata": 3, "FindCoordinator": 10, "InitProducerId": 22, "AddPartitionsToTxn": 24,
            "Produce": 0, "AddOffsetsToTxn": 25, "TxnOffsetCommit": 28, "EndTxn": 26, "Fetch": 1, "Heartbeat": 12,
            "OffsetCommit": 8, "OffsetFetch": 9, "ConsumerGroupHeartbeat": 68}
BURST = 100  # Produce requests between a zero and a dump, from outside
# Issue 45's targets: these requests at most INSTRUCTIONS_OF_PEER times noida-db's, and the
# pipeline's floor (FLOOR_REQUEST, about 90k when the issue was filed) halved.
TARGET_REQUESTS = ("Produce", "Fetch", "Metadata", "Heartbeat", "AddPartitionsToTxn", "EndTxn", "TxnOffsetCommit")
INSTRUCTIONS_OF_PEER = 2.0
FLOOR_REQUEST = "Heartbeat"
FLOOR_TARGET = 45_000
EMPTY_INTERVALS = 5  # zero-then-dump with no request: what counting from outside costs by itself
Measure = Callable[[str, Callable[[], Any]], Any]  # (request name, send it) -> the answer
RETRIABLE = {14, 15, 16, 51}  # coordinator loading / not available / not coordinator, concurrent transactions


def build_helper() -> str:
    if not os.path.exists(HELPER):
        os.makedirs(os.path.dirname(HELPER), exist_ok=True)
        source = HELPER[:-3] + ".c"
        with open(source, "w") as f:
            f.write(HELPER_C)
        subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-o", HELPER, source], check=True)
    return HELPER


def _launch() -> int:
    """In the broker's process: dump callgrind's counters as each request arrives."""
    import ctypes

    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]  # bench/client.py is no `client`
    # An earlier revision's tree (`python -m bench --baseline REV`) may have either at its older place.
    try:
        from ottla.broker.network.connection import Connection
    except ImportError:
        from ottla.broker.connection import Connection  # type: ignore[no-redef]
    try:
        from ottla.tools.cli import main
    except ImportError:
        from ottla.broker.cli import main  # type: ignore[no-redef]

    dump_at = ctypes.CDLL(os.environ["OTTLA_CALLGRIND_HELPER"]).dump_at
    dump_at.argtypes = [ctypes.c_char_p]
    data_received = Connection.data_received

    def dumping_data_received(self: Connection, data: bytes) -> None:
        key = int.from_bytes(data[4:6], "big") if len(data) >= 6 else -1
        dump_at(f"{LABEL}{key}".encode())  # what ran since the previous request: that one's cost
        data_received(self, data)

    Connection.data_received = dumping_data_received
    sys.argv[0] = "ottla"
    return main()


def _broker_class(python: str | None = None) -> Any:
    """BrokerProcess under callgrind with this file as its launcher, run by `python` (an
    earlier revision's installation, bench.peers.baseline_python) or by this one."""
    from ottla.testing import BrokerProcess

    class CallgrindBroker(BrokerProcess):
        def __init__(self, data_dir: str, out_dir: str) -> None:
            super().__init__(data_dir, env={"OTTLA_CALLGRIND_HELPER": build_helper()},
                             launcher=os.path.abspath(__file__))
            self.out_dir = out_dir

        def command(self) -> list[str]:
            own = super().command()
            return ["valgrind", "--tool=callgrind", f"--callgrind-out-file={self.out_dir}/callgrind.out.%p",
                    "--dump-line=no", "--compress-strings=no", python or own[0], *own[1:]]

    return CallgrindBroker


def _call(client: Any, entity: Any) -> Any:
    from ottla.protocol.codec import decode_response, encode_request

    api_key, version = type(entity).__api_key__, type(entity).__version__
    client.correlation_id += 1
    client.send_raw(encode_request(client.correlation_id, "instructions", entity))
    _, body = decode_response(api_key, version, client.read_frame())
    return body


def _init_producer(client: Any) -> tuple[int, int]:
    """InitProducerId for TXN_ID, asked again while the coordinator loads: (id, epoch)."""
    from tests.wire import request

    for _ in range(1000):
        init = _call(client, request(22, 4, transactional_id=TXN_ID, transaction_timeout=600_000, producer_id=-1,
                                     producer_epoch=-1))
        if init.error_code not in RETRIABLE:
            break
        time.sleep(0.05)
    _check("InitProducerId", init)
    return init.producer_id, init.producer_epoch


def _check(name: str, answer: Any, code: int | None = None) -> None:
    code = answer.error_code if code is None else code
    if code != 0:
        raise RuntimeError(f"{name}: error {code}: {answer}")


class Rounds:
    """The client side: one connection, a classic group's member and a KIP-848 member."""

    def __init__(self, bootstrap: str) -> None:
        from tests.wire import WireClient

        self.client = WireClient(bootstrap, timeout=600)
        self.offset = 0
        self.member = ""
        self.generation = -1
        self.cg_member = ""
        self.cg_epoch = 0

    def join_classic_group(self) -> None:
        from tests.wire import request

        member = ""
        for _ in range(5):
            joined = _call(self.client, request(11, 5, group_id=CLASSIC_GROUP, session_timeout=300_000,
                                                rebalance_timeout=300_000, member_id=member, group_instance_id=None,
                                                protocol_type="consumer",
                                                protocols=[{"name": "range", "metadata": b""}]))
            member = joined.member_id
            if joined.error_code == 79:  # MEMBER_ID_REQUIRED: join again with it
                continue
            _check("JoinGroup", joined)
            break
        self.member, self.generation = member, joined.generation_id
        synced = _call(self.client, request(14, 3, group_id=CLASSIC_GROUP, generation_id=self.generation,
                                            member_id=member, group_instance_id=None,
                                            assignments=[{"member_id": member, "assignment": b""}]))
        _check("SyncGroup", synced)

    def transaction(self, around: Any) -> None:
        """FindCoordinator, InitProducerId, AddPartitionsToTxn, Produce (one record, run
        through `around`), EndTxn."""
        from ottla.protocol.batch import TRANSACTIONAL_FLAG, build_batch, encode_record
        from tests.wire import request

        c = self.client
        _call(c, request(10, 4, key_type=1, coordinator_keys=[TXN_ID]))
        pid, epoch = _init_producer(c)
        _call(c, request(24, 3, v3_and_below_transactional_id=TXN_ID, v3_and_below_producer_id=pid,
                         v3_and_below_producer_epoch=epoch, v3_and_below_topics=[{"name": TOPIC, "partitions": [0]}]))
        batch = build_batch([encode_record(None, b"r" * 100)], timestamp=int(time.time() * 1000), producer_id=pid,
                            producer_epoch=epoch, base_sequence=0, attributes=TRANSACTIONAL_FLAG)
        produce = request(0, 9, transactional_id=TXN_ID, acks=-1, timeout=30000, topic_data=[
            {"name": TOPIC, "partition_data": [{"index": 0, "records": batch}]}])
        _check("Produce", around(lambda: _call(c, produce)).responses[0].partition_responses[0])
        _check("EndTxn", _call(c, request(26, 3, transactional_id=TXN_ID, producer_id=pid, producer_epoch=epoch,
                                          committed=True)))

    def round(self, measure: Measure | None = None, everything: bool = True) -> None:
        """One request of each API of REQUESTS, in order; `measure` (name, send) sends
        those of TARGET_REQUESTS, to count them from outside. With `everything` false,
        only what TARGET_REQUESTS need (a peer without KIP-848 groups: noida-db)."""
        from ottla.protocol.batch import TRANSACTIONAL_FLAG, build_batch, encode_record
        from tests.wire import request

        c = self.client

        def call(name: str, entity: Any) -> Any:
            if measure is None or name not in TARGET_REQUESTS:
                return _call(c, entity)
            return measure(name, lambda: _call(c, entity))

        if everything:
            _check("ApiVersions", _call(c, request(18, 3, client_software_name="bench", client_software_version="1")))
        call("Metadata", request(3, 12, topics=[{"name": TOPIC, "topic_id": None}], allow_auto_topic_creation=False,
                                 include_topic_authorized_operations=False))
        if everything:
            _call(c, request(10, 4, key_type=1, coordinator_keys=[TXN_ID]))
        pid, epoch = _init_producer(c)
        added = call("AddPartitionsToTxn", request(24, 3, v3_and_below_transactional_id=TXN_ID,
                                                   v3_and_below_producer_id=pid, v3_and_below_producer_epoch=epoch,
                                                   v3_and_below_topics=[{"name": TOPIC, "partitions": [0]}]))
        _check("AddPartitionsToTxn", added, added.results_by_topic_v3_and_below[0].results_by_partition[0]
               .partition_error_code)
        batch = build_batch([encode_record(None, b"r" * 100)], timestamp=int(time.time() * 1000), producer_id=pid,
                            producer_epoch=epoch, base_sequence=0, attributes=TRANSACTIONAL_FLAG)
        produced = call("Produce", request(0, 9, transactional_id=TXN_ID, acks=-1, timeout=30000, topic_data=[
            {"name": TOPIC, "partition_data": [{"index": 0, "records": batch}]}]))
        result = produced.responses[0].partition_responses[0]
        _check("Produce", result)
        _check("AddOffsetsToTxn", _call(c, request(25, 3, transactional_id=TXN_ID, producer_id=pid,
                                                   producer_epoch=epoch, group_id=TXN_GROUP)))
        partitions = [{"partition_index": 0, "committed_offset": result.base_offset, "committed_leader_epoch": -1,
                       "committed_metadata": ""}]
        committed = call("TxnOffsetCommit", request(28, 3, transactional_id=TXN_ID, group_id=TXN_GROUP,
                                                    producer_id=pid, producer_epoch=epoch, generation_id=-1,
                                                    member_id="", group_instance_id=None,
                                                    topics=[{"name": TOPIC, "partitions": partitions}]))
        _check("TxnOffsetCommit", committed, committed.topics[0].partitions[0].error_code)
        _check("EndTxn", call("EndTxn", request(26, 3, transactional_id=TXN_ID, producer_id=pid,
                                                producer_epoch=epoch, committed=True)))
        call("Fetch", request(1, 12, replica_id=-1, max_wait=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0,
                              session_id=0, session_epoch=-1, topics=[{"topic": TOPIC, "partitions": [
                                  {"partition": 0, "fetch_offset": result.base_offset + 2,
                                   "partition_max_bytes": 1 << 20, "current_leader_epoch": -1,
                                   "last_fetched_epoch": -1, "log_start_offset": -1}]}],
                              forgotten_topics_data=[], rack_id=""))
        _check("Heartbeat", call("Heartbeat", request(12, 4, group_id=CLASSIC_GROUP, generation_id=self.generation,
                                                      member_id=self.member, group_instance_id=None)))
        if not everything:
            return
        offset_commit = _call(c, request(8, 8, group_id=CLASSIC_GROUP, generation_id_or_member_epoch=self.generation,
                                         member_id=self.member, group_instance_id=None,
                                         topics=[{"name": TOPIC, "partitions": partitions}]))
        _check("OffsetCommit", offset_commit, offset_commit.topics[0].partitions[0].error_code)
        fetched = _call(c, request(9, 8, groups=[{"group_id": CLASSIC_GROUP, "topics": [
            {"name": TOPIC, "partition_indexes": [0]}]}], require_stable=False))
        _check("OffsetFetch", fetched, fetched.groups[0].error_code)
        first = self.cg_epoch == 0
        beat = _call(c, request(68, 0, group_id=CONSUMER_GROUP, member_id=self.cg_member, member_epoch=self.cg_epoch,
                                instance_id=None, rack_id=None, rebalance_timeout=300_000,
                                subscribed_topic_names=[TOPIC] if first else None, server_assignor=None,
                                topic_partitions=[] if first else None))
        _check("ConsumerGroupHeartbeat", beat)
        self.cg_member, self.cg_epoch = beat.member_id or self.cg_member, beat.member_epoch


def _total(path: str) -> int:
    with open(path, errors="replace") as f:
        for line in f:
            if line.startswith(("summary:", "totals:")):
                return int(line.split()[1])
    raise RuntimeError(f"no total in {path}")


def _control(pid: int, *flags: str) -> None:
    subprocess.run(["callgrind_control", *flags, str(pid)], check=True, capture_output=True, timeout=120)


@contextmanager
def _outside_broker(peer: str) -> Iterator[tuple[int, str, str]]:
    """`peer` (noida-db's native binary, or Ottla) started under callgrind, with a topic
    TOPIC of one partition: (its pid, its bootstrap, the directory callgrind dumps to)."""
    from confluent_kafka.admin import AdminClient

    from tests.clients import create_topic
    from tests.reference.kafka import free_port

    work = tempfile.mkdtemp(prefix="request-instructions-")
    out_dir = os.path.join(work, "callgrind")
    os.makedirs(out_dir)
    port = free_port()
    if peer == "noida-db":
        import noida_db  # the console script is a wrapper around this package's native binary

        binary = os.path.join(os.path.dirname(noida_db.__file__), "noida-db")
        program = [binary, "start", "--data-dir", os.path.join(work, "data"), "--host", "127.0.0.1", "--only",
                   "kafka", "--kafka-port", str(port)]
    else:
        program = [sys.executable, "-m", "ottla.tools.cli", "serve", "--host", "127.0.0.1", "--port", str(port),
                   "--data-dir", os.path.join(work, "data")]
    log = open(os.path.join(work, "broker.log"), "w")
    process = subprocess.Popen(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out_dir}/callgrind.out.%p",
                                "--dump-line=no", *program], stdout=log, stderr=subprocess.STDOUT, cwd=work)
    bootstrap = f"127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            try:
                AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=5)
                break
            except Exception:
                if time.monotonic() > deadline or process.poll() is not None:
                    raise RuntimeError(f"{peer} under callgrind did not start") from None
                time.sleep(1)
        create_topic(bootstrap, TOPIC, 1)
        yield process.pid, bootstrap, out_dir
    finally:
        process.terminate()
        try:
            process.wait(120)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()
        subprocess.run(["rm", "-rf", work], check=False)


def measure_produce_from_outside(peer: str, rounds: int, warmup: int, say: Any = print) -> tuple[float, float]:
    """(median instructions per idempotent Produce of one record, median per the same
    span idle), the counters zeroed and dumped from outside (callgrind_control, over
    vgdb) around BURST requests, and around as long a span with none."""
    from ottla.protocol.batch import build_batch, encode_record
    from tests.wire import request

    with _outside_broker(peer) as (pid, bootstrap, out_dir):
        client = Rounds(bootstrap).client
        init = _call(client, request(22, 4, transactional_id=None, transaction_timeout=60_000, producer_id=-1,
                                     producer_epoch=-1))
        _check("InitProducerId", init)
        sequence = 0

        def produce() -> None:
            nonlocal sequence
            batch = build_batch([encode_record(None, b"r" * 100)], timestamp=int(time.time() * 1000),
                                producer_id=init.producer_id, producer_epoch=init.producer_epoch,
                                base_sequence=sequence)
            sequence += 1
            answer = _call(client, request(0, 9, transactional_id=None, acks=-1, timeout=30000, topic_data=[
                {"name": TOPIC, "partition_data": [{"index": 0, "records": batch}]}]))
            _check("Produce", answer.responses[0].partition_responses[0])

        busy, idle = [], []
        for i in range(warmup + rounds):
            if i < warmup:
                for _ in range(BURST):
                    produce()
                continue
            _control(pid, "-z")
            began = time.monotonic()
            for _ in range(BURST):
                produce()
            span = time.monotonic() - began
            _control(pid, "-d")
            busy.append(_newest_total(out_dir) / BURST)
            _control(pid, "-z")
            time.sleep(span)
            _control(pid, "-d")
            idle.append(_newest_total(out_dir) / BURST)
            say(f"{peer} burst {i + 1 - warmup}/{rounds}: {busy[-1]:,.0f} instructions a Produce, idle "
                f"{idle[-1]:,.0f} a Produce's share of as long a span")
        client.close()
    return statistics.median(busy), statistics.median(idle)


@dataclass
class PeerCounts:
    """A peer's instructions per request of TARGET_REQUESTS, counted from outside."""
    least: dict[str, int]  # request -> the least over the rounds, less the least empty interval
    empty: int  # the least of EMPTY_INTERVALS zero-then-dump intervals with no request
    missing: dict[str, str] = field(default_factory=dict)  # request -> why it has no figure


def measure_requests_from_outside(peer: str, rounds: int, warmup: int, say: Callable[[str], None] = print
                                  ) -> PeerCounts:
    """Each request of TARGET_REQUESTS in Rounds.round's sequence, on `peer` under
    callgrind: the counters zeroed (callgrind_control -z) right before the request is
    sent and dumped (-d) once its answer is read, so an interval holds that request and
    whatever else the process ran meanwhile (its idle threads, vgdb's own attach). The
    least over the rounds, less the least of EMPTY_INTERVALS intervals with no request:
    the figure issue 45 sets noida-db's at (a native binary, which no launcher can make
    dump as each request arrives, as Ottla's does)."""
    counts: dict[str, list[int]] = {name: [] for name in TARGET_REQUESTS}
    with _outside_broker(peer) as (pid, bootstrap, out_dir):

        def counted(name: str, send: Callable[[], Any]) -> Any:
            _control(pid, "-z")
            answer = send()
            _control(pid, "-d")
            if measuring:
                counts[name].append(_newest_total(out_dir))
            return answer

        empty = []
        for _ in range(EMPTY_INTERVALS):
            _control(pid, "-z")
            _control(pid, "-d")
            empty.append(_newest_total(out_dir))
        client = Rounds(bootstrap)
        client.join_classic_group()
        measuring = False
        for i in range(warmup + rounds):
            measuring = i >= warmup
            client.round(counted, everything=False)
            say(f"{peer} from outside, round {i + 1}/{warmup + rounds} ({'measured' if measuring else 'warm-up'})")
        client.client.close()
    floor = min(empty)
    return PeerCounts({name: max(0, min(values) - floor) for name, values in counts.items() if values}, floor,
                      {name: "no answer counted" for name, values in counts.items() if not values})


def _newest_total(out_dir: str) -> int:
    paths = glob.glob(os.path.join(out_dir, "callgrind.out.*.*"))
    return _total(max(paths, key=lambda path: int(path.rsplit(".", 1)[1])))


def _dumps(out_dir: str) -> list[tuple[int, int]]:
    """(the api key that began the interval, instructions in it), in order: dump N holds
    what ran between the request that triggered dump N-1 and the one that triggered N."""
    # callgrind.out.PID.N, N counting the dumps; callgrind.out.PID is the one at exit.
    files = sorted((p for p in glob.glob(os.path.join(out_dir, "callgrind.out.*.*"))),
                   key=lambda path: int(path.rsplit(".", 1)[1]))
    intervals, previous = [], None
    for path in files:
        label, total = None, None
        with open(path, errors="replace") as f:
            for line in f:
                if line.startswith("desc: Trigger:"):
                    found = re.search(rf"{LABEL}(-?\d+)", line)
                    label = int(found.group(1)) if found else None
                elif line.startswith(("summary:", "totals:")):
                    total = int(line.split()[1])
        if previous is not None and total is not None:
            intervals.append((previous, total))
        previous = label
    return intervals


def measure(rounds: int, warmup: int, say: Any = print, python: str | None = None) -> dict[str, tuple[float, int]]:
    """(median, least) instructions per request by name, over the measured rounds; with
    `python`, of the broker that installation runs (an earlier revision's)."""
    from tests.clients import create_topic
    from tests.wire import request

    work = tempfile.mkdtemp(prefix="request-instructions-")
    out_dir = os.path.join(work, "callgrind")
    os.makedirs(out_dir)
    broker = _broker_class(python)(os.path.join(work, "data"), out_dir)
    started = time.monotonic()
    broker.start(timeout=START_TIMEOUT)
    say(f"the broker under callgrind ready after {time.monotonic() - started:.0f} s")
    try:
        create_topic(broker.bootstrap, TOPIC, 1)
        client = Rounds(broker.bootstrap)
        client.join_classic_group()
        for i in range(warmup + rounds):
            if i == warmup:
                for path in glob.glob(os.path.join(out_dir, "callgrind.out.*")):
                    os.remove(path)
            client.round()
            say(f"round {i + 1}/{warmup + rounds} ({'warm-up' if i < warmup else 'measured'})")
        # Its dump closes the last measured round's last interval.
        _call(client.client, request(18, 3, client_software_name="bench", client_software_version="1"))
        client.client.close()
    finally:
        broker.stop(timeout=120)
    names = {key: name for name, key in REQUESTS.items()}
    counts: dict[str, list[int]] = {name: [] for name in REQUESTS}
    for key, total in _dumps(out_dir):
        if key in names:
            counts[names[key]].append(total)
    subprocess.run(["rm", "-rf", work], check=False)
    return {name: (statistics.median(values), min(values)) for name, values in counts.items() if values}


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.request_instructions", description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--peer", choices=["noida-db", "ottla"],
                        help="count a Produce of one record from outside, on this broker")
    parser.add_argument("--requests", action="store_true",
                        help=f"with --peer: each of {', '.join(TARGET_REQUESTS)} counted from outside, one at a time")
    args = parser.parse_args()
    if args.peer and args.requests:
        counted = measure_requests_from_outside(args.peer, args.rounds, args.warmup,
                                                lambda line: print(line, flush=True))
        print(f"\n{args.peer}: instructions per request counted from outside, least of {args.rounds} less the least "
              f"empty interval ({counted.empty:,})")
        for name, least in counted.least.items():
            print(f"| {name} | {least:,} |")
        return
    if args.peer:
        produce, idle = measure_produce_from_outside(args.peer, args.rounds, args.warmup,
                                                     lambda line: print(line, flush=True))
        print(f"\n{args.peer}: idempotent Produce of one record, median of {args.rounds} bursts of {BURST}: "
              f"{produce:,.0f} instructions a request with the idle threads' share; idle {idle:,.0f}; the "
              f"difference {produce - idle:,.0f}")
        return
    counts = measure(args.rounds, args.warmup, lambda line: print(line, flush=True))
    print(f"\ninstructions per request (callgrind Ir) over {args.rounds} rounds after {args.warmup} warm-up: the "
          "median, and the least (the round no timer or collection fell into)")
    print("| request | median | least |\n|---|---:|---:|")
    for name, (median, least) in counts.items():
        print(f"| {name} | {median:,.0f} | {least:,} |")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "serve":
        sys.exit(_launch())  # run by BrokerProcess (under valgrind) as the broker's launcher
    main()
