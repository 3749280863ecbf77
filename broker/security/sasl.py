"""SASL on a connection: the session's state, and the server side of each mechanism.

A connection on a SASL listener goes through Kafka's exchange before anything else is
served: ApiVersions (optional), SaslHandshake naming a mechanism, then the mechanism's
tokens - in SaslAuthenticate requests (handshake v1), or as bare size-prefixed frames
(handshake v0, the older clients' way). Until it succeeds, any other request closes the
connection, as Kafka's SaslServerAuthenticator does.

Mechanisms:
- PLAIN (RFC 4616): one token, `authzid NUL user NUL password`, checked against the
  listener's JAAS users.
- SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677) on the scramp library: two round
  trips; the broker holds only the salted keys (broker/security/scram_credentials.py).
- OAUTHBEARER: signed JWTs checked against a JWKS, or Kafka's unsecured JWS for
  development (broker/security/oauthbearer.py).
A failure is SASL_AUTHENTICATION_FAILED with Kafka's message (which never says whether
the user exists), a log line without the secret, a metric, and the connection closed.
"""

from __future__ import annotations

import hmac
import secrets
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from ..logging import get_logger
from .oauthbearer import INVALID_TOKEN, InvalidToken, JwtSettings
from .oauthbearer import validate as validate_token
from .security_config import PLAINTEXT, ListenerSecurity

# scramp is imported by the first SCRAM exchange, not by every broker that starts.
if TYPE_CHECKING:
    from scramp import ScramMechanism

ANONYMOUS = "ANONYMOUS"
log = get_logger("ottla.sasl")


class Credentials(Protocol):
    """The SCRAM users (scram_credentials.py's ScramCredentials)."""

    def get(self, user: str, mechanism: str) -> Any: ...
    def unknown_user(self, user: str, mechanism: str) -> Any: ...
    def of_user(self, user: str) -> dict[str, Any]: ...
    def users(self) -> list[str]: ...
    def change(self, upserts: list[tuple[str, str, Any]], deletions: list[tuple[str, str]]) -> None: ...


class SecurityEvents(Protocol):
    """Where authentication failures are counted (the broker's metrics)."""

    def authentication_failed(self, mechanism: str) -> None: ...


class AuthenticationFailed(Exception):
    """The client's credentials or token are refused: SASL_AUTHENTICATION_FAILED with
    this message. `user` is for the log line."""

    def __init__(self, message: str, user: str | None = None) -> None:
        super().__init__(message)
        self.user = user


class OAuthBearerServer:
    """OAUTHBEARER (RFC 7628, KIP-255): the client's first message carries a bearer token,
    validated as the listener says (broker/security/oauthbearer.py): a signed JWT checked
    against a JWKS, or, for development, Kafka's unsecured JWS."""

    mechanism = "OAUTHBEARER"

    def __init__(self, settings: JwtSettings | None) -> None:
        self._settings = settings
        self.complete = False
        self.user: str | None = None
        self.expires_at: float | None = None

    def step(self, token: bytes) -> bytes:
        # gs2-header, then %x01-separated key=value pairs ending with %x01%x01.
        header, sep, rest = token.partition(b"\x01")
        if not sep or not header.startswith(b"n,") or not rest.endswith(b"\x01\x01"):
            raise AuthenticationFailed("Invalid OAUTHBEARER client first message")
        pairs = dict(item.split(b"=", 1) for item in rest[:-2].split(b"\x01") if b"=" in item)
        auth = pairs.get(b"auth", b"")
        if not auth.lower().startswith(b"bearer "):
            raise AuthenticationFailed("Invalid OAUTHBEARER client first message: no bearer token")
        try:
            validated = validate_token(self._settings, auth[7:].strip().decode("ascii"))
        except (InvalidToken, UnicodeDecodeError) as exc:
            raise AuthenticationFailed(f"{INVALID_TOKEN}: {exc}") from None
        user = validated.principal
        authzid = header[2:].rstrip(b",")
        if authzid.startswith(b"a=") and authzid[2:].decode("utf-8", "replace") != user:
            raise AuthenticationFailed("Authentication failed: Client requested an authorization id that is "
                                       "different from the token's principal", user)
        self.user = user
        self.expires_at = validated.expires_at
        self.complete = True
        return b""


