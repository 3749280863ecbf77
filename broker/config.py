"""Broker settings, under Kafka's property names and with Kafka's defaults.

Three things say what can be configured: `PROPERTIES` (settings of the broker itself,
Kafka's and the few of Ottla's own), storage's `TOPIC_CONFIGS`, whose broker
properties (`log.segment.bytes`, `log.retention.ms`, ...) give the defaults of every
topic, and the listener properties (`listeners`, `advertised.listeners`,
`listener.security.protocol.map`), which are read together.

`resolve_config` layers the sources as Kafka users expect: a `server.properties` file,
then `OTTLA_<KEY>` environment variables, then command-line flags, each overriding the
one before. Unknown keys are reported, not fatal (a Kafka `server.properties` carries
many settings a single node has no use for); an invalid value is fatal and the error
names the key and where it came from.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from ottla.coordinator.group import GroupConfig
from ottla.coordinator.share_config import ShareConfig
from ottla.storage.log_config import TOPIC_CONFIGS, LogConfig

from .config_values import (
    assignors,
    at_least,
    authorizer,
    boolean,
    checked_connection_overrides,
    http_listener,
    one_dir,
    one_of,
    tcp_port,
)
from .development_defaults import DEVELOPMENT_DEFAULTS
from .development_defaults import SOURCE as DEVELOPMENT_SOURCE
from .security.security_config import (
    ListenerSecurity,
    SecurityConfigError,
    is_secret,
    is_security_property,
    listener_security,
)


class ConfigError(ValueError):
    """A setting that stops start-up; `key` is the property at fault."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(message)
        self.key = key


@dataclass(frozen=True, slots=True)
class Property:
    kafka_name: str
    attribute: str
    parse: Callable[[str], Any]
    doc: str


