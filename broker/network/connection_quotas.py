"""How many connections the broker serves: max.connections in all, and
max.connections.per.ip from one address (max.connections.per.ip.overrides for named
ones), with Kafka's semantics (its ConnectionQuotas):

- a connection from an address that already has its maximum is closed right after it
  is accepted, with Kafka's log line ("Rejected connection from ...");
- with max.connections reached, Kafka's acceptor stops accepting until a connection
  closes: the new connection waits unserved (in the kernel's backlog there). Here the
  event loop has accepted it already; it waits unread, its reading paused, and is
  served once a slot frees, in the order it came. At most LISTEN_BACKLOG wait so, as a
  kernel's backlog would hold; past that a new connection is closed.

Both default to Kafka's (no bound: 2^31-1). A host name in the overrides is resolved
once, at start, as Kafka resolves it (InetAddress.getByName).
"""

from __future__ import annotations

import ipaddress
import socket
from collections import Counter, deque
from typing import Protocol

from ..config import BrokerConfig, ConfigError
from ..config_values import connection_overrides
from ..logging import get_logger

log = get_logger("ottla.connection")

# The most connections waiting for a slot (see the module's docstring); as listener.py's
# listen backlog.
MAX_WAITING = 1024


class Admittable(Protocol):
    def admitted(self) -> None: ...

    def refused(self) -> None: ...


def _address(host: str) -> str:
    """The one spelling of an address: IPv6 compressed, IPv4-mapped IPv6 as IPv4."""
    address = ipaddress.ip_address(host.split("%", 1)[0])
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return str(address.ipv4_mapped)
    return str(address)


def _resolve(host: str) -> str:
    try:
        return _address(host)
    except ValueError:
        pass
    try:
        return _address(str(socket.getaddrinfo(host, None)[0][4][0]))
    except (OSError, IndexError) as exc:
        raise ConfigError("max.connections.per.ip.overrides",
                          f"max.connections.per.ip.overrides contains an invalid address: {host} ({exc})") from None


class ConnectionQuotas:
    def __init__(self, config: BrokerConfig) -> None:
        self.max_connections = config.max_connections
        self.max_per_ip = config.max_connections_per_ip
        self.overrides = {_resolve(host): count
                          for host, count in connection_overrides(config.max_connections_per_ip_overrides).items()}
        self.per_ip: Counter[str] = Counter()
        self.total = 0
        self._waiting: deque[tuple[Admittable, str]] = deque()

    def arrived(self, connection: Admittable, host: str) -> None:
        """A connection was accepted from `host`: admitted at once, refused (closed), or
        made to wait for a slot."""
        if self.total < self.max_connections and not self._waiting:
            self._admit(connection, host)
        elif len(self._waiting) < MAX_WAITING:
            self._waiting.append((connection, host))
        else:
            log.info("closing connection: too many waiting for a slot", peer=host, max_connections=self.max_connections)
            connection.refused()

    def _admit(self, connection: Admittable, host: str) -> None:
        address = _address(host) if host else host
        most = self.overrides.get(address, self.max_per_ip)
        if self.per_ip[address] >= most:
            log.info(f"Rejected connection from {address}, address already has the configured maximum of "
                     f"{most} connections.")
            connection.refused()
            return
        self.per_ip[address] += 1
        self.total += 1
        connection.admitted()

    def left(self, connection: Admittable, host: str, admitted: bool) -> None:
        """A connection closed; if it was counted, its slot goes to the next waiting."""
        if not admitted:
            try:
                self._waiting.remove((connection, host))
            except ValueError:
                pass
            return
        address = _address(host) if host else host
        self.per_ip[address] -= 1
        if not self.per_ip[address]:
            del self.per_ip[address]
        self.total -= 1
        while self._waiting and self.total < self.max_connections:
            self._admit(*self._waiting.popleft())
