"""A full disk (issue 12): a produce gets KAFKA_STORAGE_ERROR, nothing acknowledged is
lost, no segment is left torn (tests/segment_files.py reads the files: every batch's
CRC, the offsets, the indexes), and the broker serves again once space returns, without
a restart. Tested on a real full filesystem (a small tmpfs: tests run as root here and
in CI) and through the admin endpoint's disk_full fault."""

from __future__ import annotations

import os
import subprocess
import time

import pytest

from ottla.protocol.batch import build_batch, encode_record
from ottla.protocol.errors import ErrorCode
from ottla.testing import BrokerProcess
from tests.clients import create_topic, idempotent_producer, produce_all, read_all, transactional_producer
from tests.segment_files import check_partition_files
from tests.wire import WireClient, request

PRODUCE = 0


def _produce(client: WireClient, topic: str, value: bytes) -> tuple[ErrorCode, int]:
    batch = build_batch([encode_record(None, value, offset_delta=0)], timestamp=int(time.time() * 1000))
    answer = client.call(request(PRODUCE, 9, transactional_id=None, acks=-1, timeout=30000, topic_data=[
        {"name": topic, "partition_data": [{"index": 0, "records": batch}]}]))
    result = answer.responses[0].partition_responses[0]
    return result.error_code, result.base_offset


@pytest.fixture
def small_disk(tmp_path):
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=6m", "tmpfs", str(mount)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root): {done.stderr.decode().strip()}")
    yield mount
    subprocess.run(["umount", "-l", str(mount)], check=False)


def test_a_full_disk_refuses_writes_loses_nothing_and_recovers(small_disk, topic_name):
    broker = BrokerProcess(str(small_disk / "data"), {"log.segment.bytes": "262144"}).start()
    try:
        create_topic(broker.bootstrap, topic_name, 1)
        partition_dir = os.path.join(broker.data_dir, f"{topic_name}-0")
        filler = small_disk / "filler"
        acknowledged: list[bytes] = []
        with WireClient(broker.bootstrap) as client:
            # Fill the disk: first with a file we can remove, then with records.
            free = os.statvfs(small_disk).f_bavail * os.statvfs(small_disk).f_frsize
            filler.write_bytes(bytes(max(free - 1024 * 1024, 0)))
            refused = 0
            for i in range(400):
                value = b"%06d" % i + bytes(8000)
                code, _ = _produce(client, topic_name, value)
                if code == ErrorCode.none:
                    acknowledged.append(value)
                else:
                    assert code == ErrorCode.kafka_storage_error, code
                    refused += 1
                    if refused >= 5:
                        break
            assert acknowledged and refused, "the disk never filled up"
            # On disk, with the disk still full: whole batches with right CRCs, the
            # acknowledged records and nothing refused, indexes pointing at batches.
            assert check_partition_files(partition_dir) == len(acknowledged)
            log = broker.log()  # a real full disk: ENOSPC, or a short write cut back off
            assert "write failed" in log and ("No space left on device" in log or "short write" in log)
            # Space returns: the same broker takes writes again, no restart.
            filler.unlink()
            value = b"after" + bytes(8000)
            code, _ = _produce(client, topic_name, value)
            assert code == ErrorCode.none
            acknowledged.append(value)
        # Other clients were served meanwhile and now too: a transaction commits.
        txn = transactional_producer(broker.bootstrap, f"full-{topic_name}")
        txn.begin_transaction()
        txn.produce(topic_name, value=b"txn", partition=0)
        txn.commit_transaction(30)
        acknowledged.append(b"txn")
        # After a crash, the files hold the acknowledged records (the commit marker may not
        # be in yet: as in Kafka, it is written after the commit's answer), and every
        # acknowledged record is read back once, in order, and nothing else; the files then
        # hold the marker too.
        broker.kill()
        end_at_kill = check_partition_files(partition_dir)
        assert end_at_kill in (len(acknowledged), len(acknowledged) + 1)
        broker.start()
        got = read_all(broker.bootstrap, topic_name, [0], isolation="read_committed")[0]
        assert got == acknowledged
        # The restarted coordinator completes the commit by writing its marker. If the kill
        # fell after the marker but before the coordinator logged the commit complete, the
        # marker is written once more, as Kafka's coordinator does after a failover: a
        # second COMMIT marker for a transaction already ended changes nothing a reader sees.
        marker_was_in = end_at_kill > len(acknowledged)
        allowed_ends = {len(acknowledged) + 1, len(acknowledged) + 2} if marker_was_in else {len(acknowledged) + 1}
        assert check_partition_files(partition_dir) in allowed_ends
    finally:
        broker.cleanup()


def test_the_disk_full_fault_answers_like_a_full_disk(fresh_broker, topic_name):
    broker = fresh_broker(admin_port=0)
    create_topic(broker.bootstrap, topic_name, 1)
    broker.admin.add_fault(kind="disk_full", topic=topic_name, count=2)
    with WireClient(broker.bootstrap) as client:
        assert _produce(client, topic_name, b"a")[0] == ErrorCode.kafka_storage_error
        assert _produce(client, topic_name, b"b")[0] == ErrorCode.kafka_storage_error
        assert _produce(client, topic_name, b"c")[0] == ErrorCode.none
    assert "No space left on device" in broker.log() or "injected full disk" in broker.log()
    producer = idempotent_producer(broker.bootstrap)
    produce_all(producer, [(topic_name, 0, None, b"d")])
    assert read_all(broker.bootstrap, topic_name, [0], isolation="read_committed")[0] == [b"c", b"d"]
