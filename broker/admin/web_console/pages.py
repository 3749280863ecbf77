"""The console's pages, rendered on request from the broker's state.

Each function takes the broker (what `ConsoleBroker` describes) and the request's
query, reads what it shows at that moment, and returns the page. Nothing here runs
unless a page is asked for: the console keeps no state and no task of its own.

Lists are paginated (PAGE_SIZE rows) and searchable, so a page costs the same at 10
topics and at 1,000 topics of 10,000 partitions: a pass over names to filter them, then
work for the rows shown only.
"""

from __future__ import annotations

import json
import struct
from collections import deque
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Iterable, Protocol

from ottla.coordinator.consumer_group import ConsumerGroup
from ottla.coordinator.transaction_log import TOPIC as TXN_TOPIC
from ottla.coordinator.transaction_log import TxnState, decode_value, encode_key, partition_for
from ottla.protocol.apis import SUPPORTED
from ottla.protocol.batch import iter_records
from ottla.protocol.errors import KafkaError
from ottla.protocol.member_assignment import consumer_assignment
from ottla.storage.log import PartitionLog
from ottla.storage.log_config import TOPIC_CONFIGS, LogConfig
from ottla.storage.segment import segment_file_name

from ..faults import FaultKind
from ...config_entries import ConfigSource, broker_config_entries
from .html import Markup, dl, esc, join, link, page, pager, search_form, size_text, table, tag, url, when
from .params import Params
from .records import DEFAULT_RECORDS, MAX_RECORDS, Row, read_slice

if TYPE_CHECKING:
    from ...config import Listener
    from ..faults import Faults
    from ..metrics import Metrics
    from ...services import Services

PAGE_SIZE = 50
PARTITIONS_PER_PAGE = 100
OFFSETS_PER_PAGE = 200
SHOWN_BYTES = 4096  # of a key or value as text; the rest is summarised
SHOWN_HEX_BYTES = 1024
SHOWN_HEADERS = 20  # per record
SHOWN_HEADER_BYTES = 256  # of a header's name or value
MAX_PAGE_BYTES = 2 * 1024 * 1024  # of rows on one Messages page; the rest is on the next
SEGMENTS_SHOWN = 20  # per partition on the topic page
HISTORY_RECORDS = 5_000  # newest offsets of __transaction_state read for one id's history
HISTORY_SHOWN = 100  # of its records, the newest
_OPEN = (TxnState.ONGOING, TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT, TxnState.PREPARE_EPOCH_FENCE)
_CONFIG_SOURCES = {ConfigSource.DYNAMIC_TOPIC_CONFIG: "topic override",
                   ConfigSource.DYNAMIC_BROKER_CONFIG: "dynamic (this broker)",
                   ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG: "dynamic (cluster default)",
                   ConfigSource.STATIC_BROKER_CONFIG: "static", ConfigSource.DEFAULT_CONFIG: "default"}


class ConsoleBroker(Protocol):
    """What the console reads of the broker (server.Broker)."""

    services: "Services"
    metrics: "Metrics"
    faults: "Faults"
    listeners: list["Listener"]
    connections: set[Any]
    config_sources: dict[str, str]  # static setting -> its file, OTTLA_<KEY> variable or "command line"


class NotFound(Exception):
    """The thing a page is about does not exist (404 with this message)."""

    status = 404


class BadRequest(NotFound):
    """A parameter the page cannot use (400 with this message)."""

    status = 400


def _filtered(names: Iterable[str], query: str) -> list[str]:
    q = query.lower()
    return sorted(n for n in names if q in n.lower()) if q else sorted(names)


def _size(log: PartitionLog) -> int:
    return sum(segment.size for segment in log.segments)


def _txn_ids_by_producer(broker: "ConsoleBroker") -> dict[int, str]:
    try:
        return {txn.producer_id: txn_id for txn_id, txn in broker.services.transactions.transactions.items()}
    except AttributeError:
        return {}


def _lso_holder(log: PartitionLog) -> int | None:
    """The producer id whose open transaction sets the partition's LSO, if one does."""
    ongoing = log.producer_state.ongoing_txns
    if not ongoing:
        return None
    pid, first = min(ongoing.items(), key=lambda item: item[1])
    return pid if first < log.high_watermark else None


