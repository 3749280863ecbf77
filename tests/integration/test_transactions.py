"""Transactions with confluent-kafka (librdkafka 2.16) against the broker in a subprocess."""

from __future__ import annotations

import os
import time

import pytest
from confluent_kafka import KafkaError, KafkaException

from ottla.protocol.batch import BatchHeader
from ottla.protocol.control import ControlType, parse_marker
from ottla.protocol.errors import ErrorCode
from ottla.storage.log import PartitionLog
from ottla.storage.log_config import LogConfig
from tests.clients import create_topic, idempotent_producer, produce_all, read_all, transactional_producer
from tests.wire import WireClient, request

# The broker started through this script dies right after a Prepare* record is written.
CRASH_AFTER_PREPARE = os.path.join(os.path.dirname(os.path.dirname(__file__)), "launchers", "crash_after_prepare.py")


def _batches(data_dir: str, topic: str, partition: int = 0) -> list[tuple[BatchHeader, bytes]]:
    """The batches of a partition as they are on disk (read through the storage code,
    which only reads the files)."""
    log = PartitionLog(os.path.join(data_dir, f"{topic}-{partition}"), topic, partition, LogConfig())
    from ottla.storage.segment import LogSegment
    names = sorted(n for n in os.listdir(log.directory) if n.endswith(".log"))
    log.segments = [LogSegment(log.directory, int(n[:-4])) for n in names]
    return list(log.batches())


def test_seed_scenario_ten_committed_transactions_then_a_second_run_bumps_the_epoch(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, 1)
    txn_id = f"seed-{topic_name}"
    producer = transactional_producer(broker.bootstrap, txn_id)
    for n in range(10):
        producer.begin_transaction()
        for i in range(50):
            producer.produce(topic_name, value=b"%d" % (n * 50 + i), partition=0)
        producer.commit_transaction(30)

    got = read_all(broker.bootstrap, topic_name, [0], isolation="read_committed")
    assert got[0] == [b"%d" % i for i in range(500)]

    batches = _batches(broker.data_dir, topic_name)
    data = [h for h, _ in batches if not h.is_control]
    controls = [(h, b) for h, b in batches if h.is_control]
    assert len(controls) == 10
    assert all(parse_marker(b).type is ControlType.COMMIT for _, b in controls)
    # Each transaction's data is followed by its marker, which takes an offset of its own.
    assert batches[-1][0].is_control
    producer_id, epoch = data[0].producer_id, data[0].producer_epoch
    assert all(h.is_transactional and h.producer_id == producer_id for h in data)

    # Running the producer again with the same transactional id: same id, next epoch.
    second = transactional_producer(broker.bootstrap, txn_id)
    second.begin_transaction()
    second.produce(topic_name, value=b"second run", partition=0)
    second.commit_transaction(30)
    last_data = [h for h, _ in _batches(broker.data_dir, topic_name) if not h.is_control][-1]
    assert last_data.producer_id == producer_id
    assert last_data.producer_epoch == epoch + 1


def test_aborted_records_are_hidden_from_read_committed_only(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, 3)
    producer = transactional_producer(broker.bootstrap, f"abort-{topic_name}")
    expected_committed: dict[int, list[bytes]] = {0: [], 1: [], 2: []}
    expected_all: dict[int, list[bytes]] = {0: [], 1: [], 2: []}
    for n in range(6):
        producer.begin_transaction()
        for i in range(30):
            value = b"txn%d-%d" % (n, i)
            producer.produce(topic_name, value=value, partition=i % 3)
            expected_all[i % 3].append(value)
            if n % 2 == 0:
                expected_committed[i % 3].append(value)
        if n % 2 == 0:
            producer.commit_transaction(30)
        else:
            producer.flush(30)  # make sure the records reach the log before the abort
            producer.abort_transaction(30)

    assert read_all(broker.bootstrap, topic_name, [0, 1, 2], isolation="read_committed") == expected_committed
    assert read_all(broker.bootstrap, topic_name, [0, 1, 2], isolation="read_uncommitted") == expected_all
    # Each abort is indexed in Kafka's .txnindex format (34-byte entries).
    txn_index = os.path.join(broker.data_dir, f"{topic_name}-0", "00000000000000000000.txnindex")
    assert os.path.getsize(txn_index) == 3 * 34


def test_an_open_transaction_holds_back_read_committed_until_commit(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, 1)
    first = transactional_producer(broker.bootstrap, f"lso-a-{topic_name}")
    second = transactional_producer(broker.bootstrap, f"lso-b-{topic_name}")
    plain = idempotent_producer(broker.bootstrap)

    produce_all(plain, [(topic_name, 0, None, b"before")])
    first.begin_transaction()
    first.produce(topic_name, value=b"a1", partition=0)
    first.flush(30)
    second.begin_transaction()
    second.produce(topic_name, value=b"b1", partition=0)
    second.flush(30)
    produce_all(plain, [(topic_name, 0, None, b"after")])

    # The LSO is the first offset of the first open transaction.
    assert read_all(broker.bootstrap, topic_name, [0], isolation="read_committed")[0] == [b"before"]
    assert read_all(broker.bootstrap, topic_name, [0], isolation="read_uncommitted")[0] == \
        [b"before", b"a1", b"b1", b"after"]

    second.commit_transaction(30)  # still held back by the first, earlier transaction
    assert read_all(broker.bootstrap, topic_name, [0], isolation="read_committed")[0] == [b"before"]

    first.commit_transaction(30)
    assert read_all(broker.bootstrap, topic_name, [0], isolation="read_committed")[0] == \
        [b"before", b"a1", b"b1", b"after"]


