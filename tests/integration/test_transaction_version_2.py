"""Transaction version 2 (KIP-890 part 2) against Ottla and against Apache Kafka 4.3.1.

Both brokers finalize transaction.version 2; the Java client 4.3 then sends Produce v12
(no AddPartitionsToTxn: the broker adds the partition itself) and EndTxn v5 (the epoch
moves at every commit and abort). tests/java/TransactionsV2.java commits, aborts,
commits, is fenced by a second producer and commits with that one; its report (epochs
from DescribeTransactions, the fenced producer's error, what read_committed reads) must
be the same on both brokers. The raw-request tests send Produce v12 and EndTxn v5 by
hand and compare the answers field by field.
"""

from __future__ import annotations

import glob
import json
import os
import subprocess
import time
import uuid
from typing import Any

import pytest
from kio.serial.errors import OutOfBoundValue

from ottla.protocol.batch import TRANSACTIONAL_FLAG, build_batch, encode_record
from tests.clients import create_topic
from tests.reference.kafka import ReferenceUnavailable, java_command
from tests.wire import WireClient, request

APP = os.path.join(os.path.dirname(os.path.dirname(__file__)), "java", "TransactionsV2.java")
API_VERSIONS, PRODUCE, FIND_COORDINATOR, INIT_PRODUCER_ID, END_TXN, DESCRIBE_TRANSACTIONS = 18, 0, 10, 22, 26, 65


