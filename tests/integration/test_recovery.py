"""Start-up recovery: torn tails, lost indexes, damaged or missing snapshots, --fsync."""

from __future__ import annotations

import glob
import os
import re
import struct
import time

import pytest

from ottla.protocol.batch import build_batch, encode_record
from ottla.protocol.errors import ErrorCode
from ottla.testing import BrokerProcess
from tests.clients import consume_partitions, create_topic, idempotent_producer, produce_all
from tests.system_tools import require
from tests.wire import WireClient, request


def _partition_dir(broker, topic: str) -> str:
    return os.path.join(broker.data_dir, f"{topic}-0")


def _produce(client: WireClient, topic: str, batch: bytes):
    response = client.call(request(0, 9, transactional_id=None, acks=-1, timeout=30000, topic_data=[
        {"name": topic, "partition_data": [{"index": 0, "records": batch}]}]))
    return response.responses[0].partition_responses[0]


def _batches_of(producer_id: int, count: int) -> list[bytes]:
    return [build_batch([encode_record(None, b"s%d" % s)], timestamp=int(time.time() * 1000),
                        producer_id=producer_id, producer_epoch=0, base_sequence=s) for s in range(count)]


def _produce_batches(broker, topic: str, count: int) -> tuple[int, list[bytes], list[int]]:
    """A new idempotent producer id and `count` one-record batches produced with it:
    (producer id, the batches, their offsets)."""
    with WireClient(broker.bootstrap) as client:
        producer_id = client.call(request(22, 4, transactional_id=None, transaction_timeout=60000,
                                          producer_id=-1, producer_epoch=-1)).producer_id
        batches = _batches_of(producer_id, count)
        return producer_id, batches, [_produce(client, topic, b).base_offset for b in batches]


def test_a_segment_torn_in_the_middle_of_a_batch_is_cut_back_at_start_up(fresh_broker, topic_name):
    broker = fresh_broker()
    create_topic(broker.bootstrap, topic_name, 1)
    produce_all(idempotent_producer(broker.bootstrap), [(topic_name, 0, None, b"m%d" % i) for i in range(1000)])
    broker.kill()
    log_file = os.path.join(_partition_dir(broker, topic_name), "00000000000000000000.log")
    size = os.path.getsize(log_file)
    with open(log_file, "ab") as f:  # half a batch, as a crash mid-write leaves it
        f.write(struct.pack(">qi", 1000, 500) + b"\x00" * 100)
    broker.start()
    assert os.path.getsize(log_file) == size
    assert "recovered_bytes_truncated=112" in broker.log()
    produce_all(idempotent_producer(broker.bootstrap), [(topic_name, 0, None, b"after")])
    got = consume_partitions(broker.bootstrap, topic_name, [0], 1001)
    assert [m.value() for m in got[0]][-2:] == [b"m999", b"after"]
    assert got[0][-1].offset() == 1000


def test_deleted_index_files_are_rebuilt(fresh_broker, topic_name):
    broker = fresh_broker(log_segment_bytes=50_000)
    create_topic(broker.bootstrap, topic_name, 1)
    produce_all(idempotent_producer(broker.bootstrap, **{"batch.size": 10_000}),
                [(topic_name, 0, None, b"x" * 200 + b"%d" % i) for i in range(2000)])
    broker.stop()
    directory = _partition_dir(broker, topic_name)
    before = {name: open(os.path.join(directory, name), "rb").read()
              for name in os.listdir(directory) if name.endswith(".index") or name.endswith(".timeindex")}
    for name in before:
        os.unlink(os.path.join(directory, name))
    broker.start()
    after = {name: open(os.path.join(directory, name), "rb").read() for name in before}
    assert after == before, "rebuilt indexes match the ones Ottla wrote while appending"
    got = consume_partitions(broker.bootstrap, topic_name, [0], 2000)
    assert got[0][-1].value().endswith(b"1999")


def test_a_corrupt_snapshot_is_skipped_and_a_retry_still_gets_its_original_offset(fresh_broker, topic_name):
    broker = fresh_broker(log_segment_bytes=1000)
    create_topic(broker.bootstrap, topic_name, 1)
    producer_id, batches, offsets = _produce_batches(broker, topic_name, 40)
    broker.stop()
    snapshots = sorted(glob.glob(os.path.join(_partition_dir(broker, topic_name), "*.snapshot")))
    assert len(snapshots) == 2, "the two newest snapshots are kept"
    with open(snapshots[-1], "r+b") as f:
        f.seek(8)
        f.write(b"\xde\xad")
    broker.start()
    with WireClient(broker.bootstrap) as client:
        retried = _produce(client, topic_name, batches[-1])
        assert (retried.error_code, retried.base_offset) == (ErrorCode.none, offsets[-1])
        assert _produce(client, topic_name, _batches_of(producer_id, 42)[41]).error_code == \
            ErrorCode.out_of_order_sequence_number


