"""Kafka Streams 4.3.1 with processing.guarantee=exactly_once_v2 against Ottla and against
Apache Kafka, the reference: tests/java/WordTotals.java re-keys its input (a repartition
topic) and keeps a running count and sum per word (a state store and its changelog topic),
Streams creating both internal topics with its own configs. The same input gives the same
output on both brokers, record for record, read with read_committed; and it still does
when Ottla is killed (SIGKILL) in the middle of the run and started again.

Each input record gives exactly one output record "count,sum" (caching is off), and all
of a word's records are in one input partition, in order, so every word's output is one
fixed sequence: a record lost or processed twice shows as a missing or repeated count,
and an aborted transaction read as committed as a surplus record.
"""

from __future__ import annotations

import os
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Sequence

import pytest
from confluent_kafka import Consumer, KafkaError, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource

from tests.clients import create_topic, idempotent_producer, produce_all
from tests.reference.kafka import ReferenceUnavailable, java_command
from tests.wire import WireClient, request

APP = os.path.join(os.path.dirname(os.path.dirname(__file__)), "java", "WordTotals.java")
WORDS = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliett",
         "kilo", "lima"]
PARTITIONS = 3
# Records in each half of the input: the second half is produced after the kill.
HALF = 900
APP_TIMEOUT = 240.0
# The app's sleep per record in the run with the kill (about 10 s of work per half), so
# that the kill finds it in the middle of its input.
KILL_RUN_DELAY_MS = 10
# The producers' transaction.timeout.ms in every run (Streams' default is 10 s): the second
# kill keeps Ottla down longer than this.
TRANSACTION_TIMEOUT_MS = 3000

Output = dict[str, list[str]]


def input_records(start: int, stop: int) -> list[tuple[int, bytes, bytes]]:
    """(partition, key, value) for records start..stop-1: value "word,number", every
    word's records in one partition."""
    records = []
    for number in range(start, stop):
        index = number % len(WORDS)
        records.append((index % PARTITIONS, b"r%d" % number, f"{WORDS[index]},{number}".encode()))
    return records


def expected_output(count: int) -> Output:
    """Every word's "count,sum" updates, in order, for input records 0..count-1."""
    totals: dict[str, tuple[int, int]] = {}
    out: Output = {}
    for number in range(count):
        word = WORDS[number % len(WORDS)]
        seen, total = totals.get(word, (0, 0))
        totals[word] = (seen + 1, total + number)
        out.setdefault(word, []).append(f"{seen + 1},{total + number}")
    return out


class StreamsApp:
    """WordTotals in a JVM of its own; stdout lines (its state changes) are collected."""

    def __init__(self, bootstrap: str, application_id: str, input_topic: str, output_topic: str,
                 state_dir: str, log_path: str, delay_ms: int = 0, group_protocol: str = "classic") -> None:
        args = [bootstrap, application_id, input_topic, output_topic, state_dir, str(delay_ms),
                str(TRANSACTION_TIMEOUT_MS), group_protocol]
        try:
            command = java_command(APP, args)
        except ReferenceUnavailable as exc:
            pytest.fail(f"Kafka Streams cannot run: {exc}", pytrace=False)
        self.log_path = log_path
        with open(log_path, "w") as log:  # the JVM keeps its own descriptor
            self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                            stderr=log, text=True)
        self.states: list[str] = []
        # Killed on purpose by the test (kill -9 of one instance): not expected to end well.
        self.lost = False
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.states.append(line.strip())

    def stop(self) -> int:
        """Ask for a clean close (stdin closed) and wait for the JVM to exit."""
        assert self.process.stdin is not None
        self.process.stdin.close()
        try:
            code = self.process.wait(120)
        finally:
            self.kill()
        self._reader.join(10)
        return code

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)

    def stderr_tail(self, lines: int = 60) -> str:
        with open(self.log_path, errors="replace") as f:
            return "".join(f.readlines()[-lines:])