PROPERTIES: tuple[Property, ...] = (
    Property("num.partitions", "num_partitions", int, "partitions of an auto-created topic"),
    Property("auto.create.topics.enable", "auto_create_topics_enable", boolean,
             "create a topic when a client asks for its metadata"),
    Property("socket.request.max.bytes", "socket_request_max_bytes", int, "largest request frame accepted"),
    Property("queued.max.request.bytes", "queued_max_request_bytes", int,
             "bytes of requests read and not yet served, all connections together (-1: no bound)"),
    Property("connections.max.idle.ms", "connections_max_idle_ms", int,
             "close a connection with nothing in or out and no request in hand for this long"),
    Property("fetch.max.bytes", "fetch_max_bytes", int,
             "most record bytes in one Fetch response (at least one batch is always returned)"),
    Property("max.incremental.fetch.session.cache.slots", "fetch_session_cache_slots", int,
             "most incremental fetch sessions (KIP-227) kept at once"),
    Property("log.flush.offset.checkpoint.interval.ms", "checkpoint_interval_ms", int,
             "how often recovery points are written"),
    Property("log.retention.check.interval.ms", "retention_check_interval_ms", int,
             "how often segments past their retention are deleted"),
    Property("log.cleaner.backoff.ms", "cleaner_backoff_ms", int, "pause between compaction passes"),
    Property("transaction.max.timeout.ms", "transaction_max_timeout_ms", int,
             "the longest transaction timeout a producer may ask for"),
    Property("transaction.state.log.num.partitions", "transaction_state_partitions", int,
             "partitions of __transaction_state"),
    Property("transaction.abort.timed.out.transaction.cleanup.interval.ms", "transaction_timeout_check_ms", int,
             "how often transactions past their timeout are aborted"),
    Property("offsets.topic.num.partitions", "offsets_topic_partitions", int, "partitions of __consumer_offsets"),
    Property("group.min.session.timeout.ms", "group_min_session_timeout_ms", int, "shortest session timeout allowed"),
    Property("group.max.session.timeout.ms", "group_max_session_timeout_ms", int, "longest session timeout allowed"),
    Property("group.initial.rebalance.delay.ms", "group_initial_rebalance_delay_ms", int,
             "how long a new group waits for more members before its first rebalance"),
    Property("group.consumer.session.timeout.ms", "group_consumer_session_timeout_ms", int,
             "KIP-848 consumer groups: a member without a heartbeat for this long is removed"),
    Property("group.consumer.heartbeat.interval.ms", "group_consumer_heartbeat_interval_ms", int,
             "KIP-848 consumer groups: how often members send a heartbeat"),
    Property("group.consumer.max.size", "group_consumer_max_size", int,
             "KIP-848 consumer groups: most members in one group"),
    Property("group.consumer.assignors", "group_consumer_assignors", assignors,
             "KIP-848 consumer groups: the server-side assignors, the default first (uniform, range)"),
    Property("group.share.record.lock.duration.ms", "group_share_record_lock_duration_ms", int,
             "share groups: how long acquired records stay locked to a member (default of the group config)"),
    Property("group.share.delivery.count.limit", "group_share_delivery_count_limit", int,
             "share groups: deliveries of a record before it is archived (default of the group config)"),
    Property("group.share.session.timeout.ms", "group_share_session_timeout_ms", int,
             "share groups: a member without a heartbeat for this long is removed"),
    Property("group.share.heartbeat.interval.ms", "group_share_heartbeat_interval_ms", int,
             "share groups: how often members send a heartbeat"),
    Property("share.coordinator.state.topic.num.partitions", "share_coordinator_state_topic_num_partitions", int,
             "partitions of __share_group_state"),
    Property("group.streams.session.timeout.ms", "group_streams_session_timeout_ms", int,
             "KIP-1071 streams groups: a member without a heartbeat for this long is removed"),
    Property("group.streams.heartbeat.interval.ms", "group_streams_heartbeat_interval_ms", int,
             "KIP-1071 streams groups: how often members send a heartbeat"),
    Property("group.streams.num.standby.replicas", "group_streams_num_standby_replicas", int,
             "KIP-1071 streams groups: standby copies of each stateful task"),
    Property("group.streams.max.size", "group_streams_max_size", int,
             "KIP-1071 streams groups: most members in one group"),
    Property("group.streams.min.session.timeout.ms", "group_streams_min_session_timeout_ms", int,
             "KIP-1071 streams groups: the least streams.session.timeout.ms a group may set"),
    Property("group.streams.max.session.timeout.ms", "group_streams_max_session_timeout_ms", int,
             "KIP-1071 streams groups: the most streams.session.timeout.ms a group may set"),
    Property("group.streams.min.heartbeat.interval.ms", "group_streams_min_heartbeat_interval_ms", int,
             "KIP-1071 streams groups: the least streams.heartbeat.interval.ms a group may set"),
    Property("group.streams.max.heartbeat.interval.ms", "group_streams_max_heartbeat_interval_ms", int,
             "KIP-1071 streams groups: the most streams.heartbeat.interval.ms a group may set"),
    Property("group.streams.max.standby.replicas", "group_streams_max_standby_replicas", int,
             "KIP-1071 streams groups: the most streams.num.standby.replicas a group may set"),
    Property("group.streams.initial.rebalance.delay.ms", "group_streams_initial_rebalance_delay_ms", int,
             "KIP-1071 streams groups: how long a new group waits for more members before its first assignment"),
    Property("group.consumer.min.session.timeout.ms", "group_consumer_min_session_timeout_ms", int,
             "KIP-848 consumer groups: the least consumer.session.timeout.ms a group may set"),
    Property("group.consumer.max.session.timeout.ms", "group_consumer_max_session_timeout_ms", int,
             "KIP-848 consumer groups: the most consumer.session.timeout.ms a group may set"),
    Property("group.consumer.min.heartbeat.interval.ms", "group_consumer_min_heartbeat_interval_ms", int,
             "KIP-848 consumer groups: the least consumer.heartbeat.interval.ms a group may set"),
    Property("group.consumer.max.heartbeat.interval.ms", "group_consumer_max_heartbeat_interval_ms", int,
             "KIP-848 consumer groups: the most consumer.heartbeat.interval.ms a group may set"),
    Property("offset.metadata.max.bytes", "offset_metadata_max_bytes", int, "largest metadata of a committed offset"),
    Property("producer.id.expiration.ms", "producer_id_expiration_ms", int,
             "forget an idle producer's sequences after this long (unless its transaction is open)"),
    Property("transactional.id.expiration.ms", "transactional_id_expiration_ms", int,
             "forget a transactional id unused for this long"),
    Property("fsync.on.ack", "fsync", boolean,
             "Ottla's own: fsync before acknowledging, concurrent producers sharing one fsync"),
    Property("log.dirs", "data_dir", one_dir, "the directory partitions are stored in (one)"),
    Property("log.dir", "data_dir", one_dir, "the same as log.dirs, as in Kafka"),
    # Ottla's own: Kafka configures its logging through log4j and has no admin endpoint.
    Property("log.level", "log_level", one_of("debug", "info", "warning", "error"), "Ottla's own log level"),
    Property("log.format", "log_format", one_of("console", "json"),
             "Ottla's log lines: console for people, json for machines"),
    Property("admin.port", "admin_port", tcp_port,
             "port of the admin HTTP endpoint (/healthz, /metrics, /faults); off if unset"),
    Property("admin.host", "admin_host", str, "interface of the admin endpoint (127.0.0.1 unless set)"),
    Property("admin.token", "admin_token", str,
             "a secret every change through the admin endpoint must carry (Authorization: Bearer)"),
    Property("admin.console.remote", "admin_console_remote", boolean,
             "serve the web console to other machines on a broker without SASL listeners or ACLs"),
    Property("schema.registry.listeners", "schema_registry_listener", http_listener,
             "Ottla's own: serve Confluent's Schema Registry API at http://host:port (off if unset)"),
    Property("authorizer.class.name", "authorizer_class_name", authorizer,
             "org.apache.kafka.metadata.authorizer.StandardAuthorizer switches ACLs on (empty: off)"),
    Property("super.users", "super_users", str, "principals allowed everything: User:admin;User:ops"),
    Property("allow.everyone.if.no.acl.found", "allow_everyone_if_no_acl_found", boolean,
             "allow a request on a resource no ACL names (refused by default)"),
    Property("max.connections", "max_connections", at_least(0),
             "most connections served at once; past it new ones wait until one closes"),
    Property("max.connections.per.ip", "max_connections_per_ip", at_least(0),
             "most connections from one address; past it a new one is closed once accepted"),
    Property("max.connections.per.ip.overrides", "max_connections_per_ip_overrides", checked_connection_overrides,
             "per address or host name, a bound other than max.connections.per.ip: host:count,host:count"),
    Property("max.broker.partitions", "max_broker_partitions", at_least(1),
             "Ottla's own (KIP-578's name): most partitions clients may create, internal topics aside"),
    Property("max.transactional.ids", "max_transactional_ids", at_least(1),
             "Ottla's own: most transactional ids kept; a new one past it is refused (POLICY_VIOLATION)"),
)
BY_KAFKA_NAME = {p.kafka_name: p for p in PROPERTIES}
SENSITIVE = frozenset({"admin.token"})
# Broker properties that set the default of a topic config: log.segment.bytes -> segment.bytes ...
LOG_DEFAULTS = {c.broker_property: c for c in TOPIC_CONFIGS.values() if c.broker_property is not None}
# Read-only: the Kafka version whose protocol and metadata this broker speaks.
KAFKA_VERSION_PROPERTIES = {"inter.broker.protocol.version": "4.1-IV1", "log.message.format.version": "3.0-IV1",
                            "process.roles": "broker,controller"}
