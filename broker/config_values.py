"""How a broker property's text becomes its value: the parsers `PROPERTIES`
(broker/config.py) names, each raising ValueError with what it expected."""

from __future__ import annotations

from collections.abc import Callable

from .security.authorizer import AUTHORIZER_CLASSES


def boolean(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("true", "1", "yes"):
        return True
    if lowered in ("false", "0", "no"):
        return False
    raise ValueError(f"expected true or false, got {text!r}")


def one_of(*choices: str) -> Callable[[str], str]:
    def parse(text: str) -> str:
        value = text.strip().lower()
        if value not in choices:
            raise ValueError(f"expected one of {', '.join(choices)}, got {text!r}")
        return value

    return parse


def tcp_port(text: str) -> int:
    value = int(text)
    if not 0 <= value <= 65535:
        raise ValueError(f"{value} is not a TCP port")
    return value


def http_listener(text: str) -> tuple[str, int]:
    """schema.registry.listeners: one http://host:port, as Confluent's `listeners` (one listener)."""
    scheme, _, address = text.strip().partition("://")
    host, _, port = address.rstrip("/").rpartition(":")
    if scheme.lower() != "http" or not host or "," in text:
        raise ValueError(f"expected one listener http://host:port, got {text!r}")
    return host.strip("[]"), tcp_port(port)


def assignors(text: str) -> tuple[str, ...]:
    """group.consumer.assignors: Kafka takes short names or the assignors' class names."""
    known = {"uniform": "uniform", "range": "range",
             "org.apache.kafka.coordinator.group.assignor.uniformassignor": "uniform",
             "org.apache.kafka.coordinator.group.assignor.rangeassignor": "range"}
    names = [n.strip().lower() for n in text.split(",") if n.strip()]
    if not names or any(n not in known for n in names):
        raise ValueError(f"expected a list of uniform and range, got {text!r}")
    return tuple(dict.fromkeys(known[n] for n in names))


def one_dir(text: str) -> str:
    # Kafka spreads partitions over several log.dirs; a single node keeps one.
    dirs = [d.strip() for d in text.split(",") if d.strip()]
    if len(dirs) != 1:
        raise ValueError(f"Ottla keeps its data in one directory, got {text!r}")
    return dirs[0]


def authorizer(text: str) -> str:
    value = text.strip()
    if value and value not in AUTHORIZER_CLASSES:
        raise ValueError(f"{value} is not an authorizer Ottla has; use {AUTHORIZER_CLASSES[0]}")
    return value


def at_least(least: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        value = int(text)
        if value < least:
            raise ValueError(f"must be at least {least}")
        return value
    return parse


def connection_overrides(text: str) -> dict[str, int]:
    """max.connections.per.ip.overrides, "host:count,host:count" (Kafka's map syntax; an
    IPv6 address before its last colon), as {host: count}. ValueError if malformed."""
    overrides: dict[str, int] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        host, sep, count = item.rpartition(":")
        if not sep or not host.strip() or not count.strip().isdigit():
            raise ValueError(f"expected host:count, got {item!r}")
        overrides[host.strip()] = int(count)
    return overrides


def checked_connection_overrides(text: str) -> str:
    connection_overrides(text)  # checked here; network/connection_quotas.py reads it
    return text