def _lso_cell(log: PartitionLog, txn_ids: dict[int, str]) -> Markup:
    lso = log.last_stable_offset
    holder = _lso_holder(log)
    if holder is None:
        return esc(f"{lso:,}")
    txn_id = txn_ids.get(holder)
    who = link(f"transaction {txn_id}", "transaction", id=txn_id) if txn_id is not None else \
        link(f"producer {holder}", "producers", topic=log.topic, partition=log.partition)
    return join([tag("span", f"{lso:,}", class_="held"), " held by ", who])


# --- Topics ---------------------------------------------------------------------------------


def topics(broker: "ConsoleBroker", params: Params) -> bytes:
    logs = broker.services.logs
    query = params.text("q")
    page_no = params.integer("page", 0, 0, 10**6)
    names = _filtered(logs.topics, query)
    shown = names[page_no * PAGE_SIZE:(page_no + 1) * PAGE_SIZE]
    rows = []
    for name in shown:
        topic = logs.topics[name]
        parts = topic.partitions
        held = sum(1 for p in parts if p.last_stable_offset < p.high_watermark)
        rows.append([link(name, "topic", name=name), len(parts), "internal" if topic.internal else "",
                     f"{sum(p.high_watermark - p.log_start_offset for p in parts):,}",
                     size_text(sum(_size(p) for p in parts)),
                     tag("span", f"{held} partition{'s' if held != 1 else ''} held back", class_="held")
                     if held else "–"])
    create = tag("form", join([
        tag("h2", "Create a topic"),
        Markup('<label>name <input name="name" required maxlength="249" pattern="[a-zA-Z0-9._-]+"></label>'),
        Markup('<label>partitions <input name="partitions" type="number" min="1" max="10000" value="1"></label>'),
        Markup('<label>configs <input name="configs" placeholder="retention.ms=86400000, cleanup.policy=compact">'
               '</label>'),
        Markup('<button type="submit">create</button>'),
    ]), id="create-topic", class_="action")
    body = join([
        search_form("topics", query, "topic name contains"),
        pager("topics", len(names), page_no, PAGE_SIZE, q=query),
        table(["topic", "partitions", "kind", "offsets kept", "size", "LSO"], rows, id_="topics",
              empty="no topic matches"),
        create,
    ])
    return page("Topics", "topics", body)


def topic(broker: "ConsoleBroker", params: Params) -> bytes:
    logs = broker.services.logs
    name = params.text("name")
    t = logs.topic(name)
    if t is None:
        raise NotFound(f"no topic {name!r}")
    page_no = params.integer("page", 0, 0, 10**6)
    txn_ids = _txn_ids_by_producer(broker)
    parts = t.partitions[page_no * PARTITIONS_PER_PAGE:(page_no + 1) * PARTITIONS_PER_PAGE]
    rows = []
    for log in parts:
        rows.append([
            log.partition, f"{log.log_start_offset:,}", _lso_cell(log, txn_ids), f"{log.high_watermark:,}",
            size_text(_size(log)), _segments(log),
            join([link("messages", "messages", topic=t.name, partition=log.partition), " ",
                  link("producers", "producers", topic=t.name, partition=log.partition)]),
        ])
    defaults = LogConfig()
    config_rows = []
    for config_name in TOPIC_CONFIGS:
        value = t.config.value_text(config_name)
        source = "topic override" if config_name in t.configs else \
            "default" if value == defaults.value_text(config_name) else "broker"
        config_rows.append([config_name, value, source])
    actions = Markup("") if t.internal else tag(
        "button", "delete topic", class_="danger", data_delete_topic=t.name)
    body = join([
        dl([("topic id", str(t.topic_id)), ("partitions", len(t.partitions)),
            ("internal", "yes (written by the coordinators only)" if t.internal else "no")]),
        actions,
        tag("h2", "Partitions"),
        pager("topic", len(t.partitions), page_no, PARTITIONS_PER_PAGE, name=t.name),
        table(["partition", "log start offset", "last stable offset", "high watermark", "size", "segment files", ""],
              rows, id_="partitions"),
        tag("h2", "Configs"),
        table(["config", "value", "source"], config_rows, id_="configs"),
    ])
    return page(f"Topic {t.name}", "topics", body)


