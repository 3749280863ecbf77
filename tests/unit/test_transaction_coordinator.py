"""The transaction coordinator's state machine and its log records, without a broker."""

from __future__ import annotations

import asyncio
import errno

import pytest

from ottla.coordinator.markers import MarkerWriter
from ottla.coordinator.producer_ids import ProducerIdAllocator
from ottla.coordinator.transaction_log import (
    TRANSITIONS,
    IllegalTransition,
    TxnRecord,
    TxnState,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
    following,
    java_string_hash,
    partition_for,
    transition,
)
from ottla.coordinator.transactions import MAX_EPOCH, TransactionCoordinator
from ottla.protocol.errors import ErrorCode, KafkaError
from ottla.storage.log_config import LogConfig
from ottla.storage.log_manager import LogManager

S = TxnState
ALLOWED = {
    (S.EMPTY, S.ONGOING), (S.EMPTY, S.EMPTY), (S.EMPTY, S.DEAD), (S.EMPTY, S.PREPARE_EPOCH_FENCE),
    (S.ONGOING, S.ONGOING), (S.ONGOING, S.PREPARE_COMMIT), (S.ONGOING, S.PREPARE_ABORT),
    (S.ONGOING, S.PREPARE_EPOCH_FENCE),
    (S.PREPARE_COMMIT, S.COMPLETE_COMMIT), (S.PREPARE_ABORT, S.COMPLETE_ABORT),
    (S.COMPLETE_COMMIT, S.EMPTY), (S.COMPLETE_COMMIT, S.ONGOING), (S.COMPLETE_COMMIT, S.DEAD),
    (S.COMPLETE_COMMIT, S.PREPARE_EPOCH_FENCE),
    (S.COMPLETE_ABORT, S.EMPTY), (S.COMPLETE_ABORT, S.ONGOING), (S.COMPLETE_ABORT, S.DEAD),
    (S.COMPLETE_ABORT, S.PREPARE_EPOCH_FENCE),
    (S.PREPARE_EPOCH_FENCE, S.PREPARE_ABORT),
    # Transaction version 2 aborts with no transaction open (Kafka's TransactionState).
    (S.EMPTY, S.PREPARE_ABORT), (S.COMPLETE_COMMIT, S.PREPARE_ABORT), (S.COMPLETE_ABORT, S.PREPARE_ABORT),
}


@pytest.mark.parametrize("current", list(S), ids=lambda s: s.kafka_name)
@pytest.mark.parametrize("target", list(S), ids=lambda s: s.kafka_name)
def test_every_transition_is_allowed_or_refused(current, target):
    record = TxnRecord(3000, 2, 60000, current, frozenset({("orders", 0)}), last_update_ms=100)
    whole = record._replace(state=target, last_update_ms=200, producer_epoch=3)  # made whole by the caller
    if (current, target) in ALLOWED:
        after = transition(record, target, 200, producer_epoch=3)
        assert (after.state, after.last_update_ms, after.producer_epoch) == (target, 200, 3)
        assert after.partitions == record.partitions
        assert following(record, whole) is whole
    else:
        with pytest.raises(IllegalTransition):
            transition(record, target, 200)
        with pytest.raises(IllegalTransition):
            following(record, whole)
    # The current record is never edited: a transition makes a new one.
    assert (record.state, record.last_update_ms, record.producer_epoch) == (current, 100, 2)
    assert set(TRANSITIONS) == set(S)


def test_a_transition_changes_what_it_is_told_and_nothing_else():
    record = TxnRecord(3000, 2, 60000, S.ONGOING, frozenset({("orders", 0)}), 100, 90, 2999, -1, 2)
    changes = {"producer_id": 4000, "producer_epoch": 0, "timeout_ms": 5000, "partitions": frozenset(),
               "start_ms": 95, "previous_producer_id": 3000, "next_producer_id": 4001, "client_transaction_version": 0}
    for name, value in changes.items():
        assert transition(record, S.PREPARE_COMMIT, 200, **{name: value}) == record._replace(
            state=S.PREPARE_COMMIT, last_update_ms=200, **{name: value}), name
    with pytest.raises(TypeError):  # a misspelt field is no silent no-op
        transition(record, S.PREPARE_COMMIT, 200, partition=frozenset())


