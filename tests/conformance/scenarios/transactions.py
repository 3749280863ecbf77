"""Transactions (seed: transactions): the coordinator's state machine and its error
paths, markers, the last stable offset and aborted transactions in Fetch, and the
describe/list APIs."""

from __future__ import annotations

from typing import Any

from ..harness import Context, Scenario, Step, sweep
from .common import (
    ADD_OFFSETS_TO_TXN,
    ADD_PARTITIONS_TO_TXN,
    DESCRIBE_PRODUCERS,
    DESCRIBE_TRANSACTIONS,
    END_TXN,
    FETCH,
    FIND_COORDINATOR,
    INIT_PRODUCER_ID,
    LIST_OFFSETS,
    LIST_TRANSACTIONS,
    OFFSET_FETCH,
    PRODUCE,
    TXN_OFFSET_COMMIT,
    WRITE_TXN_MARKERS,
    batch,
    create,
    produce,
)

TIMEOUT_WAIT = 12.0
NOT_YET = ("coordinator_not_available", "coordinator_load_in_progress", "not_coordinator")


def tid(c: Context, n: str = "") -> str:
    return c.name("txn", n)


def group(c: Context) -> str:
    return c.name("group")


def find(name: str, key_type: int, key: Any, version: int = 4) -> Step:
    return Step(name, FIND_COORDINATOR, version, lambda c: {"key_type": key_type, "key": key(c),
                                                           "coordinator_keys": [key(c)]}, retry=NOT_YET)


def init(name: str, n: str = "", timeout: int = 60000, version: int = 4, after_end: bool = False) -> Step:
    """InitProducerId; `after_end`: right after a transaction ended, when Kafka may still
    be writing its markers (CONCURRENT_TRANSACTIONS until it is done; see known.py)."""
    return Step(name, INIT_PRODUCER_ID, version, lambda c: {"transactional_id": tid(c, n),
                                                           "transaction_timeout": timeout, "producer_id": -1,
                                                           "producer_epoch": -1},
                retry=NOT_YET + (("concurrent_transactions",) if after_end else ()))


def ids(c: Context, step: str, epoch_delta: int = 0) -> tuple[int, int]:
    return int(c[step].producer_id), int(c[step].producer_epoch) + epoch_delta


def add_partitions(name: str, step: str, topic: Any = None, partitions: tuple[int, ...] = (0,), version: int = 3,
                   n: str = "", epoch_delta: int = 0, retry: tuple[str, ...] = ()) -> Step:
    def body(c: Context) -> dict[str, Any]:
        producer_id, epoch = ids(c, step, epoch_delta)
        topics = [{"name": topic(c) if topic else c.topic(), "partitions": list(partitions)}]
        return {"v3_and_below_transactional_id": tid(c, n), "v3_and_below_producer_id": producer_id,
                "v3_and_below_producer_epoch": epoch, "v3_and_below_topics": topics,
                "transactions": [{"transactional_id": tid(c, n), "producer_id": producer_id, "producer_epoch": epoch,
                                  "verify_only": False, "topics": topics}]}
    return Step(name, ADD_PARTITIONS_TO_TXN, version, body, retry=retry)


def txn_produce(name: str, step: str, values: list[bytes], sequence: int, n: str = "", epoch_delta: int = 0,
                partition: int = 0) -> Step:
    def body(c: Context) -> dict[str, Any]:
        producer_id, epoch = ids(c, step, epoch_delta)
        return produce(c.topic(), partition, batch(values, producer_id, epoch, sequence, transactional=True),
                       transactional_id=tid(c, n))
    return Step(name, PRODUCE, 9, body)


def end(name: str, step: str, committed: bool, version: int = 3, n: str = "", epoch_delta: int = 0,
        retry: tuple[str, ...] = ()) -> Step:
    def body(c: Context) -> dict[str, Any]:
        producer_id, epoch = ids(c, step, epoch_delta)
        return {"transactional_id": tid(c, n), "producer_id": producer_id, "producer_epoch": epoch,
                "committed": committed}
    return Step(name, END_TXN, version, body, retry=retry)


def add_offsets(name: str, step: str, version: int = 3, n: str = "") -> Step:
    def body(c: Context) -> dict[str, Any]:
        producer_id, epoch = ids(c, step)
        return {"transactional_id": tid(c, n), "producer_id": producer_id, "producer_epoch": epoch,
                "group_id": group(c)}
    return Step(name, ADD_OFFSETS_TO_TXN, version, body, retry=NOT_YET)


