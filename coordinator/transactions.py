"""The transaction coordinator: one state machine per transactional id.

    Empty ──AddPartitions──▶ Ongoing ──EndTxn(commit)──▶ PrepareCommit ──markers──▶ CompleteCommit
      ▲                        │    ──EndTxn(abort)───▶ PrepareAbort  ──markers──▶ CompleteAbort
      │                        │    ──InitProducerId / timeout──▶ (PrepareEpochFence) ──▶ PrepareAbort
      └──InitProducerId── Complete* / Empty (epoch + 1)

A transition is a record: it is appended to `__transaction_state` and then replayed
into memory (writes.py's rule), by the same `replay` that rebuilds every transactional
id at start-up, so a restart rebuilds exactly the state clients were told about; a
transition whose record cannot be written is not made. Ending a
transaction is two-phase as in Kafka: Prepare* is written, then the markers go to every
partition of the transaction and Complete* follows once every partition has its marker
(transaction_completion.py, which retries what fails). A broker that stops between the
phases finds the Prepare* record at start-up and finishes the markers.

EndTxn is answered once Prepare* is in the log, as Kafka answers it: from then on the
outcome is decided and survives a crash. The markers (local appends: one broker hosts
every partition) and Complete* follow right after the answer is sent, before the
connection's next request is read (the handler defers them with `after_response`), so
the producer's next transaction finds this one complete.

State transitions make new records (`transition`, Kafka's prepareTransitionTo): a
record in `transactions` is never edited, only replaced by the replay of its successor.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Mapping
from types import MappingProxyType

from ottla.protocol.batch import BatchHeader, coordinator_batch
from ottla.protocol.errors import ErrorCode, KafkaError
from ottla.protocol.loggers import get_logger
from ottla.protocol.records import keys_and_values
from ottla.storage.log_manager import LogManager

from .loading import replay
from .markers import MarkerWriter
from .producer_ids import ProducerIdAllocator
from .transaction_completion import (
    PendingMarkers,
    Scheduler,
    TransactionCompletion,
    call_later_on_running_loop,
)
from .transaction_log import (
    TOPIC,
    TxnRecord,
    TxnState,
    decode_key,
    decode_value,
    encoded_key,
    following,
    partition_for,
    transition,
    value_of,
)
from .writes import append_error

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
# At this epoch a producer gets a new id instead of another bump (Kafka: Short.MAX - 1).
MAX_EPOCH = 2**15 - 2
INTERNAL_TOPIC_CONFIGS = {"cleanup.policy": "compact", "segment.bytes": str(100 * 1024 * 1024)}
# After __transaction_state could not be created, how long FindCoordinator answers
# COORDINATOR_NOT_AVAILABLE before the disk is asked again.
_CREATION_RETRY_S = 1.0
# The states as module constants: on Python 3.11 each read of a member off its enum
# class goes through EnumType.__getattr__'s slot (about 860 instructions), and a
# transaction's calls read several.
_EMPTY, _ONGOING, _DEAD = TxnState.EMPTY, TxnState.ONGOING, TxnState.DEAD
_PREPARE_COMMIT, _PREPARE_ABORT = TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT
_COMPLETE_COMMIT, _COMPLETE_ABORT = TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT
_PREPARED = (_PREPARE_COMMIT, _PREPARE_ABORT)
_COMPLETED = (_COMPLETE_COMMIT, _COMPLETE_ABORT)
_NO_PARTITIONS: frozenset[tuple[str, int]] = frozenset()


log = get_logger("ottla.transactions")


class TransactionCoordinator:
    def __init__(self, logs: LogManager, producer_ids: ProducerIdAllocator, markers: MarkerWriter, *,
                 num_partitions: int = 50, max_timeout_ms: int = 15 * 60 * 1000,
                 max_transactional_ids: int = 2**31 - 1,
                 clock: Callable[[], float] = time.time, call_later: Scheduler = call_later_on_running_loop) -> None:
        self.logs = logs
        self.producer_ids = producer_ids
        self.markers = markers
        self.num_partitions = num_partitions
        self.max_timeout_ms = max_timeout_ms
        # max.transactional.ids: the most ids kept (each a state in memory and in
        # __transaction_state until transactional.id.expiration.ms forgets it).
        self.max_transactional_ids = max_transactional_ids
        self.clock = clock
        self.transactions: dict[str, TxnRecord] = {}
        self.completion = TransactionCompletion(
            markers, call_later, self._prepared, self._record_complete,
            lambda txn_id: (TOPIC, partition_for(txn_id, self.num_partitions)))
        # `__transaction_state` partitions not loaded yet (see `open`).
        self._loading: set[int] = set()
        self._opened = False
        self._creation_retry_at = 0.0  # (monotonic) ensure_topic's next try after a failure
        # The value `_persist` is writing, its record and its transactional id.
        self._encoded: tuple[bytes, TxnRecord, str] | None = None

    def _now_ms(self) -> int:
        return int(self.clock() * 1000)

    # --- the log -------------------------------------------------------------------------

    def open(self) -> None:
        """Take `__transaction_state` as it is, if it exists. Until `load` has read a
        partition of it, the transactional ids it holds are answered
        COORDINATOR_LOAD_IN_PROGRESS. A broker that never saw a transaction has none: as
        Kafka, it is created at the first transactional request (`ensure_topic`), and an
        empty start does not pay for its 50 partitions."""
        topic = self.logs.topic(TOPIC)
        if topic is not None:
            self.num_partitions = len(topic.partitions)
            self._loading = set(range(self.num_partitions))
        self._opened = True

    def ensure_topic(self) -> bool:
        """Create `__transaction_state` if it does not exist yet (Kafka creates it at
        the first FindCoordinator of a transactional id). False if it could not be (the
        disk refused): the coordinator is not available."""
        if self.logs.topic(TOPIC) is not None:
            return True
        if time.monotonic() < self._creation_retry_at:
            return False  # it failed a moment ago: clients ask again, the disk is not asked each time
        try:
            # Kafka's settings for its internal topics: compacted, 100 MiB segments.
            self.logs.create_topic(TOPIC, self.num_partitions, INTERNAL_TOPIC_CONFIGS)
        except (OSError, KafkaError) as exc:
            self._creation_retry_at = time.monotonic() + _CREATION_RETRY_S
            log.warning("could not create the transaction state topic", topic=TOPIC, error=str(exc))
            return False
        log.info("topic created", topic=TOPIC, partitions=self.num_partitions, configs=INTERNAL_TOPIC_CONFIGS)
        return True

    async def load(self) -> int:
        """Rebuild every transactional id from `__transaction_state`, one partition at a
        time beside the serving loop (coordinator/loading.py), and finish the
        transactions a stop left between the two phases. Returns how many ids."""
        if not self._opened:
            self.open()
        topic = self.logs.topic(TOPIC)
        if topic is None:
            return 0  # no transaction yet
        for partition, log in enumerate(topic.partitions):
            # The latest value of each key, still encoded: most records of a long
            # history are overwritten, so only the survivors are decoded. Built apart
            # and taken in whole: the timeout and expiry tasks, the admin views and
            # metrics never see a partition's ids half replayed.
            latest: dict[bytes, bytes] = {}

            def apply(header: BatchHeader, batch: bytes, latest: dict[bytes, bytes] = latest) -> None:
                if header.is_control:
                    return
                for _, key, value in keys_and_values(batch):
                    if key is None:
                        continue
                    if value is None:
                        latest.pop(key, None)
                    else:
                        latest[key] = value

            await replay(log, apply)
            # Replaying only the survivors builds what replaying every record would: a
            # record of `__transaction_state` replaces its key's state whole.
            for key, value in latest.items():
                self.replay(key, value)
            self._loading.discard(partition)
            for txn_id in {decode_key(key) for key in latest}:
                txn = self.transactions[txn_id]
                if txn.state in _PREPARED:
                    self.completion.finish(txn_id, txn)
        return len(self.transactions)

    def replay(self, key: bytes, value: bytes | None) -> None:
        """Apply one record of `__transaction_state`: the state of its transactional id,
        or its end for a tombstone. The one way `transactions` changes, at start-up and
        after every append (`_persist`)."""
        encoded = self._encoded
        if encoded is not None and value is encoded[0]:
            # The record `_persist` just encoded for its transactional id: decoding the
            # key and the value gives them back (the codec's round trip), so they are
            # taken as they are.
            self.transactions[encoded[2]] = encoded[1]
            return
        txn_id = decode_key(key)
        if value is None:
            self.transactions.pop(txn_id, None)
        else:
            self.transactions[txn_id] = decode_value(value)

    @property
    def loading(self) -> bool:
        """Whether some partition of `__transaction_state` is not loaded yet."""
        return bool(self._loading)

    def _require_loaded(self, txn_id: str) -> None:
        if self._loading and partition_for(txn_id, self.num_partitions) in self._loading:
            raise KafkaError(ErrorCode.coordinator_load_in_progress,
                             f"the __transaction_state partition of {txn_id!r} is still loading")

    def _persist(self, txn_id: str, record: TxnRecord | None, timestamp: int = -1) -> None:
        """Make `record` (made by `transition`, or the first of a transactional id; None:
        its tombstone, at `timestamp`) the state of `txn_id`: appended to its partition of
        `__transaction_state` in a batch of its own, then replayed (writes.write's rule for
        one record, in this one call: every change of a transaction comes this way). A
        refused append raises the error a coordinator answers (writes.append_error)
        before the replay, so nothing changes. The batch carries the record's update
        time, taken a moment before, as its timestamp."""
        key = encoded_key(txn_id)
        if record is None:
            value = None
        else:
            value = value_of(record)
            timestamp = record.last_update_ms
        partition = partition_for(txn_id, self.num_partitions)
        # LogManager.partition's lookup, read here: a call less at every change.
        topic = self.logs.topics.get(TOPIC)
        if topic is None:  # the first transactional request: the topic is made (or is not)
            if not self.ensure_topic():
                raise append_error(KafkaError(ErrorCode.unknown_topic_or_partition, f"{TOPIC} could not be created"),
                                   f"{TOPIC}-{partition}")
            topic = self.logs.topics[TOPIC]
        batch, header = coordinator_batch([(key, value)], timestamp)
        try:
            topic.partitions[partition].append_batch(batch, header)
        except KafkaError as exc:
            raise append_error(exc, f"{TOPIC}-{partition}") from None
        if record is None or value is None:  # a tombstone (both, or neither)
            self.replay(key, None)
            return
        self._encoded = (value, record, txn_id)
        try:
            self.replay(key, value)
        finally:
            self._encoded = None

    # --- InitProducerId ------------------------------------------------------------------

    def init_producer_id(self, txn_id: str, timeout_ms: int, expected_producer_id: int = NO_PRODUCER_ID,
                         expected_epoch: int = NO_PRODUCER_EPOCH) -> tuple[int, int]:
        """Give the transactional id its producer id and a new epoch, fencing the
        previous producer. Returns (producer id, epoch)."""
        if timeout_ms <= 0 or timeout_ms > self.max_timeout_ms:
            raise KafkaError(ErrorCode.invalid_transaction_timeout,
                             f"transaction timeout {timeout_ms} ms is outside (0, {self.max_timeout_ms}]")
        if self._loading:  # _require_loaded's first test, read here: a call less a request
            self._require_loaded(txn_id)
        txn = self.transactions.get(txn_id)
        if txn is None and len(self.transactions) >= self.max_transactional_ids:
            raise KafkaError(ErrorCode.policy_violation,
                             f"the broker keeps max.transactional.ids ({self.max_transactional_ids}) already")
        if txn is None or txn.state is _DEAD:
            self._persist(txn_id, TxnRecord(self.producer_ids.allocate(), 0, timeout_ms, _EMPTY,
                                            last_update_ms=int(self.clock() * 1000)))
            record = self.transactions[txn_id]
            return record.producer_id, record.producer_epoch
        if expected_producer_id != NO_PRODUCER_ID and (
            expected_producer_id != txn.producer_id or expected_epoch != txn.producer_epoch
        ):
            # KIP-360: a producer that asks to bump an epoch it no longer holds is a zombie.
            raise KafkaError(ErrorCode.producer_fenced,
                             f"producer {expected_producer_id}/{expected_epoch} is not the current "
                             f"{txn.producer_id}/{txn.producer_epoch} of {txn_id!r}")
        if txn.state in _PREPARED:
            raise KafkaError(ErrorCode.concurrent_transactions, f"{txn_id!r} is completing a transaction")
        if txn.state is _ONGOING:
            # The previous producer left a transaction open: fence it (epoch + 1, so its
            # late writes are refused) and abort. The client retries and gets its epoch.
            self._fence_and_abort(txn_id, txn)
            raise KafkaError(ErrorCode.concurrent_transactions,
                             f"aborting the open transaction of the previous producer of {txn_id!r}")
        producer_id, epoch, previous = self._next_epoch(txn)
        # A new producer session: nothing of the previous transaction carries over but
        # the client transaction version, which Kafka keeps in the record until the next
        # transaction sets it.
        self._persist(txn_id, following(txn, tuple.__new__(TxnRecord, (
            producer_id, epoch, timeout_ms, _EMPTY, _NO_PARTITIONS, int(self.clock() * 1000), -1, previous,
            NO_PRODUCER_ID, txn.client_transaction_version))))
        return producer_id, epoch

    def _next_epoch(self, txn: TxnRecord) -> tuple[int, int, int]:
        """(producer id, epoch, previous producer id) after a bump; a new producer id when
        the epoch is exhausted."""
        if txn.producer_epoch >= MAX_EPOCH:
            return self.producer_ids.allocate(), 0, txn.producer_id
        return txn.producer_id, txn.producer_epoch + 1, txn.previous_producer_id

    # --- adding partitions ---------------------------------------------------------------

    def _validate(self, txn_id: str, producer_id: int, epoch: int) -> TxnRecord:
        if self._loading:  # _require_loaded's first test, read here: a call less a request
            self._require_loaded(txn_id)
        txn = self.transactions.get(txn_id)
        if txn is None or txn.state is _DEAD or txn.producer_id != producer_id:
            raise KafkaError(ErrorCode.invalid_producer_id_mapping,
                             f"producer id {producer_id} does not belong to {txn_id!r}")
        if epoch != txn.producer_epoch:
            raise KafkaError(ErrorCode.producer_fenced,
                             f"epoch {epoch} of {txn_id!r} was fenced by epoch {txn.producer_epoch}")
        return txn

    def add_partitions(self, txn_id: str, producer_id: int, epoch: int, partitions: list[tuple[str, int]],
                       client_transaction_version: int = 0) -> None:
        """Add `partitions` to the transaction of `txn_id`, starting one if none is
        ongoing. `client_transaction_version` 2 marks a transaction whose partitions the
        broker adds from Produce v12 (KIP-890 part 2): it is recorded, as Kafka records
        it, and its end bumps the epoch."""
        txn = self._validate(txn_id, producer_id, epoch)
        if txn.state in _PREPARED:
            raise KafkaError(ErrorCode.concurrent_transactions, f"{txn_id!r} is completing a transaction")
        if txn.state is _ONGOING and set(partitions) <= txn.partitions:
            return  # a retry: nothing new to record
        now = int(self.clock() * 1000)
        ongoing = txn.state is _ONGOING
        self._persist(txn_id, following(txn, tuple.__new__(TxnRecord, (
            txn.producer_id, txn.producer_epoch, txn.timeout_ms, _ONGOING,
            (txn.partitions if ongoing else _NO_PARTITIONS) | frozenset(partitions), now,
            txn.start_ms if ongoing else now, txn.previous_producer_id, txn.next_producer_id,
            client_transaction_version))))

    def add_partitions_implicitly(self, txn_id: str, producer_id: int, epoch: int,
                                  partitions: list[tuple[str, int]]) -> None:
        """Transaction version 2: Produce v12 and TxnOffsetCommit v5 come with no
        AddPartitionsToTxn/AddOffsetsToTxn before them; the broker adds the partitions
        to the transaction itself, as Kafka does through AddPartitionsToTxn v5 with
        verifyOnly false: every partition of a request in one record. Already in the
        ongoing transaction: nothing to write."""
        try:
            self._require_loaded(txn_id)
        except KafkaError as exc:
            raise KafkaError(ErrorCode.not_enough_replicas, exc.message) from None
        txn = self.transactions.get(txn_id)
        if (txn is not None and txn.state is _ONGOING and txn.producer_id == producer_id
                and txn.producer_epoch == epoch and set(partitions) <= txn.partitions):
            return
        self.add_partitions(txn_id, producer_id, epoch, partitions, client_transaction_version=2)

    def verify(self, txn_id: str, producer_id: int, epoch: int, topic: str, partition: int) -> None:
        """A transactional Produce is accepted only for a partition of the producer's
        ongoing transaction (Kafka's transaction verification, KIP-890 part 1)."""
        if self._loading:  # _require_loaded's first test, read here: a call less a Produce
            try:
                self._require_loaded(txn_id)
            except KafkaError as exc:
                # As Kafka answers a produce whose verification met a loading coordinator:
                # with an error every client retries, older ones included.
                raise KafkaError(ErrorCode.not_enough_replicas, exc.message) from None
        txn = self.transactions.get(txn_id)
        if txn is None or txn.producer_id != producer_id:
            raise KafkaError(ErrorCode.invalid_producer_id_mapping,
                             f"producer id {producer_id} does not belong to {txn_id!r}")
        if epoch < txn.producer_epoch:
            raise KafkaError(ErrorCode.invalid_producer_epoch,
                             f"epoch {epoch} of {txn_id!r} was fenced by epoch {txn.producer_epoch}")
        if txn.state is not _ONGOING or (topic, partition) not in txn.partitions:
            raise KafkaError(ErrorCode.invalid_txn_state,
                             f"{topic}-{partition} is not part of an ongoing transaction of {txn_id!r}")

    # --- ending --------------------------------------------------------------------------

    def end_txn(self, txn_id: str, producer_id: int, epoch: int, commit: bool,
                bump_epoch: bool = False, complete: bool = True) -> tuple[int, int]:
        """Commit or abort. With `bump_epoch` (EndTxn v5, transaction version 2) the
        producer gets a new epoch with every end. Returns (producer id, epoch): those
        the producer has once the transaction is complete.

        With `complete=False` the transaction is only prepared (PrepareCommit or
        PrepareAbort is in the log, so its outcome is decided) and the caller finishes
        it with `complete(txn_id)`: the EndTxn handler answers in between, as Kafka
        answers once the prepare is written."""
        if bump_epoch:
            self._require_loaded(txn_id)
            return self._end_txn_v2(txn_id, producer_id, epoch, commit, complete)
        txn = self._validate(txn_id, producer_id, epoch)
        state = txn.state
        if state is _ONGOING:
            prepared = self._prepare_end(txn_id, txn, commit)
            if complete:
                self.completion.finish(txn_id, prepared)
            return prepared.producer_id, prepared.producer_epoch
        if state in _COMPLETED:
            # A retry of an end that already happened succeeds; the other outcome cannot.
            if commit == (state is _COMPLETE_COMMIT):
                return txn.producer_id, txn.producer_epoch
        elif state in _PREPARED:
            if commit == (state is _PREPARE_COMMIT):
                raise KafkaError(ErrorCode.concurrent_transactions, f"{txn_id!r} is completing a transaction")
        raise self._invalid_state(txn_id, txn, commit)

    def _end_txn_v2(self, txn_id: str, producer_id: int, epoch: int, commit: bool,
                    complete: bool) -> tuple[int, int]:
        """EndTxn v5 (Kafka's endTransaction with transaction version 2). Every end bumps
        the epoch, so the epoch tells a retry from the next transaction's end: a retry
        names the epoch before the bump (or, after the epoch ran out, the last epoch of
        the previous producer id); the same epoch is the next end. An abort needs no
        open transaction: an empty one is ended with a bump all the same, because the
        client cannot know whether its Produce v12 added a partition."""
        txn = self.transactions.get(txn_id)
        if txn is None or txn.state is _DEAD:
            raise KafkaError(ErrorCode.invalid_producer_id_mapping,
                             f"producer id {producer_id} does not belong to {txn_id!r}")
        state = txn.state
        retry_on_overflow = (txn.previous_producer_id == producer_id and epoch == MAX_EPOCH
                             and txn.producer_epoch == 0)
        retry_on_bump = txn.producer_epoch == epoch + 1
        if txn.producer_id != producer_id and not retry_on_overflow:
            raise KafkaError(ErrorCode.invalid_producer_id_mapping,
                             f"producer id {producer_id} does not belong to {txn_id!r}")
        if state in _PREPARED:
            valid_epoch = retry_on_bump
        elif state in _COMPLETED:
            valid_epoch = retry_on_bump or retry_on_overflow or epoch == txn.producer_epoch
        else:
            valid_epoch = epoch == txn.producer_epoch
        if not valid_epoch:
            raise KafkaError(ErrorCode.producer_fenced,
                             f"epoch {epoch} of {txn_id!r} was fenced by epoch {txn.producer_epoch}")
        is_retry = retry_on_bump or retry_on_overflow
        if state is _ONGOING:
            return self._prepared_answer(txn_id, self._prepare_end(txn_id, txn, commit, bump_epoch=True), complete)
        if state in (_COMPLETE_COMMIT, _COMPLETE_ABORT, _EMPTY):
            done = state is not _EMPTY and commit == (state is _COMPLETE_COMMIT)
            if is_retry and done:
                return txn.producer_id, txn.producer_epoch
            if not commit and not is_retry:
                prepared = self._prepare_end(txn_id, txn, commit, bump_epoch=True, start_ms=self._now_ms())
                return self._prepared_answer(txn_id, prepared, complete)
        elif state in _PREPARED:
            if commit == (state is _PREPARE_COMMIT):
                raise KafkaError(ErrorCode.concurrent_transactions, f"{txn_id!r} is completing a transaction")
        raise self._invalid_state(txn_id, txn, commit)

    def _prepared_answer(self, txn_id: str, prepared: TxnRecord, complete: bool) -> tuple[int, int]:
        if complete:
            self.completion.finish(txn_id, prepared)
        if prepared.next_producer_id != NO_PRODUCER_ID:
            return prepared.next_producer_id, 0
        return prepared.producer_id, prepared.producer_epoch

    @staticmethod
    def _invalid_state(txn_id: str, txn: TxnRecord, commit: bool) -> KafkaError:
        return KafkaError(ErrorCode.invalid_txn_state,
                          f"cannot {'commit' if commit else 'abort'} {txn_id!r} in state {txn.state.kafka_name}")

    def _prepare_end(self, txn_id: str, txn: TxnRecord, commit: bool, bump_epoch: bool = False,
                     start_ms: int | None = None) -> TxnRecord:
        changes: dict[str, object] = {}
        if bump_epoch:
            # Transaction version 2: the markers carry the next epoch, fencing the one that
            # ran the transaction. An exhausted epoch moves to a new producer id, which
            # takes over once the transaction is complete.
            changes["producer_epoch"] = txn.producer_epoch + 1
            changes["client_transaction_version"] = 2
            if txn.producer_epoch >= MAX_EPOCH:
                changes["next_producer_id"] = self.producer_ids.allocate()
        if start_ms is not None:
            # An abort with no partition added: its start is the abort's time (Kafka's
            # prepareAbortOrCommit with noPartitionAdded).
            changes["start_ms"] = start_ms
        target = _PREPARE_COMMIT if commit else _PREPARE_ABORT
        self._persist(txn_id, transition(txn, target, int(self.clock() * 1000), **changes))
        return self.transactions[txn_id]

    @property
    def pending_markers(self) -> Mapping[str, PendingMarkers]:
        """Prepared transactions whose markers are not all written yet."""
        return self.completion.pending

    def complete(self, txn_id: str) -> None:
        """Finish the prepared transaction of `txn_id` (see end_txn); a no-op if it is
        not prepared (anymore)."""
        self.completion.complete(txn_id)

    def _prepared(self, txn_id: str) -> TxnRecord | None:
        txn = self.transactions.get(txn_id)
        return txn if txn is not None and txn.state in _PREPARED else None

    def _record_complete(self, txn_id: str, txn: TxnRecord) -> None:
        """Every partition of the prepared `txn` has its marker: Complete*."""
        target = _COMPLETE_COMMIT if txn.state is _PREPARE_COMMIT else _COMPLETE_ABORT
        now = int(self.clock() * 1000)
        if txn.next_producer_id != NO_PRODUCER_ID:
            # The epoch was exhausted: the new producer id takes over, at epoch 0.
            self._persist(txn_id, transition(
                txn, target, now, partitions=_NO_PARTITIONS, previous_producer_id=txn.producer_id,
                producer_id=txn.next_producer_id, producer_epoch=0, next_producer_id=NO_PRODUCER_ID))
            return
        self._persist(txn_id, following(txn, tuple.__new__(TxnRecord, (
            txn.producer_id, txn.producer_epoch, txn.timeout_ms, target, _NO_PARTITIONS, now, txn.start_ms,
            txn.previous_producer_id, txn.next_producer_id, txn.client_transaction_version))))

    def close(self) -> None:
        """Cancel the scheduled retries (at shutdown, before the logs close)."""
        self.completion.close()

    def _fence_and_abort(self, txn_id: str, txn: TxnRecord) -> None:
        """Bump the epoch past the open transaction's producer and abort it with the new
        epoch, so the partitions refuse anything more from the old one. As in Kafka,
        PrepareEpochFence is a step in memory only: the one record written is
        PrepareAbort at the bumped epoch, so the fence and the abort are in the log
        together or not at all."""
        # Bumps stop at MAX_EPOCH, so one more always fits in an int16.
        fenced = transition(txn, TxnState.PREPARE_EPOCH_FENCE, self._now_ms(), producer_epoch=txn.producer_epoch + 1)
        self._abort(txn_id, fenced)

    def _abort(self, txn_id: str, txn: TxnRecord) -> None:
        self._persist(txn_id, transition(txn, _PREPARE_ABORT, self._now_ms()))
        self.completion.finish(txn_id, self.transactions[txn_id])

    # --- timeouts ------------------------------------------------------------------------

    def abort_timed_out(self) -> list[str]:
        """Fence and abort every Ongoing transaction older than its timeout. One whose
        record cannot be written stays as it is, and the next check tries again."""
        now = self._now_ms()
        expired = [txn_id for txn_id, txn in self.transactions.items()
                   if txn.state is _ONGOING and txn.start_ms + txn.timeout_ms < now]
        aborted = []
        for txn_id in expired:
            try:
                self._fence_and_abort(txn_id, self.transactions[txn_id])
            except KafkaError as exc:
                log.warning("timed-out transaction not aborted: its record cannot be written",
                            transactional_id=txn_id, error=exc.code.name)
                continue
            aborted.append(txn_id)
        return aborted

    def expire_transactional_ids(self, expiration_ms: int) -> list[str]:
        """Forget transactional ids unused for `transactional.id.expiration.ms` (a
        tombstone in the log), unless a transaction of theirs is in flight. One whose
        tombstone cannot be written is kept, and the next run tries again."""
        now = self._now_ms()
        idle = (_EMPTY, _COMPLETE_COMMIT, _COMPLETE_ABORT)
        due = [txn_id for txn_id, txn in self.transactions.items()
               if txn.state in idle and txn.last_update_ms < now - expiration_ms]
        expired = []
        for txn_id in due:
            try:
                self._forget(txn_id)
            except KafkaError as exc:
                log.warning("transactional id not expired: its tombstone cannot be written",
                            transactional_id=txn_id, error=exc.code.name)
                continue
            expired.append(txn_id)
        return expired

    def _forget(self, txn_id: str) -> None:
        """Write the tombstone of `txn_id`, then forget it."""
        self._persist(txn_id, None, self._now_ms())

    # --- admin views ---------------------------------------------------------------------

    def describe(self, txn_id: str) -> TxnRecord | None:
        self._require_loaded(txn_id)
        return self.transactions.get(txn_id)

    def records(self) -> Mapping[str, TxnRecord]:
        """Every transactional id's record as memory holds it now, read-only: what the web
        console shows, during a load too (where `list` refuses, as Kafka does)."""
        return MappingProxyType(self.transactions)

    def transactional_ids_by_producer(self) -> dict[int, str]:
        """producer id -> transactional id, for every id memory holds."""
        return {txn.producer_id: txn_id for txn_id, txn in self.transactions.items()}

    def count_by_state(self) -> Counter[TxnState]:
        """How many transactional ids are in each state (for /metrics)."""
        return Counter(txn.state for txn in self.transactions.values())

    def list(self, states: set[str], producer_ids: set[int], min_duration_ms: int = -1) -> list[tuple[str, TxnRecord]]:
        if self.loading:
            # Kafka lists nothing rather than a part while a partition loads.
            raise KafkaError(ErrorCode.coordinator_load_in_progress, "__transaction_state is still loading")
        now = self._now_ms()
        out = []
        for txn_id, txn in sorted(self.transactions.items()):
            if states and txn.state.kafka_name not in states:
                continue
            if producer_ids and txn.producer_id not in producer_ids:
                continue
            # Kafka's duration filter (KIP-994) applies to every state, on the time since the
            # transaction started (a producer with none yet, start -1, passes any filter).
            if min_duration_ms >= 0 and now - txn.start_ms <= min_duration_ms:
                continue
            out.append((txn_id, txn))
        return out
