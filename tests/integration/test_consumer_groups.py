"""KIP-848 consumer groups (`group.protocol=consumer`) with confluent-kafka: members
joining and leaving while records flow, exactly-once processing across a kill -9 of the
broker, the admin client's view, and the classic protocol beside them."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from confluent_kafka import Consumer, ConsumerGroupType, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient

from tests.clients import create_topic, idempotent_producer, produce_all, read_all

# Heartbeats every 500 ms (Kafka's 5 s would make each rebalance step take seconds).
BROKER_SETTINGS = {"group_consumer_heartbeat_interval_ms": 500, "group_consumer_session_timeout_ms": 10_000}


def _consumer(broker, group: str, **extra: object) -> Consumer:
    config = {"bootstrap.servers": broker.bootstrap, "group.id": group, "group.protocol": "consumer",
              "auto.offset.reset": "earliest", "enable.auto.commit": False, "log_level": 3}
    config.update(extra)
    return Consumer(config)


def _assigned(consumer: Consumer) -> set[int]:
    return {tp.partition for tp in consumer.assignment()}


def test_members_join_and_leave_while_records_flow_and_each_record_is_consumed_once(fresh_broker, topic_name):
    broker = fresh_broker(**BROKER_SETTINGS)
    create_topic(broker.bootstrap, topic_name, 6)
    group = f"g-{topic_name}"
    producer = idempotent_producer(broker.bootstrap)
    total = 3000
    produced = 0
    delivered: dict[int, list[int]] = {p: [] for p in range(6)}  # partition -> offsets, in delivery order
    committed = dict.fromkeys(range(6), 0)  # partition -> last position committed (synchronously)
    consumers: list[Consumer] = [_consumer(broker, group)]
    consumers[0].subscribe([topic_name])
    saw_three_way_split = False
    deadline = time.monotonic() + 150
    end_offsets: dict[int, int] = {}

    def consume(consumer: Consumer) -> None:
        done: dict[int, int] = {}
        messages = consumer.consume(200, 0.05)
        owned = _assigned(consumer)  # after the call: it may have served a rebalance
        for message in messages:
            if message.error():
                continue
            p, offset = message.partition(), message.offset()
            if p not in owned:
                continue  # revoked within this call: the next owner reads it from the committed position
            if offset in delivered[p]:
                # Re-delivered only when it lay beyond what was committed.
                assert offset >= committed[p], f"partition {p} offset {offset} again, committed {committed[p]}"
            delivered[p].append(offset)
            done[p] = offset + 1
        if done:
            try:
                result = consumer.commit(offsets=[TopicPartition(topic_name, p, o) for p, o in done.items()],
                                         asynchronous=False)
            except KafkaException:
                return  # not committed (a rebalance moved on): the next owner starts before these
            for tp in result:
                if tp.error is None:
                    committed[tp.partition] = max(committed[tp.partition], tp.offset)

    # The script: a second member after 500 records, a third after 1000; once the three
    # share the six partitions, the first leaves, then the second at 2000.
    while time.monotonic() < deadline:
        if produced < total:
            batch = [(topic_name, i % 6, None, b"%d" % i) for i in range(produced, produced + 50)]
            for t, p, k, v in batch:
                producer.produce(t, value=v, key=k, partition=p)
            producer.poll(0)
            produced += len(batch)
        live = [c for c in consumers if c is not None]
        for c in live:
            consume(c)
        # Revoke before reassign: no partition is ever held by two members at once.
        held = [p for c in live for p in _assigned(c)]
        assert len(held) == len(set(held)), [sorted(_assigned(c)) for c in live]
        if len(consumers) == 1 and produced >= 500:
            consumers.append(_consumer(broker, group))
            consumers[-1].subscribe([topic_name])
        elif len(consumers) == 2 and produced >= 1000:
            consumers.append(_consumer(broker, group))
            consumers[-1].subscribe([topic_name])
        elif len(consumers) == 3 and consumers[0] is not None:
            if sorted(len(_assigned(c)) for c in live) == [2, 2, 2]:
                saw_three_way_split = True
                consumers[0].close()  # leaves the group (epoch -1)
                consumers[0] = None
        elif consumers[0] is None and consumers[1] is not None and produced >= 2000:
            consumers[1].close()
            consumers[1] = None
        if produced >= total and consumers[1] is None:
            if not end_offsets:
                producer.flush(30)
                end_offsets = {p: total // 6 for p in range(6)}
            if all(committed[p] == end_offsets[p] for p in range(6)):
                break
    consumers[2].close()
    assert saw_three_way_split
    assert committed == dict.fromkeys(range(6), total // 6), committed
    for p in range(6):
        assert sorted(set(delivered[p])) == list(range(total // 6)), f"partition {p} misses records"


def test_consume_transform_produce_commits_exactly_once_across_a_broker_kill(fresh_broker, tmp_path):
    broker = fresh_broker(**BROKER_SETTINGS)
    source, sink, group = "eos848-input", "eos848-output", "eos848-processor"
    create_topic(broker.bootstrap, source, 3)
    create_topic(broker.bootstrap, sink, 3)
    count = 6000
    produce_all(idempotent_producer(broker.bootstrap),
                [(source, i % 3, b"%d" % i, b"%d" % i) for i in range(count)])

    # IDLE 20 s: after the broker is back, librdkafka's reconnect backoff (up to 10 s)
    # may keep the consumer waiting before it reads again.
    processor = subprocess.Popen(
        [sys.executable, "-m", "tests.integration.eos_processor", broker.bootstrap, source, sink, group,
         "eos848-txn", "consumer", "20"],
        stdout=subprocess.PIPE, stderr=open(tmp_path / "processor.log", "a"), text=True,
        cwd=os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
    committed = 0
    while committed < 1500:
        line = processor.stdout.readline()
        assert line, f"the processor stopped by itself: exit {processor.wait(30)}"
        committed += int(line.split()[1])
    # The broker goes down by SIGKILL mid-stream, under a processor that keeps running:
    # its open transaction, its group membership and its consumed positions must all
    # come out right once the broker is back.
    broker.kill()
    broker.start()
    assert processor.wait(180) == 0, f"processor exit {processor.returncode}"
    # The restarted broker rebuilt the group from __consumer_offsets as a consumer group.
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    assert admin.describe_consumer_groups([group])[group].result(10).type == ConsumerGroupType.CONSUMER

    got = read_all(broker.bootstrap, sink, [0, 1, 2], isolation="read_committed")
    values = [v for vs in got.values() for v in vs]
    # Lists, not sets: a duplicate would show.
    assert sorted(values) == sorted(b"processed:%d" % i for i in range(count)), \
        f"{len(values)} results, {len(set(values))} distinct"


def test_the_admin_client_describes_and_lists_consumer_groups_with_their_type(fresh_broker, topic_name):
    broker = fresh_broker(**BROKER_SETTINGS)
    create_topic(broker.bootstrap, topic_name, 4)
    group = f"g-{topic_name}"
    members = [_consumer(broker, group), _consumer(broker, group)]
    for c in members:
        c.subscribe([topic_name])
    deadline = time.monotonic() + 30
    while sorted(len(_assigned(c)) for c in members) != [2, 2] and time.monotonic() < deadline:
        for c in members:
            c.poll(0.05)
    # A classic group beside it.
    classic = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"classic-{topic_name}",
                        "enable.auto.commit": False, "log_level": 3})
    classic.commit(offsets=[TopicPartition(topic_name, 0, 1)], asynchronous=False)

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    described = admin.describe_consumer_groups([group])[group].result(15)
    assert described.type == ConsumerGroupType.CONSUMER
    assert described.state.name == "STABLE"
    assert len(described.members) == 2
    assignments = [sorted(tp.partition for tp in m.assignment.topic_partitions) for m in described.members]
    assert sorted(p for a in assignments for p in a) == [0, 1, 2, 3]
    assert sorted(assignments) == sorted(sorted(_assigned(c)) for c in members)

    listed = admin.list_consumer_groups().result(15)
    types = {g.group_id: g.type for g in listed.valid}
    assert types[group] == ConsumerGroupType.CONSUMER
    assert types[f"classic-{topic_name}"] == ConsumerGroupType.CLASSIC
    only_consumer = admin.list_consumer_groups(types={ConsumerGroupType.CONSUMER}).result(15)
    assert [g.group_id for g in only_consumer.valid] == [group]
    for c in members + [classic]:
        c.close()


def _poll_until(consumers: list[Consumer], condition, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for c in consumers:
            c.poll(0.05)
        if condition():
            return
    raise AssertionError(f"condition not reached; assignments: {[sorted(_assigned(c)) for c in consumers]}")


def test_a_static_member_gets_its_partitions_back_when_it_returns(fresh_broker, topic_name):
    broker = fresh_broker(**BROKER_SETTINGS)
    create_topic(broker.bootstrap, topic_name, 4)
    group = f"g-{topic_name}"
    first = _consumer(broker, group, **{"group.instance.id": "app-1"})
    second = _consumer(broker, group, **{"group.instance.id": "app-2"})
    for c in (first, second):
        c.subscribe([topic_name])
    _poll_until([first, second], lambda: sorted(len(_assigned(c)) for c in (first, second)) == [2, 2])
    held = _assigned(first)
    first.close()  # a static member leaves for a while (epoch -2): nobody takes its partitions
    for _ in range(20):
        second.poll(0.05)
    assert _assigned(second).isdisjoint(held)

    back = _consumer(broker, group, **{"group.instance.id": "app-1"})
    back.subscribe([topic_name])
    _poll_until([back, second], lambda: _assigned(back) == held)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    described = admin.describe_consumer_groups([group])[group].result(15)
    assert sorted(m.group_instance_id for m in described.members) == ["app-1", "app-2"]
    for c in (back, second):
        c.close()


def test_a_regex_subscription_follows_topics_created_later(fresh_broker, topic_name):
    broker = fresh_broker(**BROKER_SETTINGS)
    create_topic(broker.bootstrap, f"{topic_name}-a", 2)
    create_topic(broker.bootstrap, "unrelated", 2)
    consumer = _consumer(broker, f"g-{topic_name}", **{"topic.metadata.refresh.interval.ms": 1000})
    consumer.subscribe([f"^{topic_name}-.*"])
    _poll_until([consumer], lambda: len(consumer.assignment()) == 2)
    create_topic(broker.bootstrap, f"{topic_name}-b", 3)
    _poll_until([consumer], lambda: len(consumer.assignment()) == 5)
    assert {tp.topic for tp in consumer.assignment()} == {f"{topic_name}-a", f"{topic_name}-b"}
    consumer.close()
