"""The Kafka listeners: one TCP server per configured listener, each accepted socket
handed to a Connection with that listener's security. As in mini-redis, the listener
only accepts; the connection reads frames and keeps requests in order; the dispatcher
and the handlers serve them.

A listener's TLS context and principal mapping rules are built when the broker is, so a
keystore or truststore that cannot be read stops the broker before anything listens.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace

from ..config import BrokerConfig, Listener
from ..security.security_config import ListenerSecurity
from ..security.tls import parse_mapping_rules, server_context
from ..services import Services
from .connection import Connection
from .connection_quotas import ConnectionQuotas
from .dispatch import Dispatcher
from .request_memory import RequestMemory

# Connections the kernel queues for a listener before the broker accepts them (at most
# the kernel's somaxconn): more than Kafka's socket.listen.backlog.size default (50), so
# that many clients connecting at once (a test suite, a consumer group starting) are
# queued, not refused.
LISTEN_BACKLOG = 1024
# How long stopping waits for a listener's server to close before going on without it.
CLOSE_TIMEOUT_SECONDS = 5


class Listeners:
    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        # Per listener: what its connections go through, and its TLS context.
        self.security: dict[str, ListenerSecurity] = {
            listener.name: config.listener_security(listener) for listener in config.listeners}
        self._tls = {name: server_context(s.ssl) for name, s in self.security.items() if s.ssl is not None}
        self._mapping_rules = {name: parse_mapping_rules(s.ssl.principal_mapping_rules)
                               for name, s in self.security.items() if s.ssl is not None}
        # The configured listeners, with the port each one actually bound (port 0 asks
        # for any free port) once they listen.
        self.bound: list[Listener] = list(config.listeners)
        # Every open connection, of every listener: to close idle ones, and to finish
        # them all at shutdown.
        self.connections: set[Connection] = set()
        # max.connections and max.connections.per.ip, over every listener as in Kafka.
        self.quotas = ConnectionQuotas(config)
        self._servers: list[asyncio.AbstractServer] = []

    async def start(self, services: Services, dispatcher: Dispatcher, memory: RequestMemory) -> None:
        loop = asyncio.get_running_loop()
        for i, listener in enumerate(self.bound):
            # Not serving until the bound port is known: a connection is answered with
            # its listener's advertised address, which may be that port.
            server = await loop.create_server(
                lambda i=i, name=listener.name: Connection(
                    services, dispatcher, self.bound[i], self.connections, self.config.socket_request_max_bytes,
                    memory, self.quotas, self.security[name], self._mapping_rules.get(name, ())),
                listener.bind_host, listener.port,
                reuse_address=True, backlog=LISTEN_BACKLOG, start_serving=False, ssl=self._tls.get(listener.name),
            )
            self.bound[i] = replace(listener, port=server.sockets[0].getsockname()[1])
            self._servers.append(server)
        for bound in self._servers:
            await bound.start_serving()

    def stop_accepting(self) -> None:
        for server in self._servers:
            server.close()

    async def wait_closed(self) -> None:
        for server in self._servers:
            try:
                await asyncio.wait_for(server.wait_closed(), timeout=CLOSE_TIMEOUT_SECONDS)
            except TimeoutError:
                pass
