"""The console's pages of the built-in schema registry (schema_registry/):

    GET /console/schemas?q=&page=     subjects: type, latest version and id, versions
    GET /console/subject?name=        a subject's versions (soft-deleted ones marked),
                                      their ids, references and schema text

Read from the registry's state as `_schemas` built it. A principal sees a subject as the
registry lets it read one: with DESCRIBE on the topic the subject names
(schema_registry/access.py); a broker without security shows every subject.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from ottla.schema_registry.access import topic_of
from ottla.schema_registry.store import SchemaVersion

from ..html import Markup, dl, join, link, page, pager, search_form, table, tag
from ..params import Params
from .common import PAGE_SIZE, ConsoleBroker, NotFound


def _visible(broker: ConsoleBroker) -> Callable[[str], bool]:
    return lambda subject: broker.may_describe_topic(topic_of(subject))


def _off() -> bytes:
    return page("Schemas", "schemas", tag("p", "The schema registry is off: set schema.registry.listeners "
                                               "(make run serves it on http://127.0.0.1:8081)."))


def schemas(broker: ConsoleBroker, params: Params) -> bytes:
    if getattr(broker, "schema_registry", None) is None:
        return _off()
    state = broker.schema_store.state
    query = params.text("q")
    page_no = params.integer("page", 0, 0, 10**6)
    visible = _visible(broker)
    subjects = sorted(s for s in state.versions if query.lower() in s.lower() and visible(s))
    rows = []
    for subject in subjects[page_no * PAGE_SIZE:(page_no + 1) * PAGE_SIZE]:
        versions = [state.versions[subject][v] for v in sorted(state.versions[subject])]
        live = [v for v in versions if not v.deleted]
        latest = (live or versions)[-1]
        rows.append([link(subject, "subject", name=subject), latest.schema.schema_type, latest.version,
                     latest.schema_id, len(live), "deleted" if not live else ""])
    body = join([search_form("schemas", query, "subject contains"),
                 pager("schemas", len(subjects), page_no, PAGE_SIZE, q=query),
                 table(["subject", "type", "latest version", "id", "versions", ""], rows, id_="subjects",
                       empty="no subject matches")])
    return page("Schemas", "schemas", body)


def subject(broker: ConsoleBroker, params: Params) -> bytes:
    if getattr(broker, "schema_registry", None) is None:
        return _off()
    name = params.text("name")
    versions: dict[int, SchemaVersion] = broker.schema_store.state.versions.get(name, {})
    if not versions or not _visible(broker)(name):
        raise NotFound(f"no subject {name!r}")
    config = broker.schema_store.state.configs.get(name) or {}
    mode = broker.schema_store.state.modes.get(name)
    parts = [tag("h2", name), dl([("topic", link(topic_of(name), "topic", name=topic_of(name))),
                                  ("compatibility", config.get("compatibilityLevel", "the global level")),
                                  ("mode", mode or "the global mode")])]
    for number in sorted(versions, reverse=True):
        entry = versions[number]
        references = join(join([link(f"{r.name} ({r.subject} v{r.version})", "subject", name=r.subject),
                                Markup(" ")]) for r in entry.schema.references) or "none"
        parts.append(tag("h3", f"version {number}" + (" (soft-deleted)" if entry.deleted else ""),
                         id=f"v{number}"))
        parts.append(dl([("id", entry.schema_id), ("type", entry.schema.schema_type), ("references", references)]))
        parts.append(tag("pre", _pretty(entry.schema.text), class_="json"))
    return page(f"Subject {name}", "schemas", join(parts))


def _pretty(text: str) -> str:
    try:
        return json.dumps(json.loads(text), indent=2)
    except (ValueError, RecursionError):
        return text
