"""The offsets store on its own: commits, transactional commits and their markers, and
what a restart replays from `__consumer_offsets`, without a broker or any membership."""

from __future__ import annotations

import asyncio

import pytest

from ottla.coordinator.markers import MarkerWriter
from ottla.coordinator.offset_store import OffsetStore
from ottla.coordinator.offsets_log import (
    TOPIC,
    CommittedOffset,
    GroupKey,
    OffsetKey,
    decode_key,
    decode_offset_value,
    encode_group_key,
    encode_offset_key,
    encode_offset_value,
)
from ottla.protocol.errors import ErrorCode, KafkaError
from ottla.storage.log_config import LogConfig
from ottla.storage.log_manager import LogManager

PARTITIONS = 5
TP = ("orders", 0)


class Data:
    """A data directory that can be closed and opened again, as a restart does."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.logs: LogManager | None = None

    def open(self) -> tuple[OffsetStore, MarkerWriter, list[tuple[GroupKey, bytes | None]]]:
        if self.logs is not None:
            self.logs.close()
        logs = self.logs = LogManager(self.path, LogConfig())
        logs.load()

        def create_topic() -> None:
            logs.create_topic(TOPIC, PARTITIONS, {"cleanup.policy": "compact"})

        replayed: list[tuple[GroupKey, bytes | None]] = []
        store = OffsetStore(logs, create_topic, PARTITIONS, max_metadata_bytes=16,
                            replay_group_record=lambda key, value: replayed.append((key, value)))  # type: ignore[arg-type]
        asyncio.run(store.load())
        markers = MarkerWriter(logs)
        markers.listeners.append(store.on_marker)
        return store, markers, replayed


@pytest.fixture
def data(tmp_path):
    data = Data(str(tmp_path))
    yield data
    if data.logs is not None:
        data.logs.close()


def committed(store: OffsetStore, group: str, tp=TP, require_stable: bool = False):
    offset, code = store.fetch(group, [tp], require_stable)[tp]
    return (offset.offset if offset else None), code


def end_txn(store: OffsetStore, markers: MarkerWriter, group: str, producer_id: int, commit: bool,
            epoch: int = 0) -> None:
    results = markers.write(producer_id, epoch, commit, 0, [(TOPIC, store.partition_for(group))])
    assert set(results.values()) == {ErrorCode.none}


def test_commits_are_fetched_and_survive_a_restart(data):
    store, _, _ = data.open()
    codes = store.write("g", store.commit("g", {TP: CommittedOffset(10, 3, "ok"),
                                                ("orders", 1): CommittedOffset(11, -1, "x" * 17)}))
    assert codes == {TP: ErrorCode.none, ("orders", 1): ErrorCode.offset_metadata_too_large}
    store.write("g", store.commit("g", {TP: CommittedOffset(12, 3, "later")}))
    assert store.fetch("g", None, False) == {TP: (CommittedOffset(12, 3, "later"), ErrorCode.none)}
    assert store.fetch("nobody", [TP], True) == {TP: (None, ErrorCode.none)}

    store, _, _ = data.open()
    assert store.fetch("g", None, False) == {TP: (CommittedOffset(12, 3, "later"), ErrorCode.none)}


def test_a_transactional_commit_waits_for_its_marker(data):
    store, markers, _ = data.open()
    store.write("g", store.commit("g", {TP: CommittedOffset(5)}))
    store.write("g", store.commit("g", {TP: CommittedOffset(10)}), 7, 0)
    assert committed(store, "g") == (5, ErrorCode.none)
    assert committed(store, "g", require_stable=True) == (None, ErrorCode.unstable_offset_commit)

    end_txn(store, markers, "g", 7, commit=True)
    assert committed(store, "g", require_stable=True) == (10, ErrorCode.none)

    store.write("g", store.commit("g", {TP: CommittedOffset(20)}), 7, 0)
    end_txn(store, markers, "g", 7, commit=False)
    assert committed(store, "g", require_stable=True) == (10, ErrorCode.none)


def test_a_marker_settles_only_the_offsets_in_its_own_partition(data):
    # One transaction commits offsets for three groups: "g" and "b" share a partition of
    # __consumer_offsets, "h" has another. Each marker settles its partition's groups
    # only; the others wait for theirs. A restart replays the same.
    store, markers, _ = data.open()
    assert store.partition_for("g") == store.partition_for("b") != store.partition_for("h")
    for group in ("g", "b", "h"):
        store.write(group, store.commit(group, {TP: CommittedOffset(10)}), 7, 0)
    end_txn(store, markers, "g", 7, commit=True)
    assert [committed(store, group, require_stable=True) for group in ("g", "b", "h")] == [
        (10, ErrorCode.none), (10, ErrorCode.none), (None, ErrorCode.unstable_offset_commit)]
    end_txn(store, markers, "h", 7, commit=False)
    settled = [(10, ErrorCode.none), (10, ErrorCode.none), (None, ErrorCode.none)]
    assert [committed(store, group, require_stable=True) for group in ("g", "b", "h")] == settled
    store, markers, _ = data.open()
    assert [committed(store, group, require_stable=True) for group in ("g", "b", "h")] == settled


def test_a_plain_commit_written_after_a_transactional_one_wins(data):
    store, markers, _ = data.open()
    store.write("g", store.commit("g", {TP: CommittedOffset(20)}), 7, 0)
    store.write("g", store.commit("g", {TP: CommittedOffset(15)}))
    end_txn(store, markers, "g", 7, commit=True)
    assert committed(store, "g") == (15, ErrorCode.none)


def test_a_stale_producer_epoch_is_fenced(data):
    store, markers, _ = data.open()
    store.write("g", store.commit("g", {TP: CommittedOffset(20)}), 7, 1)
    end_txn(store, markers, "g", 7, commit=False, epoch=1)
    with pytest.raises(KafkaError) as raised:
        store.write("g", store.commit("g", {TP: CommittedOffset(21)}), 7, 0)
    assert raised.value.code == ErrorCode.producer_fenced


def test_a_restart_replays_markers_and_keeps_open_transactions_pending(data):
    store, markers, _ = data.open()
    store.write("committed", store.commit("committed", {TP: CommittedOffset(10)}), 7, 0)
    store.write("aborted", store.commit("aborted", {TP: CommittedOffset(20)}), 8, 0)
    store.write("open", store.commit("open", {TP: CommittedOffset(30)}), 9, 0)
    end_txn(store, markers, "committed", 7, commit=True)
    end_txn(store, markers, "aborted", 8, commit=False)

    store, markers, _ = data.open()
    assert committed(store, "committed", require_stable=True) == (10, ErrorCode.none)
    assert committed(store, "aborted", require_stable=True) == (None, ErrorCode.none)
    assert committed(store, "open", require_stable=True) == (None, ErrorCode.unstable_offset_commit)
    end_txn(store, markers, "open", 9, commit=True)
    assert committed(store, "open", require_stable=True) == (30, ErrorCode.none)


def test_group_records_are_handed_back_in_order_and_deletions_tombstone_the_offsets(data):
    store, _, _ = data.open()
    key = encode_group_key(GroupKey("g"))
    store.append("g", [(key, b"first")])
    store.write("g", store.commit("g", {TP: CommittedOffset(1), ("orders", 1): CommittedOffset(2)}))
    store.append("g", [(key, b"second")])
    store.write("g", store.delete("g", [("orders", 1), ("orders", 9)]))  # a partition without an offset is no error
    store.write("other", store.commit("other", {TP: CommittedOffset(3)}))

    store, _, replayed = data.open()
    assert replayed == [(GroupKey("g"), b"first"), (GroupKey("g"), b"second")]
    assert store.fetch("g", None, False) == {TP: (CommittedOffset(1), ErrorCode.none)}

    store.write("g", store.delete_group("g", [(key, None)]))
    assert store.fetch("g", None, False) == {}
    store, _, replayed = data.open()
    assert replayed[-1] == (GroupKey("g"), None)
    assert store.fetch("g", None, False) == {}


def test_offset_records_are_kafkas_offset_commit_key_v1_and_value_v3():
    # Field by field as Kafka's OffsetCommitKey and OffsetCommitValue schemas lay them out.
    key = encode_offset_key(OffsetKey("group-a", "orders", 2))
    assert key == bytes.fromhex("0001" "0007") + b"group-a" + bytes.fromhex("0006") + b"orders" + bytes.fromhex(
        "00000002")
    value = encode_offset_value(CommittedOffset(42, 7, "météo", 1_700_000_000_000))
    assert value == (bytes.fromhex("0003" "000000000000002a" "00000007" "0007") + "météo".encode()
                     + (1_700_000_000_000).to_bytes(8, "big"))
    assert decode_key(key) == OffsetKey("group-a", "orders", 2)
    assert decode_offset_value(value) == CommittedOffset(42, 7, "météo", 1_700_000_000_000)


def test_only_short_group_ids_are_kept_with_their_encoded_keys(data):
    """The commit's key cache (offset_store._offset_key_bytes) holds up to 4,096 keys, so a
    client's 32 KiB group ids must not be kept in it: about 130 MB at the cache's size.
    Break-and-see-it-fail: with every group id cached, the long one's key was kept."""
    from ottla.coordinator import offset_store

    store, _, _ = data.open()
    cached = offset_store._offset_key_bytes
    cached.cache_clear()
    store.write("g" * 32_000, store.commit("g" * 32_000, {TP: CommittedOffset(1)}))
    assert cached.cache_info().currsize == 0
    store.write("short", store.commit("short", {TP: CommittedOffset(1)}))
    assert cached.cache_info().currsize == 1
    assert committed(store, "g" * 32_000) == (1, ErrorCode.none)
