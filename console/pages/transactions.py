"""The Transactions page and one transactional id's page, with its history in
`__transaction_state`."""

from __future__ import annotations

import struct
from collections import deque
from typing import Any

from ottla.coordinator.transaction_log import TOPIC as TXN_TOPIC
from ottla.coordinator.transaction_log import TxnState, decode_value, encode_key, partition_for
from ottla.protocol.batch import iter_records

from ..html import Markup, dl, esc, join, link, page, pager, table, tag, url, when
from ..params import Params
from .common import PAGE_SIZE, ConsoleBroker, NotFound, filtered, lso_holder

HISTORY_RECORDS = 5_000  # newest offsets of __transaction_state read for one id's history
HISTORY_SHOWN = 100  # of its records, the newest
_OPEN = (TxnState.ONGOING, TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT, TxnState.PREPARE_EPOCH_FENCE)


def transactions(broker: ConsoleBroker, params: Params) -> bytes:
    coordinator = broker.services.transactions
    logs = broker.services.logs
    query = params.text("q")
    state = params.text("state")
    page_no = params.integer("page", 0, 0, 10**6)
    all_txns = coordinator.records()
    ids = [i for i in filtered(all_txns, query) if not state or all_txns[i].state.kafka_name == state]
    rows, classes = [], []
    for txn_id in ids[page_no * PAGE_SIZE:(page_no + 1) * PAGE_SIZE]:
        txn = all_txns[txn_id]
        is_open = txn.state in _OPEN
        holds = [(t, p) for t, p in sorted(txn.partitions)
                 if is_open and broker.may_describe_producers(t) and _holds_lso(logs, t, p, txn.producer_id)]
        rows.append([link(txn_id, "transaction", id=txn_id), tag("span", txn.state.kafka_name, class_="state"),
                     txn.producer_id, txn.producer_epoch, when(txn.start_ms) if is_open else "–",
                     f"{txn.timeout_ms:,} ms", partition_links(sorted(txn.partitions)),
                     partition_links(holds, holds_lso=True) if holds else "–"])
        classes.append("open" if is_open else None)
    states = tag("select", join([tag("option", "any state", value="")] + [
        tag("option", s.kafka_name, value=s.kafka_name, selected="selected" if s.kafka_name == state else None)
        for s in TxnState]), name="state")
    form = tag("form", join([Markup(f'<input type="search" name="q" value="{esc(query)}" '
                                    'placeholder="transactional id contains">'), states,
                             Markup('<button type="submit">search</button>')]),
               method="get", action=url("transactions"), class_="search")
    body = join([form, pager("transactions", len(ids), page_no, PAGE_SIZE, q=query, state=state),
                 table(["transactional id", "state", "producer id", "epoch", "started", "timeout", "partitions",
                        "holds back the LSO of"], rows, id_="transactions", row_classes=classes,
                       empty="no transactional id matches")])
    return page("Transactions", "transactions", body)


def _holds_lso(logs: Any, topic_name: str, partition: int, producer_id: int) -> bool:
    log = logs.partition(topic_name, partition)
    return log is not None and lso_holder(log) == producer_id


def partition_links(partitions: list[tuple[str, int]], holds_lso: bool = False, limit: int = 20) -> Markup:
    items = [link(f"{t}-{p}", "topic", name=t) if not holds_lso else
             link(f"{t}-{p}", "messages", topic=t, partition=p, isolation="read_uncommitted") for t, p in
             partitions[:limit]]
    if len(partitions) > limit:
        items.append(esc(f"… {len(partitions) - limit} more"))
    return join(join([item, " "]) for item in items)


