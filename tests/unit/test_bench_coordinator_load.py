"""The coordinator-load benchmark's history (bench/coordinator_load.py) is written with the
coordinators' own record types and encoders: when those change (TxnRecord became a named
tuple in issue 45's round four), the history must still be written, and say what the
coordinators will replay. Found by the full `make bench` failing on dataclasses.replace."""

from __future__ import annotations

from bench.coordinator_load import IDS, ORDINARY, PARTITIONS, TXN_TOPIC, write_history
from ottla.coordinator.transaction_log import TxnState, decode_key, decode_value, partition_for
from ottla.protocol.records import keys_and_values
from ottla.storage.log_config import LogConfig
from ottla.storage.log_manager import LogManager


def test_each_transaction_of_the_history_is_begun_prepared_and_completed(tmp_path) -> None:
    transactions, commits = 2 * IDS, 7
    assert write_history(str(tmp_path), transactions, commits) == 3 * transactions + commits
    logs = LogManager(str(tmp_path), LogConfig())
    logs.load()
    try:
        log = logs.partition(TXN_TOPIC, partition_for("bench-txn-0", PARTITIONS))
        assert log is not None
        states = [decode_value(value).state for _, batch in log.batches()
                  for _, key, value in keys_and_values(batch)
                  if key is not None and value is not None and decode_key(key) == "bench-txn-0"]
        assert states == [TxnState.ONGOING, TxnState.PREPARE_COMMIT, TxnState.COMPLETE_COMMIT] * 2
        completed = decode_value(next(value for _, batch in log.batches() for _, key, value in keys_and_values(batch)
                                      if key is not None and value is not None
                                      and decode_key(key) == "bench-txn-0"
                                      and decode_value(value).state is TxnState.COMPLETE_COMMIT))
        assert completed.partitions == frozenset() and completed.start_ms == -1
        assert ORDINARY in logs.topics
    finally:
        logs.close()
