"""Fault injection's error answers (protocol/error_responses.py) on both sides of the
versions where a request changed its shape: a field the older versions lack reads as its
default there (protocol/views), so the answer follows the version, not whether a field
is present."""

from __future__ import annotations

from ottla.protocol import apis
from ottla.protocol.error_responses import error_response
from ottla.protocol.errors import ErrorCode
from tests.wire import request

CODE = ErrorCode.not_controller


def test_delete_topics_by_name_and_by_state() -> None:
    by_name = request(apis.DELETE_TOPICS.key, 5, topic_names=["a", "b"], timeout=1000)
    by_state = request(apis.DELETE_TOPICS.key, 6, topics=[{"name": "a"}, {"name": "b"}], timeout=1000)
    for version, body in ((5, by_name), (6, by_state)):
        answer = error_response(apis.DELETE_TOPICS.key, body, CODE)
        assert [(r["name"], r["error_code"]) for r in answer["responses"]] == [("a", CODE), ("b", CODE)], version


def test_add_partitions_to_txn_of_a_client_and_of_a_broker() -> None:
    topics = [{"name": "t", "partitions": [0, 1]}]
    client = request(apis.ADD_PARTITIONS_TO_TXN.key, 3, v3_and_below_transactional_id="x",
                     v3_and_below_producer_id=1, v3_and_below_producer_epoch=0, v3_and_below_topics=topics)
    broker = request(apis.ADD_PARTITIONS_TO_TXN.key, 4, transactions=[
        {"transactional_id": "x", "producer_id": 1, "producer_epoch": 0, "verify_only": True, "topics": topics}])
    for version, body in ((3, client), (4, broker)):
        answer = error_response(apis.ADD_PARTITIONS_TO_TXN.key, body, CODE)
        results = answer.get("results_by_topic_v3_and_below") or [
            t for r in answer["results_by_transaction"] for t in r["topic_results"]]
        assert [(p["partition_index"], p["partition_error_code"]) for t in results
                for p in t["results_by_partition"]] == [(0, CODE), (1, CODE)], version


def test_offset_fetch_of_one_group_and_of_several() -> None:
    one = request(apis.OFFSET_FETCH.key, 7, group_id="g", topics=[{"name": "t", "partition_indexes": [0]}],
                  require_stable=False)
    several = request(apis.OFFSET_FETCH.key, 8, groups=[
        {"group_id": "g", "topics": [{"name": "t", "partition_indexes": [0]}]}], require_stable=False)
    answer = error_response(apis.OFFSET_FETCH.key, one, CODE)
    assert answer["error_code"] == CODE and [t["name"] for t in answer["topics"]] == ["t"]
    assert error_response(apis.OFFSET_FETCH.key, several, CODE) == {"groups": [{"group_id": "g", "error_code": CODE}]}
