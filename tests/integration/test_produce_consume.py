"""confluent-kafka's idempotent producer and a consumer, end to end."""

from __future__ import annotations

from tests.clients import consume_partitions, create_topic, idempotent_producer, produce_all

# Enough for hundreds of batches per partition (linger.ms=5): what 100,000 showed too.
MESSAGES = 10_000
PARTITIONS = 3


def test_idempotent_producer_10k_messages_read_back_exactly_in_order(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, PARTITIONS)
    producer = idempotent_producer(broker.bootstrap)
    produce_all(producer, [
        (topic_name, i % PARTITIONS, f"k{i}".encode(), f"message-{i}".encode()) for i in range(MESSAGES)
    ])

    got = consume_partitions(broker.bootstrap, topic_name, list(range(PARTITIONS)), MESSAGES)

    assert sum(len(v) for v in got.values()) == MESSAGES
    for partition, messages in got.items():
        sent = [f"message-{i}".encode() for i in range(partition, MESSAGES, PARTITIONS)]
        assert [m.value() for m in messages] == sent
        assert [m.offset() for m in messages] == list(range(len(sent)))
        assert all(m.key() == b"k" + m.value()[len(b"message-"):] for m in messages[:100])


def test_more_messages_than_one_fetch_returns_continue_from_the_right_offset(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, 1)
    producer = idempotent_producer(broker.bootstrap)
    big = b"v" * 10_000
    produce_all(producer, [(topic_name, 0, None, big + str(i).encode()) for i in range(500)])

    got = consume_partitions(broker.bootstrap, topic_name, [0], 500)

    assert [m.value() for m in got[0]] == [big + str(i).encode() for i in range(500)]
