"""The CI loop (issue 39): what one typical integration test asks of its Kafka, step by
step, on Ottla with its defaults, Apache Kafka 4.3.1 and noida-db, each round a fresh
broker of each in turn (interleaved, so drift of the machine falls on all alike):

1. create a topic (AdminClient.create_topics);
2. produce 100 records with an idempotent producer and flush (its start included);
3. the first record of a new classic consumer group (subscribe, join, sync, fetch);
4. drain the other 99 and commit (synchronously), then close the consumer;
5. one transaction (init_transactions, begin, one record, commit);
6. the first record of a new KIP-848 consumer group (group.protocol=consumer);
7. delete the topic.

Each test runs in a client process of its own (`python -m bench.ci_loop BOOTSTRAP`), so
librdkafka starts cold every time as in a real test. Kafka runs as the reference tests
start it (tests/reference/kafka.py): its shipped KRaft server.properties' values and
group.initial.rebalance.delay.ms=0, the development setting Ottla's defaults take too
(docs/configuration.md): the comparison is with Kafka at its fastest for a test.

Targets: each step the broker bounds at most Kafka's time (medians), and the whole test
at most 0.8x Kafka's. A step is called client-bound where every broker takes about the
same (within CLIENT_BOUND_SPREAD of the fastest): the time is librdkafka's, not the
broker's. Ottla's fastest round is shown beside the medians: librdkafka's idempotent and
transactional producers ask for their producer id as soon as a connection is up, and when
none is yet, again after a fixed 500 ms (rdkafka_idempotence.c's PID timer), so those
steps take about 0.5 s more in the rounds where the first attempt lost that race, on any
broker.

Run alone: `python -m bench --only ci-loop --peers kafka,noida-db --rounds 3`.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

STEPS = ("create topic", "produce 100", "classic group: first record", "drain and commit", "one transaction",
         "KIP-848 group: first record", "delete topic")
RECORDS = 100
STEP_TIMEOUT = 60.0
WHOLE_TARGET = 0.8  # the whole test at most this times Kafka's
CLIENT_BOUND_SPREAD = 0.25


@dataclass
class CiLoop:
    brokers: list[str]
    times: dict[str, list[dict[str, float]]] = field(default_factory=dict)  # broker -> per round, step -> s
    failures: dict[str, str] = field(default_factory=dict)  # broker -> why it has no figures


def _next_record(consumer, deadline: float):  # type: ignore[no-untyped-def]
    while time.monotonic() < deadline:
        message = consumer.poll(0.1)
        if message is not None and not message.error():
            return message
    raise TimeoutError("no record")


@contextmanager
def _step(times: dict[str, float], name: str) -> Iterator[float]:
    """Times the block as step `name`; yields its deadline (monotonic)."""
    started = time.monotonic()
    yield started + STEP_TIMEOUT
    times[name] = time.monotonic() - started


def _new_group_member(bootstrap: str, topic: str, protocol: str):  # type: ignore[no-untyped-def]
    """A consumer of a group of its own, `protocol` classic or consumer (KIP-848), subscribed to `topic`."""
    from confluent_kafka import Consumer

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"{protocol}-{topic}", "group.protocol": protocol,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    return consumer


def run_test(bootstrap: str, times: dict[str, float]) -> None:
    """The CI loop's steps against `bootstrap`, each step's seconds into `times` as it ends."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = f"ci-loop-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    with _step(times, STEPS[0]):
        admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(STEP_TIMEOUT)
    with _step(times, STEPS[1]):
        producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
        for i in range(RECORDS):
            producer.produce(topic, b"record %d" % i)
        if producer.flush(STEP_TIMEOUT):
            raise TimeoutError("records left unsent")
    with _step(times, STEPS[2]) as deadline:
        classic = _new_group_member(bootstrap, topic, "classic")
        _next_record(classic, deadline)
    with _step(times, STEPS[3]) as deadline:
        for _ in range(RECORDS - 1):
            _next_record(classic, deadline)
        classic.commit(asynchronous=False)
        classic.close()
    with _step(times, STEPS[4]):
        transactional = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"tx-{topic}"})
        transactional.init_transactions(STEP_TIMEOUT)
        transactional.begin_transaction()
        transactional.produce(topic, b"in a transaction")
        transactional.commit_transaction(STEP_TIMEOUT)
    with _step(times, STEPS[5]) as deadline:
        modern = _new_group_member(bootstrap, topic, "consumer")
        _next_record(modern, deadline)
    modern.close()
    with _step(times, STEPS[6]):
        admin.delete_topics([topic])[topic].result(STEP_TIMEOUT)


def _run_client(bootstrap: str) -> tuple[dict[str, float], str | None]:
    """The steps' seconds, and why the test stopped short (None if it did not)."""
    done = subprocess.run([sys.executable, "-m", "bench.ci_loop", bootstrap], capture_output=True, text=True,
                          timeout=len(STEPS) * STEP_TIMEOUT + 30, stdin=subprocess.DEVNULL)
    lines = done.stdout.strip().splitlines()
    if not lines:
        reasons = [line for line in done.stderr.strip().splitlines() if not line.startswith("%")]
        raise RuntimeError(reasons[-1] if reasons else f"the client exited with code {done.returncode}")
    answer = json.loads(lines[-1])
    return answer["times"], answer["failed"]


