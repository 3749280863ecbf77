"""Coordinators load their internal topics beside the serving loop: what is answered
while a partition loads, and that a replay in slices misses nothing appended between
them (coordinator/loading.py)."""

from __future__ import annotations

import asyncio

import pytest

from ottla.coordinator import loading
from ottla.coordinator.group import GroupConfig
from ottla.coordinator.groups import GroupCoordinator
from ottla.coordinator.markers import MarkerWriter
from ottla.coordinator.offsets_log import TOPIC as OFFSETS_TOPIC
from ottla.coordinator.offsets_log import CommittedOffset
from ottla.coordinator.producer_ids import ProducerIdAllocator
from ottla.coordinator.transactions import TransactionCoordinator
from ottla.protocol.batch import BatchHeader, build_batch, encode_record, iter_records
from ottla.protocol.errors import ErrorCode, KafkaError
from ottla.storage.log_config import LogConfig
from ottla.storage.log_manager import LogManager

LOAD_IN_PROGRESS = ErrorCode.coordinator_load_in_progress


@pytest.fixture
def logs(tmp_path):
    logs = LogManager(str(tmp_path), LogConfig())
    logs.load()
    logs.create_topic("orders", 1)
    yield logs
    logs.close()


def _transactions(logs: LogManager, tmp_path) -> TransactionCoordinator:
    return TransactionCoordinator(logs, ProducerIdAllocator(str(tmp_path)), MarkerWriter(logs), num_partitions=3)


def test_transactional_ids_are_answered_load_in_progress_until_their_partition_is_loaded(logs, tmp_path):
    first = _transactions(logs, tmp_path)
    asyncio.run(first.load())
    pid, epoch = first.init_producer_id("app", 60_000)
    first.add_partitions("app", pid, epoch, [("orders", 0)])

    after_restart = _transactions(logs, tmp_path)
    after_restart.open()
    assert after_restart.loading
    for call in (lambda: after_restart.init_producer_id("app", 60_000),
                 lambda: after_restart.add_partitions("app", pid, epoch, [("orders", 0)]),
                 lambda: after_restart.end_txn("app", pid, epoch, True),
                 lambda: after_restart.describe("app"),
                 lambda: after_restart.list(set(), set())):
        with pytest.raises(KafkaError) as refused:
            call()
        assert refused.value.code is LOAD_IN_PROGRESS
    # A transactional produce meeting a loading coordinator gets an error every client retries.
    with pytest.raises(KafkaError) as refused:
        after_restart.verify("app", pid, epoch, "orders", 0)
    assert refused.value.code is ErrorCode.not_enough_replicas
    # Nothing half loaded is seen by the timeout task meanwhile.
    assert after_restart.abort_timed_out() == []

    assert asyncio.run(after_restart.load()) == 1
    assert not after_restart.loading
    after_restart.verify("app", pid, epoch, "orders", 0)  # the open transaction came back
    assert after_restart.describe("app").partitions == {("orders", 0)}


def test_groups_are_answered_load_in_progress_until_their_partition_is_loaded(logs):
    def coordinator() -> GroupCoordinator:
        return GroupCoordinator(logs, lambda: logs.create_topic(OFFSETS_TOPIC, 3, {"cleanup.policy": "compact"}),
                                GroupConfig(num_partitions=3))

    first = coordinator()
    asyncio.run(first.load())
    first.commit_offsets("readers", "", None, -1, {("orders", 0): CommittedOffset(42)})

    after_restart = coordinator()
    after_restart.open()
    for call in (lambda: after_restart.fetch_offsets("readers", None, False),
                 lambda: after_restart.commit_offsets("readers", "", None, -1, {("orders", 0): CommittedOffset(43)}),
                 lambda: after_restart.list_groups(set(), set()),
                 lambda: after_restart.describe("readers"),
                 lambda: after_restart.delete_offsets("readers", [("orders", 0)]),
                 lambda: after_restart.delete_group("readers"),
                 lambda: after_restart.heartbeat("readers", "m", None, 1)):
        with pytest.raises(KafkaError) as refused:
            call()
        assert refused.value.code is LOAD_IN_PROGRESS

    asyncio.run(after_restart.load())
    assert after_restart.fetch_offsets("readers", None, False)[("orders", 0)][0].offset == 42


def test_a_replay_in_slices_reads_what_is_appended_between_them(logs, monkeypatch):
    monkeypatch.setattr(loading, "SLICE_SECONDS", 0)  # yield after every batch
    log = logs.partition("orders", 0)

    def append(value: bytes) -> None:
        batch = build_batch([encode_record(None, value)], timestamp=0)
        log.append_batch(batch, BatchHeader.parse(batch))

    for i in range(3):
        append(b"before-%d" % i)
    seen: list[bytes] = []

    def apply(header: BatchHeader, batch: bytes) -> None:
        seen.extend(record.value for record in iter_records(batch))

    async def load_while_appending() -> int:
        replaying = asyncio.ensure_future(loading.replay(log, apply))
        await asyncio.sleep(0)
        append(b"during")  # a marker written while the partition loads, say
        return await replaying

    assert asyncio.run(load_while_appending()) == 4
    assert seen == [b"before-0", b"before-1", b"before-2", b"during"]