class PlainServer:
    mechanism = "PLAIN"

    def __init__(self, users: dict[str, str]) -> None:
        self._users = users
        self.complete = False
        self.user: str | None = None

    def step(self, token: bytes) -> bytes:
        parts = token.split(b"\0")
        if len(parts) != 3:
            raise AuthenticationFailed("Invalid SASL/PLAIN response: expected 3 tokens, got " + str(len(parts)))
        try:
            authzid, user, password = (p.decode("utf-8") for p in parts)
        except UnicodeDecodeError:
            raise AuthenticationFailed("Invalid SASL/PLAIN response: not UTF-8") from None
        if not user:
            raise AuthenticationFailed("Authentication failed: username not specified")
        if not password:
            raise AuthenticationFailed("Authentication failed: password not specified", user)
        expected = self._users.get(user)
        # compare_digest on both branches: an unknown user takes as long as a wrong password.
        if not hmac.compare_digest(password.encode(), (expected or "\0" + password).encode()) or expected is None:
            raise AuthenticationFailed("Authentication failed: Invalid username or password", user)
        if authzid and authzid != user:
            raise AuthenticationFailed("Authentication failed: Client requested an authorization id that is "
                                       "different from username", user)
        self.user = user
        self.complete = True
        return b""


_MECHANISMS: dict[str, ScramMechanism] = {}


def _scram_mechanism(name: str) -> ScramMechanism:
    mechanism = _MECHANISMS.get(name)
    if mechanism is None:
        from scramp import ScramMechanism

        mechanism = _MECHANISMS[name] = ScramMechanism(name)
    return mechanism


class ScramServer:
    """SCRAM-SHA-256/512 on the scramp library, from the stored keys (salt, iterations,
    StoredKey, ServerKey: scram_credentials.py); the password is never known here.

    An unknown user is answered with made-up credentials derived from the user's name
    under the broker's secret (ScramCredentials.unknown_user): the exchange runs to the
    proof and fails there as a wrong password does, and the salt it showed is the same on
    every attempt but cannot be computed by anyone without the secret, so the exchange
    does not tell who exists (Kafka's own server does tell)."""

    def __init__(self, mechanism: str, credentials: Credentials) -> None:
        self.mechanism = mechanism
        self._credentials = credentials
        # 18 random bytes, as long as Kafka's server nonce (130 bits in base 36) or so:
        # scramp's own default (64 hex digits) costs more to check, char by char, for
        # nothing an attacker could use.
        self._exchange = _scram_mechanism(mechanism).make_server(self._auth_info, s_nonce=secrets.token_urlsafe(18))
        self._known = False
        self._state = "first"
        self.complete = False
        self.user: str | None = None

    def _auth_info(self, user: str) -> tuple[bytes, bytes, bytes, int]:
        self.user = user
        credential = self._credentials.get(user, self.mechanism)
        self._known = credential is not None
        if credential is None:
            credential = self._credentials.unknown_user(user, self.mechanism)
        return credential.salt, credential.stored_key, credential.server_key, credential.iterations

    def step(self, token: bytes) -> bytes:
        from scramp import ScramException
        from scramp.core import Nonce
        from scramp.utils import ServerError

        try:
            message = token.decode("utf-8")
        except UnicodeDecodeError:
            raise AuthenticationFailed("Invalid SCRAM message: not UTF-8", self.user) from None
        if self._state == "first":
            self._state = "final"
            # Kafka's server takes "n" only: no channel binding, and not "y" (a client
            # that thinks the server cannot bind) either.
            if not message.startswith("n,"):
                raise AuthenticationFailed("Invalid SCRAM client first message")
            try:
                self._exchange.set_client_first(message)
                return self._exchange.get_server_first().encode()
            except ScramException as exc:
                raise AuthenticationFailed(f"Invalid SCRAM client first message: {exc}", self.user) from None
        if self._state == "final":
            self._state = "done"
            failure = AuthenticationFailed("Authentication failed during authentication due to invalid credentials "
                                           f"with SASL mechanism {self.mechanism}", self.user)
            # Kafka checks that the client's nonce ends with the server's
            # (ScramSaslServer), and librdkafka relies on it: before 1.7, and still in
            # Debian's 2.0.2 (kcat), it repeats its own nonce in front. scramp wants the two
            # equal; the proof covers the nonce as the client sent it either way.
            nonce = next((part[2:] for part in message.split(",") if part.startswith("r=")), "")
            if not nonce.endswith(str(self._exchange.nonce)):
                raise AuthenticationFailed("Invalid client nonce in the final client message.", self.user)
            try:
                if nonce != str(self._exchange.nonce):
                    self._exchange.nonce = Nonce(nonce)
                self._exchange.set_client_final(message)
                final = self._exchange.get_server_final()
            except ScramException as exc:
                if exc.server_error is ServerError.INVALID_PROOF:
                    raise failure from None
                raise AuthenticationFailed(f"Invalid SCRAM client final message: {exc}", self.user) from None
            if not self._known:  # made-up keys: no proof can match them, and none may pass
                raise failure
            self.complete = True
            return final.encode()
        raise AuthenticationFailed("Unexpected SCRAM message after the exchange ended")


