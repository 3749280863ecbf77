"""The Broker page (listeners, configs with their sources, request counts, faults) and
the counters its charts poll."""

from __future__ import annotations

from typing import Any

from ottla.broker.config_entries import ConfigSource, broker_config_entries
from ottla.broker.faults import FaultKind
from ottla.protocol.apis import SUPPORTED
from ottla.protocol.errors import KafkaError

from ..html import Markup, dl, join, page, table, tag, url
from ..params import Params
from .common import ConsoleBroker

_CONFIG_SOURCES = {ConfigSource.DYNAMIC_TOPIC_CONFIG: "topic override",
                   ConfigSource.DYNAMIC_BROKER_CONFIG: "dynamic (this broker)",
                   ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG: "dynamic (cluster default)",
                   ConfigSource.STATIC_BROKER_CONFIG: "static", ConfigSource.DEFAULT_CONFIG: "default"}


def broker_page(broker: ConsoleBroker, params: Params) -> bytes:
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
    # The page needs DESCRIBE_CONFIGS on the cluster (DescribeConfigs of the broker: the
    # configs and listeners, app.py); the log directory (DescribeLogDirs) and what
    # /metrics and /faults answer need DESCRIBE on it.
    cluster = broker.may_describe_cluster()
    facts: list[tuple[object, object]] = [("node id", services.node_id), ("cluster id", logs.cluster_id)]
    if cluster:
        facts += [("data directory", logs.data_dir), ("client connections", len(broker.connections))]
    facts += [("topics", len(logs.topics)), ("partitions", sum(len(t.partitions) for t in logs.topics.values()))]
    operations = join([
        tag("h2", "Rates"), charts,
        tag("h2", "Requests by API"), table(["API", "requests", "mean latency"], api_rows, id_="apis"),
        tag("h2", "Error codes answered"), table(["API", "error", "count"], error_rows, id_="errors",
                                                 empty="no error answered"),
        tag("h2", "Fault injection"),
        table(["id", "kind", "API", "topic", "partition", "error", "delay ms", "remaining", ""], fault_rows,
              id_="faults", empty="no fault set"),
        fault_form,
    ]) if cluster else tag("p", "Rates, request counts and faults need DESCRIBE on the cluster, as /metrics and "
                                "/faults do.", class_="note", id="metrics-refused")
    body = join([
        dl(facts),
        tag("h2", "Listeners"),
        table(["name", "security protocol", "bound", "advertised"], listeners, id_="listeners"),
        operations,
        tag("details", join([tag("summary", f"Configuration ({len(config_rows)} properties, with their sources)"),
                             table(["property", "value", "source"], config_rows, id_="config")]), class_="config"),
    ])
    return page("Broker", "broker", body)


def stats(broker: ConsoleBroker) -> dict[str, Any]:
    """The counters the Broker page's charts turn into rates (they difference two polls).

    Records appended are the high watermarks' sum over the clients' topics; records
    consumed, the committed offsets' sum over every group the viewer may DESCRIBE, as
    OffsetFetch answers it (the fetch path counts no records: it never decodes the
    batches it sends)."""
    metrics = broker.metrics
    api_names = {key: api.name for key, api in SUPPORTED.items()}
    records = 0
    for t in broker.services.logs.topics.values():
        if not t.internal:
            records += sum(p.high_watermark for p in t.partitions)
    groups = broker.services.groups
    consumed = 0
    try:
        for group_id in [g for g in groups.all_groups() if broker.may_describe_group(g)]:  # OffsetFetch's
            consumed += sum(o.offset for o, _ in groups.fetch_offsets(group_id, None, False).values() if o)
    except KafkaError:  # __consumer_offsets still loading
        pass
    requests = {api_names.get(key, str(key)): m.requests for key, m in metrics.apis.items()}
    return {"records": records, "consumed": consumed, "bytes_in": metrics.bytes_in, "bytes_out": metrics.bytes_out,
            "produce": requests.get("Produce", 0), "fetch": requests.get("Fetch", 0),
            "errors": sum(sum(m.errors.values()) for m in metrics.apis.values()), "requests": requests}
