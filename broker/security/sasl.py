"""SASL on a connection: the session's state, and the server side of each mechanism.

A connection on a SASL listener goes through Kafka's exchange before anything else is
served: ApiVersions (optional), SaslHandshake naming a mechanism, then the mechanism's
tokens - in SaslAuthenticate requests (handshake v1), or as bare size-prefixed frames
(handshake v0, the older clients' way). Until it succeeds, any other request closes the
connection, as Kafka's SaslServerAuthenticator does.

Mechanisms:
- PLAIN (RFC 4616): one token, `authzid NUL user NUL password`, checked against the
  listener's JAAS users.
- SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677): two round trips; the broker
  holds only the salted keys (broker/security/scram_credentials.py).
- OAUTHBEARER with Kafka's unsecured-JWS validation, for development.
A failure is SASL_AUTHENTICATION_FAILED with Kafka's message (which never says whether
the user exists), a log line without the secret, a metric, and the connection closed.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
import secrets
import time
from dataclasses import dataclass
from typing import Any, Protocol

from ..logging import get_logger
from .scram_credentials import MECHANISMS as SCRAM_MECHANISMS
from .security_config import PLAINTEXT, ListenerSecurity

ANONYMOUS = "ANONYMOUS"
log = get_logger("ottla.sasl")


class Credentials(Protocol):
    """The SCRAM users (scram_credentials.py's ScramCredentials)."""

    def get(self, user: str, mechanism: str) -> Any: ...
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
    """OAUTHBEARER (RFC 7628, KIP-255) with Kafka's unsecured-JWS validation, for
    development: a token whose header says `"alg": "none"`, with a `sub` claim (the
    principal) and an `exp` claim in the future. Nothing is verified cryptographically,
    exactly as Kafka's OAuthBearerUnsecuredValidatorCallbackHandler."""

    mechanism = "OAUTHBEARER"

    def __init__(self) -> None:
        self.complete = False
        self.user: str | None = None

    def step(self, token: bytes) -> bytes:
        # gs2-header, then %x01-separated key=value pairs ending with %x01%x01.
        header, sep, rest = token.partition(b"\x01")
        if not sep or not header.startswith(b"n,") or not rest.endswith(b"\x01\x01"):
            raise AuthenticationFailed("Invalid OAUTHBEARER client first message")
        pairs = dict(item.split(b"=", 1) for item in rest[:-2].split(b"\x01") if b"=" in item)
        auth = pairs.get(b"auth", b"")
        if not auth.lower().startswith(b"bearer "):
            raise AuthenticationFailed("Invalid OAUTHBEARER client first message: no bearer token")
        claims = _unsecured_jws_claims(auth[7:].strip())
        user = claims.get("sub")
        if not isinstance(user, str) or not user:
            raise AuthenticationFailed('{"status":"invalid_token"}: the token has no sub claim')
        expires = claims.get("exp")
        if not isinstance(expires, (int, float)) or expires <= time.time():
            raise AuthenticationFailed('{"status":"invalid_token"}: the token has expired or has no exp claim', user)
        authzid = header[2:].rstrip(b",")
        if authzid.startswith(b"a=") and authzid[2:].decode("utf-8", "replace") != user:
            raise AuthenticationFailed("Authentication failed: Client requested an authorization id that is "
                                       "different from the token's principal", user)
        self.user = user
        self.complete = True
        return b""


def _unsecured_jws_claims(token: bytes) -> dict:  # type: ignore[type-arg]
    parts = token.split(b".")
    if len(parts) != 3 or parts[2]:
        raise AuthenticationFailed('{"status":"invalid_token"}: not an unsecured JWS (header.claims.)')
    try:
        header, claims = (json.loads(base64.urlsafe_b64decode(p + b"=" * (-len(p) % 4))) for p in parts[:2])
    except (ValueError, UnicodeDecodeError):
        raise AuthenticationFailed('{"status":"invalid_token"}: the token is not base64url JSON') from None
    if not isinstance(header, dict) or header.get("alg") != "none" or not isinstance(claims, dict):
        raise AuthenticationFailed('{"status":"invalid_token"}: only unsecured tokens (alg none) are accepted')
    return claims


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


_SCRAM_ATTRIBUTE = re.compile(rb"^([a-zA-Z])=(.*)$", re.S)


def _attributes(message: bytes) -> dict[str, bytes]:
    out: dict[str, bytes] = {}
    for part in message.split(b","):
        match = _SCRAM_ATTRIBUTE.match(part)
        if match is None:
            raise AuthenticationFailed("Invalid SCRAM message: " + part[:40].decode("utf-8", "replace"))
        out[match.group(1).decode()] = match.group(2)
    return out


def _unescape_name(raw: bytes) -> str:
    # RFC 5802: ',' and '=' in a name are written =2C and =3D; any other '=' is invalid.
    if re.search(rb"=(?!2C|3D)", raw):
        raise AuthenticationFailed("Invalid SCRAM username")
    return raw.replace(b"=2C", b",").replace(b"=3D", b"=").decode("utf-8")


class ScramServer:
    def __init__(self, mechanism: str, credentials: "Credentials") -> None:
        self.mechanism = mechanism
        self._digest = SCRAM_MECHANISMS[mechanism][0]
        self._credentials = credentials
        self._state = "first"
        self.complete = False
        self.user: str | None = None

    def step(self, token: bytes) -> bytes:
        if self._state == "first":
            return self._client_first(token)
        if self._state == "final":
            return self._client_final(token)
        raise AuthenticationFailed("Unexpected SCRAM message after the exchange ended")

    def _client_first(self, message: bytes) -> bytes:
        # gs2-header: "n,," or "n,a=authzid," (no channel binding; "y"/"p" are refused,
        # as Kafka refuses them).
        match = re.match(rb"^(n|y|p=[^,]*),(a=[^,]*)?,(.*)$", message, re.S)
        if match is None or not match.group(1) == b"n":
            raise AuthenticationFailed("Invalid SCRAM client first message")
        self._gs2_header = message[: len(message) - len(match.group(3))]
        self._client_first_bare = match.group(3)
        attributes = _attributes(self._client_first_bare)
        if "n" not in attributes or "r" not in attributes or not attributes["r"]:
            raise AuthenticationFailed("Invalid SCRAM client first message")
        user = _unescape_name(attributes["n"])
        self.user = user
        authzid = match.group(2)
        if authzid and _unescape_name(authzid[2:]) != user:
            raise AuthenticationFailed("Authentication failed: Client requested an authorization id that is "
                                       "different from username", user)
        credential = self._credentials.get(user, self.mechanism)
        self._credential = credential
        if credential is None:
            # Go on with made-up values: the failure comes at the proof, as for a wrong
            # password, so the exchange does not tell who exists.
            salt, iterations = hashlib.sha256(b"ottla" + user.encode()).digest(), 4096
        else:
            salt, iterations = credential.salt, credential.iterations
        self._nonce = attributes["r"] + base64.b64encode(secrets.token_bytes(18)).replace(b"=", b"")
        self._server_first = b"r=%s,s=%s,i=%d" % (self._nonce, base64.b64encode(salt), iterations)
        self._state = "final"
        return self._server_first

    def _client_final(self, message: bytes) -> bytes:
        self._state = "done"
        proof_at = message.rfind(b",p=")
        if proof_at < 0:
            raise AuthenticationFailed("Invalid SCRAM client final message", self.user)
        without_proof = message[:proof_at]
        attributes = _attributes(message)
        # Kafka checks that the nonce ends with the server's (its ScramSaslServer), which
        # librdkafka before 1.7 relies on: it repeats its own nonce in front.
        if not attributes.get("r", b"").endswith(self._nonce):
            raise AuthenticationFailed("Invalid client nonce in the final client message.", self.user)
        if attributes.get("c") != base64.b64encode(self._gs2_header):
            raise AuthenticationFailed("Invalid SCRAM client final message: channel binding mismatch", self.user)
        try:
            proof = base64.b64decode(attributes.get("p", b""), validate=True)
        except ValueError:
            raise AuthenticationFailed("Invalid SCRAM client final message: proof", self.user) from None
        failure = AuthenticationFailed("Authentication failed during authentication due to invalid credentials with "
                                       f"SASL mechanism {self.mechanism}", self.user)
        credential = self._credential
        if credential is None:
            raise failure
        auth_message = self._client_first_bare + b"," + self._server_first + b"," + without_proof
        signature = hmac.digest(credential.stored_key, auth_message, self._digest)
        if len(proof) != len(signature):
            raise failure
        client_key = bytes(a ^ b for a, b in zip(proof, signature))
        if not hmac.compare_digest(hashlib.new(self._digest, client_key).digest(), credential.stored_key):
            raise failure
        self.complete = True
        return b"v=" + base64.b64encode(hmac.digest(credential.server_key, auth_message, self._digest))


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

    def start(self, mechanism: str, credentials: "Credentials") -> None:
        sasl = self.security.sasl
        assert sasl is not None
        self.mechanism = mechanism
        if mechanism == "PLAIN":
            self.server = PlainServer(dict(sasl.plain_users))
        elif mechanism == "OAUTHBEARER":
            self.server = OAuthBearerServer()
        else:
            self.server = ScramServer(mechanism, credentials)

    def respond_to(self, token: bytes, events: "SecurityEvents", peer: str) -> tuple[bytes, int]:
        """One token of the exchange: the server's answer and, once authenticated, the
        session lifetime in ms (0: none). Raises AuthenticationFailed, having logged and
        counted it and marked the connection for closing."""
        server = self.server
        assert server is not None
        try:
            challenge = server.step(token)
            lifetime = self.authenticated_as(server.user) if server.complete else 0  # type: ignore[arg-type]
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

    def authenticated_as(self, user: str) -> int:
        """Mark the session authenticated; the session lifetime to tell the client (ms, 0: none)."""
        if self.authenticated and user != self.user:
            # KIP-368: re-authentication may not change the principal.
            raise AuthenticationFailed("Cannot change principals during re-authentication from "
                                       f"User:{self.user} to User:{user}", user)
        self.user = user
        self.authenticated = True
        self.server = None
        self.raw_tokens = False
        lifetime = self.security.reauth_ms
        self.expires_at = time.monotonic() + lifetime / 1000 if lifetime else None
        return lifetime