def run_app(bootstrap: str, topic: str, transactional_id: str) -> dict[str, str]:
    try:
        command = java_command(APP, [bootstrap, topic, transactional_id])
    except ReferenceUnavailable as exc:
        pytest.fail(f"the Java client cannot run: {exc}", pytrace=False)
    done = subprocess.run(command, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, f"TransactionsV2 against {bootstrap} failed:\n{done.stderr[-4000:]}"
    return dict(line.split("=", 1) for line in done.stdout.splitlines() if "=" in line)


def test_the_java_client_runs_transaction_version_2_on_both(broker, kafka_reference):
    """The epochs move at every commit and abort (with transaction version 1 they would
    stay at 0 until the second producer's InitProducerId), and the report is the same
    on both brokers. Broken once by finalizing transaction.version 1 in Ottla: the
    client fell back to version 1 and the epochs stopped moving."""
    reports, records = {}, {}
    for name, bootstrap, data_dir in (("ottla", broker.bootstrap, broker.data_dir),
                                      ("kafka", kafka_reference.bootstrap_servers, kafka_reference.data_dir)):
        topic = f"tv2-{uuid.uuid4().hex[:8]}"
        create_topic(bootstrap, topic, partitions=2)
        txn_id = f"tv2-{uuid.uuid4().hex[:8]}"
        reports[name] = run_app(bootstrap, topic, txn_id)
        records[name] = _transaction_records(data_dir, txn_id, topic)
    ottla, kafka = reports["ottla"], reports["kafka"]
    # The __transaction_state records, as Kafka's kafka-dump-log prints them, tell the
    # same story on both: every state, epoch, partition set and client transaction version.
    assert records["kafka"], "no __transaction_state record of the transactional id in Kafka's log"
    assert records["ottla"] == records["kafka"]
    assert [kafka[f"{step}.epoch"] for step in ("init", "commit-1", "abort-1", "commit-2")] == ["0", "1", "2", "3"]
    assert kafka["committed-p0"] == "commit-1-p0,commit-3-p0"
    assert kafka["committed-p1"] == "commit-1-p1,commit-2-p1"
    assert kafka["group-offset"] == "5"
    # Markers carry the bumped epoch: a partition's producer state is at its last marker's.
    assert (kafka["producers-p0"], kafka["producers-p1"]) == ("5", "3")
    assert ottla == kafka


def _dump_log_transaction_state(data_dir: str) -> str:
    files = sorted(glob.glob(os.path.join(data_dir, "__transaction_state-*", "*.log")))
    assert files, f"no __transaction_state segment under {data_dir}"
    try:
        command = java_command("org.apache.kafka.tools.DumpLogSegments",
                               ["--transaction-log-decoder", "--files", ",".join(files)])
    except ReferenceUnavailable as exc:
        pytest.fail(f"kafka-dump-log cannot run: {exc}", pytrace=False)
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def _partitions_named(name: str, partitions: list[int], topic: str) -> tuple[str, list[int]]:
    """The test's topic and the group's __consumer_offsets partition (where the random
    group id hashes to) under names the same on both brokers."""
    if name == topic:
        return "topic", sorted(partitions)
    if name == "__consumer_offsets":
        return "__consumer_offsets", [-1]
    return name, sorted(partitions)


def _transaction_records(data_dir: str, txn_id: str, topic: str) -> list[tuple[Any, ...]]:
    """(status, epoch relative to the first, clientTransactionVersion, partitions, whether
    the partitions are a null array) of each __transaction_state record of `txn_id`, read
    with kafka-dump-log."""
    out = []
    first_epoch = None
    for line in _dump_log_transaction_state(data_dir).splitlines():
        if f'"transactionalId":"{txn_id}"' not in line.replace(" ", "") or "payload: " not in line:
            continue
        payload = line.split("payload: ", 1)[1].strip()
        if payload in ("", "null", "<DELETE>"):
            continue
        data = json.loads(payload)["data"]
        if first_epoch is None:
            first_epoch = data["producerEpoch"]
        partitions = sorted(_partitions_named(p["topic"], p["partitionIds"], topic)
                            for p in data["transactionPartitions"] or [])
        out.append((data["transactionStatus"], data["producerEpoch"] - first_epoch,
                    data.get("clientTransactionVersion", 0), partitions, data["transactionPartitions"] is None))
    return out


def test_transaction_state_records_say_client_transaction_version_2(broker):
    """Kafka's own kafka-dump-log reads Ottla's __transaction_state and finds the
    transaction version 2 fields: clientTransactionVersion 2 on the records a Produce
    v12 / EndTxn v5 transaction wrote."""
    topic = f"tv2-{uuid.uuid4().hex[:8]}"
    create_topic(broker.bootstrap, topic, partitions=1)
    txn_id = f"tv2-dump-{uuid.uuid4().hex[:8]}"
    with WireClient(broker.bootstrap) as client:
        producer_id, epoch = _init(client, txn_id)
        assert _produce(client, txn_id, topic, producer_id, epoch)[0] == 0
        assert _end(client, txn_id, producer_id, epoch, True).error_code == 0
    printed = _dump_log_transaction_state(broker.data_dir)
    lines = [line for line in printed.splitlines() if f'"{txn_id}"' in line or txn_id in line]
    assert lines, printed[-3000:]
    assert any('"clientTransactionVersion":2' in line.replace(" ", "") for line in lines), "\n".join(lines)


def test_a_produce_v12_adds_all_its_partitions_in_one_transaction_state_record(broker):
    """KIP-890's implicit add: a Produce v12 with batches for three partitions adds them
    to the transaction in one __transaction_state record, as Kafka does with its one
    AddPartitionsToTxn per request (read back with kafka-dump-log). Seen failing with
    the partitions added one by one (three Ongoing records)."""
    topic = f"tv2-{uuid.uuid4().hex[:8]}"
    create_topic(broker.bootstrap, topic, partitions=3)
    txn_id = f"tv2-add-{uuid.uuid4().hex[:8]}"
    with WireClient(broker.bootstrap) as client:
        producer_id, epoch = _init(client, txn_id)
        batch = build_batch([encode_record(b"k", b"v")], timestamp=int(time.time() * 1000), producer_id=producer_id,
                            producer_epoch=epoch, base_sequence=0, attributes=TRANSACTIONAL_FLAG)
        answer = client.call(request(PRODUCE, 12, transactional_id=txn_id, acks=-1, timeout=30000, topic_data=[
            {"name": topic, "partition_data": [{"index": p, "records": batch} for p in range(3)]}]))
        assert [p.error_code for p in answer.responses[0].partition_responses] == [0, 0, 0]
        assert _state(client, txn_id) == ("Ongoing", [(topic, [0, 1, 2])])
    ongoing = [r for r in _transaction_records(broker.data_dir, txn_id, topic) if r[0] == 1]  # Ongoing
    assert [r[3] for r in ongoing] == [[("topic", [0, 1, 2])]]


# --- raw requests, compared with Kafka's answers ---------------------------------------


def _init(client: WireClient, txn_id: str) -> tuple[int, int]:
    # Kafka creates __transaction_state at the first FindCoordinator and answers
    # COORDINATOR_NOT_AVAILABLE until it is there.
    for _ in range(100):
        coordinator = client.call(request(FIND_COORDINATOR, 4, key_type=1, coordinator_keys=[txn_id]))
        if coordinator.coordinators[0].error_code == 0:
            break
        time.sleep(0.2)
    assert coordinator.coordinators[0].error_code == 0
    for _ in range(150):
        answer = client.call(request(INIT_PRODUCER_ID, 5, transactional_id=txn_id, transaction_timeout=60000,
                                     producer_id=-1, producer_epoch=-1))
        if answer.error_code == 0:
            return int(answer.producer_id), int(answer.producer_epoch)
        assert answer.error_code in (14, 15, 16, 51), answer  # coordinator not ready yet, concurrent transactions
        time.sleep(0.1)
    raise AssertionError("InitProducerId never succeeded")


def _produce(client: WireClient, txn_id: str, topic: str, producer_id: int, epoch: int, sequence: int = 0,
             version: int = 12) -> tuple[int, Any]:
    batch = build_batch([encode_record(b"k", b"v")], timestamp=int(time.time() * 1000), producer_id=producer_id,
                        producer_epoch=epoch, base_sequence=sequence, attributes=TRANSACTIONAL_FLAG)
    answer = client.call(request(PRODUCE, version, transactional_id=txn_id, acks=-1, timeout=30000, topic_data=[
        {"name": topic, "partition_data": [{"index": 0, "records": batch}]}]))
    partition = answer.responses[0].partition_responses[0]
    return int(partition.error_code), partition


def _end(client: WireClient, txn_id: str, producer_id: int, epoch: int, commit: bool, version: int = 5) -> Any:
    for _ in range(50):
        answer = client.call(request(END_TXN, version, transactional_id=txn_id, producer_id=producer_id,
                                     producer_epoch=epoch, committed=commit))
        if answer.error_code != 51:  # the previous end still writing its markers
            return answer
        time.sleep(0.1)
    return answer


def _describe(client: WireClient, txn_id: str) -> Any:
    return client.call(request(DESCRIBE_TRANSACTIONS, 0, transactional_ids=[txn_id])).transaction_states[0]


def _state(client: WireClient, txn_id: str) -> tuple[str, list[tuple[str, list[int]]]]:
    """The transaction's state and partitions. An Empty transaction has no start time:
    both brokers send -1, which kio refuses to decode as a timestamp."""
    try:
        txn = _describe(client, txn_id)
    except OutOfBoundValue:
        return "no start time (Empty)", []
    return txn.transaction_state, [(t.topic, list(t.partitions)) for t in txn.topics]


def _scenario(bootstrap: str) -> list[tuple[str, object]]:
    """Produce v12 with no AddPartitionsToTxn, then EndTxn v5 in every interesting case;
    what each answered, with producer ids and epochs made relative to the first."""
    topic = f"tv2-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, partitions=1)
    txn_id = f"tv2-raw-{uuid.uuid4().hex[:8]}"
    seen: list[tuple[str, object]] = []
    with WireClient(bootstrap) as client:
        pid, epoch0 = _init(client, txn_id)

        def end(step: str, producer_epoch: int, commit: bool) -> None:
            answer = _end(client, txn_id, pid, producer_epoch, commit)
            seen.append((step, (int(answer.error_code), int(answer.producer_id) - pid if answer.producer_id >= 0
                                else -1, int(answer.producer_epoch) - epoch0 if answer.producer_epoch >= 0 else -1)))

        # Kafka's new partition may have no leader yet (NOT_LEADER_OR_FOLLOWER), and its
        # coordinator may still be busy (NOT_ENOUGH_REPLICAS): retry as a client does.
        for _ in range(50):
            code = _produce(client, txn_id, topic, pid, epoch0)[0]
            if code not in (6, 19):
                break
            time.sleep(0.1)
        seen.append(("produce v12, partition not added", code))
        state, partitions = _state(client, txn_id)
        seen.append(("described after produce", (state, partitions == [(topic, [0])])))
        end("commit", epoch0, True)
        end("commit retried", epoch0, True)
        end("abort retried as the other outcome", epoch0, False)
        end("commit with nothing open", epoch0 + 1, True)
        end("abort with nothing open", epoch0 + 1, False)
        end("stale epoch", epoch0, True)
        seen.append(("produce v12 at a fenced epoch", _produce(client, txn_id, topic, pid, epoch0 + 1)[0]))
        seen.append(("produce v12 at the new epoch", _produce(client, txn_id, topic, pid, epoch0 + 2)[0]))
        end("abort", epoch0 + 2, False)
        # Kafka writes the markers after it answers: wait for them, so that the next
        # step does not race them (it would get CONCURRENT_TRANSACTIONS as
        # NOT_ENOUGH_REPLICAS).
        for _ in range(100):
            if _describe(client, txn_id).transaction_state == "CompleteAbort":
                break
            time.sleep(0.1)
        seen.append(("produce v11 without AddPartitionsToTxn",
                     _produce(client, txn_id, topic, pid, epoch0 + 3, version=11)[0]))
        txn = _describe(client, txn_id)
        seen.append(("described after the abort", (txn.transaction_state, int(txn.producer_epoch) - epoch0)))
        # A new producer while a transaction version 2 transaction is open: it is fenced
        # and aborted, and the new producer gets the epoch after the abort's.
        seen.append(("produce v12, then a new producer", _produce(client, txn_id, topic, pid, epoch0 + 3)[0]))
        new_pid, new_epoch = _init(client, txn_id)
        seen.append(("new producer", (new_pid - pid, new_epoch - epoch0, _state(client, txn_id)[0])))
    return seen


@pytest.fixture(scope="module")
def kafka_scenario(kafka_reference) -> list[tuple[str, object]]:
    return _scenario(kafka_reference.bootstrap_servers)


def test_produce_v12_and_end_txn_v5_answer_as_kafka(broker, kafka_scenario):
    """Every answer of the raw scenario equals Kafka's, step by step. Broken once by
    keeping the epoch at EndTxn v5 (bump_epoch false in the handler): the answers' epochs
    and the retry/stale-epoch errors differed from Kafka's."""
    ottla = _scenario(broker.bootstrap)
    assert ottla == kafka_scenario


def test_api_versions_finalizes_transaction_version_2_as_kafka(broker, kafka_reference):
    """Supported 0-2 and finalized 2, as Kafka 4.3.1 answers ApiVersions v4 (v3 hides
    the features whose lowest level is 0 in Kafka: KIP-1022)."""
    def features(bootstrap: str) -> tuple[Any, Any, dict[int, int]]:
        with WireClient(bootstrap) as client:
            body = client.call(request(API_VERSIONS, 4, client_software_name="t", client_software_version="1"))
        supported = {f.name: (f.min_version, f.max_version) for f in body.supported_features}
        finalized = {f.name: (f.min_version_level, f.max_version_level) for f in body.finalized_features}
        versions = {k.api_key: k.max_version for k in body.api_keys}
        return supported["transaction.version"], finalized["transaction.version"], versions
    ottla, kafka = features(broker.bootstrap), features(kafka_reference.bootstrap_servers)
    assert ottla[:2] == kafka[:2] == ((0, 2), (2, 2))
    # v3 leaves the features whose lowest level is 0 out of the supported ones
    # (transaction.version among them) and still says it is finalized at 2.
    v3 = {}
    for name, bootstrap in (("ottla", broker.bootstrap), ("kafka", kafka_reference.bootstrap_servers)):
        with WireClient(bootstrap) as client:
            body = client.call(request(API_VERSIONS, 3, client_software_name="t", client_software_version="1"))
        v3[name] = ([f.name for f in body.supported_features],
                    {f.name: f.max_version_level for f in body.finalized_features}["transaction.version"])
    assert v3["ottla"] == v3["kafka"] == (["metadata.version"], 2)
    # The versions transaction version 2 is made of.
    assert ottla[2][PRODUCE] >= 12 and ottla[2][END_TXN] == kafka[2][END_TXN] == 5
