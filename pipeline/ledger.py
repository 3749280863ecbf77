"""The sink's ledger: which micro-batch each writer task last committed, kept by Kafka
inside the same transactions as the data.

A streaming query's writer task (query id Q, task partition P) writes batch N in one
transaction of the transactional id `ottla-spark-Q-P`. In that transaction it also
commits, as a transactional consumer-group offset (TxnOffsetCommit, Kafka's
`sendOffsetsToTransaction`), the number N + 1 for the pseudo-partition P of
`LEDGER_TOPIC` in the group `ottla-spark-Q`. Data and ledger entry become visible
together or not at all. Before writing batch N again, after `init_transactions` has
fenced every earlier producer of the same id and settled its open transaction, the
task reads its entry: N + 1 or more means batch N is already in the topics.

Why offsets and not marker records in a topic of their own: reading an entry is one
OffsetFetch, whatever the history, and it does not wait on the other tasks. A marker
record would have to be found by scanning a topic under read_committed, whose last
stable offset stays behind any other task's transaction still open, such as a
transaction left open by a killed attempt whose task has not yet been retried.

Inspect a query's ledger with any Kafka tool: the group `ottla-spark-<query id>`,
topic `__ottla_spark_batches`, shows one "offset" per task partition, the next batch it
will write.
"""

from __future__ import annotations

from confluent_kafka import Consumer, Producer, TopicPartition

LEDGER_TOPIC = "__ottla_spark_batches"
PREFIX = "ottla-spark"
TIMEOUT_S = 30.0


def transactional_id(query_id: str, task_partition: int) -> str:
    return f"{PREFIX}-{query_id}-{task_partition}"


class BatchLedger:
    def __init__(self, client_config: dict[str, str], query_id: str, task_partition: int) -> None:
        self.task_partition = task_partition
        # A consumer that never joins its group: it reads the group's committed offsets
        # and provides the group metadata the producer's transaction needs.
        self.consumer = Consumer({
            **client_config,
            "group.id": f"{PREFIX}-{query_id}",
            "enable.auto.commit": False,
            # librdkafka then asks for stable offsets (KIP-447): an entry still pending
            # in an open transaction is waited for, never read as absent.
            "isolation.level": "read_committed",
        })

    def committed(self, batch_id: int) -> bool:
        """Whether this task partition's transaction for `batch_id` (or a later one) has
        committed. Only meaningful once the caller's producer has run
        `init_transactions`, which ends any transaction of an earlier attempt."""
        [entry] = self.consumer.committed([TopicPartition(LEDGER_TOPIC, self.task_partition)], timeout=TIMEOUT_S)
        return entry.offset > batch_id

    def record(self, producer: Producer, batch_id: int) -> None:
        """Add "batch_id is written" to the producer's open transaction."""
        producer.send_offsets_to_transaction([TopicPartition(LEDGER_TOPIC, self.task_partition, batch_id + 1)],
                                             self.consumer.consumer_group_metadata(), TIMEOUT_S)

    def close(self) -> None:
        self.consumer.close()
