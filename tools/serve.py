"""What `ottla serve` runs: the broker, and beside it the admin endpoint with its web
console (admin.port) and the schema registry (schema.registry.listeners).

broker/ imports neither (tests/unit/test_import_graph.py): they are attached to the
Broker as its neighbour (server.Neighbour), which it starts once its data directory is
loaded and stops after its Kafka connections. They read the broker through what it
offers: the console through its ConsoleBroker protocol, the registry through the
partition logs and the broker's users and ACLs. Each is imported only when configured: a
broker without them starts sooner (tests/integration/test_start_imports.py).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

from ottla.broker.config import BrokerConfig, ConfigError
from ottla.broker.security.authorizer import CLUSTER_NAME, Operation, ResourceType
from ottla.broker.security.scram_credentials import ScramCredential
from ottla.broker.server import Broker

if TYPE_CHECKING:
    from ottla.console.access import AdminAccess, Principal
    from ottla.console.admin_http import AdminServer
    from ottla.console.pages.common import ConsoleBroker
    from ottla.schema_registry.access import CallableAccess
    from ottla.schema_registry.rest import SchemaRegistryServer
    from ottla.schema_registry.store import SchemaStore


class ServedBroker:
    """The broker and the HTTP servers configured beside it, attached to it as one
    neighbour: one sign-in for both, so that a client address's failed sign-ins count on
    both."""

    def __init__(self, config: BrokerConfig, add_scram: Sequence[tuple[str, str, ScramCredential]] = (),
                 config_sources: Mapping[str, str] | None = None) -> None:
        self.broker = broker = Broker(config, add_scram, config_sources)
        self.admin: AdminServer | None = None
        self.schema_registry: SchemaRegistryServer | None = None
        self._access: AdminAccess | None = None
        if config.admin_port is None and config.schema_registry_listener is None:
            return
        from ottla.console.access import admin_access

        # Who signs in to the HTTP endpoints, and what each may do.
        self._access = admin_access(broker)
        if config.admin_port is not None:
            from ottla.console.admin_http import AdminServer
            from ottla.console.app import WebConsole

            self.admin = AdminServer(broker.faults, broker.metrics_text, lambda: broker.stopping, config.admin_token,
                                     # The console answers 503 until `services` exist (console/app.py).
                                     console=WebConsole(cast("ConsoleBroker", _ConsoleBroker(broker, self))),
                                     access=self._access, parse_console_schemas=self._parse_console_schemas)
        # The built-in schema registry: its state is the `_schemas` topic (`schema_store`),
        # read when the broker has loaded its data directory.
        if config.schema_registry_listener is not None:
            from ottla.schema_registry.registry import SchemaRegistry
            from ottla.schema_registry.rest import SchemaRegistryServer

            self.schema_registry = SchemaRegistryServer(SchemaRegistry(self.schema_store),
                                                        _registry_access(self._access))
        broker.attach(self)

    @functools.cached_property
    def schema_store(self) -> SchemaStore:
        """The schema registry's state: made when the registry or the console first asks."""
        from ottla.schema_registry.store import SchemaStore

        return SchemaStore(self.broker.logs)

    async def _parse_console_schemas(self) -> bool:
        return self.schema_registry is not None and await self.schema_registry.registry.parse_wanted()

    @property
    def admin_url(self) -> str | None:
        if self.admin is None:
            return None
        return _url(self.broker.config.admin_host, self.admin.port)

    @property
    def schema_registry_url(self) -> str | None:
        listener = self.broker.config.schema_registry_listener
        if self.schema_registry is None or listener is None:
            return None
        return _url(listener[0], self.schema_registry.port)

    # --- server.Neighbour -----------------------------------------------------------------

    def data_loaded(self) -> None:
        if self.schema_registry is not None:
            from ottla.schema_registry.store import UnusableTopic

            # Before any client connects: `_schemas` is the registry's alone from the start.
            try:
                self.schema_store.open()
            except UnusableTopic as exc:
                raise ConfigError("schema.registry.listeners", str(exc)) from None

    async def start(self) -> Mapping[str, str | None]:
        config = self.broker.config
        if self.admin is not None:
            assert config.admin_port is not None, "the admin endpoint exists only with admin.port"
            await self.admin.start(config.admin_host, config.admin_port)
        if self.schema_registry is not None and config.schema_registry_listener is not None:
            await self.schema_registry.start(*config.schema_registry_listener)
        return {"admin": self.admin_url, "schema_registry": self.schema_registry_url}

    async def stop(self) -> None:
        if self.admin is not None:
            await self.admin.stop()
        if self.schema_registry is not None:
            await self.schema_registry.stop()
        if self._access is not None:
            self._access.close()


def _url(host: str, port: int) -> str:
    if host in ("", "0.0.0.0", "::"):
        host = "127.0.0.1"  # every interface: this one is sure to answer
    return f"http://{'[' + host + ']' if ':' in host else host}:{port}"


class _ConsoleBroker:
    """The broker as the console reads it (console/pages/common.py, ConsoleBroker):
    the broker's own state, and the schema registry's (its pages; the Messages page
    decodes records with the registry's parser when it is on)."""

    def __init__(self, broker: Broker, served: ServedBroker) -> None:
        self._broker = broker
        self._served = served

    def __getattr__(self, name: str) -> Any:
        return getattr(self._broker, name)

    @property
    def schema_store(self) -> SchemaStore:
        return self._served.schema_store

    @property
    def schema_registry(self) -> SchemaRegistryServer | None:
        return self._served.schema_registry


def _registry_access(access: AdminAccess) -> CallableAccess:
    """The schema registry signs in the broker's users and asks its authorizer, as the
    admin endpoint does (schema_registry/access.py has the mapping)."""
    from ottla.console.access import TooManyAttempts
    from ottla.schema_registry.access import ALTER_CLUSTER, WRITE, CallableAccess, SignInLimited

    principals: dict[str, Principal] = {}

    async def sign_in(authorization: str, peer: str) -> str | None:
        try:
            principal = await access.sign_in(authorization, peer)
        except TooManyAttempts as exc:
            raise SignInLimited(exc.retry_after) from None
        if principal is None:
            return None
        principals[principal.name] = principal
        return principal.name

    def allows(name: str, action: str, topic: str, peer: str) -> bool:
        principal = principals.get(name)
        if action == ALTER_CLUSTER:
            return access.allows(principal, Operation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME, peer)
        operation = Operation.WRITE if action == WRITE else Operation.DESCRIBE
        return access.allows(principal, operation, ResourceType.TOPIC, topic, peer)

    return CallableAccess(access.secured, sign_in, allows)

