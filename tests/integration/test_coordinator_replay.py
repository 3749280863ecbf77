"""A broker's coordinators hold what a restart rebuilds from their logs: every change
is the replay of the records it wrote (coordinator/writes.py), transaction markers in
`__consumer_offsets` included. Groups of both protocols, plain and transactional offset
commits (committed, aborted and still open), transactions and a deleted group are made
over the wire; what the broker describes of them is the same after a restart.

Evidence: with the markers listener not wired in broker/server.py (a transaction's
end in `__consumer_offsets` is not replayed while the broker runs), the group whose
offsets a transaction committed has none before the restart, and the test fails there.
"""

from __future__ import annotations

from typing import Any

from ottla.protocol.errors import ErrorCode
from tests.clients import create_topic
from tests.integration.test_coordinator_write_failures import DELETE_GROUPS, OFFSET_FETCH, Client
from tests.wire import WireClient, request

CLASSIC = ["left", "stable", "offsets-only", "deleted", "txn-committed", "txn-aborted"]
CONSUMER = ["consumers"]
TXN_IDS = ["committed", "aborted", "open"]


def described(client: Client) -> dict[str, Any]:
    """The broker's view of the groups, offsets and transactions, and which offsets
    wait for their transaction (OffsetFetch with require_stable)."""
    stable = client.wire.call(request(OFFSET_FETCH, 8, require_stable=True, groups=[
        {"group_id": g, "topics": None} for g in CLASSIC + CONSUMER]))
    return {**client.view(CLASSIC, CONSUMER, TXN_IDS),
            "unstable": sorted((g.group_id, p.partition_index) for g in stable.groups for t in g.topics
                               for p in t.partitions if p.error_code == ErrorCode.unstable_offset_commit)}


def test_what_the_coordinators_hold_is_what_a_restart_rebuilds(fresh_broker, topic_name):
    broker = fresh_broker(group_initial_rebalance_delay_ms=0)
    create_topic(broker.bootstrap, topic_name, 2)
    with WireClient(broker.bootstrap) as wire:
        client = Client(wire, topic_name)
        left = client.stable_group("left")
        assert client.commit("left", left, 1, 5) == ErrorCode.none
        assert client.leave("left", left).error_code == ErrorCode.none  # its generation ends empty
        stable = client.stable_group("stable")
        assert client.commit("stable", stable, 1, 6) == ErrorCode.none
        assert client.commit("offsets-only", "", -1, 7) == ErrorCode.none
        assert client.commit("deleted", "", -1, 8) == ErrorCode.none
        assert wire.call(request(DELETE_GROUPS, 2, groups_names=["deleted"])).results[0].error_code == ErrorCode.none
        for member in ("m1", "m2"):
            assert client.consumer_heartbeat("consumers", member, 0).error_code == ErrorCode.none
        assert client.commit("consumers", "m1", 1, 11, version=9) == ErrorCode.none
        assert client.consumer_heartbeat("consumers", "m2", -1).error_code == ErrorCode.none
        for txn_id, group, offset in (("committed", "txn-committed", 20), ("aborted", "txn-aborted", 30),
                                      ("open", "offsets-only", 40)):
            producer = client.init_producer_id(txn_id)
            assert client.add_partition(txn_id, producer, 0) == ErrorCode.none
            assert client.add_offsets(txn_id, producer, group) == ErrorCode.none
            assert client.txn_commit(txn_id, producer, group, offset) == ErrorCode.none
            if txn_id != "open":
                assert client.end_txn(txn_id, producer, commit=txn_id == "committed") == ErrorCode.none
        before = described(client)
    assert before["offsets"]["txn-committed"] == (ErrorCode.none, [(topic_name, 0, 20)])
    assert before["offsets"]["txn-aborted"] == (ErrorCode.none, [])
    assert before["unstable"] == [("offsets-only", 0)]
    assert before["groups"]["left"][1] == "Empty" and before["groups"]["stable"][1] == "Stable"
    assert before["groups"]["deleted"][1] == "Dead"

    broker.restart()
    with WireClient(broker.bootstrap) as wire:
        assert described(Client(wire, topic_name)) == before