def _segments(log: PartitionLog) -> Markup:
    segments = log.segments
    items = [tag("li", f"{segment_file_name(s.base_offset, '.log')} ({size_text(s.size)}) and its indexes")
             for s in segments[-SEGMENTS_SHOWN:]]
    if len(segments) > SEGMENTS_SHOWN:
        items.insert(0, tag("li", f"… {len(segments) - SEGMENTS_SHOWN} older segments"))
    items += [tag("li", segment_file_name(o, ".snapshot")) for o in log.producer_state.snapshot_offsets()]
    return tag("details", join([tag("summary", f"{len(segments)} segment{'s' if len(segments) != 1 else ''}"),
                                tag("ul", join(items))]))


# --- Messages -------------------------------------------------------------------------------


def messages(broker: "ConsoleBroker", params: Params) -> bytes:
    logs = broker.services.logs
    topic_name = params.text("topic")
    partition = params.integer("partition", 0, 0, 10**6)
    isolation = params.choice("isolation", ("read_uncommitted", "read_committed"))
    fmt = params.choice("format", ("auto", "text", "json", "hex"))
    limit = params.integer("limit", DEFAULT_RECORDS, 1, MAX_RECORDS)
    from_ts = params.text("timestamp")
    form = _messages_form(topic_name, partition, params.text("offset"), from_ts, isolation, fmt, limit)
    if not topic_name:
        return page("Messages", "messages", join([form, tag("p", "Choose a topic and a partition.")]))
    log = logs.partition(topic_name, partition)
    if log is None:
        raise NotFound(f"no partition {topic_name}-{partition}")
    start = params.integer("offset", log.log_start_offset, -1, 2**63 - 1)
    note = Markup("")
    if from_ts:
        ts = _timestamp(from_ts)
        found = log.offset_for_timestamp(ts)
        start = found[0] if found is not None else log.high_watermark
        note = tag("p", f"first record at or after {from_ts}: offset {start}", class_="note")
    read_committed = isolation == "read_committed"
    got = read_slice(log, start, read_committed=read_committed, limit=limit)
    txn_ids = _txn_ids_by_producer(broker)
    summary = dl([("log start offset", f"{got.log_start_offset:,}"),
                  ("last stable offset", _lso_cell(log, txn_ids)),
                  ("high watermark", f"{got.high_watermark:,}"),
                  ("isolation", isolation + (" (stops at the LSO; aborted records left out)" if read_committed
                                             else " (everything written; aborted records marked)"))])
    hidden = tag("p", f"{got.hidden_aborted} aborted record(s) left out, as a read_committed consumer "
                      "never sees them", class_="note") if got.hidden_aborted else Markup("")
    rows_html, cut_at = message_rows(got.rows, fmt)
    next_offset = got.next_offset if cut_at is None else cut_at
    more = dict(topic=topic_name, partition=partition, isolation=isolation, format=fmt, limit=limit)
    nav = join([link("« from the start", "messages", **more, offset=got.log_start_offset), " ",
                link("next page »", "messages", **more, offset=next_offset)])
    tail = tag("button", "live tail", id="tail", type="button",
               data_tail=url("messages/rows", **more, offset=next_offset))
    body = join([form, summary, note, hidden, tag("div", join([nav, " ", tail]), class_="pager"),
                 _messages_table(rows_html)])
    return page(f"Messages of {topic_name}-{partition}", "messages", body)


def _timestamp(text: str) -> int:
    """Milliseconds since the epoch, from digits or an ISO time (UTC unless it says)."""
    if text.strip().lstrip("-").isdigit():
        return int(text)
    try:
        moment = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise BadRequest(f"not a time: {text!r} (use 2026-11-24T01:00:00Z or milliseconds)") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return int(moment.timestamp() * 1000)


def messages_rows(broker: "ConsoleBroker", params: Params) -> tuple[str, int]:
    """The live tail's next rows, as table rows, and the offset to ask from next."""
    log = broker.services.logs.partition(params.text("topic"), params.integer("partition", 0, 0, 10**6))
    if log is None:
        raise NotFound("no such partition")
    isolation = params.choice("isolation", ("read_uncommitted", "read_committed"))
    got = read_slice(log, params.integer("offset", 0, 0, 2**63 - 1), read_committed=isolation == "read_committed",
                     limit=params.integer("limit", DEFAULT_RECORDS, 1, MAX_RECORDS))
    rows_html, cut_at = message_rows(got.rows, params.choice("format", ("auto", "text", "json", "hex")))
    return rows_html, got.next_offset if cut_at is None else cut_at


