"""The Topics page and one topic's page: partitions, segment files, configs."""

from __future__ import annotations

from ottla.storage.log import PartitionLog
from ottla.storage.log_config import TOPIC_CONFIGS, LogConfig
from ottla.storage.log_manager import Topic
from ottla.storage.segment import segment_file_name

from ..html import Markup, dl, join, link, page, pager, search_form, size_text, table, tag
from ..params import Params
from .common import (
    PAGE_SIZE,
    PARTITIONS_PER_PAGE,
    ConsoleBroker,
    NotFound,
    filtered,
    log_size,
    lso_cell,
    txn_ids_by_producer,
)

SEGMENTS_SHOWN = 20  # per partition on the topic page


def topics(broker: ConsoleBroker, params: Params) -> bytes:
    logs = broker.services.logs
    query = params.text("q")
    page_no = params.integer("page", 0, 0, 10**6)
    names = filtered(logs.topics, query)
    shown = names[page_no * PAGE_SIZE:(page_no + 1) * PAGE_SIZE]
    sizes = broker.may_describe_cluster()  # DescribeLogDirs
    rows = []
    for name in shown:
        topic = logs.topics[name]
        parts = topic.partitions
        held = sum(1 for p in parts if p.last_stable_offset < p.high_watermark)
        rows.append([link(name, "topic", name=name), len(parts), "internal" if topic.internal else "",
                     f"{sum(p.high_watermark - p.log_start_offset for p in parts):,}",
                     size_text(sum(log_size(p) for p in parts)) if sizes else "–",
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


def topic(broker: ConsoleBroker, params: Params) -> bytes:
    logs = broker.services.logs
    name = params.text("name")
    t = logs.topic(name)
    if t is None:
        raise NotFound(f"no topic {name!r}")
    page_no = params.integer("page", 0, 0, 10**6)
    txn_ids = txn_ids_by_producer(broker)
    parts = t.partitions[page_no * PARTITIONS_PER_PAGE:(page_no + 1) * PARTITIONS_PER_PAGE]
    holders = broker.may_describe_producers(name)
    files = broker.may_describe_cluster()  # DescribeLogDirs
    rows = []
    for log in parts:
        rows.append([
            log.partition, f"{log.log_start_offset:,}", lso_cell(log, txn_ids, holders), f"{log.high_watermark:,}",
            size_text(log_size(log)) if files else "–", _segments(log) if files else "–",
            join([link("messages", "messages", topic=t.name, partition=log.partition), " ",
                  link("producers", "producers", topic=t.name, partition=log.partition)]),
        ])
    configs = _configs(t) if broker.may_describe_configs(name) else tag(
        "p", "DescribeConfigs would refuse them: DESCRIBE_CONFIGS on the topic is needed.", class_="note",
        id="configs-refused")
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
        configs,
    ])
    return page(f"Topic {t.name}", "topics", body)


def _configs(t: Topic) -> Markup:
    defaults = LogConfig()
    config_rows = []
    for config_name in TOPIC_CONFIGS:
        value = t.config.value_text(config_name)
        source = "topic override" if config_name in t.configs else \
            "default" if value == defaults.value_text(config_name) else "broker"
        config_rows.append([config_name, value, source])
    return table(["config", "value", "source"], config_rows, id_="configs")


def _segments(log: PartitionLog) -> Markup:
    segments = log.segments
    items = [tag("li", f"{segment_file_name(s.base_offset, '.log')} ({size_text(s.size)}) and its indexes")
             for s in segments[-SEGMENTS_SHOWN:]]
    if len(segments) > SEGMENTS_SHOWN:
        items.insert(0, tag("li", f"… {len(segments) - SEGMENTS_SHOWN} older segments"))
    items += [tag("li", segment_file_name(o, ".snapshot")) for o in log.producer_state.snapshot_offsets()]
    return tag("details", join([tag("summary", f"{len(segments)} segment{'s' if len(segments) != 1 else ''}"),
                                tag("ul", join(items))]))
