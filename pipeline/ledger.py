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

Kafka commits offsets only for partitions that exist, so the ledger topic is a real
topic: each task makes sure it has its pseudo-partition (created, or its partitions
added, on first use). It holds no records.

Inspect a query's ledger with any Kafka tool: the group `ottla-spark-<query id>`,
topic `__ottla_spark_batches`, shows one "offset" per task partition, the next batch it
will write.
"""

from __future__ import annotations

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

LEDGER_TOPIC = "__ottla_spark_batches"
PREFIX = "ottla-spark"
TIMEOUT_S = 30.0


def transactional_id(query_id: str, task_partition: int) -> str:
    return f"{PREFIX}-{query_id}-{task_partition}"


def ensure_ledger_partition(client_config: dict[str, str], task_partition: int) -> None:
    """Give LEDGER_TOPIC at least task_partition + 1 partitions. Tasks race to do it:
    another's creation or growth first is as good as this one's."""
    admin = AdminClient({**client_config})
    tolerated = (KafkaError.TOPIC_ALREADY_EXISTS, KafkaError.INVALID_PARTITIONS)
    for _ in range(5):
        topic = admin.list_topics(LEDGER_TOPIC, timeout=TIMEOUT_S).topics.get(LEDGER_TOPIC)
        if topic is not None and topic.error is None and len(topic.partitions) > task_partition:
            return
        if topic is None or topic.error is not None:
            # The cluster's default replication factor (-1): Ottla's 1, a cluster's own.
            futures = admin.create_topics([NewTopic(LEDGER_TOPIC, task_partition + 1, -1)])
        else:
            futures = admin.create_partitions([NewPartitions(LEDGER_TOPIC, task_partition + 1)])
        for future in futures.values():
            try:
                future.result(TIMEOUT_S)
            except KafkaException as exc:
                if exc.args[0].code() not in tolerated:
                    raise
    raise RuntimeError(f"{LEDGER_TOPIC} did not get partition {task_partition}")


class BatchLedger:
    def __init__(self, client_config: dict[str, str], query_id: str, task_partition: int) -> None:
        self.task_partition = task_partition
        ensure_ledger_partition(client_config, task_partition)
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