_MESSAGE_HEADERS = ["offset", "timestamp", "key", "value", "headers", "producer id / epoch", "sequence", "transaction"]


def _messages_table(rows_html: str) -> Markup:
    head = join(tag("th", h) for h in _MESSAGE_HEADERS)
    if not rows_html:
        rows_html = tag("tr", tag("td", "nothing to show", colspan=len(_MESSAGE_HEADERS), class_="empty"))
    return Markup(f'<table id="messages"><thead><tr>{head}</tr></thead><tbody>{rows_html}</tbody></table>')


def message_rows(rows: list[Row], fmt: str) -> tuple[str, int | None]:
    """The rows as table rows, at most MAX_PAGE_BYTES of them, and the offset of the first
    row left out for that (None: all are in)."""
    out: list[str] = []
    size = 0
    for row in rows:
        if size > MAX_PAGE_BYTES:
            return "".join(out), row.offset
        producer = f"{row.producer_id} / {row.producer_epoch}" if row.producer_id >= 0 else "–"
        if row.kind != "record":
            css = f"marker {row.kind.lower()}"
            cells = [row.offset, when(row.timestamp), tag("span", f"{row.kind} marker", class_="badge"),
                     "control record: ends the transaction of producer "
                     f"{row.producer_id} in this partition", "", producer, "–", row.kind]
        else:
            css = row.txn or "plain"
            status = tag("span", row.txn, class_=f"badge {row.txn}") if row.txn else "–"
            cells = [row.offset, when(row.timestamp), _payload(row.key, fmt), _payload(row.value, fmt),
                     _headers(row.headers), producer, row.sequence if row.sequence >= 0 else "–", status]
        html_row = tag("tr", join(tag("td", c) for c in cells), class_=css, data_offset=row.offset)
        size += len(html_row)
        out.append(html_row)
    return "".join(out), None


def _payload(data: bytes | None, fmt: str, shown: int = SHOWN_BYTES) -> Markup:
    """A key, value or header value: as text if it is UTF-8 (pretty-printed if it is
    JSON), else as hex; at most `shown` bytes of it."""
    if data is None:
        return tag("span", "null", class_="null")
    extra = len(data) - shown
    if fmt in ("auto", "text", "json"):
        text = _utf8_prefix(data, shown)
        if text is None and fmt != "auto":
            return join([tag("span", "not UTF-8:", class_="note"), " ", _hex(data)])
        if text is not None:
            if fmt in ("auto", "json") and extra <= 0 and text[:1] in "{[":
                try:
                    pretty = json.dumps(json.loads(text), indent=2, ensure_ascii=False)
                except (ValueError, RecursionError):  # not JSON, or nested deeper than Python parses
                    pretty = None
                # Indentation grows with nesting: a deeply nested value is shown as it came.
                if pretty is not None and len(pretty) <= 4 * shown:
                    return tag("pre", pretty, class_="json")
            rest = len(data) - len(text.encode())
            more = tag("span", f" … {rest:,} more bytes", class_="note") if rest > 0 else Markup("")
            return join([tag("span", text, class_="text"), more])
    return _hex(data)


def _utf8_prefix(data: bytes, limit: int) -> str | None:
    """The first `limit` bytes as text, less a character the limit cut in two; None if
    they are not UTF-8."""
    for cut in range(4 if len(data) > limit else 1):
        try:
            return data[:limit - cut].decode("utf-8")
        except UnicodeDecodeError:
            continue
    return None


def _hex(data: bytes) -> Markup:
    shown = data[:SHOWN_HEX_BYTES]
    more = f" … {len(data) - len(shown):,} more bytes" if len(data) > len(shown) else ""
    return join([tag("code", shown.hex(" "), class_="hex"), tag("span", more, class_="note") if more else ""])


def _headers(headers: tuple[tuple[str, bytes | None], ...]) -> Markup:
    if not headers:
        return Markup("")
    items = [tag("li", join([tag("b", name[:SHOWN_HEADER_BYTES]), ": ", _payload(value, "auto", SHOWN_HEADER_BYTES)]))
             for name, value in headers[:SHOWN_HEADERS]]
    if len(headers) > SHOWN_HEADERS:
        items.append(tag("li", f"… {len(headers) - SHOWN_HEADERS} more headers", class_="note"))
    return tag("ul", join(items), class_="headers")