LISTENER_PROPERTIES = ("listeners", "advertised.listeners", "listener.security.protocol.map")
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
ENV_PREFIX = "OTTLA_"
# Environment variables that are not settings: the tests' launchers' (OTTLA_TEST_RELEASE_LOADING)
# and OTTLA_PURE_PYTHON, which turns the compiled request path off (protocol/compiled_codec.py).
_ENV_NOT_SETTINGS = ("OTTLA_TEST_", "OTTLA_PURE_PYTHON")


@dataclass(frozen=True, slots=True)
class Listener:
    """One address the broker listens on, and the address it tells clients to use.

    Kafka has several listeners so that one broker can be reached under different
    names: from inside a container network as `ottla:29092` and from the host as
    `localhost:9092`. Each connection is answered (Metadata, FindCoordinator) with the
    advertised address of the listener it came in on."""

    name: str
    host: str  # "" or 0.0.0.0: every interface
    port: int  # 0: any free port
    advertised_host: str | None = None
    advertised_port: int | None = None  # None: the port actually bound
    # PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL (listener.security.protocol.map).
    security_protocol: str = "PLAINTEXT"

    @property
    def bind_host(self) -> str:
        return self.host or "0.0.0.0"

    @property
    def advertised_address(self) -> tuple[str, int]:
        """(host, port) clients are told to connect to."""
        # A wildcard address means nothing to a client; loopback is what works for a
        # broker on a laptop. A container sets advertised.listeners.
        host = self.advertised_host or ("127.0.0.1" if self.host in ("0.0.0.0", "::", "") else self.host)
        return host, self.advertised_port or self.port


