"""Kafka Connect 4.3.1 in distributed mode with Ottla as its Kafka: two workers in one group
(Connect's own protocol, incremental cooperative rebalancing) keep their config, offset and
status topics on Ottla, run the FileStream connectors of connect-file, and survive a kill -9
of the worker running the tasks; with `exactly.once.source.support=enabled` (KIP-618) a
source task killed in the middle of a transaction leaves no duplicate and no gap for a
read_committed consumer.

Connectors are created and watched through Connect's REST API (urllib), as an operator or a
connector's CI would.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource

from tests.clients import open_transaction_on, read_all
from tests.reference.connect import ConnectWorker, wait_until

FILE_SOURCE = "org.apache.kafka.connect.file.FileStreamSourceConnector"
FILE_SINK = "org.apache.kafka.connect.file.FileStreamSinkConnector"
# What Connect's worker creates (DistributedConfig's defaults: one config partition, 25
# offset partitions, 5 status partitions), every one compacted.
WORKER_TOPIC_PARTITIONS = {"configs": 1, "offsets": 25, "status": 5}
REBALANCE_TIMEOUT = 120.0


@pytest.fixture
def workers() -> Iterator[list[ConnectWorker]]:
    """Connect workers started by the test; all killed at the end."""
    started: list[ConnectWorker] = []
    yield started
    for worker in started:
        worker.kill()


def start_pair(started: list[ConnectWorker], work_dir: str, bootstrap: str, group: str,
               extra: dict[str, str] | None = None) -> tuple[ConnectWorker, ConnectWorker]:
    pair = (ConnectWorker(work_dir, f"{group}-1", bootstrap, group, extra),
            ConnectWorker(work_dir, f"{group}-2", bootstrap, group, extra))
    started.extend(pair)
    # Both JVMs boot at once (the slow part).
    errors: list[BaseException] = []

    def run(worker: ConnectWorker) -> None:
        try:
            worker.start()
        except BaseException as exc:  # reported below, in the test's thread
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(worker,)) for worker in pair]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    return pair


def append_lines(path: str, lines: list[str], pause: float = 0.0) -> None:
    with open(path, "a") as f:
        for line in lines:
            f.write(line + "\n")
            f.flush()
            if pause:
                time.sleep(pause)


def read_lines(path: str) -> list[str]:
    try:
        with open(path) as f:
            return f.read().splitlines()
    except FileNotFoundError:
        return []


def worker_topic_configs(bootstrap: str, group: str) -> dict[str, tuple[int, dict[str, tuple[str, object]]]]:
    """{suffix: (partitions, {config: (value, source)})} of the worker's three topics,
    the configs set on the topic itself (DescribeConfigs)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    metadata = admin.list_topics(timeout=10)
    out = {}
    for suffix in WORKER_TOPIC_PARTITIONS:
        topic = f"{group}-{suffix}"
        (future,) = admin.describe_configs([ConfigResource("TOPIC", topic)]).values()
        entries = future.result(10)
        own = {name: (entry.value, entry.source) for name, entry in entries.items()
               if entry.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value}
        out[suffix] = (len(metadata.topics[topic].partitions), own)
    return out


def tasks_on(worker: ConnectWorker, connectors: list[str], expected: int) -> dict[str, dict[int, str]] | None:
    placed = {name: worker.running_tasks(name) for name in connectors}
    return placed if all(len(tasks) == expected for tasks in placed.values()) else None