def _messages_form(topic_name: str, partition: int, offset: str, timestamp: str, isolation: str, fmt: str,
                   limit: int) -> Markup:
    def select(name: str, options: tuple[str, ...], current: str) -> Markup:
        return tag("select", join(tag("option", o, value=o, selected="selected" if o == current else None)
                                  for o in options), name=name)

    return tag("form", join([
        Markup(f'<label>topic <input name="topic" value="{esc(topic_name)}" required></label>'),
        Markup(f'<label>partition <input name="partition" type="number" min="0" value="{partition}"></label>'),
        Markup(f'<label>from offset <input name="offset" value="{esc(offset)}" placeholder="log start"></label>'),
        Markup(f'<label>or from time <input name="timestamp" value="{esc(timestamp)}" '
               'placeholder="2026-11-24T01:00:00Z or ms"></label>'),
        tag("label", join(["isolation ", select("isolation", ("read_uncommitted", "read_committed"), isolation)])),
        tag("label", join(["value as ", select("format", ("auto", "text", "json", "hex"), fmt)])),
        Markup(f'<label>rows <input name="limit" type="number" min="1" max="{MAX_RECORDS}" value="{limit}"></label>'),
        Markup('<button type="submit">show</button>'),
    ]), method="get", action=url("messages"), class_="search")


# --- Transactions -----------------------------------------------------------------------------


def transactions(broker: "ConsoleBroker", params: Params) -> bytes:
    coordinator = broker.services.transactions
    logs = broker.services.logs
    query = params.text("q")
    state = params.text("state")
    page_no = params.integer("page", 0, 0, 10**6)
    all_txns = coordinator.transactions
    ids = [i for i in _filtered(all_txns, query) if not state or all_txns[i].state.kafka_name == state]
    rows, classes = [], []
    for txn_id in ids[page_no * PAGE_SIZE:(page_no + 1) * PAGE_SIZE]:
        txn = all_txns[txn_id]
        is_open = txn.state in _OPEN
        holds = [(t, p) for t, p in sorted(txn.partitions) if is_open and _holds_lso(logs, t, p, txn.producer_id)]
        rows.append([link(txn_id, "transaction", id=txn_id), tag("span", txn.state.kafka_name, class_="state"),
                     txn.producer_id, txn.producer_epoch, when(txn.start_ms) if is_open else "–",
                     f"{txn.timeout_ms:,} ms", _partition_links(sorted(txn.partitions)),
                     _partition_links(holds, holds_lso=True) if holds else "–"])
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
    return log is not None and _lso_holder(log) == producer_id


def _partition_links(partitions: list[tuple[str, int]], holds_lso: bool = False, limit: int = 20) -> Markup:
    items = [link(f"{t}-{p}", "topic", name=t) if not holds_lso else
             link(f"{t}-{p}", "messages", topic=t, partition=p, isolation="read_uncommitted") for t, p in
             partitions[:limit]]
    if len(partitions) > limit:
        items.append(esc(f"… {len(partitions) - limit} more"))
    return join(join([item, " "]) for item in items)


def transaction(broker: "ConsoleBroker", params: Params) -> bytes:
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
        first = log.producer_state.ongoing_txns.get(txn.producer_id)
        holds = first is not None and _lso_holder(log) == txn.producer_id
        rows.append([
            link(f"{t}-{p}", "topic", name=t),
            link(f"{first:,}", "messages", topic=t, partition=p, offset=first, isolation="read_uncommitted")
            if first is not None else "–",
            tag("span", f"{log.last_stable_offset:,}", class_="held") if holds else f"{log.last_stable_offset:,}",
            f"{log.high_watermark:,}",
            tag("span", f"yes: read_committed consumers stop at offset {log.last_stable_offset:,} "
                        f"({log.high_watermark - log.last_stable_offset:,} offsets held back)", class_="held")
            if holds else "no",
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


def _history(broker: "ConsoleBroker", txn_id: str) -> Markup:
    """The records of `txn_id` in its `__transaction_state` partition, the newest
    HISTORY_RECORDS offsets of it at most (compaction may have removed older ones)."""
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
                         value.producer_epoch, _partition_links(sorted(value.partitions)), when(value.start_ms)])
    older = f"; the newest {HISTORY_SHOWN} of its {count} records shown" if count > HISTORY_SHOWN else ""
    note = tag("p", f"{TXN_TOPIC}-{number}, from offset {start:,}{older}", class_="note")
    return join([note, table(["offset", "written", "state", "producer id", "epoch", "partitions", "started"],
                             rows, id_="history", empty="no record of this id")])