def test_without_any_snapshot_the_log_replay_gives_the_same_state(fresh_broker, topic_name):
    broker = fresh_broker(log_segment_bytes=1000)
    create_topic(broker.bootstrap, topic_name, 1)
    producer_id, batches, offsets = _produce_batches(broker, topic_name, 30)
    broker.stop()
    for snapshot in glob.glob(os.path.join(_partition_dir(broker, topic_name), "*.snapshot")):
        os.unlink(snapshot)
    broker.start()
    with WireClient(broker.bootstrap) as client:
        for batch, offset in zip(batches[-5:], offsets[-5:], strict=True):
            retried = _produce(client, topic_name, batch)
            assert (retried.error_code, retried.base_offset) == (ErrorCode.none, offset)


def test_fsync_mode_acknowledges_after_fsync_and_keeps_everything(fresh_broker, topic_name):
    # kill -9 keeps the page cache, so this shows recovery in fsync mode, not the fsync
    # itself: test_with_fsync_a_produce_is_acknowledged_only_after_its_segments_are_fsynced does.
    broker = fresh_broker(fsync_on_ack="true")
    create_topic(broker.bootstrap, topic_name, 2)
    produce_all(idempotent_producer(broker.bootstrap), [(topic_name, i % 2, None, b"d%d" % i) for i in range(5000)])
    broker.kill()
    broker.start()
    got = consume_partitions(broker.bootstrap, topic_name, [0, 1], 5000)
    assert sum(len(v) for v in got.values()) == 5000


class _TracedBroker(BrokerProcess):
    """The broker run under strace, which records its file and socket writes and its
    fsyncs, each line naming the file or the TCP connection (-yy). -D makes strace a
    detached grandchild: the process the test signals is the broker itself."""

    def __init__(self, data_dir: str, trace_path: str, properties: dict[str, str]) -> None:
        super().__init__(data_dir, properties)
        self.trace_path = trace_path

    def command(self) -> list[str]:
        return [require("strace"), "-D", "-f", "-q", "-yy", "--seccomp-bpf", "-o", self.trace_path,
                "-e", "trace=fsync,fdatasync,write,writev,pwrite64,sendto,sendmsg", *super().command()]


_SYSCALL = re.compile(r"^(\d+)\s+(?:<\.\.\. (\w+) resumed>|(\w+)\((\d+)<(TCP:\[[^\]]*\]|[^>]*)>)")


def _trace_events(trace: str) -> list[tuple[str, str, str]]:
    """(event, syscall, file or connection) in the order the syscalls happened: "start"
    when a call began, "done" when it returned (strace splits a call another thread
    interrupted into `<unfinished ...>` and `<... resumed>` lines)."""
    events: list[tuple[str, str, str]] = []
    pending: dict[str, tuple[str, str]] = {}
    for line in trace.splitlines():
        match = _SYSCALL.match(line)
        if match is None:
            continue
        pid, resumed, name, _fd, target = match.groups()
        if resumed is not None:
            if pid in pending:
                events.append(("done", *pending.pop(pid)))
            continue
        events.append(("start", name, target))
        if line.rstrip().endswith("<unfinished ...>"):
            pending[pid] = (name, target)
        else:
            events.append(("done", name, target))
    return events


