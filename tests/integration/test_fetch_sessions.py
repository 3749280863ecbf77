"""Incremental fetch sessions (KIP-227) over the wire, and with a client that uses them
(kafka-python): a session's requests and answers carry only what changed, and its
errors are Kafka's (issue 14 point 3)."""

from __future__ import annotations

import uuid

from kafka import KafkaConsumer, TopicPartition

from ottla.protocol.errors import ErrorCode
from tests.clients import create_topic, idempotent_producer, produce_all
from tests.wire import WireClient, request

FETCH, METADATA = 1, 3
MAX = 1 << 20


def _partition(p: int, offset: int) -> dict:
    return {"partition": p, "fetch_offset": offset, "partition_max_bytes": MAX, "current_leader_epoch": -1,
            "last_fetched_epoch": -1, "log_start_offset": -1}


def _fetch(client: WireClient, session_id: int, epoch: int, topic, offsets: dict[int, int],
           forgotten: list[int] = (), version: int = 12):  # type: ignore[assignment, no-untyped-def]
    key = "topic_id" if version >= 13 else "topic"
    return client.call(request(
        FETCH, version, replica_id=-1, max_wait=0, min_bytes=0, max_bytes=MAX, isolation_level=0,
        session_id=session_id, session_epoch=epoch,
        topics=[{key: topic, "partitions": [_partition(p, o) for p, o in offsets.items()]}] if offsets else [],
        forgotten_topics_data=[{key: topic, "partitions": list(forgotten)}] if forgotten else [], rack_id=""))


def _named(answer) -> dict[int, tuple[int, bool]]:  # type: ignore[no-untyped-def]
    """partition -> (high watermark, has records) of every partition an answer names."""
    return {p.partition_index: (p.high_watermark, bool(p.records)) for t in answer.responses for p in t.partitions}


def test_a_session_answers_only_what_changed_and_refuses_what_kafka_refuses(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, 3)
    produce_all(idempotent_producer(broker.bootstrap), [(topic_name, p, None, b"first") for p in range(3)])
    with WireClient(broker.bootstrap) as client:
        opened = _fetch(client, 0, 0, topic_name, {0: 0, 1: 0, 2: 0})
        session = opened.session_id
        assert opened.error_code == ErrorCode.none and session != 0
        assert _named(opened) == {0: (1, True), 1: (1, True), 2: (1, True)}
        # No other replica to read from: Kafka's -1 (the handler leaves it to the field's default).
        assert {p.preferred_read_replica for t in opened.responses for p in t.partitions} == {-1}

        # The client moves its positions past the records: only that is sent, and the
        # answer names nothing (nothing new anywhere).
        quiet = _fetch(client, session, 1, topic_name, {0: 1, 1: 1, 2: 1})
        assert quiet.session_id == session and _named(quiet) == {}
        assert _named(_fetch(client, session, 2, topic_name, {})) == {}

        produce_all(idempotent_producer(broker.bootstrap), [(topic_name, 1, None, b"second")])
        assert _named(_fetch(client, session, 3, topic_name, {})) == {1: (2, True)}

        # A request lost or sent twice: the epoch says so. An unknown session too.
        assert _fetch(client, session, 3, topic_name, {}).error_code == ErrorCode.invalid_fetch_session_epoch
        assert _fetch(client, session + 1, 4, topic_name, {}).error_code == ErrorCode.fetch_session_id_not_found
        # A session opened with topic names cannot go on with topic ids (v13+).
        topic_id = client.call(request(METADATA, 12, topics=[{"name": topic_name, "topic_id": None}],
                                       allow_auto_topic_creation=False, include_topic_authorized_operations=False)
                               ).topics[0].topic_id
        refused = _fetch(client, session, 4, topic_id, {}, version=13)
        assert refused.error_code == ErrorCode.fetch_session_topic_id_error and not refused.responses

        # Forgetting a partition: the session no longer reads it. (Partition 1's position
        # moves past "second", else it would return it again.)
        produce_all(idempotent_producer(broker.bootstrap), [(topic_name, p, None, b"third") for p in (0, 2)])
        assert _named(_fetch(client, session, 4, topic_name, {1: 2}, forgotten=[0])) == {2: (2, True)}
        # Forgetting the rest closes the session: the answer says "no session".
        closed = _fetch(client, session, 5, topic_name, {}, forgotten=[1, 2])
        assert closed.session_id == 0
        assert _fetch(client, session, 6, topic_name, {}).error_code == ErrorCode.fetch_session_id_not_found

        # By topic id (v13+): a session of ids, and an unknown id is named in every answer.
        stranger = uuid.uuid4()
        by_id = client.call(request(
            FETCH, 13, replica_id=-1, max_wait=0, min_bytes=0, max_bytes=MAX, isolation_level=0,
            session_id=0, session_epoch=0, topics=[
                {"topic_id": topic_id, "partitions": [_partition(0, 2)]},
                {"topic_id": stranger, "partitions": [_partition(0, 0)]}],
            forgotten_topics_data=[], rack_id=""))
        assert by_id.session_id != 0
        assert [(t.topic_id, t.partitions[0].error_code) for t in by_id.responses] == [
            (topic_id, ErrorCode.none), (stranger, ErrorCode.unknown_topic_id)]
        again = _fetch(client, by_id.session_id, 1, topic_id, {}, version=13)
        assert [(t.topic_id, t.partitions[0].error_code) for t in again.responses] == [
            (stranger, ErrorCode.unknown_topic_id)]