def test_log_records_round_trip():
    record = TxnRecord(3000, 2, 60000, S.ONGOING, frozenset({("orders", 0), ("orders", 3), ("audit", 1)}),
                       1669693174442, 1669693174400, previous_producer_id=2999, client_transaction_version=2)
    assert decode_value(encode_value(record)) == record
    assert decode_key(encode_key("TEST-1")) == "TEST-1"
    assert encode_key("TEST-1")[:2] == b"\x00\x00"


def test_no_partitions_are_a_null_array_when_empty_and_an_empty_one_otherwise():
    # As Kafka writes TransactionPartitions: null for an Empty transaction.
    partitions_at = 2 + 8 + 2 + 4 + 1  # version, producer id, epoch, timeout, status
    for state in S:
        encoded = encode_value(TxnRecord(3000, 2, 60000, state))
        assert encoded[partitions_at] == (0 if state is S.EMPTY else 1), state.kafka_name
        assert decode_value(encoded) == TxnRecord(3000, 2, 60000, state)


def test_sets_of_partitions_round_trip_whether_their_encoding_is_cached_or_not():
    for size in (1, 2, 16, 17, 40):
        partitions = frozenset((f"topic-{i % 3}", i) for i in range(size))
        record = TxnRecord(3000, 2, 60000, S.ONGOING, partitions, 100, 90)
        assert encode_value(record) == encode_value(record)  # the second from the cache, if any
        assert decode_value(encode_value(record)) == record, size


def test_partition_of_a_transactional_id_follows_java_string_hash_code():
    assert java_string_hash("") == 0
    assert java_string_hash("hello") == 99162322  # Java's "hello".hashCode()
    assert java_string_hash("Aa") == java_string_hash("BB") == 2112  # the classic collision
    assert java_string_hash("polygenelubricants") == -2**31  # Integer.MIN_VALUE: Kafka's abs maps it to 0
    assert partition_for("polygenelubricants", 50) == 0
    assert partition_for("hello", 50) == 99162322 % 50


@pytest.fixture
def coordinator(tmp_path):
    logs = LogManager(str(tmp_path), LogConfig())
    logs.load()
    logs.create_topic("orders", 2)
    now = [1000.0]
    coordinator = TransactionCoordinator(logs, ProducerIdAllocator(str(tmp_path)), MarkerWriter(logs),
                                         num_partitions=5, clock=lambda: now[0])
    asyncio.run(coordinator.load())
    coordinator.now = now  # type: ignore[attr-defined]
    return coordinator


def test_init_commit_and_reinit(coordinator):
    pid, epoch = coordinator.init_producer_id("app", 60000)
    assert epoch == 0
    coordinator.add_partitions("app", pid, epoch, [("orders", 0)])
    assert coordinator.describe("app").state is S.ONGOING
    coordinator.end_txn("app", pid, epoch, commit=True)
    assert coordinator.describe("app").state is S.COMPLETE_COMMIT
    # A retried commit succeeds; an abort of the committed transaction does not.
    assert coordinator.end_txn("app", pid, epoch, commit=True) == (pid, epoch)
    with pytest.raises(KafkaError) as wrong:
        coordinator.end_txn("app", pid, epoch, commit=False)
    assert wrong.value.code == ErrorCode.invalid_txn_state
    assert coordinator.init_producer_id("app", 60000) == (pid, epoch + 1)


def test_errors_for_stale_producers_and_bad_timeouts(coordinator):
    pid, epoch = coordinator.init_producer_id("app", 60000)
    coordinator.init_producer_id("app", 60000)
    cases = [
        (lambda: coordinator.add_partitions("app", pid, epoch, [("orders", 0)]), ErrorCode.producer_fenced),
        (lambda: coordinator.add_partitions("app", pid + 99, epoch, [("orders", 0)]),
         ErrorCode.invalid_producer_id_mapping),
        (lambda: coordinator.end_txn("app", pid, epoch + 1, commit=True), ErrorCode.invalid_txn_state),
        (lambda: coordinator.init_producer_id("app", 60000, pid, epoch), ErrorCode.producer_fenced),
        (lambda: coordinator.init_producer_id("app", 15 * 60 * 1000 + 1), ErrorCode.invalid_transaction_timeout),
        (lambda: coordinator.verify("app", pid, epoch, "orders", 0), ErrorCode.invalid_producer_epoch),
        (lambda: coordinator.verify("app", pid, epoch + 1, "orders", 0), ErrorCode.invalid_txn_state),
    ]
    for call, code in cases:
        with pytest.raises(KafkaError) as refused:
            call()
        assert refused.value.code == code