def test_a_second_producer_with_the_same_transactional_id_fences_the_first(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, 1)
    txn_id = f"zombie-{topic_name}"
    zombie = transactional_producer(broker.bootstrap, txn_id)
    zombie.begin_transaction()
    zombie.produce(topic_name, value=b"zombie-1", partition=0)
    zombie.flush(30)

    successor = transactional_producer(broker.bootstrap, txn_id)  # fences and aborts the zombie's transaction
    successor.begin_transaction()
    successor.produce(topic_name, value=b"successor", partition=0)
    successor.commit_transaction(30)

    with pytest.raises(KafkaException) as failed:
        zombie.produce(topic_name, value=b"zombie-2", partition=0)
        zombie.flush(10)
        zombie.commit_transaction(10)
    # librdkafka turns the broker's PRODUCER_FENCED / INVALID_PRODUCER_EPOCH into its
    # fatal _FENCED: the zombie can do nothing more.
    error = failed.value.args[0]
    assert error.fatal() and error.code() == KafkaError._FENCED, error

    committed = read_all(broker.bootstrap, topic_name, [0], isolation="read_committed")[0]
    assert committed == [b"successor"]


def test_a_transaction_left_open_past_its_timeout_is_aborted_by_the_broker(fresh_broker, topic_name):
    broker = fresh_broker(transaction_abort_timed_out_transaction_cleanup_interval_ms=300)
    create_topic(broker.bootstrap, topic_name, 1)
    stalled = transactional_producer(broker.bootstrap, f"slow-{topic_name}", **{"transaction.timeout.ms": 1500})
    stalled.begin_transaction()
    stalled.produce(topic_name, value=b"never visible", partition=0)
    stalled.flush(30)
    time.sleep(3)
    produce_all(idempotent_producer(broker.bootstrap), [(topic_name, 0, None, b"later")])

    assert read_all(broker.bootstrap, topic_name, [0], isolation="read_committed")[0] == [b"later"]
    assert "transaction timed out" in broker.log()
    markers = [b for h, b in _batches(broker.data_dir, topic_name) if h.is_control]
    assert [parse_marker(b).type for b in markers] == [ControlType.ABORT]


def test_a_crash_between_prepare_commit_and_the_markers_is_completed_at_restart(fresh_broker, topic_name):
    broker = fresh_broker(launcher=CRASH_AFTER_PREPARE)
    create_topic(broker.bootstrap, topic_name, 2)
    producer = transactional_producer(broker.bootstrap, f"crash-{topic_name}",
                                      **{"message.timeout.ms": 5000, "transaction.timeout.ms": 60000})
    producer.begin_transaction()
    for i in range(20):
        producer.produce(topic_name, value=b"c%d" % i, partition=i % 2)
    producer.flush(30)
    with pytest.raises(KafkaException) as failed:
        producer.commit_transaction(3)  # the broker dies after writing PrepareCommit
    # No answer from a dead broker: the commit's wait ends, retriable (not an error the
    # broker sent, which would mean it answered before dying).
    assert failed.value.args[0].code() == KafkaError._TIMED_OUT, failed.value.args[0]
    assert broker.wait_exit() == 17
    assert all(not h.is_control for h, _ in _batches(broker.data_dir, topic_name))

    broker.launcher = None  # the broker as shipped from here on
    broker.start()
    got = read_all(broker.bootstrap, topic_name, [0, 1], isolation="read_committed")
    assert got == {0: [b"c%d" % i for i in range(0, 20, 2)], 1: [b"c%d" % i for i in range(1, 20, 2)]}