@pytest.mark.parametrize("fsync", [True, False], ids=["fsync", "no-fsync"])
def test_with_fsync_a_produce_is_acknowledged_only_after_its_segments_are_fsynced(tmp_path, topic_name, fsync):
    """An acknowledged produce with --fsync survives the machine losing power: strace
    shows the batch written to each partition's segment, then an fsync of that segment
    that returned, then the response written to the producer's connection. Without
    --fsync the same trace shows the response leave with no fsync in between, so the
    test tells the two apart (a kill -9 cannot: the page cache keeps the data).

    Checked by breaking it: with `os.fsync(fd)` in broker/durability.py's _fsync_all
    replaced by `pass` the fsync case fails (no fsync before the response), and with
    dispatch's `await group_commit.sync()` removed it fails too (the response leaves
    before the fsync). The partitions' directories (holding the new segments' names)
    and the data directory (holding the partitions') are fsynced before the first
    response too, as Kafka 4.3.1 does: with `fsync_directory` in storage/directories.py
    made to do nothing, the fsync case fails (no directory fsync)."""
    trace_path = str(tmp_path / "broker.strace")
    broker = _TracedBroker(str(tmp_path / "data"), trace_path, {
        "fsync.on.ack": str(fsync).lower(), "log.flush.offset.checkpoint.interval.ms": "3600000"})
    broker.start()
    try:
        broker.create_topic(topic_name, 2)
        with WireClient(broker.bootstrap) as client:
            local = "%s:%d" % client.sock.getsockname()[:2]
            for i in range(3):
                batch = build_batch([encode_record(None, b"r%d" % i)], timestamp=int(time.time() * 1000))
                answer = client.call(request(0, 9, transactional_id=None, acks=-1, timeout=30000, topic_data=[
                    {"name": topic_name, "partition_data": [
                        {"index": p, "records": batch} for p in (0, 1)]}]))
                assert [(r.error_code, r.base_offset) for r in answer.responses[0].partition_responses] == \
                    [(ErrorCode.none, i), (ErrorCode.none, i)]
        assert broker.process is not None
        pid = broker.process.pid
        assert broker.stop() == 0
        deadline = time.monotonic() + 10
        while not re.search(rf"^{pid}\s+\+\+\+ exited with", open(trace_path).read(), re.M):  # its last line
            assert time.monotonic() < deadline, "strace did not finish its trace"
            time.sleep(0.1)
    finally:
        broker.cleanup()
    events = _trace_events(open(trace_path).read())
    segments = {os.path.join(broker.data_dir, f"{topic_name}-{p}", "00000000000000000000.log") for p in (0, 1)}
    responses = [i for i, (event, name, target) in enumerate(events)
                 if event == "start" and name in ("write", "writev", "sendto", "sendmsg")
                 and target.endswith("->" + local + "]")]
    assert len(responses) == 3, f"three produce responses on the connection from {local}: {responses}"
    begin = 0
    for answered in responses:
        window = events[begin:answered]
        written = {target for event, name, target in window if name == "writev" and target in segments}
        assert written == segments, f"each produce writes both segments before its response: {written}"
        synced = {target for event, name, target in window
                  if event == "done" and name in ("fsync", "fdatasync") and target in segments}
        if fsync:
            assert synced == segments, f"response sent before fsync of {sorted(segments - synced)}"
            if begin == 0:
                directories = {os.path.dirname(path) for path in segments} | {broker.data_dir}
                synced_directories = {target for event, name, target in events[:answered]
                                      if event == "done" and name == "fsync" and target in directories}
                assert synced_directories == directories, \
                    f"first response before an fsync of {sorted(directories - synced_directories)}"
        else:
            assert not synced, f"without --fsync, no fsync before the response: {synced}"
        begin = answered + 1


def test_without_fsync_a_rolled_segment_is_fsynced_at_once(tmp_path, topic_name):
    """Kafka's roll schedules a flush of everything below the new segment ("flush-log"):
    without --fsync too, a power loss then takes at most the active segment. strace
    shows the first segment's log and offset index and the partition's directory fsynced
    while the broker runs, though the periodic checkpoint (an hour here) has not come.
    Seen failing (no fsync of them within the minute) with PartitionLog.roll's on_roll
    call taken out."""
    trace_path = str(tmp_path / "broker.strace")
    broker = _TracedBroker(str(tmp_path / "data"), trace_path, {
        "fsync.on.ack": "false", "log.flush.offset.checkpoint.interval.ms": "3600000"})
    broker.start()
    try:
        create_topic(broker.bootstrap, topic_name, 1, {"segment.bytes": "8192"})
        produce_all(idempotent_producer(broker.bootstrap, **{"batch.size": 2000}),
                    [(topic_name, 0, None, b"r" * 1000) for _ in range(30)])
        partition = os.path.join(broker.data_dir, f"{topic_name}-0")
        first = os.path.join(partition, "00000000000000000000")
        wanted = {first + ".log", first + ".index", partition}
        deadline = time.monotonic() + 60
        while True:
            synced = {target for event, name, target in _trace_events(open(trace_path).read())
                      if event == "done" and name in ("fsync", "fdatasync")}
            if wanted <= synced:
                break
            assert time.monotonic() < deadline, f"the rolled segment's {sorted(wanted - synced)} not fsynced"
            time.sleep(0.2)
        assert len(glob.glob(os.path.join(partition, "*.log"))) > 1
        assert broker.stop() == 0
    finally:
        broker.cleanup()


def test_recovery_after_kill_9_checks_only_what_followed_the_last_checkpoint(fresh_broker, topic_name):
    broker = fresh_broker(log_flush_offset_checkpoint_interval_ms=300)
    create_topic(broker.bootstrap, topic_name, 1)
    big = [(topic_name, 0, None, b"b" * 1000) for _ in range(20_000)]  # ~20 MB, one segment
    produce_all(idempotent_producer(broker.bootstrap), big)
    checkpoint = os.path.join(broker.data_dir, "recovery-point-offset-checkpoint")
    deadline = time.monotonic() + 20
    while f"{topic_name} 0 20000" not in (open(checkpoint).read() if os.path.exists(checkpoint) else ""):
        assert time.monotonic() < deadline, "no checkpoint at the log end"
        time.sleep(0.1)
    produce_all(idempotent_producer(broker.bootstrap), [(topic_name, 0, None, b"tail-%d" % i) for i in range(100)])
    broker.kill()
    broker.start()
    checked = int(broker.log().rsplit("recovered_bytes_checked=", 1)[1].split()[0])
    assert 0 < checked < 100_000, f"{checked} bytes checked: recovery read more than the unflushed tail"
    got = consume_partitions(broker.bootstrap, topic_name, [0], 20_100)
    assert got[0][-1].value() == b"tail-99" and got[0][-1].offset() == 20_099
