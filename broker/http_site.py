"""The HTTP servers the broker runs beside its Kafka listeners (the admin endpoint with
the web console, and the schema registry): aiohttp's server on the broker's event loop,
started and stopped one way, with one set of limits on what a client may send, and the
address checks their loopback rules share.

What each server answers, and who may ask, stays with it (console/admin_http.py,
schema_registry/rest.py); what is here is what no client should be able to change: how
long it may take to send its headers and its body, how many headers and how long each.
"""

from __future__ import annotations

import asyncio
import ipaddress
from typing import Any

from aiohttp import web

from .logging import get_logger

# How long a client has to send a request's headers (from connecting, or from the last
# answer on a kept-alive connection), and its body: a slow client is closed, not waited for.
READ_TIMEOUT = 10
MAX_HEADERS = 100
MAX_HEADER_BYTES = 8190  # of a request line or one header line


class BodyTimeout(Exception):
    """The request's body did not arrive within READ_TIMEOUT: answer 408 and close."""


async def read_body(request: web.Request) -> bytes:
    """The request's body, or BodyTimeout: aiohttp times out headers only."""
    try:
        return await asyncio.wait_for(request.read(), READ_TIMEOUT)
    except TimeoutError:
        raise BodyTimeout from None


class HttpSite:
    """One aiohttp server on host:port; `what` names it in log lines."""

    def __init__(self, what: str) -> None:
        self.what = what
        self.port = 0
        self._runner: web.AppRunner | None = None

    async def start(self, app: web.Application, host: str, port: int) -> None:
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=1.0,
                                     logger=_ProtocolLog(self.what),
                                     keepalive_timeout=READ_TIMEOUT, max_headers=MAX_HEADERS,
                                     max_line_size=MAX_HEADER_BYTES, max_field_size=MAX_HEADER_BYTES)
        await self._runner.setup()
        site = web.TCPSite(self._runner, host, port, reuse_address=True)
        await site.start()
        self.port = self._runner.addresses[0][1]

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()


class _ProtocolLog:
    """aiohttp's server logger: a request it could not parse (answered 400) is one line
    with the reason, not a traceback a client could fill the log with."""

    def __init__(self, what: str) -> None:
        self._log = get_logger(f"ottla.{what}")
        self._event = f"{what.replace('_', ' ')} request refused"

    def exception(self, message: str, *args: Any, exc_info: BaseException | None = None, **_: Any) -> None:
        self._log.warning(self._event, reason=str(exc_info or "").strip().replace("\n", " ")[:200],
                          what=message % args if args else message)

    error = warning = exception

    def info(self, *args: Any, **kwargs: Any) -> None:
        pass

    debug = info


def host_of(address: str) -> str:
    """The host of a Host header or a peer address, without its port."""
    if address.startswith("["):  # [::1]:9644, [::1]
        return address[1:].partition("]")[0]
    return address.rpartition(":")[0] if address.count(":") == 1 else address


def is_loopback(address: str) -> bool:
    """Whether a Host header or a peer address names a loopback address (any port)."""
    host = host_of(address)
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