def test_distributed_workers_run_file_connectors_and_survive_a_kill(fresh_broker, workers, tmp_path):
    """Two workers form one group on Ottla; the worker creates its three topics compacted;
    a FileStream source copies a file into a topic and a FileStream sink copies the topic
    into another file; after kill -9 of the worker holding the source task, the other worker
    runs every task and lines appended afterwards still arrive, in order. The sink is
    at-least-once: a line may arrive twice after the kill, never be missing."""
    broker = fresh_broker()
    group = "connect-file"
    first, second = start_pair(workers, str(tmp_path), broker.bootstrap, group)

    source_file, sink_file = str(tmp_path / "in.txt"), str(tmp_path / "out.txt")
    before = [f"line-{n}" for n in range(200)]
    append_lines(source_file, before)
    first.put_connector("file-source", {"connector.class": FILE_SOURCE, "file": source_file,
                                        "topic": "connect-lines", "tasks.max": "1"})
    first.put_connector("file-sink", {"connector.class": FILE_SINK, "file": sink_file,
                                      "topics": "connect-lines", "tasks.max": "1"})
    wait_until(lambda: read_lines(sink_file) == before, REBALANCE_TIMEOUT, "the first lines to go through",
               lambda: f"sink file has {len(read_lines(sink_file))} lines\n{first.log_tail()}")
    assert read_all(broker.bootstrap, "connect-lines", [0], isolation="read_committed")[0] == \
        [line.encode() for line in before]

    # The worker's own topics, as the worker asked for them.
    configs = worker_topic_configs(broker.bootstrap, group)
    for suffix, partitions in WORKER_TOPIC_PARTITIONS.items():
        assert configs[suffix][0] == partitions, configs
        assert configs[suffix][1].get("cleanup.policy") == ("compact", ConfigSource.DYNAMIC_TOPIC_CONFIG.value), configs

    placed = wait_until(lambda: tasks_on(first, ["file-source", "file-sink"], 1), REBALANCE_TIMEOUT,
                        "both tasks to run")
    victim = first if placed["file-source"][0] == first.worker_id else second
    survivor = second if victim is first else first
    victim.kill()
    after = [f"line-{n}" for n in range(200, 400)]
    append_lines(source_file, after)

    def all_on_survivor() -> bool:
        placed = tasks_on(survivor, ["file-source", "file-sink"], 1)
        return placed is not None and all(tasks[0] == survivor.worker_id for tasks in placed.values())

    wait_until(all_on_survivor, REBALANCE_TIMEOUT, "the survivor to take every task", survivor.log_tail)
    expected = before + after
    wait_until(lambda: set(read_lines(sink_file)) >= set(expected), REBALANCE_TIMEOUT,
               "the lines appended after the kill", survivor.log_tail)
    got = read_lines(sink_file)
    first_seen = list(dict.fromkeys(got))
    assert first_seen == expected, "lines out of order or foreign lines in the sink file"
    # Redelivered lines (at-least-once) are a suffix replay, never a line that was not sent.
    assert set(got) == set(expected)


def test_exactly_once_source_across_a_worker_kill(fresh_broker, workers, tmp_path):
    """KIP-618 with Ottla: the source task's transactional producer writes records and the
    task's source offsets in one transaction (transaction.boundary=interval, 2 s), the
    leader fences the task's earlier producers with Admin.fenceProducers (InitProducerId on
    the task's transactional id). The worker running the task is killed with kill -9 while
    lines keep being appended: its open transaction is aborted when the survivor's task
    producer initialises, and the survivor resumes from the committed source offset. A
    read_committed consumer sees every line exactly once, in order (exact list, not set);
    the read_uncommitted view holding more records shows the kill did land inside a
    transaction. Checked to fail when read_committed Fetch lists no aborted transactions."""
    broker = fresh_broker()
    group = "connect-eos"
    first, second = start_pair(workers, str(tmp_path), broker.bootstrap, group,
                               {"exactly.once.source.support": "enabled"})
    source_file = str(tmp_path / "in.txt")
    open(source_file, "w").close()
    topic = "connect-eos-lines"
    first.put_connector("eos-source", {
        "connector.class": FILE_SOURCE, "file": source_file, "topic": topic, "tasks.max": "1",
        "exactly.once.support": "required", "transaction.boundary": "interval",
        "transaction.boundary.interval.ms": "2000"})
    placed = wait_until(lambda: tasks_on(first, ["eos-source"], 1), REBALANCE_TIMEOUT, "the source task to run",
                        first.log_tail)
    victim = first if placed["eos-source"][0] == first.worker_id else second
    survivor = second if victim is first else first

    lines = [f"eos-{n}" for n in range(1000)]
    append_lines(source_file, lines[:300], pause=0.01)

    def committed() -> list[bytes]:
        return read_all(broker.bootstrap, topic, [0], isolation="read_committed")[0]

    wait_until(lambda: len(committed()) >= 150, REBALANCE_TIMEOUT, "a first committed transaction")
    # Lines keep arriving while the worker dies: a transaction is open at the kill.
    writer = threading.Thread(target=append_lines, args=(source_file, lines[300:], 0.01))
    writer.start()
    # Kill only once the broker holds records of an open transaction (high watermark past
    # the last stable offset): a fixed sleep could land between a commit and the next
    # transaction's first send, and a busy machine makes that likely.
    wait_until(lambda: open_transaction_on(broker.bootstrap, topic, [0]), REBALANCE_TIMEOUT,
               "records of an open transaction on the broker")
    victim.kill()
    writer.join()
    wait_until(lambda: survivor.running_tasks("eos-source").get(0) == survivor.worker_id, REBALANCE_TIMEOUT,
               "the survivor to run the source task", survivor.log_tail)
    wanted = [line.encode() for line in lines]
    wait_until(lambda: len(committed()) >= len(wanted), REBALANCE_TIMEOUT, "every line to be committed",
               survivor.log_tail)
    got = committed()
    assert got == wanted, (f"{len(got)} records; duplicates: {len(got) - len(set(got))}; "
                           f"missing: {len(set(wanted) - set(got))}")
    uncommitted = read_all(broker.bootstrap, topic, [0], isolation="read_uncommitted")[0]
    assert len(uncommitted) > len(wanted), "the kill did not land inside an open transaction"