def txn_offset_commit(name: str, step: str, version: int = 3, n: str = "") -> Step:
    def body(c: Context) -> dict[str, Any]:
        producer_id, epoch = ids(c, step)
        return {"transactional_id": tid(c, n), "group_id": group(c), "producer_id": producer_id,
                "producer_epoch": epoch, "generation_id": -1, "member_id": "", "group_instance_id": None,
                "topics": [{"name": c.topic(), "partitions": [{"partition_index": 0, "committed_offset": 1,
                                                               "committed_leader_epoch": -1,
                                                               "committed_metadata": "m"}]}]}
    return Step(name, TXN_OFFSET_COMMIT, version, body, retry=NOT_YET)


def fetch_committed(name: str, version: int = 12, isolation: int = 1) -> Step:
    return Step(name, FETCH, version, lambda c: {
        "replica_id": -1, "max_wait": 0, "min_bytes": 0, "max_bytes": 1 << 20, "isolation_level": isolation,
        "session_id": 0, "session_epoch": -1, "forgotten_topics_data": [], "rack_id": "",
        "topics": [{"topic": c.topic(), "topic_id": c["create"].topics[0].topic_id, "partitions": [
            {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20, "current_leader_epoch": -1,
             "log_start_offset": -1, "last_fetched_epoch": -1}]}]})


def markers(name: str, step: str, committed: bool, version: int, coordinator_epoch: int = 0) -> Step:
    def body(c: Context) -> dict[str, Any]:
        producer_id, epoch = ids(c, step)
        return {"markers": [{"producer_id": producer_id, "producer_epoch": epoch, "transaction_result": committed,
                             "topics": [{"name": c.topic(), "partition_indexes": [0]}],
                             "coordinator_epoch": coordinator_epoch, "transaction_version": 0}]}
    return Step(name, WRITE_TXN_MARKERS, version, body)


LIST_ALL = {"state_filters": [], "producer_id_filters": [], "duration_filter": -1, "transactional_id_pattern": None}

