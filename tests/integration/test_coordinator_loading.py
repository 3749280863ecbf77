"""After a restart the broker serves at once; the transaction and group coordinators load
`__transaction_state` and `__consumer_offsets` behind it, answering their requests
COORDINATOR_LOAD_IN_PROGRESS meanwhile, as Kafka does (issue 15). Before, the broker
replayed both topics before it listened: after a long history, seconds of nothing."""

from __future__ import annotations

import os
import threading

from confluent_kafka import Producer

from ottla.protocol.errors import ErrorCode
from tests.clients import (
    commit_offset,
    create_topic,
    idempotent_producer,
    produce_all,
    read_all,
    transactional_producer,
)
from tests.wire import WireClient, request

# The broker started through this script loads its coordinators once a file exists.
HOLD_LOADING = os.path.join(os.path.dirname(os.path.dirname(__file__)), "launchers", "hold_coordinator_loading.py")
LOADING = ErrorCode.coordinator_load_in_progress
INIT_PRODUCER_ID, OFFSET_FETCH, LIST_GROUPS, DESCRIBE_TRANSACTIONS, FIND_COORDINATOR = 22, 9, 16, 65, 10


def _describe(client: WireClient, txn_id: str):  # type: ignore[no-untyped-def]
    return client.call(request(DESCRIBE_TRANSACTIONS, 0, transactional_ids=[txn_id])).transaction_states[0]


def test_a_restarted_broker_serves_while_its_coordinators_load(fresh_broker, tmp_path, topic_name):
    broker = fresh_broker()
    create_topic(broker.bootstrap, topic_name, 1)
    txn_id, group = f"loading-{topic_name}", f"group-{topic_name}"
    producer = transactional_producer(broker.bootstrap, txn_id)
    producer.begin_transaction()
    producer.produce(topic_name, value=b"committed", partition=0)
    producer.commit_transaction(30)
    commit_offset(broker.bootstrap, group, topic_name, 0, 1)
    with WireClient(broker.bootstrap) as client:
        before = _describe(client, txn_id)
    assert before.error_code == ErrorCode.none
    broker.stop()

    release = tmp_path / "release-loading"
    broker.launcher = HOLD_LOADING
    broker.env["OTTLA_TEST_RELEASE_LOADING"] = str(release)
    broker.start(wait_for_coordinators=False)

    # Ordinary topics are served while the coordinators load.
    produce_all(idempotent_producer(broker.bootstrap), [(topic_name, 0, None, b"during the load")])
    assert read_all(broker.bootstrap, topic_name, [0], isolation="read_committed")[0] == [
        b"committed", b"during the load"]
    with WireClient(broker.bootstrap) as client:
        found = client.call(request(FIND_COORDINATOR, 4, key_type=1, coordinator_keys=[txn_id]))
        assert found.coordinators[0].error_code == ErrorCode.none
        # What the coordinators hold is answered "loading", which every client retries.
        init = client.call(request(INIT_PRODUCER_ID, 4, transactional_id=txn_id, transaction_timeout=60000,
                                   producer_id=-1, producer_epoch=-1))
        assert init.error_code == LOADING
        assert _describe(client, txn_id).error_code == LOADING
        fetched = client.call(request(OFFSET_FETCH, 8, require_stable=True, groups=[
            {"group_id": group, "topics": [{"name": topic_name, "partition_indexes": [0]}]}]))
        assert fetched.groups[0].error_code == LOADING
        assert client.call(request(LIST_GROUPS, 4, states_filter=[])).error_code == LOADING
    assert not broker.coordinators_loaded.is_set()

    # A transactional producer started now waits out the load by retrying...
    started: list[Producer] = []
    waiting = threading.Thread(target=lambda: started.append(transactional_producer(broker.bootstrap, txn_id)))
    waiting.start()
    waiting.join(1.0)
    assert waiting.is_alive() and not started
    release.touch()
    assert broker.coordinators_loaded.wait(30)
    waiting.join(30)
    # ...and gets the history's producer id with the next epoch: the load brought it back.
    assert len(started) == 1
    (restarted,) = started
    restarted.begin_transaction()  # an open transaction is described with its start time
    restarted.produce(topic_name, value=b"after the load", partition=0)
    restarted.flush(30)
    with WireClient(broker.bootstrap) as client:
        after = _describe(client, txn_id)
        assert after.error_code == ErrorCode.none
        assert (after.producer_id, after.producer_epoch) == (before.producer_id, before.producer_epoch + 1)
        fetched = client.call(request(OFFSET_FETCH, 8, require_stable=True, groups=[
            {"group_id": group, "topics": [{"name": topic_name, "partition_indexes": [0]}]}]))
        assert fetched.groups[0].error_code == ErrorCode.none
        assert fetched.groups[0].topics[0].partitions[0].committed_offset == 1
    restarted.commit_transaction(30)
    assert read_all(broker.bootstrap, topic_name, [0], isolation="read_committed")[0][-1] == b"after the load"
