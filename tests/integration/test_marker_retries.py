"""A transaction is complete only once every partition has its marker (issue 12 point
3): a marker that fails is retried until it is written, CompleteCommit follows it, and
the partition's LSO reaches its high watermark. A client cannot make the coordinator's
markers be refused by claiming a later coordinator epoch."""

from __future__ import annotations

import time

from ottla.protocol.errors import ErrorCode
from tests.clients import create_topic, read_all, transactional_producer
from tests.wire import WireClient, request


def _offsets(bootstrap: str, topic: str) -> tuple[int, int]:
    """(last stable offset, high watermark) of partition 0."""
    found = []
    with WireClient(bootstrap) as client:
        for isolation in (1, 0):
            response = client.call(request(2, 7, replica_id=-1, isolation_level=isolation, topics=[
                {"name": topic, "partitions": [{"partition_index": 0, "timestamp": -1}]}]))
            found.append(response.topics[0].partitions[0].offset)
    return found[0], found[1]


def _listed(bootstrap: str, txn_id: str):
    """The transactional id as ListTransactions shows it: producer id and state."""
    with WireClient(bootstrap) as client:
        listed = client.call(request(66, 0, state_filters=[], producer_id_filters=[])).transaction_states
    (found,) = [t for t in listed if t.transactional_id == txn_id]
    return found


def _wait_for_state(bootstrap: str, txn_id: str, state: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while _listed(bootstrap, txn_id).transaction_state != state:
        assert time.monotonic() < deadline, f"{txn_id} never reached {state}"
        time.sleep(0.1)


def test_a_marker_claiming_a_later_coordinator_epoch_is_refused_and_cannot_stall_a_commit(
        fresh_broker, topic_name):
    broker = fresh_broker()
    create_topic(broker.bootstrap, topic_name, 1)
    txn_id = f"forged-{topic_name}"
    producer = transactional_producer(broker.bootstrap, txn_id)
    producer_id = _listed(broker.bootstrap, txn_id).producer_id
    # Accepted, it would make the partition record coordinator epoch 5 for this producer
    # and refuse every marker of the real coordinator (epoch 0) from then on.
    with WireClient(broker.bootstrap) as client:
        response = client.call(request(27, 1, markers=[{
            "producer_id": producer_id, "producer_epoch": 0, "transaction_result": False,
            "topics": [{"name": topic_name, "partition_indexes": [0]}], "coordinator_epoch": 5}]))
    assert response.markers[0].topics[0].partitions[0].error_code == ErrorCode.transaction_coordinator_fenced
    assert "transaction markers refused" in broker.log()

    producer.begin_transaction()
    producer.produce(topic_name, value=b"committed", partition=0)
    producer.commit_transaction(30)
    _wait_for_state(broker.bootstrap, txn_id, "CompleteCommit")
    assert _offsets(broker.bootstrap, topic_name) == (2, 2)  # the record and its marker
    assert read_all(broker.bootstrap, topic_name, [0], isolation="read_committed")[0] == [b"committed"]


def test_markers_that_hit_a_disk_error_are_retried_until_written_and_only_then_the_commit_completes(
        fresh_broker, topic_name):
    broker = fresh_broker(admin_port=0)
    create_topic(broker.bootstrap, topic_name, 1)
    txn_id = f"disk-{topic_name}"
    producer = transactional_producer(broker.bootstrap, txn_id)

    def commit_while_the_disk_fails(value: bytes) -> None:
        producer.begin_transaction()
        producer.produce(topic_name, value=value, partition=0)
        producer.flush(30)
        # Every write to the partition fails from here on: the marker cannot be written.
        broker.admin.add_fault(kind="disk_error", topic=topic_name, partition=0, count=100_000)
        producer.commit_transaction(30)  # answered once PrepareCommit is in the log
        deadline = time.monotonic() + 60
        while broker.log().count("transaction not completed: retrying") < 3:
            assert time.monotonic() < deadline, "the marker was not retried"
            time.sleep(0.1)
        assert _listed(broker.bootstrap, txn_id).transaction_state == "PrepareCommit"
        last_stable, high_watermark = _offsets(broker.bootstrap, topic_name)
        assert last_stable < high_watermark

    commit_while_the_disk_fails(b"first")
    broker.admin.clear_faults()  # the disk is back: the next retry writes the marker
    _wait_for_state(broker.bootstrap, txn_id, "CompleteCommit")
    assert _offsets(broker.bootstrap, topic_name) == (2, 2)

    # A restart while the marker is still failing finishes the transaction at start-up.
    commit_while_the_disk_fails(b"second")
    broker.kill()
    broker.start()
    _wait_for_state(broker.bootstrap, txn_id, "CompleteCommit")
    assert _offsets(broker.bootstrap, topic_name) == (4, 4)
    assert read_all(broker.bootstrap, topic_name, [0], isolation="read_committed")[0] == [b"first", b"second"]
    assert "fault injected" in broker.log()