def transaction(broker: ConsoleBroker, params: Params) -> bytes:
    services = broker.services
    txn_id = params.text("id")
    txn = services.transactions.describe(txn_id)
    if txn is None:
        raise NotFound(f"no transactional id {txn_id!r}")
    is_open = txn.state in _OPEN
    rows = []
    for t, p in sorted(txn.partitions):
        log = services.logs.partition(t, p)
        if log is None:
            rows.append([f"{t}-{p}", "(deleted)", "", "", ""])
            continue
        # Where the transaction starts in the partition, and whether it holds the LSO back,
        # are DescribeProducers' answer (READ on the topic).
        producers_shown = broker.may_describe_producers(t)
        first = log.producer_state.ongoing_txns.get(txn.producer_id) if producers_shown else None
        holds = first is not None and lso_holder(log) == txn.producer_id
        rows.append([
            link(f"{t}-{p}", "topic", name=t),
            link(f"{first:,}", "messages", topic=t, partition=p, offset=first, isolation="read_uncommitted")
            if first is not None else "–",
            tag("span", f"{log.last_stable_offset:,}", class_="held") if holds else f"{log.last_stable_offset:,}",
            f"{log.high_watermark:,}",
            tag("span", f"yes: read_committed consumers stop at offset {log.last_stable_offset:,} "
                        f"({log.high_watermark - log.last_stable_offset:,} offsets held back)", class_="held")
            if holds else "no" if producers_shown else "–",
        ])
    summary = dl([("state", txn.state.kafka_name), ("producer id", txn.producer_id),
                  ("producer epoch", txn.producer_epoch), ("timeout", f"{txn.timeout_ms:,} ms"),
                  ("started", when(txn.start_ms) if is_open else "–"), ("last update", when(txn.last_update_ms)),
                  ("transaction version", txn.client_transaction_version)])
    body = join([summary, tag("h2", "Partitions in the transaction"),
                 table(["partition", "first offset of the transaction", "last stable offset", "high watermark",
                        "holds back the LSO"], rows, id_="txn-partitions",
                       empty="no partition (no transaction open)"),
                 tag("h2", f"History in {TXN_TOPIC}"), _history(broker, txn_id)])
    return page(f"Transaction {txn_id}", "transactions", body)


def _history(broker: ConsoleBroker, txn_id: str) -> Markup:
    """The records of `txn_id` in its `__transaction_state` partition, the newest
    HISTORY_RECORDS offsets of it at most (compaction may have removed older ones)."""
    if not broker.may_read_transaction_history():
        return tag("p", f"Reading it needs READ on {TXN_TOPIC}, as a Fetch of it would.", class_="note",
                   id="history-refused")
    logs = broker.services.logs
    internal = logs.topic(TXN_TOPIC)
    if internal is None:
        return tag("p", f"{TXN_TOPIC} does not exist yet")
    number = partition_for(txn_id, len(internal.partitions))
    log = internal.partitions[number]
    start = max(log.log_start_offset, log.high_watermark - HISTORY_RECORDS)
    key = encode_key(txn_id)
    found: deque[Any] = deque(maxlen=HISTORY_SHOWN)  # the newest records of this id
    count = 0
    for header, batch in log.batches(start):
        if header.is_control:
            continue
        for record in iter_records(batch):
            if record.offset >= start and record.key is not None and bytes(record.key) == key:
                found.append(record)
                count += 1
    rows = []
    for record in found:
        try:
            value = decode_value(bytes(record.value)) if record.value is not None else None
        except (ValueError, IndexError, UnicodeDecodeError, struct.error):
            rows.append([record.offset, when(record.timestamp), "(a value this broker cannot read)", "", "", "", ""])
            continue
        if value is None:
            rows.append([record.offset, when(record.timestamp), "(tombstone: id expired)", "", "", "", ""])
        else:
            rows.append([record.offset, when(record.timestamp), value.state.kafka_name, value.producer_id,
                         value.producer_epoch, partition_links(sorted(broker.describable(value.partitions))),
                         when(value.start_ms)])
    older = f"; the newest {HISTORY_SHOWN} of its {count} records shown" if count > HISTORY_SHOWN else ""
    note = tag("p", f"{TXN_TOPIC}-{number}, from offset {start:,}{older}", class_="note")
    return join([note, table(["offset", "written", "state", "producer id", "epoch", "partitions", "started"],
                             rows, id_="history", empty="no record of this id")])