def read_output(bootstrap: str, topic: str) -> tuple[Output, dict[str, int]]:
    """Every committed record of `topic` (read_committed, to the end of each partition):
    each word's values in offset order, and the partition each word is in."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{time.monotonic_ns()}",
                         "enable.auto.commit": False, "isolation.level": "read_committed",
                         "enable.partition.eof": True, "log_level": 3})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    out: Output = {}
    placed: dict[str, int] = {}
    at_end: set[int] = set()
    deadline = time.monotonic() + APP_TIMEOUT
    try:
        while len(at_end) < PARTITIONS:
            assert time.monotonic() < deadline, f"{topic}: partitions {at_end} of {PARTITIONS} read to their end"
            for message in consumer.consume(10000, 0.2):
                error, partition = message.error(), message.partition()
                assert partition is not None, str(error)
                if error is not None:
                    assert error.code() == KafkaError._PARTITION_EOF, str(error)
                    at_end.add(partition)
                    continue
                key, value = message.key(), message.value()
                assert key is not None and value is not None
                at_end.discard(partition)
                word = key.decode()
                out.setdefault(word, []).append(value.decode())
                assert placed.setdefault(word, partition) == partition
    finally:
        consumer.close()
    return out, placed


def committed_count(bootstrap: str, topic: str) -> int:
    """How many records of `topic` a read_committed consumer sees now."""
    return sum(len(values) for values in read_output(bootstrap, topic)[0].values())


def wait_for_output(bootstrap: str, topic: str, count: int, app: StreamsApp) -> None:
    """Wait until `count` records of `topic` are committed (each look reads until every
    partition is read to its end, so it lasts as long as Streams keeps committing)."""
    deadline = time.monotonic() + APP_TIMEOUT
    while committed_count(bootstrap, topic) < count:
        assert app.process.poll() is None, f"Streams exited early: {app.states}\n{app.stderr_tail()}"
        assert time.monotonic() < deadline, \
            f"Streams did not write {count} records to {topic}: {app.states}\n{app.stderr_tail()}"
        time.sleep(0.5)


def wait_for_written(bootstrap: str, topic: str, count: int, app: StreamsApp) -> int:
    """Wait until the high watermarks of `topic` add up to `count` or more (records written,
    committed or not, and transaction markers); returns their sum."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"watcher-{time.monotonic_ns()}",
                         "log_level": 3})
    deadline = time.monotonic() + APP_TIMEOUT
    try:
        while (written := sum(consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                              for p in range(PARTITIONS))) < count:
            assert app.process.poll() is None, f"Streams exited early: {app.states}\n{app.stderr_tail()}"
            assert time.monotonic() < deadline, f"Streams did not start writing {topic}: {app.states}"
            time.sleep(0.1)
    finally:
        consumer.close()
    return written


