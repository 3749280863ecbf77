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


class MarkerWriter:
    def __init__(self, logs: LogManager, durable: bool = False) -> None:
        self.logs = logs
        self.listeners: list[MarkerListener] = []
        self.durable = durable  # --fsync: markers fsynced before write returns

    def write(self, producer_id: int, producer_epoch: int, committed: bool, coordinator_epoch: int,
              partitions: list[tuple[str, int]]) -> dict[tuple[str, int], ErrorCode]:
        marker = EndTxnMarker(ControlType.COMMIT if committed else ControlType.ABORT, coordinator_epoch)
        results = {}
        for topic, partition in partitions:
            log = self.logs.partition(topic, partition)
            if log is None:
                results[(topic, partition)] = ErrorCode.unknown_topic_or_partition
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
            results[(topic, partition)] = ErrorCode.none
            for listener in self.listeners:
                listener(topic, partition, producer_id, committed)
        return results