def _parse_endpoints(key: str, text: str) -> dict[str, tuple[str, int]]:
    """`NAME://host:port,...` as {NAME: (host, port)}, in order."""
    endpoints: dict[str, tuple[str, int]] = {}
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        name, sep, address = item.partition("://")
        host, colon, port_text = address.rpartition(":")
        if not sep or not colon:
            raise ConfigError(key, f"invalid value for {key}: expected NAME://HOST:PORT, got {item!r}")
        try:
            port = tcp_port(port_text)
        except ValueError as exc:
            raise ConfigError(key, f"invalid value for {key}: {exc}") from None
        name = name.upper()
        if name in endpoints:
            raise ConfigError(key, f"invalid value for {key}: listener {name} is given twice")
        endpoints[name] = (host.strip("[]"), port)
    if not endpoints:
        raise ConfigError(key, f"invalid value for {key}: no listener in {text!r}")
    return endpoints


def _parse_listeners(listeners: str, advertised: str | None, protocol_map: str | None) -> tuple[Listener, ...]:
    bound = _parse_endpoints("listeners", listeners)
    told = _parse_endpoints("advertised.listeners", advertised) if advertised else {}
    # Kafka's default map names each listener after its protocol.
    protocols = {name: name for name in SECURITY_PROTOCOLS}
    for pair in (protocol_map or "").split(","):
        if not pair.strip():
            continue
        name, sep, protocol = pair.strip().partition(":")
        if not sep:
            raise ConfigError("listener.security.protocol.map",
                              f"invalid value for listener.security.protocol.map: {pair!r} is not NAME:PROTOCOL")
        protocols[name.strip().upper()] = protocol.strip().upper()
    for name in bound:
        listener_protocol = protocols.get(name)
        if listener_protocol is None:
            raise ConfigError("listeners", f"invalid value for listeners: no security protocol for listener {name}; "
                                           "give it one in listener.security.protocol.map")
        if listener_protocol not in SECURITY_PROTOCOLS:
            raise ConfigError("listener.security.protocol.map",
                              f"invalid value for listener.security.protocol.map: {listener_protocol} is not one of "
                              f"{', '.join(SECURITY_PROTOCOLS)}")
    for name in told:
        if name not in bound:
            raise ConfigError("advertised.listeners",
                              f"invalid value for advertised.listeners: {name} is not one of the listeners")
    result: list[Listener] = []
    for name, (host, port) in bound.items():
        advertised_host, advertised_port = told.get(name, (None, None))
        result.append(Listener(name, host, port, advertised_host, advertised_port,
                               security_protocol=protocols[name]))
    return tuple(result)


def listener_text(listeners: Iterable[Listener]) -> str:
    """Listeners as the `listeners` property writes them."""
    return ",".join(f"{item.name}://{item.host}:{item.port}" for item in listeners)


