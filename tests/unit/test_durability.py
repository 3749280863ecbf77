"""--fsync's group commit: concurrent requests share fsync rounds."""

from __future__ import annotations

import asyncio
import os

from ottla.broker.durability import GroupCommit, RollFlush
from ottla.protocol.batch import BatchHeader, build_batch, encode_record
from ottla.storage.checkpoints import LOG_START_OFFSET_FILE, RECOVERY_POINT_FILE, read_checkpoint
from ottla.storage.log_config import LogConfig
from ottla.storage.log_manager import LogManager


async def test_concurrent_requests_share_fsyncs_and_move_the_recovery_point(tmp_path):
    logs = LogManager(str(tmp_path), LogConfig())
    logs.load()
    commit = GroupCommit(logs)
    logs.on_append = commit.appended
    topic = logs.create_topic("t", 4)
    for log in topic.partitions:
        log.on_append = commit.appended

    async def produce_and_wait(i: int) -> None:
        data = build_batch([encode_record(None, b"v%d" % i)], timestamp=0)
        topic.partitions[i % 4].append_batch(data, BatchHeader.parse(data))
        await commit.sync()

    await asyncio.gather(*(produce_and_wait(i) for i in range(40)))
    assert commit.rounds <= 3, f"{commit.rounds} fsync rounds for 40 requests"
    assert all(log.flushed_offset == log.log_end_offset == 10 for log in topic.partitions)
    await commit.sync()  # nothing new: no round
    assert commit.rounds <= 3


def test_flush_messages_fsyncs_every_n_messages(tmp_path):
    logs = LogManager(str(tmp_path), LogConfig())
    logs.load()
    log = logs.create_topic("t", 1, {"flush.messages": "3"}).partitions[0]
    for _ in range(7):
        data = build_batch([encode_record(None, b"v")], timestamp=0)
        log.append_batch(data, BatchHeader.parse(data))
    assert log.flushed_offset == 6 and log.unflushed_messages == 1


def test_checkpoint_offsets_taken_earlier_never_overwrite_those_written_later(tmp_path):
    # The broker's checkpoint writes the files in a worker thread while DeleteRecords
    # writes them on the event loop: whichever thread writes last, the newest offsets
    # stay on disk (an older log start offset would bring deleted records back).
    logs = LogManager(str(tmp_path), LogConfig())
    logs.load()
    log = logs.create_topic("t", 1).partitions[0]
    for _ in range(5):
        data = build_batch([encode_record(None, b"v")], timestamp=0)
        log.append_batch(data, BatchHeader.parse(data))
    older = logs.checkpoint_offsets()
    log.delete_records_before(3)
    logs.write_checkpoints()
    logs.write_checkpoint_files(older)
    assert read_checkpoint(str(tmp_path / LOG_START_OFFSET_FILE)) == {("t", 0): 3}
    newer = logs.checkpoint_offsets()
    log.flush()
    logs.write_checkpoint_files(newer)
    assert read_checkpoint(str(tmp_path / RECOVERY_POINT_FILE)) == {("t", 0): 0}


def test_a_checkpoint_for_some_partitions_snapshots_only_those(tmp_path):
    # DeleteRecords checkpoints on the event loop before it answers: the partitions it
    # changed get their producer-state snapshots there; the others keep theirs for the
    # broker's periodic checkpoint (worker threads). The offsets files hold every one.
    logs = LogManager(str(tmp_path), LogConfig())
    logs.load()
    changed, other = logs.create_topic("t", 2).partitions
    for log in (changed, other):
        for sequence in range(5):
            data = build_batch([encode_record(None, b"v")], timestamp=0, producer_id=9, producer_epoch=0,
                               base_sequence=sequence)
            log.append_batch(data, BatchHeader.parse(data))
    changed.delete_records_before(3)
    logs.checkpoint([changed])
    assert os.path.exists(os.path.join(changed.directory, f"{5:020d}.snapshot")) and not changed.producer_state.changed
    assert not any(name.endswith(".snapshot") for name in os.listdir(other.directory)) and other.producer_state.changed
    assert read_checkpoint(str(tmp_path / LOG_START_OFFSET_FILE)) == {("t", 0): 3, ("t", 1): 0}