def test_init_during_an_ongoing_transaction_fences_aborts_and_asks_to_retry(coordinator):
    pid, epoch = coordinator.init_producer_id("app", 60000)
    coordinator.add_partitions("app", pid, epoch, [("orders", 1)])
    with pytest.raises(KafkaError) as busy:
        coordinator.init_producer_id("app", 60000)
    assert busy.value.code == ErrorCode.concurrent_transactions
    assert coordinator.describe("app").state is S.COMPLETE_ABORT
    assert coordinator.init_producer_id("app", 60000) == (pid, epoch + 2)
    marker_epochs = [h.producer_epoch for h, _ in coordinator.logs.partition("orders", 1).batches() if h.is_control]
    assert marker_epochs == [epoch + 1]


def test_exhausted_epoch_moves_to_a_new_producer_id(coordinator):
    pid, _ = coordinator.init_producer_id("app", 60000)
    coordinator.transactions["app"] = coordinator.transactions["app"]._replace(producer_epoch=MAX_EPOCH)
    new_pid, epoch = coordinator.init_producer_id("app", 60000)
    assert new_pid != pid and epoch == 0


def test_end_txn_v5_bumps_the_epoch_on_every_end(coordinator):
    pid, epoch = coordinator.init_producer_id("app", 60000)
    coordinator.add_partitions("app", pid, epoch, [("orders", 0)])
    assert coordinator.end_txn("app", pid, epoch, commit=True, bump_epoch=True) == (pid, epoch + 1)
    # The retry of that EndTxn, with the old epoch, gets the same answer.
    assert coordinator.end_txn("app", pid, epoch, commit=True, bump_epoch=True) == (pid, epoch + 1)


def test_end_txn_v5_tells_a_retry_from_the_next_end_by_the_epoch(coordinator):
    """Kafka's endTransaction with transaction version 2: after a commit at epoch e, a
    commit at e is the next transaction's (nothing open: INVALID_TXN_STATE), an abort
    at e ends an empty transaction with another bump, e - 1 is the retry, and any
    other epoch is fenced. Broken once by accepting the same epoch as a retry: the
    INVALID_TXN_STATE assertion failed."""
    pid, epoch = coordinator.init_producer_id("app", 60000)
    coordinator.add_partitions_implicitly("app", pid, epoch, [("orders", 0)])
    assert coordinator.describe("app").client_transaction_version == 2
    assert coordinator.end_txn("app", pid, epoch, commit=True, bump_epoch=True) == (pid, epoch + 1)
    with pytest.raises(KafkaError) as again:
        coordinator.end_txn("app", pid, epoch + 1, commit=True, bump_epoch=True)
    assert again.value.code == ErrorCode.invalid_txn_state
    with pytest.raises(KafkaError) as other_outcome:
        coordinator.end_txn("app", pid, epoch, commit=False, bump_epoch=True)
    assert other_outcome.value.code == ErrorCode.invalid_txn_state
    with pytest.raises(KafkaError) as stale:
        coordinator.end_txn("app", pid, epoch - 1, commit=True, bump_epoch=True)
    assert stale.value.code == ErrorCode.producer_fenced
    # An abort with nothing open still ends a transaction: the epoch moves on.
    assert coordinator.end_txn("app", pid, epoch + 1, commit=False, bump_epoch=True) == (pid, epoch + 2)
    txn = coordinator.describe("app")
    assert (txn.state, txn.producer_epoch, txn.client_transaction_version) == (S.COMPLETE_ABORT, epoch + 2, 2)
    markers = [(h.producer_epoch) for h, _ in coordinator.logs.partition("orders", 0).batches() if h.is_control]
    assert markers == [epoch + 1]


def test_end_txn_v5_at_the_last_epoch_hands_over_a_new_producer_id(coordinator):
    pid, _ = coordinator.init_producer_id("app", 60000)
    coordinator.transactions["app"] = coordinator.transactions["app"]._replace(producer_epoch=MAX_EPOCH)
    coordinator.add_partitions_implicitly("app", pid, MAX_EPOCH, [("orders", 0)])
    new_pid, new_epoch = coordinator.end_txn("app", pid, MAX_EPOCH, commit=True, bump_epoch=True)
    assert new_pid != pid and new_epoch == 0
    txn = coordinator.describe("app")
    assert (txn.producer_id, txn.producer_epoch, txn.previous_producer_id) == (new_pid, 0, pid)
    # The markers fence the old producer id at the epoch past its last.
    markers = [(h.producer_id, h.producer_epoch) for h, _ in coordinator.logs.partition("orders", 0).batches()
               if h.is_control]
    assert markers == [(pid, MAX_EPOCH + 1)]
    # Its retry, with the old id and epoch, is answered with what the producer has now.
    assert coordinator.end_txn("app", pid, MAX_EPOCH, commit=True, bump_epoch=True) == (new_pid, 0)