@dataclass(frozen=True)
class BrokerConfig:
    listeners: tuple[Listener, ...] = (Listener("PLAINTEXT", "127.0.0.1", 9092),)
    data_dir: str = "./data"
    log_level: str = "info"
    log_format: str = "console"
    admin_port: int | None = None
    # The admin endpoint can inject faults that close every connection: loopback only
    # unless the operator opens it (with a token, best).
    admin_host: str = "127.0.0.1"
    admin_token: str | None = None
    # Without SASL users or ACLs nobody can sign in to the console: it answers this
    # machine only unless this opens it (issue 28).
    admin_console_remote: bool = False
    # The built-in schema registry (schema_registry/): (host, port), off if None.
    schema_registry_listener: tuple[str, int] | None = None
    # ACLs (broker/security/authorizer.py): on when authorizer.class.name names Kafka's authorizer.
    authorizer_class_name: str = ""
    super_users: str = ""
    allow_everyone_if_no_acl_found: bool = False

    num_partitions: int = 1
    auto_create_topics_enable: bool = True
    socket_request_max_bytes: int = 100 * 1024 * 1024
    fetch_max_bytes: int = 55 * 1024 * 1024  # Kafka's default, 57671680
    fetch_session_cache_slots: int = 1000  # Kafka's default
    # Kafka's default is -1 (no bound, only queued.max.requests=500); a broker on a
    # laptop or a CI runner is better off refusing to hold more than this.
    queued_max_request_bytes: int = 256 * 1024 * 1024
    connections_max_idle_ms: int = 600_000  # Kafka's default: 10 minutes
    # Kafka's defaults: no bound (network/connection_quotas.py).
    max_connections: int = 2**31 - 1
    max_connections_per_ip: int = 2**31 - 1
    max_connections_per_ip_overrides: str = ""
    # Ottla's own bounds where Kafka's defaults bound nothing (docs/security.md).
    max_broker_partitions: int = 10_000
    max_transactional_ids: int = 100_000
    checkpoint_interval_ms: int = 60_000
    retention_check_interval_ms: int = 300_000
    cleaner_backoff_ms: int = 15_000
    transaction_max_timeout_ms: int = 15 * 60 * 1000
    transaction_state_partitions: int = 50
    transaction_timeout_check_ms: int = 10_000
    # The group coordinator's settings: Kafka's defaults, as the coordinator states them.
    offsets_topic_partitions: int = GroupConfig.num_partitions
    group_min_session_timeout_ms: int = GroupConfig.min_session_timeout_ms
    group_max_session_timeout_ms: int = GroupConfig.max_session_timeout_ms
    group_initial_rebalance_delay_ms: int = GroupConfig.initial_rebalance_delay_ms
    group_consumer_session_timeout_ms: int = GroupConfig.consumer_session_timeout_ms
    group_consumer_heartbeat_interval_ms: int = GroupConfig.consumer_heartbeat_interval_ms
    group_consumer_max_size: int = GroupConfig.consumer_max_size
    group_consumer_assignors: tuple[str, ...] = GroupConfig.consumer_assignors
    group_streams_session_timeout_ms: int = GroupConfig.streams_session_timeout_ms
    group_streams_heartbeat_interval_ms: int = GroupConfig.streams_heartbeat_interval_ms
    group_streams_num_standby_replicas: int = GroupConfig.streams_num_standby_replicas
    group_streams_max_size: int = GroupConfig.streams_max_size
    group_streams_min_session_timeout_ms: int = GroupConfig.streams_min_session_timeout_ms
    group_streams_max_session_timeout_ms: int = GroupConfig.streams_max_session_timeout_ms
    group_streams_min_heartbeat_interval_ms: int = GroupConfig.streams_min_heartbeat_interval_ms
    group_streams_max_heartbeat_interval_ms: int = GroupConfig.streams_max_heartbeat_interval_ms
    group_streams_max_standby_replicas: int = GroupConfig.streams_max_standby_replicas
    group_streams_initial_rebalance_delay_ms: int = GroupConfig.streams_initial_rebalance_delay_ms
    group_consumer_min_session_timeout_ms: int = GroupConfig.consumer_min_session_timeout_ms
    group_consumer_max_session_timeout_ms: int = GroupConfig.consumer_max_session_timeout_ms
    group_consumer_min_heartbeat_interval_ms: int = GroupConfig.consumer_min_heartbeat_interval_ms
    group_consumer_max_heartbeat_interval_ms: int = GroupConfig.consumer_max_heartbeat_interval_ms
    offset_metadata_max_bytes: int = GroupConfig.max_metadata_bytes
    fsync: bool = False
    producer_id_expiration_ms: int = 24 * 3600 * 1000
    transactional_id_expiration_ms: int = 7 * 24 * 3600 * 1000
    # Share groups (KIP-932): Kafka's defaults, as the share coordinator states them.
    group_share_record_lock_duration_ms: int = ShareConfig.record_lock_duration_ms
    group_share_delivery_count_limit: int = ShareConfig.delivery_count_limit
    group_share_session_timeout_ms: int = ShareConfig.session_timeout_ms
    group_share_heartbeat_interval_ms: int = ShareConfig.heartbeat_interval_ms
    share_coordinator_state_topic_num_partitions: int = ShareConfig.state_topic_partitions
    # Defaults of every topic's log settings (log.segment.bytes, log.retention.ms...).
    log: LogConfig = field(default_factory=LogConfig)
    # The TLS and SASL properties (ssl.*, sasl.*, listener.name.<listener>.*) as given:
    # broker/security/security_config.py reads them per listener.
    security: Mapping[str, str] = field(default_factory=dict)

    def with_first_listener(self, host: str | None = None, port: int | None = None,
                            advertised_host: str | None = None) -> BrokerConfig:
        """The --host/--port/--advertised-host flags: they change the first listener,
        whatever the properties made of it."""
        first = self.listeners[0]
        first = replace(
            first,
            host=first.host if host is None else host,
            port=first.port if port is None else port,
            advertised_host=first.advertised_host if advertised_host is None else advertised_host,
        )
        return replace(self, listeners=(first, *self.listeners[1:]))

    def with_kafka_properties(self, values: dict[str, str]) -> BrokerConfig:
        """A copy with Kafka-named properties applied. Raises ConfigError naming the key
        for an unknown key or an invalid value."""
        changes: dict[str, Any] = {}
        log_changes: dict[str, str | None] = {}
        if any(key in values for key in LISTENER_PROPERTIES):
            changes["listeners"] = _parse_listeners(
                values.get("listeners") or listener_text(self.listeners),
                values.get("advertised.listeners"),
                values.get("listener.security.protocol.map"),
            )
        security = dict(self.security)
        for key, text in values.items():
            if key in LISTENER_PROPERTIES:
                continue
            if is_security_property(key):
                security[key] = text
                changes["security"] = security
                continue
            if key in LOG_DEFAULTS:
                definition = LOG_DEFAULTS[key]
                try:
                    definition.parse(text)
                except ValueError as exc:
                    raise ConfigError(key, f"invalid value for {key}: {exc}") from None
                log_changes[definition.name] = text
                continue
            prop = BY_KAFKA_NAME.get(key)
            if prop is None:
                raise ConfigError(key, f"unknown broker property {key!r}")
            try:
                changes[prop.attribute] = prop.parse(text)
            except ValueError as exc:
                raise ConfigError(key, f"invalid value for {key}: {exc}") from None
        if log_changes:
            changes["log"] = self.log.with_topic_configs(log_changes)
        config = replace(self, **changes)
        if config.max_connections_per_ip == 0 and not config.max_connections_per_ip_overrides.strip():
            raise ConfigError("max.connections.per.ip", "max.connections.per.ip can be set to zero only if "
                              "max.connections.per.ip.overrides property is set.")
        for listener in config.listeners:
            config.listener_security(listener)  # refuse what no connection could use
        return config

    def listener_security(self, listener: Listener) -> ListenerSecurity:
        """What a connection on `listener` goes through (TLS, SASL) before it is served."""
        try:
            return listener_security(listener.name, listener.security_protocol, self.security)
        except SecurityConfigError as exc:
            raise ConfigError(exc.key, str(exc)) from None

    def broker_properties(self) -> dict[str, str | None]:
        """Every broker property and its current value as text (for DescribeConfigs);
        a secret's value is None, as Kafka describes its passwords."""
        values: dict[str, str | None] = {p.kafka_name: None if p.kafka_name in SENSITIVE
                                         else _text(getattr(self, p.attribute)) for p in PROPERTIES}
        values.update({name: self.log.value_text(c.name) for name, c in LOG_DEFAULTS.items()})
        values.update({key: None if is_secret(key) else value for key, value in self.security.items()})
        # What admin UIs read to decide which features the cluster has: Kafka 4.1's.
        values.update(KAFKA_VERSION_PROPERTIES)
        return values