def internal_topic_configs(bootstrap: str, application_id: str) -> dict[str, dict[str, str]]:
    """The configs Streams set on its internal topics (by suffix): those not left at the default."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    names = [name for name in admin.list_topics(timeout=10).topics if name.startswith(application_id + "-")]
    resources = [ConfigResource(ConfigResource.Type.TOPIC, name) for name in names]
    configs = {}
    for resource, future in admin.describe_configs(resources).items():
        entries = future.result(15)
        configs[resource.name[len(application_id) + 1:]] = {
            name: entry.value for name, entry in entries.items()
            if entry.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value}
    return configs


def first_difference(got: Output, want: Output) -> str:
    """Where two outputs part, word by word (pytest's dict diff hides it)."""
    lines = []
    for word in sorted(set(got) | set(want)):
        mine, theirs = got.get(word, []), want.get(word, [])
        if mine != theirs:
            pairs = enumerate(zip(mine, theirs, strict=False))
            at = next((i for i, (a, b) in pairs if a != b), min(len(mine), len(theirs)))
            lines.append(f"{word}: {len(mine)} records vs {len(theirs)}, first differing at #{at}: "
                         f"{mine[at:at + 3]} vs {theirs[at:at + 3]}")
    return "\n".join(lines)


def run_app(bootstrap: str, tmp_path, name: str, *, kills: Sequence[tuple[int, Callable[[], None]]] = (),
            group_protocol: str = "classic", instances: int = 1,
            started: list[StreamsApp] | None = None) -> tuple[Output, dict[str, int], StreamsApp]:
    """Input in two halves, WordTotals over it, its output read back. With `kills`
    ((written, kill) pairs: `kill` kills the broker and starts it again once the output's
    high watermarks add up to `written`), the app processes slowly, the kills come while it
    works on the first half, and the second half is produced after them. `group_protocol`:
    Streams' group.protocol, classic or streams (KIP-1071); `instances`: how many JVMs run
    the application (the first is returned; `started`, if given, gets them all, for a kill
    to choose from: an instance marked `lost` is not expected to end well)."""
    input_topic, output_topic = f"words-{name}", f"totals-{name}"
    create_topic(bootstrap, input_topic, PARTITIONS)
    create_topic(bootstrap, output_topic, PARTITIONS)
    produce_all(idempotent_producer(bootstrap), [(input_topic, p, k, v) for p, k, v in input_records(0, HALF)])
    apps = [StreamsApp(bootstrap, name, input_topic, output_topic, str(tmp_path / f"{name}-state{i or ''}"),
                       str(tmp_path / f"{name}.streams{i or ''}.log"), delay_ms=KILL_RUN_DELAY_MS if kills else 0,
                       group_protocol=group_protocol) for i in range(instances)]
    app = apps[0]
    if started is not None:
        started.extend(apps)
    try:
        for threshold, kill in kills:
            written = wait_for_written(bootstrap, output_topic, threshold, app)
            kill()
            # Records and markers: fewer than the first half's records means mid-run.
            assert written < HALF, f"a kill came after the first half was processed ({written} written)"
        produce_all(idempotent_producer(bootstrap),
                    [(input_topic, p, k, v) for p, k, v in input_records(HALF, 2 * HALF)])
        wait_for_output(bootstrap, output_topic, 2 * HALF, app)
        running = [a for a in apps if not a.lost]
        for other in running[1:]:
            assert other.process.poll() is None, f"Streams exited early: {other.states}\n{other.stderr_tail()}"
        codes = [a.stop() for a in running]
    finally:
        for a in apps:
            a.kill()
    for a, code in zip(running, codes, strict=True):
        assert code == 0, f"Streams ended with {code}: {a.states}\n{a.stderr_tail()}"
    out, placed = read_output(bootstrap, output_topic)
    return out, placed, app


@pytest.fixture(scope="module")
def kafka_run(kafka_reference, tmp_path_factory) -> Iterator[tuple[Output, dict[str, int], dict[str, dict[str, str]]]]:
    """WordTotals on Apache Kafka: the output every Ottla run must equal."""
    tmp_path = tmp_path_factory.mktemp("streams-kafka")
    name = f"wt-kafka-{time.monotonic_ns()}"
    out, placed, _ = run_app(kafka_reference.bootstrap, tmp_path, name)
    yield out, placed, internal_topic_configs(kafka_reference.bootstrap, name)


def test_streams_exactly_once_output_equals_kafkas(kafka_run, broker, tmp_path):
    """One run on each broker: the same output, and the internal topics with the same
    configs (checked to fail when Ottla drops one config of CreateTopics, retention.ms)."""
    kafka_out, kafka_placed, kafka_configs = kafka_run
    assert kafka_out == expected_output(2 * HALF), first_difference(kafka_out, expected_output(2 * HALF))

    name = f"wt-ottla-{time.monotonic_ns()}"
    out, placed, app = run_app(broker.bootstrap, tmp_path, name)

    assert out == kafka_out, first_difference(out, kafka_out)
    assert placed == kafka_placed
    assert "STATE ERROR" not in app.states
    # The internal topics, with the configs Streams gave them, as on Kafka.
    configs = internal_topic_configs(broker.bootstrap, name)
    assert set(configs) == {"by-word-repartition", "word-totals-changelog"}
    assert configs == kafka_configs


def test_streams_exactly_once_across_kills_of_ottla(kafka_run, fresh_broker, tmp_path):
    """kill -9 of Ottla twice while Streams is in the middle of its input (transactions
    open, repartition records not yet consumed): first started again at once (the clients
    retry what was in flight: Ottla's recovered producer state must tell duplicates), then
    kept down longer than the Streams producers' transaction timeout, so that the
    coordinator aborts their open transactions when it is back and Streams, fenced, starts
    its tasks again from the last commit (restoring its state store from the changelog).
    Through both the output is every record exactly once, equal to Kafka's (checked to
    fail when Ottla's read_committed Fetch lists no aborted transactions: aborted output
    then shows as repeated counts)."""
    kafka_out, kafka_placed, _ = kafka_run
    ottla = fresh_broker(transaction_abort_timed_out_transaction_cleanup_interval_ms=200)

    def kill_and_restart() -> None:
        ottla.kill()
        ottla.start()

    def kill_past_the_transaction_timeout() -> None:
        ottla.kill()
        time.sleep(TRANSACTION_TIMEOUT_MS / 1000 + 1)
        ottla.start()

    name = f"wt-kill-{time.monotonic_ns()}"
    out, placed, app = run_app(ottla.bootstrap, tmp_path, name,
                               kills=[(HALF // 6, kill_and_restart), (HALF // 2, kill_past_the_transaction_timeout)])

    assert out == kafka_out, first_difference(out, kafka_out)
    assert placed == kafka_placed
    assert "STATE ERROR" not in app.states


def test_streams_group_protocol_output_equals_kafkas(kafka_run, broker, tmp_path):
    """WordTotals with group.protocol=streams (KIP-1071): Ottla's streams group coordinator
    takes the topology, creates the repartition and changelog topics with the configs it
    declares, and assigns the tasks; the output is Kafka's, record for record."""
    kafka_out, kafka_placed, kafka_configs = kafka_run
    name = f"wt-streams-{time.monotonic_ns()}"
    out, placed, app = run_app(broker.bootstrap, tmp_path, name, group_protocol="streams")

    assert out == kafka_out, first_difference(out, kafka_out)
    assert placed == kafka_placed
    assert "STATE ERROR" not in app.states
    # The broker made the internal topics, with the configs the topology asked for.
    configs = internal_topic_configs(broker.bootstrap, name)
    assert set(configs) == {"by-word-repartition", "word-totals-changelog"}
    assert configs == kafka_configs


def test_streams_group_protocol_through_kafkas_initial_rebalance_delay(kafka_run, fresh_broker, tmp_path):
    """The same with Ottla started with Kafka's group.streams.initial.rebalance.delay.ms
    (3000, not the development default 0): the Streams client is answered
    ASSIGNMENT_DELAYED with no tasks, then gets them once the delay is over, and the
    output is Kafka's. (Seen failing with the delay never over: no task came and the
    app timed out.)"""
    kafka_out, kafka_placed, _ = kafka_run
    ottla = fresh_broker(group_streams_initial_rebalance_delay_ms=3000)
    name = f"wt-delayed-{time.monotonic_ns()}"
    out, placed, app = run_app(ottla.bootstrap, tmp_path, name, group_protocol="streams")

    assert out == kafka_out, first_difference(out, kafka_out)
    assert placed == kafka_placed
    assert "STATE ERROR" not in app.states


STREAMS_GROUP_DESCRIBE = 89


def describe_streams_group(bootstrap: str, group_id: str) -> tuple[int, set[str]]:
    """StreamsGroupDescribe: the group's epoch and its member ids, once the coordinator
    answers (it says COORDINATOR_LOAD_IN_PROGRESS while it loads after a restart)."""
    deadline = time.monotonic() + APP_TIMEOUT
    while True:
        try:
            with WireClient(bootstrap) as client:
                group = client.call(request(STREAMS_GROUP_DESCRIBE, 0, group_ids=[group_id],
                                            include_authorized_operations=False)).groups[0]
        except OSError:
            group = None  # not listening yet
        if group is not None and group.error_code == 0:
            return group.group_epoch, {m.member_id for m in group.members}
        assert time.monotonic() < deadline, f"{group_id}: not described: {group}"
        time.sleep(0.1)


def test_streams_group_two_instances_across_a_kill_of_ottla(kafka_run, fresh_broker, tmp_path):
    """Two JVMs of WordTotals (four stream threads: members of one streams group, so the
    tasks move between them through revocations) and a kill -9 of Ottla in the middle of
    the first half: the group is what the coordinator wrote before the kill (its epoch and
    its members are back, nobody had to join again), and the output is Kafka's, exactly
    once."""
    kafka_out, kafka_placed, _ = kafka_run
    ottla = fresh_broker()
    name = f"wt-streams2-{time.monotonic_ns()}"
    seen: dict[str, tuple[int, set[str]]] = {}

    def kill_and_restart() -> None:
        seen["before"] = describe_streams_group(ottla.bootstrap, name)
        ottla.kill()
        ottla.start()
        seen["after"] = describe_streams_group(ottla.bootstrap, name)

    out, placed, app = run_app(ottla.bootstrap, tmp_path, name, group_protocol="streams", instances=2,
                               kills=[(HALF // 3, kill_and_restart)])

    assert out == kafka_out, first_difference(out, kafka_out)
    assert placed == kafka_placed
    (epoch_before, members_before), (epoch_after, members_after) = seen["before"], seen["after"]
    assert members_before and members_before <= members_after
    assert epoch_after >= epoch_before


def standby_tasks(bootstrap: str, group_id: str) -> dict[str, int]:
    """StreamsGroupDescribe: each member's number of standby tasks in its target."""
    with WireClient(bootstrap) as client:
        group = client.call(request(STREAMS_GROUP_DESCRIBE, 0, group_ids=[group_id],
                                    include_authorized_operations=False)).groups[0]
    return {m.member_id: sum(len(t.partitions) for t in m.target_assignment.standby_tasks) for m in group.members}


def test_streams_group_moves_a_killed_instances_tasks_to_the_other(kafka_run, fresh_broker, tmp_path):
    """Two JVMs of WordTotals in one streams group with a standby copy of each stateful
    task (group.streams.num.standby.replicas=1) and a short session: once both are in the
    group, the second JVM is killed (SIGKILL) in the middle of the first half; its members
    are fenced when their session expires, their tasks move to the first JVM (where the
    standby copies of the store were), and the output is Kafka's, exactly once."""
    kafka_out, kafka_placed, _ = kafka_run
    ottla = fresh_broker(group_streams_session_timeout_ms=6000, group_streams_heartbeat_interval_ms=500,
                         group_streams_num_standby_replicas=1)
    name = f"wt-streams-lost-{time.monotonic_ns()}"
    apps: list[StreamsApp] = []
    seen: dict[str, object] = {}

    def kill_the_second_instance() -> None:
        deadline = time.monotonic() + APP_TIMEOUT
        while len(describe_streams_group(ottla.bootstrap, name)[1]) < 4:  # two threads in each JVM
            assert time.monotonic() < deadline, "the second instance never joined"
            time.sleep(0.2)
        seen["standby"] = standby_tasks(ottla.bootstrap, name)
        apps[1].lost = True
        apps[1].kill()
        while len(members := describe_streams_group(ottla.bootstrap, name)[1]) > 2:
            assert time.monotonic() < deadline, f"the lost instance's members were never fenced: {members}"
            time.sleep(0.2)
        seen["after"] = members

    out, placed, app = run_app(ottla.bootstrap, tmp_path, name, group_protocol="streams", instances=2,
                               kills=[(HALF // 3, kill_the_second_instance)], started=apps)

    assert out == kafka_out, first_difference(out, kafka_out)
    assert placed == kafka_placed
    # The stateful subtopology's 3 tasks had a standby copy each, in the other JVM.
    standby = seen["standby"]
    assert isinstance(standby, dict) and sum(standby.values()) == PARTITIONS, standby
    assert len(seen["after"]) == 2  # type: ignore[arg-type]
