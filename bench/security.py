"""Produce and consume throughput over SASL_SSL (SCRAM-SHA-512, TLS) next to PLAINTEXT, on
one Ottla broker with both listeners (`ottla serve --dev-security` plus a plaintext one),
in alternating rounds. The target (issue 13): SASL_SSL at least 0.7x PLAINTEXT.

Same client settings as the other workloads: idempotence, acks=all, linger.ms=5; the
consumer reads the topic back from offset 0.
"""

from __future__ import annotations

import statistics
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from ottla.testing import BrokerProcess

PROTOCOLS = ("PLAINTEXT", "SASL_SSL")
TARGET = 0.7


@dataclass
class SecurityResult:
    messages: int
    size: int
    produce: dict[str, list[float]] = field(default_factory=lambda: {p: [] for p in PROTOCOLS})
    consume: dict[str, list[float]] = field(default_factory=lambda: {p: [] for p in PROTOCOLS})


def _produce(config: dict[str, str], topic: str, messages: int, size: int) -> float:
    failures: list[object] = []
    producer = Producer({**config, "enable.idempotence": True, "acks": "all", "linger.ms": 5,
                         "queue.buffering.max.messages": 1_000_000})
    producer.produce(topic, b"warm-up")
    producer.flush(30)
    payload = bytes(size)
    started = time.monotonic()
    for _ in range(messages):
        while True:
            try:
                producer.produce(topic, payload, on_delivery=lambda e, m: failures.append(e) if e else None)
                break
            except BufferError:
                producer.poll(0.01)
    if producer.flush(120) or failures:
        raise KafkaException(failures[0] if failures else "messages left unsent")
    return messages / (time.monotonic() - started)


def _consume(config: dict[str, str], topic: str, messages: int) -> float:
    # fetch.queue.backoff.ms: as in bench.workloads, librdkafka's one-second pause when its
    # queue is full would otherwise fall on whichever listener serves faster.
    consumer = Consumer({**config, "group.id": f"bench-{uuid.uuid4().hex}", "enable.auto.commit": False,
                         "fetch.wait.max.ms": 10, "fetch.queue.backoff.ms": 10})
    consumer.assign([TopicPartition(topic, 0, 1)])  # past the warm-up message
    got = 0
    started = time.monotonic()
    deadline = started + 120
    while got < messages and time.monotonic() < deadline:
        for message in consumer.consume(10_000, 0.5):
            if message.error() is None:
                got += 1
    seconds = time.monotonic() - started
    consumer.close()
    if got < messages:
        raise RuntimeError(f"consumed {got} of {messages}")
    return messages / seconds


def run_security(messages: int, size: int, rounds: int, say: Callable[[str], None]) -> SecurityResult:
    result = SecurityResult(messages, size)
    with tempfile.TemporaryDirectory(prefix="ottla-bench-security-") as directory:
        broker = BrokerProcess(f"{directory}/data", {
            "listeners": "PLAINTEXT://127.0.0.1:0,CLEAR://127.0.0.1:0",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CLEAR:PLAINTEXT",
        }, args=["--dev-security"]).start()
        try:
            configs = {"SASL_SSL": broker.dev_security_config(),
                       "PLAINTEXT": {"bootstrap.servers": broker.listeners["CLEAR"]}}
            admin = AdminClient(configs["PLAINTEXT"])
            for r in range(rounds):
                for protocol in PROTOCOLS if r % 2 == 0 else reversed(PROTOCOLS):
                    topic = f"bench-security-{uuid.uuid4().hex[:8]}"
                    for future in admin.create_topics([NewTopic(topic, 1, 1)]).values():
                        future.result(30)
                    produced = _produce(configs[protocol], topic, messages, size)
                    consumed = _consume(configs[protocol], topic, messages)
                    result.produce[protocol].append(produced)
                    result.consume[protocol].append(consumed)
                    say(f"security round {r + 1}: {protocol}: produce {produced:,.0f} msgs/s, "
                        f"consume {consumed:,.0f} msgs/s")
        finally:
            broker.stop()
            broker.cleanup()
    return result


def security_lines(result: SecurityResult | None) -> list[str]:
    if result is None:
        return []
    lines = [f"Security: {result.messages:,} x {result.size} B per round, SASL_SSL (SCRAM-SHA-512 over TLS 1.3) "
             "against PLAINTEXT on the same broker (medians; target: SASL_SSL >= "
             f"{TARGET}x PLAINTEXT)", "",
             "| msgs/s  | PLAINTEXT | SASL_SSL | SASL_SSL/PLAINTEXT | verdict |",
             "|---------|----------:|---------:|-------------------:|---------|"]
    for name, figures in (("produce", result.produce), ("consume", result.consume)):
        plain, secure = statistics.median(figures["PLAINTEXT"]), statistics.median(figures["SASL_SSL"])
        ratio = secure / plain
        lines.append(f"| {name} | {plain:,.0f} | {secure:,.0f} | {ratio:.2f}x | "
                     f"{'met' if ratio >= TARGET else '**missed**'} |")
    return lines


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(prog="python -m bench.security", description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    outcome = run_security(args.messages, args.size, args.rounds, lambda line: print(line, flush=True))
    print("\n".join(security_lines(outcome)))