def test_produce_v12_adds_partitions_with_the_current_epoch_only(coordinator):
    pid, epoch = coordinator.init_producer_id("app", 60000)
    with pytest.raises(KafkaError) as old:
        coordinator.add_partitions_implicitly("app", pid, epoch - 1 if epoch else epoch + 1, [("orders", 0)])
    assert old.value.code == ErrorCode.producer_fenced
    coordinator.add_partitions_implicitly("app", pid, epoch, [("orders", 0)])
    coordinator.add_partitions_implicitly("app", pid, epoch, [("orders", 1)])
    txn = coordinator.describe("app")
    assert txn.state is S.ONGOING and txn.partitions == {("orders", 0), ("orders", 1)}


def test_timed_out_transactions_are_fenced_and_aborted(coordinator):
    pid, epoch = coordinator.init_producer_id("slow", 1000)
    coordinator.add_partitions("slow", pid, epoch, [("orders", 0)])
    assert coordinator.abort_timed_out() == []
    coordinator.now[0] += 2
    assert coordinator.abort_timed_out() == ["slow"]
    txn = coordinator.describe("slow")
    assert txn.state is S.COMPLETE_ABORT and txn.producer_epoch == epoch + 1


def test_state_is_rebuilt_from_the_log(coordinator, tmp_path):
    pid, epoch = coordinator.init_producer_id("app", 60000)
    coordinator.add_partitions("app", pid, epoch, [("orders", 0), ("orders", 1)])
    reloaded = TransactionCoordinator(coordinator.logs, ProducerIdAllocator(str(tmp_path)),
                                      MarkerWriter(coordinator.logs), num_partitions=5)
    assert asyncio.run(reloaded.load()) == 1
    txn = reloaded.describe("app")
    assert (txn.producer_id, txn.producer_epoch, txn.state) == (pid, epoch, S.ONGOING)
    assert txn.partitions == {("orders", 0), ("orders", 1)}


def test_idle_transactional_ids_expire_and_are_forgotten_after_a_reload(coordinator, tmp_path):
    pid, epoch = coordinator.init_producer_id("idle", 60000)
    busy_pid, busy_epoch = coordinator.init_producer_id("busy", 60000)
    coordinator.add_partitions("busy", busy_pid, busy_epoch, [("orders", 0)])
    coordinator.now[0] += 8 * 24 * 3600
    assert coordinator.expire_transactional_ids(7 * 24 * 3600 * 1000) == ["idle"]
    reloaded = TransactionCoordinator(coordinator.logs, ProducerIdAllocator(str(tmp_path)),
                                      MarkerWriter(coordinator.logs), num_partitions=5)
    asyncio.run(reloaded.load())
    assert reloaded.describe("idle") is None and reloaded.describe("busy") is not None


class FailingDisk:
    """Fails the next `count` writes to one partition with EIO, as the broker's
    disk_error fault does (broker/faults.py)."""

    def __init__(self, topic: str, partition: int, count: int) -> None:
        self.target, self.count = (topic, partition), count

    def __call__(self, topic: str, partition: int) -> None:
        if (topic, partition) == self.target and self.count > 0:
            self.count -= 1
            raise OSError(errno.EIO, "injected disk error")


def _markers(coordinator, partition: int) -> list[int]:
    return [h.producer_id for h, _ in coordinator.logs.partition("orders", partition).batches() if h.is_control]


