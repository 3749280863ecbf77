"""Offsets per topic partition, in the JSON form Spark's Kafka source uses.

    {"orders": {"0": 23, "1": 7}, "payments": {"0": -2}}

Partition numbers are strings because JSON object keys are; -2 means "earliest" and -1
"latest", as in Spark. Offsets in this form are what Spark writes to the streaming
query's checkpoint (the `offsets/` log), so a restarted query resumes from them; the
connector never commits offsets to a consumer group.

Inside the connector the same information is a `PartitionOffsets`: a dict from
(topic, partition) to an offset. Everything here is plain arithmetic on those dicts,
with no client and no Spark, so it can be tested alone.
"""

from __future__ import annotations

import json

PartitionOffsets = dict[tuple[str, int], int]

EARLIEST = -2
LATEST = -1


class DataLossError(RuntimeError):
    """Offsets that were planned or checkpointed are no longer in the topic (deleted
    and recreated, or truncated). Raised when the `failOnDataLoss` option is true."""


def to_json(offsets: PartitionOffsets) -> dict[str, dict[str, int]]:
    """The checkpointable form: topic -> partition (as a string) -> offset."""
    nested: dict[str, dict[str, int]] = {}
    for (topic, partition), offset in sorted(offsets.items()):
        nested.setdefault(topic, {})[str(partition)] = offset
    return nested


def from_json(nested: dict[str, dict[str, int]]) -> PartitionOffsets:
    return {(topic, int(partition)): int(offset)
            for topic, partitions in nested.items() for partition, offset in partitions.items()}


def parse_spec(text: str, option: str) -> str | PartitionOffsets:
    """A startingOffsets / endingOffsets option: "earliest", "latest" or per-partition
    JSON (which may use -2 and -1 for one partition's earliest or latest)."""
    word = text.strip().lower()
    if word in ("earliest", "latest"):
        return word
    try:
        return from_json(json.loads(text))
    except (ValueError, AttributeError, TypeError) as exc:
        raise ValueError(f'{option} must be "earliest", "latest" or JSON like {{"topic": {{"0": 42}}}}, '
                         f"not {text!r}") from exc


def resolve(spec: str | PartitionOffsets, option: str, earliest: PartitionOffsets,
            latest: PartitionOffsets) -> PartitionOffsets:
    """Concrete offsets for every partition in `latest` from a parsed spec. JSON must name
    every partition, as Spark's Kafka source requires: a partition left out would
    otherwise be read from an offset nobody chose."""
    if spec == "earliest":
        return dict(earliest)
    if spec == "latest":
        return dict(latest)
    assert isinstance(spec, dict)
    missing = sorted(set(latest) - set(spec))
    if missing:
        raise ValueError(f"{option} names no offset for {', '.join(f'{t}-{p}' for t, p in missing)}; "
                         "JSON offsets must cover every partition of the subscribed topics")
    unknown = sorted(set(spec) - set(latest))
    if unknown:
        raise ValueError(f"{option} names partitions that do not exist: "
                         f"{', '.join(f'{t}-{p}' for t, p in unknown)}")
    return {tp: earliest[tp] if offset == EARLIEST else latest[tp] if offset == LATEST else offset
            for tp, offset in spec.items()}


def limit(start: PartitionOffsets, available: PartitionOffsets, max_offsets: int) -> PartitionOffsets:
    """End offsets that advance from `start` towards `available` by at most `max_offsets`
    offsets in all, shared among the partitions in proportion to what each has waiting.

    Spark's own Kafka source rounds small shares up and can exceed the limit; here the
    shares are rounded down and the remainder goes, one offset each, to the partitions
    with the largest fractions, so the total is never above the limit. Offsets are
    counted, not records: under read_committed some offsets are transaction markers or
    aborted records, so a batch holds at most `max_offsets` records, often fewer."""
    waiting = {tp: available[tp] - start[tp] for tp in available if available[tp] > start[tp]}
    total = sum(waiting.values())
    if total <= max_offsets:
        return dict(available)
    shares = {tp: max_offsets * size // total for tp, size in waiting.items()}
    remainder = max_offsets - sum(shares.values())
    by_fraction = sorted(waiting, key=lambda tp: (-(max_offsets * waiting[tp] % total), tp))
    for tp in by_fraction[:remainder]:
        shares[tp] += 1
    end = dict(available)
    for tp, share in shares.items():
        end[tp] = start[tp] + share
    return end


def continue_from(checkpointed: PartitionOffsets, earliest: PartitionOffsets, latest: PartitionOffsets,
                  fail_on_data_loss: bool) -> PartitionOffsets:
    """Where each current partition continues from, given the offsets a query has reached.

    A partition the query has not seen yet (a new partition, or a new topic matching
    subscribePattern) starts at its earliest offset, as in Spark. A checkpointed offset
    beyond the partition's end, or a partition that disappeared, means the topic was
    deleted or truncated since: an error, or with failOnDataLoss=false, a restart of
    that partition from its earliest offset (and the vanished one is dropped)."""
    gone = sorted(set(checkpointed) - set(latest))
    behind = sorted(tp for tp in checkpointed if tp in latest and checkpointed[tp] > latest[tp])
    if fail_on_data_loss and (gone or behind):
        problems = [f"{t}-{p} no longer exists" for t, p in gone]
        problems += [f"{t}-{p} ends at {latest[(t, p)]}, before the checkpointed offset {checkpointed[(t, p)]}"
                     for t, p in behind]
        raise DataLossError("; ".join(problems) + " (set failOnDataLoss=false to continue anyway)")
    return {tp: checkpointed[tp] if tp in checkpointed and tp not in behind else earliest[tp] for tp in latest}