# --- Producers --------------------------------------------------------------------------------


def producers(broker: "ConsoleBroker", params: Params) -> bytes:
    logs = broker.services.logs
    topic_name = params.text("topic")
    page_no = params.integer("page", 0, 0, 10**6)
    if not topic_name:
        query = params.text("q")
        with_state = [(name, sum(1 for p in logs.topics[name].partitions if p.producer_state.producers))
                      for name in _filtered(logs.topics, query)]
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
    txn_ids = _txn_ids_by_producer(broker)
    sections = []
    for log in parts[page_no * PARTITIONS_PER_PAGE:(page_no + 1) * PARTITIONS_PER_PAGE]:
        ongoing = log.producer_state.ongoing_txns
        holder = _lso_holder(log)
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
            dl([("last stable offset", _lso_cell(log, txn_ids)), ("high watermark", f"{log.high_watermark:,}")]),
            table(["producer id", "epoch", "last sequence", "coordinator epoch", "last timestamp",
                   "cached batches (newest last)", "open transaction's first offset"], rows,
                  id_=f"producers-{log.partition}"),
        ]))
    body = join([pager("producers", len(parts), page_no, PARTITIONS_PER_PAGE, topic=t.name, partition=wanted),
                 join(sections) if sections else tag("p", "No producer state in this topic.")])
    return page(f"Producers of {t.name}", "producers", body)


# --- Consumer groups --------------------------------------------------------------------------


def groups(broker: "ConsoleBroker", params: Params) -> bytes:
    coordinator = broker.services.groups
    query = params.text("q")
    page_no = params.integer("page", 0, 0, 10**6)
    ids = _filtered(coordinator.groups, query)
    rows = []
    for group_id in ids[page_no * PAGE_SIZE:(page_no + 1) * PAGE_SIZE]:
        group = coordinator.groups[group_id]
        rows.append([link(group_id, "group", id=group_id), group.type.value, group.protocol_type or "",
                     group.state_name, len(_members(group))])
    body = join([search_form("groups", query, "group id contains"),
                 pager("groups", len(ids), page_no, PAGE_SIZE, q=query),
                 table(["group", "type", "protocol type", "state", "members"], rows, id_="groups",
                       empty="no group matches")])
    return page("Consumer groups", "groups", body)


def _members(group: Any) -> list[Any]:
    """A group's members, whatever kind of group (classic or KIP-848 consumer) it is."""
    return list(group.members.values())


def _member_row(group: Any, member: Any, topic_names: dict[object, str]) -> list[object]:
    """member id, instance id, client id, host, and what it is assigned: a consumer group's
    member holds partitions by topic id (named here); a classic member holds the bytes
    its leader assigned, readable when the protocol type is "consumer"."""
    if isinstance(group, ConsumerGroup):
        pairs = sorted((topic_names.get(t, str(t)), sorted(ps)) for t, ps in member.assigned.items())
        return [member.member_id, member.instance_id or "", member.client_id, member.client_host,
                _topic_partitions(pairs)]
    return [member.member_id, member.group_instance_id or "", member.client_id, member.client_host,
            _classic_assignment(member.assignment, group.protocol_type)]


def _classic_assignment(value: bytes, protocol_type: str | None) -> Markup:
    if not value:
        return Markup("")
    if protocol_type == "consumer":
        try:
            return _topic_partitions(consumer_assignment(bytes(value)))
        except (struct.error, IndexError, UnicodeDecodeError):
            pass
    return tag("code", bytes(value[:256]).hex(" "), class_="hex")


def _topic_partitions(pairs: list[tuple[str, list[int]]]) -> Markup:
    return join(join([tag("b", t), f" {', '.join(map(str, ps))}", Markup("<br>")]) for t, ps in pairs)


