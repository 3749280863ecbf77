"""This machine's own addresses, for tests that must reach a server from somewhere other
than loopback."""

from __future__ import annotations

import socket


def own_non_loopback_address() -> str | None:
    """The IPv4 address this machine would send from to another network, or None where
    it has only loopback."""
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        probe.connect(("10.255.255.255", 1))  # no packet is sent: only a route is chosen
        address = probe.getsockname()[0]
    except OSError:
        return None
    finally:
        probe.close()
    return None if address.startswith("127.") else address