SCENARIOS = [
    Scenario("transactions-happy-path", [
        create("create"),
        *[find(f"find-coordinator@v{v}", 1, tid, version=v) for v in range(7)],
        *[init(f"init@v{v}", version=v) for v in range(6)],
        init("init"),
        *[add_partitions(f"add-partitions@v{v}", "init", version=v) for v in range(6)],
        txn_produce("produce", "init", [b"a", b"b"], 0),
        txn_produce("produce-again", "init", [b"c"], 2),
        Step("describe-producers", DESCRIBE_PRODUCERS, 0, lambda c: {"topics": [{"name": c.topic(),
                                                                                 "partition_indexes": [0, 1]}]}),
        Step("describe-transactions", DESCRIBE_TRANSACTIONS, 0, lambda c: {"transactional_ids": [tid(c), "nope"]}),
        *sweep("list-transactions", LIST_TRANSACTIONS, LIST_ALL, only_mine=True),
        Step("list-transactions-by-state", LIST_TRANSACTIONS, 2, {**LIST_ALL, "state_filters": ["Ongoing", "Nope"]},
             only_mine=True),
        Step("list-transactions-by-pattern", LIST_TRANSACTIONS, 2, lambda c: {
            **LIST_ALL, "transactional_id_pattern": tid(c) + ".*"}),
        Step("list-transactions-bad-pattern", LIST_TRANSACTIONS, 2, {**LIST_ALL, "transactional_id_pattern": "(["}),
        Step("list-offsets-read-committed", LIST_OFFSETS, 8, lambda c: {
            "replica_id": -1, "isolation_level": 1,
            "topics": [{"name": c.topic(), "partitions": [{"partition_index": 0, "timestamp": -1}]}]}),
        fetch_committed("fetch-read-committed-open"),
        *[add_offsets(f"add-offsets@v{v}", "init", version=v) for v in range(5)],
        txn_offset_commit("txn-offset-commit", "init"),
        *[txn_offset_commit(f"txn-offset-commit@v{v}", "init", version=v) for v in range(6)],
        Step("offset-fetch-unstable", OFFSET_FETCH, 9, lambda c: {"groups": [
            {"group_id": group(c), "member_id": None, "member_epoch": -1,
             "topics": [{"name": c.topic(), "partition_indexes": [0]}]}], "require_stable": True}),
        Step("offset-fetch-unstable@v6", OFFSET_FETCH, 6, lambda c: {
            "group_id": group(c), "topics": [{"name": c.topic(), "partition_indexes": [0]}], "require_stable": True}),
        end("commit", "init", True),
        end("commit-again", "init", True, retry=("concurrent_transactions",)),
        end("abort-after-commit", "init", False, retry=("concurrent_transactions",)),
        init("init-2", after_end=True),
        add_partitions("add-2", "init-2"),
        txn_produce("produce-2", "init-2", [b"aborted"], 0),
        end("abort", "init-2", False),
        init("init-3", after_end=True),
        add_partitions("add-3", "init-3"),
        txn_produce("produce-3", "init-3", [b"open"], 0),
        fetch_committed("fetch-read-committed"),
        fetch_committed("fetch-read-uncommitted", isolation=0),
        Step("describe-producers-after", DESCRIBE_PRODUCERS, 0, lambda c: {"topics": [{"name": c.topic(),
                                                                                       "partition_indexes": [0]}]}),
        *[end(f"end@v{v}", "init-3", v % 2 == 0, version=v, retry=("concurrent_transactions",)) for v in range(6)],
    ]),
    Scenario("transactions-errors", [
        create("create"),
        find("find", 1, tid),
        init("init"),
        end("end-with-no-transaction", "init", True),
        end("abort-with-no-transaction", "init", False),
        add_partitions("add-unknown-topic", "init", topic=lambda c: c.topic("nope")),
        add_partitions("add-unknown-partition", "init", partitions=(5,)),
        add_partitions("add-wrong-epoch", "init", epoch_delta=1),
        add_partitions("add-unknown-transactional-id", "init", n="other"),
        txn_produce("produce-not-added", "init", [b"x"], 0),
        txn_offset_commit("txn-offset-commit-before-add-offsets", "init"),
        add_partitions("add", "init"),
        init("init-while-ongoing"),
        # Once the abort the last step began is written, the id comes back with its epoch bumped.
        init("init-after-abort", after_end=True),
        txn_produce("produce-fenced", "init", [b"x"], 0),
        # Kafka is still aborting the open transaction for a moment (see init's docstring).
        end("end-fenced", "init", True, retry=("concurrent_transactions",)),
        add_partitions("add-fenced", "init", retry=("concurrent_transactions",)),
        end("end-wrong-epoch-ahead", "init-while-ongoing", True, epoch_delta=5),
        end("end-unknown-transactional-id", "init", True, n="other"),
        init("init-bad-timeout", n="t", timeout=0),
        init("init-too-long-timeout", n="t", timeout=10_000_000),
        Step("init-empty-id", INIT_PRODUCER_ID, 4, {"transactional_id": "", "transaction_timeout": 60000,
                                                   "producer_id": -1, "producer_epoch": -1}),
        Step("init-wrong-producer-id", INIT_PRODUCER_ID, 4, lambda c: {
            "transactional_id": tid(c), "transaction_timeout": 60000, "producer_id": 5555, "producer_epoch": 0}),
        Step("add-offsets-unknown-producer", ADD_OFFSETS_TO_TXN, 3, lambda c: {
            "transactional_id": tid(c), "producer_id": 5555, "producer_epoch": 0, "group_id": group(c)}),
        Step("describe-unknown", DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": ["cf-no-such-transaction"]}),
        Step("describe-producers-unknown", DESCRIBE_PRODUCERS, 0, lambda c: {
            "topics": [{"name": c.topic("nope"), "partition_indexes": [0]}, {"name": c.topic(),
                                                                            "partition_indexes": [3]}]}),
    ]),
    # Both brokers look for timed-out transactions every 10 s (Kafka's default
    # transaction.abort.timed.out.transaction.cleanup.interval.ms): the wait covers one look.
    Scenario("transaction-timeout", [
        create("create"),
        find("find", 1, tid),
        init("init", timeout=1000),
        add_partitions("add", "init"),
        txn_produce("produce", "init", [b"late"], 0),
        Step("describe-after-timeout", DESCRIBE_TRANSACTIONS, 0, lambda c: {"transactional_ids": [tid(c)]},
             wait=TIMEOUT_WAIT),
        end("commit-after-timeout", "init", True, retry=("concurrent_transactions",)),
        add_partitions("add-after-timeout", "init", retry=("concurrent_transactions",)),
        txn_produce("produce-after-timeout", "init", [b"later"], 1),
        init("init-again", timeout=1000, after_end=True),
    ]),
    Scenario("write-txn-markers", [
        create("create"),
        Step("init", INIT_PRODUCER_ID, 4, {"transactional_id": None, "transaction_timeout": 60000,
                                           "producer_id": -1, "producer_epoch": -1}),
        markers("markers-no-transaction@v1", "init", True, 1),
        markers("markers-no-transaction@v2", "init", False, 2),
        Step("markers-unknown-topic", WRITE_TXN_MARKERS, 1, lambda c: {"markers": [{
            "producer_id": 1, "producer_epoch": 0, "transaction_result": True, "coordinator_epoch": 0,
            "topics": [{"name": c.topic("nope"), "partition_indexes": [0]}]}]}),
        fetch_committed("fetch"),
    ]),
]