def test_a_marker_that_fails_is_retried_with_backoff_and_complete_is_written_only_after_it(coordinator):
    retries: list[tuple[float, object]] = []
    coordinator.completion.call_later = lambda delay, callback: retries.append((delay, callback))
    pid, epoch = coordinator.init_producer_id("app", 60000)
    coordinator.add_partitions("app", pid, epoch, [("orders", 0), ("orders", 1)])
    coordinator.logs.set_write_check(FailingDisk("orders", 1, count=6))

    coordinator.end_txn("app", pid, epoch, commit=True)
    for _ in range(6):
        assert coordinator.describe("app").state is S.PREPARE_COMMIT
        assert coordinator.pending_markers["app"].partitions == {("orders", 1)}
        with pytest.raises(KafkaError) as busy:
            coordinator.add_partitions("app", pid, epoch, [("orders", 0)])
        assert busy.value.code == ErrorCode.concurrent_transactions
        retries[-1][1]()  # the retry, when its backoff is over
    # Kafka's retry.backoff.ms, doubling up to retry.backoff.max.ms.
    assert [delay for delay, _ in retries] == [0.1, 0.2, 0.4, 0.8, 1.0, 1.0]
    assert coordinator.describe("app").state is S.COMPLETE_COMMIT
    assert "app" not in coordinator.pending_markers
    # Partition 0 got its marker at the first attempt and never again.
    assert _markers(coordinator, 0) == [pid] and _markers(coordinator, 1) == [pid]
    assert coordinator.logs.partition("orders", 1).last_stable_offset == \
        coordinator.logs.partition("orders", 1).log_end_offset


def test_a_deleted_partition_is_the_one_failure_that_ends_the_retries(coordinator):
    retries: list[tuple[float, object]] = []
    coordinator.completion.call_later = lambda delay, callback: retries.append((delay, callback))
    coordinator.logs.create_topic("audit", 1)
    pid, epoch = coordinator.init_producer_id("app", 60000)
    coordinator.add_partitions("app", pid, epoch, [("orders", 0), ("audit", 0)])
    coordinator.logs.set_write_check(FailingDisk("audit", 0, count=1000))
    coordinator.end_txn("app", pid, epoch, commit=False)
    assert coordinator.describe("app").state is S.PREPARE_ABORT and len(retries) == 1
    coordinator.logs.delete_topic("audit")
    retries[-1][1]()
    assert coordinator.describe("app").state is S.COMPLETE_ABORT and len(retries) == 1


def test_a_failed_complete_record_is_written_again_without_rewriting_the_markers(coordinator):
    retries: list[tuple[float, object]] = []
    coordinator.completion.call_later = lambda delay, callback: retries.append((delay, callback))
    pid, epoch = coordinator.init_producer_id("app", 60000)
    coordinator.add_partitions("app", pid, epoch, [("orders", 0)])
    state_partition = partition_for("app", coordinator.num_partitions)
    coordinator.end_txn("app", pid, epoch, commit=True, complete=False)
    coordinator.logs.set_write_check(FailingDisk("__transaction_state", state_partition, count=1))
    coordinator.complete("app")
    assert coordinator.describe("app").state is S.PREPARE_COMMIT
    assert coordinator.pending_markers["app"].partitions == frozenset()
    retries[-1][1]()
    assert coordinator.describe("app").state is S.COMPLETE_COMMIT
    assert _markers(coordinator, 0) == [pid]


def test_a_transaction_state_topic_the_disk_refuses_leaves_nothing_and_is_not_retried_at_once(tmp_path, monkeypatch):
    """__transaction_state is created at the first transactional FindCoordinator. A disk
    that refuses partway leaves no partition directory behind (a restart would load a
    topic of fewer partitions), and clients asking again within the retry pause do not
    make the broker write (and log) each time."""
    from ottla.coordinator import transactions as transactions_module
    from ottla.storage import log_manager as log_manager_module

    logs = LogManager(str(tmp_path), LogConfig())
    logs.load()
    coordinator = TransactionCoordinator(logs, ProducerIdAllocator(str(tmp_path)), MarkerWriter(logs),
                                         num_partitions=5)
    coordinator.open()
    real_create = log_manager_module.PartitionLog.create
    tries = []

    def full_disk_at_the_third(path, topic, partition, config):
        tries.append(partition)
        if partition == 2:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_create(path, topic, partition, config)

    monkeypatch.setattr(log_manager_module.PartitionLog, "create", staticmethod(full_disk_at_the_third))
    now = [100.0]
    monkeypatch.setattr(transactions_module.time, "monotonic", lambda: now[0])
    assert coordinator.ensure_topic() is False
    assert [name for name in tmp_path.iterdir() if name.name.startswith("__transaction_state")] == []
    assert logs.topic("__transaction_state") is None
    assert coordinator.ensure_topic() is False
    assert tries == [0, 1, 2]  # not asked again within the pause
    now[0] += 2
    monkeypatch.setattr(log_manager_module.PartitionLog, "create", staticmethod(real_create))
    assert coordinator.ensure_topic() is True
    assert len(logs.topic("__transaction_state").partitions) == 5
