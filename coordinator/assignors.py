"""The server-side assignors of KIP-848 consumer groups: `uniform` and `range`.

An assignor maps the group's members to partitions. It sees each member's subscription
(topic ids, already resolved from names and regexes), the partition count of every
subscribed topic, and the group's previous target assignment, and returns the new
target: every partition some member subscribes to goes to exactly one such member.

- `uniform` (Kafka's default, UniformAssignor): as even as the subscriptions allow,
  and sticky: a member keeps what it had as long as that keeps the counts within one
  of each other, so a rebalance moves as few partitions as it can.
- `range` (RangeAssignor): per topic, the subscribed members in member-id order take
  contiguous ranges, the first ones one partition more when it does not divide.

Kafka's uniform assignor balances heterogeneous subscriptions with a more elaborate
builder; this one balances by moving single partitions from the fullest eligible
member to the emptiest until no move narrows the gap, which gives the same counts for
homogeneous groups and near-even ones otherwise.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass

# topic id -> partitions
Assignment = dict[uuid.UUID, frozenset[int]]


@dataclass(frozen=True, slots=True)
class AssignmentSpec:
    """What an assignor gets: the members' subscriptions and the subscribed topics'
    partition counts."""

    subscriptions: Mapping[str, frozenset[uuid.UUID]]  # member id -> topic ids
    partition_counts: Mapping[uuid.UUID, int]  # topic id -> partitions
    previous: Mapping[str, Assignment]  # member id -> its previous target


def _as_assignment(partitions: dict[uuid.UUID, set[int]]) -> Assignment:
    return {topic: frozenset(ps) for topic, ps in partitions.items() if ps}


def uniform(spec: AssignmentSpec) -> dict[str, Assignment]:
    members = sorted(spec.subscriptions)
    owned: dict[str, dict[uuid.UUID, set[int]]] = {m: {} for m in members}
    count = dict.fromkeys(members, 0)
    taken: set[tuple[uuid.UUID, int]] = set()
    # 1. Stickiness: each member keeps what it had and may still have.
    for member in members:
        for topic, partitions in spec.previous.get(member, {}).items():
            if topic not in spec.subscriptions[member]:
                continue
            for p in partitions:
                if p < spec.partition_counts.get(topic, 0) and (topic, p) not in taken:
                    taken.add((topic, p))
                    owned[member].setdefault(topic, set()).add(p)
                    count[member] += 1
    # 2. The rest goes to the eligible member with the fewest partitions.
    subscribers: dict[uuid.UUID, list[str]] = {}
    for member in members:
        for topic in spec.subscriptions[member]:
            if topic in spec.partition_counts:
                subscribers.setdefault(topic, []).append(member)
    for topic in sorted(subscribers):
        for p in range(spec.partition_counts[topic]):
            if (topic, p) in taken:
                continue
            member = min(subscribers[topic], key=lambda m: (count[m], m))
            owned[member].setdefault(topic, set()).add(p)
            count[member] += 1
    # 3. Balance: move one partition at a time from a member to an eligible one holding
    # at least two fewer. Each move lowers the sum of squared counts, so this ends.
    moved = True
    while moved:
        moved = False
        for member in sorted(members, key=lambda m: -count[m]):
            for topic in sorted(owned[member]):
                eligible = subscribers[topic]
                target = min(eligible, key=lambda m: (count[m], m))
                while owned[member].get(topic) and count[target] + 1 < count[member]:
                    p = max(owned[member][topic])
                    owned[member][topic].discard(p)
                    owned[target].setdefault(topic, set()).add(p)
                    count[member] -= 1
                    count[target] += 1
                    moved = True
                    target = min(eligible, key=lambda m: (count[m], m))
    return {m: _as_assignment(owned[m]) for m in members}


def range_(spec: AssignmentSpec) -> dict[str, Assignment]:
    owned: dict[str, dict[uuid.UUID, set[int]]] = {m: {} for m in spec.subscriptions}
    topics = {t for subscribed in spec.subscriptions.values() for t in subscribed if t in spec.partition_counts}
    for topic in topics:
        subscribers = sorted(m for m, subscribed in spec.subscriptions.items() if topic in subscribed)
        partitions = spec.partition_counts[topic]
        quota, extra = divmod(partitions, len(subscribers))
        start = 0
        for i, member in enumerate(subscribers):
            size = quota + (1 if i < extra else 0)
            if size:
                owned[member][topic] = set(range(start, start + size))
            start += size
    return {m: _as_assignment(ps) for m, ps in owned.items()}


ASSIGNORS: dict[str, Callable[[AssignmentSpec], dict[str, Assignment]]] = {
    "uniform": uniform,
    "range": range_,
}
