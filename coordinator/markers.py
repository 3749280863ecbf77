"""Writing COMMIT/ABORT markers into the partitions of a transaction.

The one code path for markers: the transaction coordinator calls it when a transaction
ends, and the WriteTxnMarkers handler calls it for markers sent over the wire. Each
partition's log appends a control batch and closes the producer's open transaction
there (moving its LSO; an abort also lands in the segment's .txnindex). Listeners (the
group coordinator, for transactional offset commits in `__consumer_offsets`) hear of
every marker written.

With --fsync the markers are fsynced before `write` returns: the coordinator records a
transaction complete (CompleteCommit) right after, and were that record to reach the
disk without the markers, a power loss would leave the partitions' transaction open
for good, its records never visible and the LSO stuck, while the coordinator holds it
done. Kafka gets the same order from replication (Complete* follows the markers'
acknowledgement by every in-sync replica); on one node, fsync is that acknowledgement.
"""

from __future__ import annotations

from collections.abc import Callable

from ottla.protocol.control import ControlType, EndTxnMarker
from ottla.protocol.errors import ErrorCode, KafkaError
from ottla.storage.log_manager import LogManager

MarkerListener = Callable[[str, int, int, bool], None]  # topic, partition, producer id, committed

# The markers of the coordinator's own epoch (transaction_completion.COORDINATOR_EPOCH),
# made once: a frozen dataclass's __init__ costs about 5k instructions, at every end.
_MARKERS = {(committed, 0): EndTxnMarker(ControlType.COMMIT if committed else ControlType.ABORT, 0)
            for committed in (False, True)}
# Read once: each read of a member off its enum class costs a Python 3.11 slot call.
_NONE, _UNKNOWN_PARTITION = ErrorCode.none, ErrorCode.unknown_topic_or_partition


class MarkerWriter:
    def __init__(self, logs: LogManager, durable: bool = False) -> None:
        self.logs = logs
        self.listeners: list[MarkerListener] = []
        self.durable = durable  # --fsync: markers fsynced before write returns

    def write(self, producer_id: int, producer_epoch: int, committed: bool, coordinator_epoch: int,
              partitions: list[tuple[str, int]]) -> dict[tuple[str, int], ErrorCode]:
        marker = _MARKERS.get((committed, coordinator_epoch))
        if marker is None:
            marker = EndTxnMarker(ControlType.COMMIT if committed else ControlType.ABORT, coordinator_epoch)
        results = {}
        partition_log = self.logs.partition
        for topic, partition in partitions:
            log = partition_log(topic, partition)
            if log is None:
                results[(topic, partition)] = _UNKNOWN_PARTITION
                continue
            try:
                log.append_marker(producer_id, producer_epoch, marker)
                if self.durable:
                    log.flush()
            except OSError:  # the flush: the marker is in, but not for sure
                results[(topic, partition)] = ErrorCode.kafka_storage_error
                continue
            except KafkaError as exc:
                results[(topic, partition)] = exc.code
                continue
            results[(topic, partition)] = _NONE
            for listener in self.listeners:
                listener(topic, partition, producer_id, committed)
        return results