def test_committed_data_and_epochs_survive_a_restart_and_an_open_transaction_waits_for_its_timeout(
        fresh_broker, topic_name):
    broker = fresh_broker(transaction_abort_timed_out_transaction_cleanup_interval_ms=300)
    create_topic(broker.bootstrap, topic_name, 1)
    txn_id = f"restart-{topic_name}"
    producer = transactional_producer(broker.bootstrap, txn_id)
    producer.begin_transaction()
    producer.produce(topic_name, value=b"committed", partition=0)
    producer.commit_transaction(30)
    open_txn = transactional_producer(broker.bootstrap, f"open-{topic_name}", **{"transaction.timeout.ms": 4000})
    opened = time.monotonic()  # before the coordinator's clock for it starts
    open_txn.begin_transaction()
    open_txn.produce(topic_name, value=b"open", partition=0)
    open_txn.flush(30)
    epoch_before = [h for h, _ in _batches(broker.data_dir, topic_name) if not h.is_control][0].producer_epoch

    broker.kill()
    broker.start()
    # Still open after the restart: read_committed stops before it...
    assert read_all(broker.bootstrap, topic_name, [0], isolation="read_committed", settle=0.5)[0] == [b"committed"]
    with WireClient(broker.bootstrap) as client:
        described = client.call(request(65, 0, transactional_ids=[f"open-{topic_name}", txn_id]))
        states = {s.transactional_id: s.transaction_state for s in described.transaction_states}
    # Ongoing while its 4 s can not have run out; on a machine slow enough that they did
    # (the restart under load), the coordinator may already have aborted it.
    still_open = {"Ongoing"} if time.monotonic() - opened < 4 else {"Ongoing", "PrepareAbort", "CompleteAbort"}
    assert states[txn_id] == "CompleteCommit"
    assert states[f"open-{topic_name}"] in still_open, states
    # ...until its timeout aborts it.
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and "transaction timed out" not in broker.log():
        time.sleep(0.2)
    produce_all(idempotent_producer(broker.bootstrap), [(topic_name, 0, None, b"later")])
    assert read_all(broker.bootstrap, topic_name, [0], isolation="read_committed")[0] == [b"committed", b"later"]

    again = transactional_producer(broker.bootstrap, txn_id)
    again.begin_transaction()
    again.produce(topic_name, value=b"after restart", partition=0)
    again.commit_transaction(30)
    last = [h for h, _ in _batches(broker.data_dir, topic_name) if not h.is_control][-1]
    assert last.producer_epoch == epoch_before + 1


def test_write_txn_markers_over_the_wire_writes_the_marker_and_moves_the_lso(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, 1)
    txn_id = f"wire-{topic_name}"
    producer = transactional_producer(broker.bootstrap, txn_id, **{"transaction.timeout.ms": 60000})
    producer.begin_transaction()
    producer.produce(topic_name, value=b"held", partition=0)
    producer.flush(30)
    header = [h for h, _ in _batches(broker.data_dir, topic_name)][0]

    with WireClient(broker.bootstrap) as client:
        def lso() -> int:
            response = client.call(request(2, 7, replica_id=-1, isolation_level=1, topics=[
                {"name": topic_name, "partitions": [{"partition_index": 0, "timestamp": -1}]}]))
            return response.topics[0].partitions[0].offset

        assert lso() == 0
        response = client.call(request(27, 1, markers=[{
            "producer_id": header.producer_id, "producer_epoch": header.producer_epoch, "transaction_result": True,
            "topics": [{"name": topic_name, "partition_indexes": [0]}], "coordinator_epoch": 0}]))
        assert response.markers[0].topics[0].partitions[0].error_code == ErrorCode.none
        assert lso() == 2  # the record and the marker

    assert read_all(broker.bootstrap, topic_name, [0], isolation="read_committed")[0] == [b"held"]


def test_list_transactions_and_describe_producers_show_the_coordinator_and_partition_state(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, 1)
    open_id, done_id = f"listed-open-{topic_name}", f"listed-done-{topic_name}"
    open_txn = transactional_producer(broker.bootstrap, open_id, **{"transaction.timeout.ms": 60000})
    open_txn.begin_transaction()
    open_txn.produce(topic_name, value=b"pending", partition=0)
    open_txn.flush(30)
    done = transactional_producer(broker.bootstrap, done_id)
    done.begin_transaction()
    done.produce(topic_name, value=b"done", partition=0)
    done.commit_transaction(30)

    with WireClient(broker.bootstrap) as client:
        ongoing = client.call(request(66, 1, state_filters=["Ongoing"], producer_id_filters=[], duration_filter=-1))
        ongoing_ids = {t.transactional_id for t in ongoing.transaction_states}
        assert open_id in ongoing_ids and done_id not in ongoing_ids
        everything = client.call(request(66, 0, state_filters=[], producer_id_filters=[]))
        states = {t.transactional_id: t.transaction_state for t in everything.transaction_states}
        assert states[open_id] == "Ongoing" and states[done_id] == "CompleteCommit"
        unknown = client.call(request(66, 0, state_filters=["Sleeping"], producer_id_filters=[]))
        assert list(unknown.unknown_state_filters) == ["Sleeping"]

        producers = client.call(request(61, 0, topics=[{"name": topic_name, "partition_indexes": [0]}]))
        active = producers.topics[0].partitions[0].active_producers
        header = [h for h, _ in _batches(broker.data_dir, topic_name) if not h.is_control][0]
        by_id = {p.producer_id: p for p in active}
        assert by_id[header.producer_id].current_txn_start_offset == 0  # the open transaction
        assert any(p.current_txn_start_offset == -1 for p in active)  # the committed one
    open_txn.abort_transaction(30)
