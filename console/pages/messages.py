"""The Messages page: a partition's records from an offset or a time, and its live tail.
With the schema registry on, a key or value in Confluent's wire format is shown decoded
with its schema (schema_decoding.py) when the format is "auto"."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from ottla.schema_registry.access import topic_of

from ..html import Markup, dl, esc, join, link, page, tag, url, when
from ..params import Params
from ..records import DEFAULT_RECORDS, MAX_RECORDS, Row, read_slice
from ..schema_decoding import SchemaDecoder
from .common import BadRequest, ConsoleBroker, NotFound, lso_cell, txn_ids_by_producer

SHOWN_BYTES = 4096  # of a key or value as text; the rest is summarised
SHOWN_HEX_BYTES = 1024
SHOWN_HEADERS = 20  # per record
SHOWN_HEADER_BYTES = 256  # of a header's name or value
MAX_PAGE_BYTES = 2 * 1024 * 1024  # of rows on one Messages page; the rest is on the next


def messages(broker: ConsoleBroker, params: Params) -> bytes:
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
    txn_ids = txn_ids_by_producer(broker)
    summary = dl([("log start offset", f"{got.log_start_offset:,}"),
                  ("last stable offset", lso_cell(log, txn_ids)),
                  ("high watermark", f"{got.high_watermark:,}"),
                  ("isolation", isolation + (" (stops at the LSO; aborted records left out)" if read_committed
                                             else " (everything written; aborted records marked)"))])
    hidden = tag("p", f"{got.hidden_aborted} aborted record(s) left out, as a read_committed consumer "
                      "never sees them", class_="note") if got.hidden_aborted else Markup("")
    rows_html, cut_at = message_rows(got.rows, fmt, _decoder(broker, fmt))
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
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp() * 1000)


def messages_rows(broker: ConsoleBroker, params: Params) -> tuple[str, int]:
    """The live tail's next rows, as table rows, and the offset to ask from next."""
    log = broker.services.logs.partition(params.text("topic"), params.integer("partition", 0, 0, 10**6))
    if log is None:
        raise NotFound("no such partition")
    isolation = params.choice("isolation", ("read_uncommitted", "read_committed"))
    got = read_slice(log, params.integer("offset", 0, 0, 2**63 - 1), read_committed=isolation == "read_committed",
                     limit=params.integer("limit", DEFAULT_RECORDS, 1, MAX_RECORDS))
    fmt = params.choice("format", ("auto", "text", "json", "hex"))
    rows_html, cut_at = message_rows(got.rows, fmt, _decoder(broker, fmt))
    return rows_html, got.next_offset if cut_at is None else cut_at


_MESSAGE_HEADERS = ["offset", "timestamp", "key", "value", "headers", "producer id / epoch", "sequence", "transaction"]


def _messages_table(rows_html: str) -> Markup:
    head = join(tag("th", h) for h in _MESSAGE_HEADERS)
    if not rows_html:
        rows_html = tag("tr", tag("td", "nothing to show", colspan=len(_MESSAGE_HEADERS), class_="empty"))
    return Markup(f'<table id="messages"><thead><tr>{head}</tr></thead><tbody>{rows_html}</tbody></table>')


def _decoder(broker: ConsoleBroker, fmt: str) -> SchemaDecoder | None:
    """The page's decoder of Confluent's wire format: with the registry on, in "auto"; it
    reads a schema as the registry lets this viewer (DESCRIBE on a subject's topic)."""
    server = getattr(broker, "schema_registry", None)
    if fmt != "auto" or server is None:
        return None
    return SchemaDecoder(broker.schema_store.state, lambda subject: broker.may_describe_topic(topic_of(subject)),
                         server.registry.stored_parse)


def message_rows(rows: list[Row], fmt: str, decoder: SchemaDecoder | None = None) -> tuple[str, int | None]:
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
            cells = [row.offset, when(row.timestamp), _cell(row.key, fmt, decoder), _cell(row.value, fmt, decoder),
                     _headers(row.headers), producer, row.sequence if row.sequence >= 0 else "–", status]
        html_row = tag("tr", join(tag("td", c) for c in cells), class_=css, data_offset=row.offset)
        size += len(html_row)
        out.append(html_row)
    return "".join(out), None


def _cell(data: bytes | None, fmt: str, decoder: SchemaDecoder | None) -> Markup:
    """A key or value: decoded with its registered schema if it is in Confluent's wire
    format and the decoder can, else as `_payload` shows it (with the decoder's note)."""
    decoded = decoder.decode(data) if decoder is not None and data is not None else None
    if decoded is None:
        return _payload(data, fmt)
    note = tag("div", decoded.note, class_="note schema")
    if decoded.text is None:
        return join([note, _hex(data) if data is not None else Markup("")])
    return join([note, tag("pre", decoded.text, class_="json decoded")])


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