def group(broker: "ConsoleBroker", params: Params) -> bytes:
    services = broker.services
    group_id = params.text("id")
    g = services.groups.groups.get(group_id)
    committed = services.groups.fetch_offsets(group_id, None, False)
    if g is None and not committed:
        raise NotFound(f"no group {group_id!r}")
    facts: list[tuple[object, object]] = []
    members = []
    if g is not None:
        facts = [("type", g.type.value), ("protocol type", g.protocol_type or "–"), ("state", g.state_name)]
        for attribute, label in (("generation", "generation"), ("group_epoch", "group epoch"),
                                 ("protocol_name", "assignor"), ("leader_id", "leader")):
            value = getattr(g, attribute, None)
            if value is not None:
                facts.append((label, value))
        topic_names = services.groups.topic_names()
        members = [_member_row(g, m, topic_names) for m in _members(g)]
    page_no = params.integer("page", 0, 0, 10**6)
    # Lag as kafka-consumer-groups gives it: log end offset (the high watermark) less the
    # committed offset; beside it, what a read_committed consumer can still read: up to the LSO.
    lags = []
    for (t, p), (offset, _error) in sorted(committed.items()):
        log = services.logs.partition(t, p)
        if log is None or offset is None:
            lags.append((t, p, offset, log, None, None))
            continue
        lags.append((t, p, offset, log, log.high_watermark - offset.offset,
                     max(0, log.last_stable_offset - offset.offset)))
    shown = lags[page_no * OFFSETS_PER_PAGE:(page_no + 1) * OFFSETS_PER_PAGE]
    rows = [[link(t, "topic", name=t), p, f"{offset.offset:,}" if offset else "–",
             f"{log.high_watermark:,}" if log is not None else "(deleted)",
             f"{lag:,}" if lag is not None else "–", f"{committed_lag:,}" if committed_lag is not None else "–",
             offset.metadata if offset else ""]
            for t, p, offset, log, lag, committed_lag in shown]
    facts.append(("total lag", tag("span", f"{sum(lag[4] or 0 for lag in lags):,}", id="total-lag")))
    body = join([dl(facts), tag("h2", "Members"),
                 table(["member id", "instance id", "client id", "host", "assignment"], members, id_="members",
                       empty="no member"),
                 tag("h2", "Committed offsets and lag"),
                 pager("group", len(lags), page_no, OFFSETS_PER_PAGE, id=group_id),
                 table(["topic", "partition", "committed offset", "log end offset", "lag",
                        "lag to the LSO (read_committed)", "metadata"], rows,
                       id_="offsets", empty="no committed offset")])
    return page(f"Group {group_id}", "groups", body)


# --- Broker -----------------------------------------------------------------------------------


