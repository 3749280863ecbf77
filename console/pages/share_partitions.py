"""A share group's share-partitions on its console page: each one's start and end
offsets and how many of its records are in each state, then the records in flight
(acquired, or available again after a delivery) with their delivery counts, holders
and lock expiry, at most RECORDS_SHOWN per share-partition. Only the topics the
console's principal may describe are shown (`services.logs.topics` is filtered so)."""

from __future__ import annotations

import time

from ottla.coordinator.share_partition import ACKNOWLEDGED, ACQUIRED, ARCHIVED, AVAILABLE

from ..html import Markup, join, table, tag
from .common import ConsoleBroker

RECORDS_SHOWN = 100
_STATE_NAMES = {AVAILABLE: "available", ACQUIRED: "acquired", ACKNOWLEDGED: "acknowledged", ARCHIVED: "archived"}


def share_partitions(broker: ConsoleBroker, group_id: str) -> Markup:
    services = broker.services
    shares = services.shares
    names = {t.topic_id: name for name, t in services.logs.topics.items()}
    now = time.monotonic()
    summary, records = [], []
    for key in shares.offsets_of(group_id):
        sp = shares.partitions[key]
        _, topic_id, partition = key
        if topic_id not in names:
            continue  # deleted, or a topic the signed-in principal may not describe
        topic = names[topic_id]
        in_flight = sp.in_flight()
        counts = {state: sum(1 for _, s, _, _ in in_flight if s == state) for state in _STATE_NAMES}
        summary.append([topic, partition, f"{sp.start_offset:,}", f"{sp.end_offset:,}", counts[ACQUIRED],
                        counts[AVAILABLE], counts[ACKNOWLEDGED], counts[ARCHIVED]])
        shown = [r for r in in_flight if r[1] in (ACQUIRED, AVAILABLE)][:RECORDS_SHOWN]
        for offset, state, count, lock in shown:
            records.append([topic, partition, f"{offset:,}", _STATE_NAMES[state], count,
                            lock.member_id if lock else "", f"{max(lock.deadline - now, 0):.1f} s" if lock else ""])
    return join([
        tag("h2", "Share-partitions"),
        table(["topic", "partition", "start offset", "end offset", "acquired", "available again", "acknowledged",
               "archived"], summary, id_="share-partitions", empty="no share-partition started"),
        tag("h2", "Records in flight"),
        table(["topic", "partition", "offset", "state", "delivery count", "held by", "lock expires in"], records,
              id_="share-records", empty="no record in flight"),
    ])
