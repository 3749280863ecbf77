"""The Producers page: what DescribeProducers knows, per partition."""

from __future__ import annotations

from ..html import dl, join, link, page, pager, search_form, table, tag, when
from ..params import Params
from .common import (
    PAGE_SIZE,
    PARTITIONS_PER_PAGE,
    ConsoleBroker,
    NotFound,
    filtered,
    lso_cell,
    lso_holder,
    txn_ids_by_producer,
)


def producers(broker: ConsoleBroker, params: Params) -> bytes:
    logs = broker.services.logs
    topic_name = params.text("topic")
    page_no = params.integer("page", 0, 0, 10**6)
    if not topic_name:
        query = params.text("q")
        with_state = [(name, sum(1 for p in logs.topics[name].partitions if p.producer_state.producers))
                      for name in filtered(logs.topics, query) if broker.may_describe_producers(name)]
        with_state = [(name, n) for name, n in with_state if n]
        rows = [[link(name, "producers", topic=name), n] for name, n in
                with_state[page_no * PAGE_SIZE:(page_no + 1) * PAGE_SIZE]]
        body = join([tag("p", "What DescribeProducers knows: per partition, the producer ids with their "
                              "epoch, last sequence, the 5 cached batches and the open transaction's first "
                              "offset."),
                     search_form("producers", query, "topic name contains"),
                     pager("producers", len(with_state), page_no, PAGE_SIZE, q=query),
                     table(["topic", "partitions with producer state"], rows, id_="producer-topics",
                           empty="no partition holds producer state")])
        return page("Producers", "producers", body)
    t = logs.topic(topic_name)
    if t is None:
        raise NotFound(f"no topic {topic_name!r}")
    wanted = params.text("partition")
    parts = [p for p in t.partitions if p.producer_state.producers and (not wanted or str(p.partition) == wanted)]
    txn_ids = txn_ids_by_producer(broker)
    sections = []
    for log in parts[page_no * PARTITIONS_PER_PAGE:(page_no + 1) * PARTITIONS_PER_PAGE]:
        ongoing = log.producer_state.ongoing_txns
        holder = lso_holder(log)
        rows = []
        for pid, entry in sorted(log.producer_state.producers.items()):
            first = ongoing.get(pid)
            batches = tag("ol", join(tag("li", f"seq {b.first_seq}–{b.last_seq} → offsets {b.first_offset:,}–"
                                               f"{b.last_offset:,}") for b in entry.batches), class_="batches")
            txn_id = txn_ids.get(pid)
            rows.append([
                join([str(pid), " ", link(f"({txn_id})", "transaction", id=txn_id)]) if txn_id else pid,
                entry.epoch, entry.last_seq, entry.coordinator_epoch, when(entry.last_timestamp), batches,
                (join([link(f"{first:,}", "messages", topic=t.name, partition=log.partition, offset=first),
                       tag("span", " holds the LSO", class_="held") if pid == holder else ""])
                 if first is not None else "–"),
            ])
        sections.append(join([
            tag("h2", f"{t.name}-{log.partition}"),
            dl([("last stable offset", lso_cell(log, txn_ids)), ("high watermark", f"{log.high_watermark:,}")]),
            table(["producer id", "epoch", "last sequence", "coordinator epoch", "last timestamp",
                   "cached batches (newest last)", "open transaction's first offset"], rows,
                  id_=f"producers-{log.partition}"),
        ]))
    body = join([pager("producers", len(parts), page_no, PARTITIONS_PER_PAGE, topic=t.name, partition=wanted),
                 join(sections) if sections else tag("p", "No producer state in this topic.")])
    return page(f"Producers of {t.name}", "producers", body)