def broker_page(broker: "ConsoleBroker", params: Params) -> bytes:
    services = broker.services
    listeners = [[listener.name, listener.security_protocol, f"{listener.bind_host}:{listener.port}",
                  "{}:{}".format(*listener.advertised_address)] for listener in broker.listeners]
    config_rows = []
    for entry in broker_config_entries(services, None):
        value = "(sensitive)" if entry["is_sensitive"] else entry["value"]
        source = _CONFIG_SOURCES.get(entry["config_source"], "")
        if entry["config_source"] == ConfigSource.STATIC_BROKER_CONFIG and entry["name"] in broker.config_sources:
            source = f"static: {broker.config_sources[entry['name']]}"
        config_rows.append([entry["name"], value, source])
    api_names = {key: api.name for key, api in SUPPORTED.items()}
    metrics = broker.metrics
    api_rows = [[api_names.get(key, key), f"{m.requests:,}",
                 f"{(m.seconds / m.requests * 1000 if m.requests else 0):.2f} ms"]
                for key, m in sorted(metrics.apis.items())]
    error_rows = [[api_names.get(key, key), code.name.upper(), f"{n:,}"]
                  for key, m in sorted(metrics.apis.items()) for code, n in sorted(m.errors.items())]
    charts = tag("div", join(
        tag("figure", join([tag("figcaption", label), tag("div", "", class_="chart", data_series=series)]))
        for series, label in (("records", "records appended / s"), ("consumed", "records consumed / s (as committed)"),
                              ("bytes_in", "bytes in / s"), ("bytes_out", "bytes out / s"),
                              ("produce", "Produce requests / s"), ("fetch", "Fetch requests / s"),
                              ("errors", "error codes / s"))),
        class_="charts", data_stats=url("stats"))
    faults = broker.faults.active()
    fault_rows = [[f.id, f.kind, f.api or "any", f.topic or "", "" if f.partition is None else f.partition,
                   f.error or "", "" if f.delay_ms is None else f.delay_ms, f.remaining,
                   tag("button", "remove", type="button", data_remove_fault=f.id)] for f in faults]
    fault_form = tag("form", join([
        tag("label", join(["kind ", tag("select", join(tag("option", k.value, value=k.value) for k in FaultKind),
                                        name="kind")])),
        tag("label", join(["API ", tag("select", join([tag("option", "(default)", value="")] + [
            tag("option", api.name, value=api.name) for api in sorted(SUPPORTED.values(), key=lambda a: a.name)]),
            name="api")])),
        Markup('<label>topic <input name="topic"></label>'),
        Markup('<label>partition <input name="partition" type="number" min="0"></label>'),
        Markup('<label>count <input name="count" type="number" min="1" value="1"></label>'),
        Markup('<label>error <input name="error" placeholder="NOT_LEADER_OR_FOLLOWER"></label>'),
        Markup('<label>delay ms <input name="delay_ms" type="number" min="0"></label>'),
        Markup('<button type="submit">inject</button>'),
    ]), id="add-fault", class_="action")
    logs = services.logs
    body = join([
        dl([("node id", services.node_id), ("cluster id", logs.cluster_id), ("data directory", logs.data_dir),
            ("client connections", len(broker.connections)), ("topics", len(logs.topics)),
            ("partitions", sum(len(t.partitions) for t in logs.topics.values()))]),
        tag("h2", "Listeners"),
        table(["name", "security protocol", "bound", "advertised"], listeners, id_="listeners"),
        tag("h2", "Rates"), charts,
        tag("h2", "Requests by API"), table(["API", "requests", "mean latency"], api_rows, id_="apis"),
        tag("h2", "Error codes answered"), table(["API", "error", "count"], error_rows, id_="errors",
                                                 empty="no error answered"),
        tag("h2", "Fault injection"),
        table(["id", "kind", "API", "topic", "partition", "error", "delay ms", "remaining", ""], fault_rows,
              id_="faults", empty="no fault set"),
        fault_form,
        tag("details", join([tag("summary", f"Configuration ({len(config_rows)} properties, with their sources)"),
                             table(["property", "value", "source"], config_rows, id_="config")]), class_="config"),
    ])
    return page("Broker", "broker", body)


def stats(broker: "ConsoleBroker") -> dict[str, Any]:
    """The counters the Broker page's charts turn into rates (they difference two polls).

    Records appended are the high watermarks' sum over the clients' topics; records
    consumed, the committed offsets' sum over every group (the fetch path counts no
    records: it never decodes the batches it sends)."""
    metrics = broker.metrics
    api_names = {key: api.name for key, api in SUPPORTED.items()}
    records = 0
    for t in broker.services.logs.topics.values():
        if not t.internal:
            records += sum(p.high_watermark for p in t.partitions)
    groups = broker.services.groups
    consumed = 0
    try:
        for group_id in list(groups.groups):
            consumed += sum(o.offset for o, _ in groups.fetch_offsets(group_id, None, False).values() if o)
    except KafkaError:  # __consumer_offsets still loading
        pass
    requests = {api_names.get(key, str(key)): m.requests for key, m in metrics.apis.items()}
    return {"records": records, "consumed": consumed, "bytes_in": metrics.bytes_in, "bytes_out": metrics.bytes_out,
            "produce": requests.get("Produce", 0), "fetch": requests.get("Fetch", 0),
            "errors": sum(sum(m.errors.values()) for m in metrics.apis.values()), "requests": requests}


def error_page(status: int, message: str) -> bytes:
    title = {404: "Not found", 400: "Bad request", 503: "Not available"}.get(status, "Error")
    return page(title, "", tag("p", message, class_="error"))


def handle_kafka_error(exc: KafkaError) -> bytes:
    return page("Not available", "", tag("p", f"{exc.code.name.upper()}: {exc.message}", class_="error"))
