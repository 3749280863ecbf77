"""What a listener's security asks of a connection, on the connection's session: a client
certificate's principal once the TLS handshake is done (mutual TLS), the SASL gate in
front of every request until the client has authenticated (security/sasl.py says what
is allowed before), and the bare token frames of SaslHandshake v0."""

from __future__ import annotations

import asyncio
from typing import Any

from ottla.protocol.apis import API_VERSIONS, SASL_AUTHENTICATE, SASL_HANDSHAKE
from ottla.protocol.codec import RequestHeader

from ..logging import get_logger
from ..security.sasl import AuthenticationFailed, SecurityEvents, Session
from ..security.tls import certificate_principal

log = get_logger("ottla.connection")

# What a SASL listener serves before the client has authenticated (and what a client
# sends to authenticate again, KIP-368).
_BEFORE_AUTHENTICATION = frozenset({API_VERSIONS.key, SASL_HANDSHAKE.key, SASL_AUTHENTICATE.key})


class ConnectionSecurity:
    def __init__(self, session: Session, mapping_rules: tuple[Any, ...], events: SecurityEvents) -> None:
        self.session = session
        self._sasl = session.security.uses_sasl
        self._mapping_rules = mapping_rules
        self._events = events

    @property
    def uses_tls(self) -> bool:
        return self.session.security.uses_tls

    @property
    def authenticating(self) -> bool:
        """A SASL listener's client has yet to (re-)authenticate: its requests go to the
        connection's worker, in order, none served as it is read."""
        return self._sasl and self.session.needs_authentication

    @property
    def uses_sasl(self) -> bool:
        return self._sasl

    def frame_bound(self) -> int | None:
        """The bound on a frame's size while the client has not authenticated
        (sasl.server.max.receive.size); None once it has: socket.request.max.bytes's."""
        return self.session.security.max_receive_bytes if self.authenticating else None

    def take_certificate(self, transport: asyncio.BaseTransport, peer: str) -> bool:
        """The principal of a client certificate (mutual TLS). False when the
        certificate maps to no principal: the connection is closed, as Kafka does."""
        ssl_object = transport.get_extra_info("ssl_object")
        der = ssl_object.getpeercert(binary_form=True) if ssl_object is not None else None
        if der is None:
            return True  # no certificate asked for, or none offered where it is optional
        user = certificate_principal(der, self._mapping_rules)
        if user is None:
            log.warning("closing connection", reason="no ssl.principal.mapping.rules rule maps the client certificate",
                        peer=peer)
            transport.close()
            return False
        self.session.user = user
        return True

    def refusal(self, header: RequestHeader, api_name: str) -> str | None:
        """Why this request may not be served yet (the connection is then closed,
        answering nothing, as Kafka's SaslServerAuthenticator does), or None."""
        if self._sasl and header.api_key not in _BEFORE_AUTHENTICATION and self.session.needs_authentication:
            reason = "re-authentication is due" if self.session.authenticated else "not authenticated yet"
            return f"{api_name} request on a SASL listener: {reason}"
        return None

    async def answer_raw_token(self, frame: memoryview, peer: str) -> bytes | None:
        """The answer to a SASL token sent in a bare frame after a SaslHandshake v0, as a
        bare frame too; None for a failure, after Kafka's delay (the old way has no
        error to send: the connection is closed)."""
        try:
            challenge, _ = self.session.respond_to(bytes(frame), self._events, peer)
        except AuthenticationFailed:
            await asyncio.sleep(self.session.security.failed_auth_delay_ms / 1000)
            return None
        return len(challenge).to_bytes(4, "big") + challenge
