"""The second phase of ending a transaction: its markers, then its Complete* record.

Once Prepare* is in `__transaction_state` the outcome is decided (transactions.py);
what remains is a COMMIT or ABORT marker in every partition of the transaction
(through `MarkerWriter`, the path WriteTxnMarkers also uses), and then the record that
the transaction is complete. As Kafka's TransactionMarkerChannelManager, Complete* is
written only after all markers are in: a marker that is refused or fails (a disk error)
is sent again after a backoff that doubles from Kafka's retry.backoff.ms to its
retry.backoff.max.ms, and until then the transaction stays prepared, so its producer
gets CONCURRENT_TRANSACTIONS and DescribeTransactions shows why the partition's LSO
has not moved. A partition deleted meanwhile needs no marker: it is the one failure
that ends the retries. A broker that stops between the phases finds Prepare* in the
log at start-up, and the coordinator hands it here again.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from ottla.protocol.errors import ErrorCode, KafkaError
from ottla.protocol.loggers import get_logger

from .markers import MarkerWriter
from .transaction_log import TxnRecord, TxnState

COORDINATOR_EPOCH = 0  # the epoch of our (only) __transaction_state leadership
MARKER_RETRY_BACKOFF_MS = 100
MARKER_RETRY_BACKOFF_MAX_MS = 1000

# (delay in seconds, callback) -> a handle with cancel(), as loop.call_later
Scheduler = Callable[[float, Callable[[], None]], Any]

log = get_logger("ottla.transactions")

# Read once: each read of a member off its enum class costs a Python 3.11 slot call.
_PREPARE_COMMIT = TxnState.PREPARE_COMMIT
_NONE, _UNKNOWN_PARTITION = ErrorCode.none, ErrorCode.unknown_topic_or_partition


def call_later_on_running_loop(delay: float, callback: Callable[[], None]) -> asyncio.TimerHandle:
    return asyncio.get_running_loop().call_later(delay, callback)


@dataclass(frozen=True, slots=True)
class PendingMarkers:
    """The partitions of a prepared transaction still without their marker."""

    partitions: frozenset[tuple[str, int]]
    attempts: int  # how many times the markers were tried


class TransactionCompletion:
    """Prepared transactions on their way to Complete* (Kafka's
    TransactionMarkerChannelManager queue). The coordinator gives it how to read a
    transactional id's prepared state, how to record its completion (raising the
    KafkaError of a refused write), and where that record goes (for the log line)."""

    def __init__(self, markers: MarkerWriter, call_later: Scheduler,
                 prepared: Callable[[str], TxnRecord | None], record_complete: Callable[[str, TxnRecord], None],
                 state_partition: Callable[[str], tuple[str, int]]) -> None:
        self.markers = markers
        self.call_later = call_later
        self.prepared = prepared
        self.record_complete = record_complete
        self.state_partition = state_partition
        # Prepared transactions whose markers are not all written yet, retried with `call_later`.
        self.pending: dict[str, PendingMarkers] = {}
        self._retries: dict[str, Any] = {}  # the scheduled retry of each, to cancel at close

    def complete(self, txn_id: str) -> None:
        """Finish the prepared transaction of `txn_id`; a no-op if it is not prepared
        (anymore)."""
        txn = self.prepared(txn_id)
        if txn is not None:
            self.finish(txn_id, txn)
        else:
            self.pending.pop(txn_id, None)

    def finish(self, txn_id: str, txn: TxnRecord) -> None:
        """Write the markers of the prepared `txn`; once every partition has its marker,
        record the transaction complete. Whatever fails is tried again later."""
        pending = self.pending.get(txn_id)
        wanted = pending.partitions if pending is not None else txn.partitions
        attempts = pending.attempts + 1 if pending is not None else 1
        commit = txn.state is _PREPARE_COMMIT
        results = self.markers.write(txn.producer_id, txn.producer_epoch, commit, COORDINATOR_EPOCH, sorted(wanted))
        failed: dict[tuple[str, int], ErrorCode] = {}
        for tp, code in results.items():  # a loop, not a comprehension: no call of its own (Python 3.11)
            if code != _NONE and code != _UNKNOWN_PARTITION:
                failed[tp] = code
        if failed:
            self._retry_later(txn_id, PendingMarkers(frozenset(failed), attempts), failed)
            return
        try:
            self.record_complete(txn_id, txn)
        except KafkaError as exc:
            # The markers are in; only the record of it failed: try that again.
            self._retry_later(txn_id, PendingMarkers(frozenset(), attempts), {self.state_partition(txn_id): exc.code})
            return
        self.pending.pop(txn_id, None)

    def _retry_later(self, txn_id: str, pending: PendingMarkers, failed: dict[tuple[str, int], ErrorCode]) -> None:
        self.pending[txn_id] = pending
        backoff_ms = min(MARKER_RETRY_BACKOFF_MS * 2 ** (pending.attempts - 1), MARKER_RETRY_BACKOFF_MAX_MS)
        log.warning("transaction not completed: retrying", transactional_id=txn_id, attempt=pending.attempts,
                    retry_in_ms=backoff_ms,
                    failed={f"{topic}-{partition}": code.name for (topic, partition), code in sorted(failed.items())})
        self._retries[txn_id] = self.call_later(backoff_ms / 1000, lambda: self._retry(txn_id))

    def _retry(self, txn_id: str) -> None:
        self._retries.pop(txn_id, None)
        try:
            self.complete(txn_id)
        except Exception:  # nothing may end the retries but the transaction's end
            log.exception("transaction completion failed", transactional_id=txn_id)
            pending = self.pending.get(txn_id)
            if pending is not None:
                self._retry_later(txn_id, replace(pending, attempts=pending.attempts + 1),
                                  dict.fromkeys(pending.partitions, ErrorCode.unknown_server_error))

    def close(self) -> None:
        """Cancel the scheduled retries (at shutdown, before the logs close): the
        Prepare* records stay in the log, and the next start finishes them."""
        for handle in self._retries.values():
            handle.cancel()
        self._retries.clear()