def _text(value: Any) -> str:
    if value is None:
        return ""
    return str(value).lower() if isinstance(value, bool) else str(value)


def is_known(key: str) -> bool:
    return key in BY_KAFKA_NAME or key in LOG_DEFAULTS or key in LISTENER_PROPERTIES or is_security_property(key)


def env_name(key: str) -> str:
    """`log.segment.bytes` -> `OTTLA_LOG_SEGMENT_BYTES`."""
    return ENV_PREFIX + key.replace(".", "_").replace("-", "_").upper()


def env_properties(environ: Mapping[str, str]) -> dict[str, str]:
    """The settings given as OTTLA_<KEY> variables, under their property names. Kafka
    keys contain no underscores, so the name maps back without ambiguity."""
    return {
        name[len(ENV_PREFIX):].lower().replace("_", "."): value
        for name, value in environ.items()
        if name.startswith(ENV_PREFIX) and not name.startswith(_ENV_NOT_SETTINGS)
    }


def read_properties(path: str) -> dict[str, str]:
    """A Java `.properties` file, as Kafka reads server.properties: `key=value`,
    `key: value` or `key value`; `#` and `!` comments; a trailing backslash continues
    the line."""
    values: dict[str, str] = {}
    with open(path, encoding="utf-8") as f:
        pending = ""
        for raw in f:
            line = pending + raw.strip() if pending else raw.strip()
            pending = ""
            if not line or line[0] in "#!":
                continue
            if line.endswith("\\") and (len(line) - len(line.rstrip("\\"))) % 2 == 1:
                pending = line[:-1]
                continue
            cut = min((i for i in (line.find("="), line.find(":"), line.find(" "), line.find("\t")) if i >= 0),
                      default=len(line))
            key = line[:cut].strip()
            value = line[cut:].lstrip(" \t")
            if value[:1] in ("=", ":"):
                value = value[1:]
            values[key] = value.strip().replace("\\\\", "\\")
        if pending:
            values.setdefault(pending, "")
    return values