def test_a_duplicate_of_a_batch_not_yet_fsynced_waits_for_its_fsync(tmp_path):
    # A producer's retry of a batch whose first request still waits for --fsync's group
    # commit is answered as a duplicate: it must wait for the same fsync, not be
    # acknowledged at once. Its append counts as a write to the group commit (the
    # dispatcher waits when the count moves) until the original is flushed.
    logs = LogManager(str(tmp_path), LogConfig())
    logs.load()
    commit = GroupCommit(logs)
    log = logs.create_topic("t", 1).partitions[0]
    log.on_append = commit.appended
    data = build_batch([encode_record(None, b"v")], timestamp=0, producer_id=7, producer_epoch=0, base_sequence=0)
    log.append_batch(data, BatchHeader.parse(data))
    before = commit.generation
    assert log.append_batch(data, BatchHeader.parse(data)).duplicate
    assert commit.generation > before, "the duplicate of an unflushed batch was not made to wait"
    log.flush()
    before = commit.generation
    assert log.append_batch(data, BatchHeader.parse(data)).duplicate
    assert commit.generation == before, "a duplicate of a flushed batch waits for nothing"


async def test_with_fsync_records_are_readable_once_fsynced(tmp_path):
    # With --fsync the high watermark is the fsynced offset, as Kafka's is the offset the
    # in-sync replicas have: a record a power loss can still take is not served, so no
    # consumer commits an offset past what survives. The flush wakes waiting fetches.
    logs = LogManager(str(tmp_path), LogConfig())
    logs.fsync_on_ack = True
    woken: list[tuple[str, int]] = []
    logs.on_flushed = lambda topic, partition: woken.append((topic, partition))
    logs.load()
    commit = GroupCommit(logs)
    log = logs.create_topic("t", 1).partitions[0]
    log.on_append = commit.appended
    data = build_batch([encode_record(None, b"v")], timestamp=0)
    log.append_batch(data, BatchHeader.parse(data))
    unflushed = log.read(0, 1 << 20, read_committed=False, min_one=True)
    assert (unflushed.records, unflushed.high_watermark, log.log_end_offset) == (None, 0, 1)
    await commit.sync()
    flushed = log.read(0, 1 << 20, read_committed=False, min_one=True)
    assert flushed.records is not None and flushed.high_watermark == 1
    assert woken == [("t", 0)]


async def test_a_rolled_segment_is_flushed_at_once_and_the_recovery_point_moves_past_it(tmp_path, monkeypatch):
    # Kafka's roll schedules a flush of everything below the new segment (its log and
    # indexes, the partition's directory, the producer snapshot): a power loss then
    # takes at most the active segment, not all written since the periodic checkpoint.
    synced: set[tuple[int, int]] = set()
    fsync = os.fsync

    def recording_fsync(fd: int) -> None:
        status = os.fstat(fd)
        synced.add((status.st_dev, status.st_ino))
        fsync(fd)

    monkeypatch.setattr(os, "fsync", recording_fsync)
    logs = LogManager(str(tmp_path), LogConfig())
    logs.load()
    flusher = RollFlush(logs)
    logs.on_roll = flusher.rolled
    log = logs.create_topic("t", 1, {"segment.bytes": "2000"}).partitions[0]
    while len(log.segments) < 2:
        data = build_batch([encode_record(None, b"v" * 300)], timestamp=0, producer_id=7, producer_epoch=0,
                           base_sequence=log.log_end_offset)
        log.append_batch(data, BatchHeader.parse(data))  # the last one is the new segment's first
    rolled, active = log.segments
    await flusher.wait_idle()

    def inode(name: str) -> tuple[int, int]:
        status = os.stat(os.path.join(log.directory, name))
        return status.st_dev, status.st_ino

    old_files = {inode(f"{rolled.base_offset:020d}{suffix}") for suffix in (".log", ".index", ".timeindex")}
    assert old_files <= synced, "the rolled segment's log and indexes were not fsynced"
    assert inode("") in synced, "the partition's directory (the new segment's name) was not fsynced"
    assert inode(f"{active.base_offset:020d}.snapshot") in synced
    assert inode(f"{active.base_offset:020d}.log") not in synced, "the active segment is the periodic flush's"
    assert log.flushed_offset == active.base_offset and log.unflushed_messages == 1
    assert logs.checkpoint_offsets().recovery_points == {("t", 0): active.base_offset}
