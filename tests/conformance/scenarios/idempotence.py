"""The idempotent producer (seed: idempotence): duplicates of cached batches, sequences
out of order, the retry older than the five cached batches, unknown producer ids, the
epoch bump (KIP-360)."""

from __future__ import annotations

from typing import Any

from ..harness import Context, Scenario, Step, sweep
from .common import INIT_PRODUCER_ID, PRODUCE, batch, create, produce

NOT_YET = ("coordinator_load_in_progress", "coordinator_not_available")
RECORDS = 2  # records per batch: batch n starts at sequence 2n


def pid(c: Context, step: str = "init") -> int:
    return int(c[step].producer_id)


def seq_batch(c: Context, n: int, epoch: int = 0, step: str = "init", producer_id: int | None = None) -> dict:
    producer = pid(c, step) if producer_id is None else producer_id
    return produce(c.topic(), 0, batch([b"v%d-%d" % (n, i) for i in range(RECORDS)], producer, epoch, n * RECORDS))


def idempotent_produce(name: str, n: int, epoch: int = 0, step: str = "init", version: int = 9,
                       producer_id: int | None = None) -> Step:
    return Step(name, PRODUCE, version, lambda c: seq_batch(c, n, epoch, step, producer_id))


def init(name: str, body: Any) -> Step:
    """InitProducerId v4; Kafka answers COORDINATOR_LOAD_IN_PROGRESS until its producer
    id manager has its first block of ids."""
    return Step(name, INIT_PRODUCER_ID, 4, body, retry=NOT_YET)


INIT = {"transactional_id": None, "transaction_timeout": 60000, "producer_id": -1, "producer_epoch": -1}

SCENARIOS = [
    Scenario("idempotence", [
        create("create"),
        *sweep("init-versions", INIT_PRODUCER_ID, INIT, retry=NOT_YET),
        init("init", INIT),
        idempotent_produce("batch-0", 0),
        idempotent_produce("batch-1", 1),
        idempotent_produce("duplicate-of-last", 1),
        idempotent_produce("duplicate-of-first", 0),
        idempotent_produce("gap", 5),
        idempotent_produce("batch-2", 2),
        idempotent_produce("batch-3", 3),
        idempotent_produce("batch-4", 4),
        idempotent_produce("batch-5", 5),
        idempotent_produce("batch-6", 6),
        idempotent_produce("retry-older-than-five-cached", 1),
        idempotent_produce("retry-oldest-cached", 2),
        idempotent_produce("wrong-epoch-ahead", 7, epoch=3),
        idempotent_produce("unknown-producer-first-sequence", 0, producer_id=987654),
        idempotent_produce("unknown-producer-later-sequence", 4, producer_id=876543),
        init("bump", lambda c: {**INIT, "producer_id": pid(c), "producer_epoch": 0}),
        init("bump-with-stale-epoch", lambda c: {**INIT, "producer_id": pid(c), "producer_epoch": 0}),
        init("bump-unknown-producer", {**INIT, "producer_id": 765432, "producer_epoch": 0}),
        init("bump-half-given", {**INIT, "producer_id": 765432}),
        idempotent_produce("old-epoch-after-bump", 7, epoch=0),
        idempotent_produce("new-epoch-sequence-0", 0, epoch=1),
        idempotent_produce("new-epoch-not-from-0", 3, epoch=1),
        *[idempotent_produce(f"produce-v{v}", v, epoch=1, version=v) for v in range(3, 12) if v != 3],
        Step("non-idempotent-with-sequence", PRODUCE, 9, lambda c: produce(c.topic(), 0, batch([b"x"], -1, -1, 0))),
        init("zero-timeout", {**INIT, "transaction_timeout": 0}),
    ]),
]