@dataclass(frozen=True, slots=True)
class ResolvedConfig:
    config: BrokerConfig
    unknown: dict[str, str]  # key -> where it came from, to warn about
    sources: dict[str, str]  # key -> where its value came from


def resolve_config(file_path: str | None, environ: Mapping[str, str], flags: Mapping[str, str]) -> ResolvedConfig:
    """The broker configuration from its sources, later ones winning: defaults <
    the development defaults (development_defaults.py) < `file_path` (server.properties)
    < OTTLA_* variables in `environ` < `flags` (the command line's properties). Raises
    ConfigError naming the key and its source."""
    layers: list[tuple[str, Mapping[str, str]]] = [(DEVELOPMENT_SOURCE, DEVELOPMENT_DEFAULTS)]
    if file_path is not None:
        try:
            layers.append((file_path, read_properties(file_path)))
        except OSError as exc:
            raise ConfigError("--config", f"cannot read the config file: {exc}") from None
    env = env_properties(environ)
    layers.append(("environment", env))
    layers.append(("command line", flags))
    merged: dict[str, str] = {}
    sources: dict[str, str] = {}
    for source, values in layers:
        for key, value in values.items():
            merged[key] = value
            sources[key] = env_name(key) if values is env else source
    unknown = {key: sources[key] for key in merged if not is_known(key)}
    known = {key: value for key, value in merged.items() if key not in unknown}
    try:
        config = BrokerConfig().with_kafka_properties(known)
    except ConfigError as exc:
        where = f"set in {sources[exc.key]}" if exc.key in sources else "not set"
        raise ConfigError(exc.key, f"{exc} ({where})") from None
    return ResolvedConfig(config, unknown, {key: sources[key] for key in known})