def test_the_session_cache_holds_max_incremental_fetch_session_cache_slots(fresh_broker, topic_name):
    broker = fresh_broker(max_incremental_fetch_session_cache_slots=1)
    create_topic(broker.bootstrap, topic_name, 1)
    with WireClient(broker.bootstrap) as first, WireClient(broker.bootstrap) as second:
        assert _fetch(first, 0, 0, topic_name, {0: 0}).session_id != 0
        # The cache is full and its one session is fresh: no session, full requests.
        refused = _fetch(second, 0, 0, topic_name, {0: 0})
        assert refused.error_code == ErrorCode.none and refused.session_id == 0
        assert len(refused.responses[0].partitions) == 1


def test_a_consumer_using_fetch_sessions_reads_everything(fresh_broker, topic_name):
    """kafka-python keeps a fetch session per broker (its FetchSessionHandler)."""
    broker = fresh_broker(admin_port=0)
    partitions = 20
    create_topic(broker.bootstrap, topic_name, partitions)
    expected = {(p, b"m-%d-%d" % (p, i)) for p in range(partitions) for i in range(5)}
    produce_all(idempotent_producer(broker.bootstrap), [(topic_name, p, None, v) for p, v in sorted(expected)])
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest",
                             enable_auto_commit=False, consumer_timeout_ms=3000, fetch_max_wait_ms=100)
    consumer.assign([TopicPartition(topic_name, p) for p in range(partitions)])
    got = {(m.partition, m.value) for m in consumer}
    assert got == expected
    # The consumer fetches through a session holding its 20 partitions...
    assert broker.admin.metric("ottla_fetch_sessions") == 1
    assert broker.admin.metric("ottla_fetch_session_partitions") == partitions
    # ...and records produced now reach it through the session's incremental answers.
    late = {(p, b"late-%d" % p) for p in range(0, partitions, 7)}
    produce_all(idempotent_producer(broker.bootstrap), [(topic_name, p, None, v) for p, v in sorted(late)])
    assert {(m.partition, m.value) for m in consumer} == late
    consumer.close()
    assert broker.admin.metric("ottla_fetch_sessions") == 1


def test_a_session_naming_a_quarter_million_partitions_is_not_kept(broker, topic_name):
    """Kafka bounds only how many sessions it keeps; a client naming huge numbers of
    partitions could make it hold them all. Ottla bounds what all sessions hold together
    (200,000 partitions): past that the answer carries no session."""
    create_topic(broker.bootstrap, topic_name, 1)
    with WireClient(broker.bootstrap, timeout=60) as client:
        huge = _fetch(client, 0, 0, f"{topic_name}-nowhere", dict.fromkeys(range(250_000), 0))
        assert huge.session_id == 0 and len(huge.responses[0].partitions) == 250_000
        assert huge.responses[0].partitions[0].error_code == ErrorCode.unknown_topic_or_partition
        # Everyone else's sessions are still welcome.
        assert _fetch(client, 0, 0, topic_name, {0: 0}).session_id != 0