@dataclass(slots=True)
class Session:
    """Who is on a connection, and where it is in the SASL exchange."""

    security: ListenerSecurity = PLAINTEXT
    # Kafka's principal: User:ANONYMOUS on PLAINTEXT, the certificate's mapped name on
    # SSL with a client certificate, the SASL user once authenticated.
    user: str = ANONYMOUS
    authenticated: bool = False
    mechanism: str | None = None
    server: PlainServer | ScramServer | OAuthBearerServer | None = None
    # Handshake v0: the mechanism's tokens come as bare frames, not SaslAuthenticate.
    raw_tokens: bool = False
    # Monotonic time after which the client must authenticate again (KIP-368); None: never.
    expires_at: float | None = None
    # Close the connection once the response in hand is sent (a failed authentication).
    close_after_response: bool = False

    @property
    def principal(self) -> str:
        return f"User:{self.user}"

    @property
    def needs_authentication(self) -> bool:
        if not self.security.uses_sasl:
            return False
        return not self.authenticated or (self.expires_at is not None and time.monotonic() > self.expires_at)

    def start(self, mechanism: str, credentials: Credentials) -> None:
        sasl = self.security.sasl
        assert sasl is not None
        self.mechanism = mechanism
        if mechanism == "PLAIN":
            self.server = PlainServer(dict(sasl.plain_users))
        elif mechanism == "OAUTHBEARER":
            self.server = OAuthBearerServer(sasl.oauthbearer)
        else:
            self.server = ScramServer(mechanism, credentials)

    def respond_to(self, token: bytes, events: SecurityEvents, peer: str) -> tuple[bytes, int]:
        """One token of the exchange: the server's answer and, once authenticated, the
        session lifetime in ms (0: none). Raises AuthenticationFailed, having logged and
        counted it and marked the connection for closing."""
        server = self.server
        assert server is not None
        try:
            challenge = server.step(token)
            lifetime = 0
            if server.complete:
                assert server.user is not None, "a mechanism that completed names its user"
                lifetime = self.authenticated_as(server.user, getattr(server, "expires_at", None))
        except AuthenticationFailed as exc:
            self.close_after_response = True
            self.server = None
            events.authentication_failed(server.mechanism)
            # The reason and the user name, never the token: it holds the password.
            log.warning("authentication failed", mechanism=server.mechanism, user=(exc.user or "")[:128],
                        reason=str(exc), peer=peer)
            raise
        if server.complete:
            log.info("authenticated", mechanism=server.mechanism, principal=self.principal, peer=peer)
        return challenge, lifetime

    def authenticated_as(self, user: str, credential_expires_at: float | None = None) -> int:
        """Mark the session authenticated; the session lifetime to tell the client (ms, 0: none).
        With re-authentication on, a credential that expires sooner (an OAUTHBEARER
        token's exp, seconds since the epoch) shortens it, as in Kafka."""
        if self.authenticated and user != self.user:
            # KIP-368: re-authentication may not change the principal.
            raise AuthenticationFailed("Cannot change principals during re-authentication from "
                                       f"User:{self.user} to User:{user}", user)
        self.user = user
        self.authenticated = True
        self.server = None
        self.raw_tokens = False
        lifetime = self.security.reauth_ms
        if lifetime and credential_expires_at is not None:
            lifetime = max(1, min(lifetime, int((credential_expires_at - time.time()) * 1000)))
        self.expires_at = time.monotonic() + lifetime / 1000 if lifetime else None
        return lifetime