def run_ci_loop(rounds: int, contenders: list[tuple[str, Callable[[], object]]],
                log: Callable[[str], None]) -> CiLoop:
    """`rounds` rounds; in each, every contender (name, peer factory) fresh, in turn."""
    result = CiLoop([name for name, _ in contenders])
    for r in range(rounds):
        for name, make_peer in contenders:
            if name in result.failures:
                continue
            peer = make_peer()
            try:
                peer.start()  # type: ignore[attr-defined]
                times, failed = _run_client(peer.bootstrap)  # type: ignore[attr-defined]
            except Exception as exc:  # a peer that cannot run the test: n/a, the run goes on
                result.failures[name] = f"round {r + 1}: {str(exc).splitlines()[0] if str(exc) else exc!r}"
                log(f"ci-loop round {r + 1}/{rounds}  {name:<9} n/a ({result.failures[name]})")
                continue
            finally:
                peer.stop()  # type: ignore[attr-defined]
            if failed is not None:
                # The steps it did are figures; the test as a whole has none on this broker.
                result.failures[name] = f"round {r + 1}: {failed}"
            result.times.setdefault(name, []).append(times)
            log(f"ci-loop round {r + 1}/{rounds}  {name:<9} "
                + ", ".join(f"{times[s]:.2f}" if s in times else "n/a" for s in STEPS)
                + (f"  = {sum(times.values()):.2f} s" if failed is None else f"  ({failed})"))
    return result


def median_seconds(result: CiLoop, broker: str, step: str | None) -> float | None:
    """The median of a step's seconds (the whole test's with None) over the rounds that did it."""
    rounds = [t for t in result.times.get(broker, []) if (len(t) == len(STEPS) if step is None else step in t)]
    if not rounds:
        return None
    return statistics.median(sum(t.values()) if step is None else t[step] for t in rounds)


def _fastest(result: CiLoop, broker: str, step: str | None) -> float | None:
    """The least of a step's seconds over the rounds: with the median, where a client
    timer (librdkafka's 500 ms PID retry) fell into some rounds and not others."""
    rounds = [t for t in result.times.get(broker, []) if (len(t) == len(STEPS) if step is None else step in t)]
    return min((sum(t.values()) if step is None else t[step] for t in rounds), default=None)


def is_client_bound(result: CiLoop, step: str) -> bool:
    """Whether every broker that did `step` took about the same median time (within
    CLIENT_BOUND_SPREAD of the fastest): then the time is the client's, not the broker's."""
    known = [m for b in result.brokers if (m := median_seconds(result, b, step)) is not None]
    return len(known) > 1 and max(known) <= min(known) * (1 + CLIENT_BOUND_SPREAD)


def ci_loop_lines(result: CiLoop | None, ottla: str = "Ottla", kafka: str = "kafka") -> list[str]:
    """The table of medians per step and broker, with the verdicts against Kafka."""
    if result is None:
        return []
    brokers = [b for b in result.brokers if b in result.times]
    rounds = max((len(result.times[b]) for b in brokers), default=0)
    lines = [f"CI loop (bench.ci_loop): one integration test step by step, median seconds of {rounds} rounds", "",
             "| Step | " + " | ".join(brokers) + f" | {ottla}'s fastest | Ottla/Kafka | Verdict |",
             "|---|" + "---:|" * len(brokers) + "---:|---:|---|"]
    for step in [*STEPS, None]:
        medians = {b: median_seconds(result, b, step) for b in brokers}
        figures = " | ".join("n/a" if medians[b] is None else f"{medians[b]:.3f}" for b in brokers)
        ours, theirs = medians.get(ottla), medians.get(kafka)
        fastest = _fastest(result, ottla, step)
        ratio = f"{ours / theirs:.2f}" if ours is not None and theirs else "n/a"
        client_bound = step is not None and is_client_bound(result, step)
        if ours is None or theirs is None:
            verdict = "n/a"
        elif step is None:
            verdict = ("met" if ours <= WHOLE_TARGET * theirs else "NOT MET") + f" (at most {WHOLE_TARGET}x Kafka's)"
        else:
            verdict = ("met" if ours <= theirs else "NOT MET") + " (at most Kafka's)"
            if client_bound:
                verdict += f"; client-bound (every broker within {CLIENT_BOUND_SPREAD:.0%})"
        name = "whole test" if step is None else step
        lines.append(f"| {name} | {figures} | {'n/a' if fastest is None else f'{fastest:.3f}'} | {ratio} | {verdict} |")
    lines += [f"{name}: n/a ({why})" for name, why in result.failures.items()]
    return lines


def main(bootstrap: str) -> None:
    """The client process: one JSON line, the steps' seconds and why it stopped short."""
    times: dict[str, float] = {}
    failed = None
    try:
        run_test(bootstrap, times)
    except Exception as exc:
        failed = f"{STEPS[len(times)]}: {type(exc).__name__}: {exc}"
    print(json.dumps({"times": times, "failed": failed}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
