"""OAUTHBEARER tokens (RFC 7628, KIP-255, KIP-768): who a bearer token says the client is.

Two validators, chosen per listener as Kafka chooses its server callback handler:
- signed JWTs (Kafka's OAuthBearerValidatorCallbackHandler): the signature checked with a
  key of the JWKS at `sasl.oauthbearer.jwks.endpoint.url` (an https:, http: or file: URL),
  `exp` and `iat` required, `exp`, `nbf`, and the optional `sasl.oauthbearer.expected.audience`
  and `.expected.issuer` checked with `sasl.oauthbearer.clock.skew.seconds` of leeway; the
  principal is the `sasl.oauthbearer.sub.claim.name` claim (`sub`), the scopes the
  `sasl.oauthbearer.scope.claim.name` claim (`scope`). Algorithm `none` and shared-secret
  (HMAC) algorithms are refused: a JWKS publishes public keys.
- unsecured JWS (Kafka's default OAuthBearerUnsecuredValidatorCallbackHandler), for
  development only: header `"alg": "none"`, any `sub`, nothing verified. The broker warns
  at start-up on every listener that accepts them.

The JWKS is read at start-up (an unreadable one is a configuration error), a file again
when it changes, an HTTP one again every `sasl.oauthbearer.jwks.endpoint.refresh.ms` (in a
thread: a SASL exchange never waits on the network) and when a token names a key id the
set does not hold (at most once a second).
"""

from __future__ import annotations

import base64
import json
import os
import threading
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..logging import get_logger

# PyJWT is imported where signed tokens are checked (a listener with a JWKS), not by
# every broker that starts.
if TYPE_CHECKING:
    import jwt

log = get_logger("ottla.sasl")

# The properties of the signed-JWT validator, as Kafka names them.
PROPERTIES = frozenset({
    "sasl.oauthbearer.jwks.endpoint.url", "sasl.oauthbearer.jwks.endpoint.refresh.ms",
    "sasl.oauthbearer.expected.audience", "sasl.oauthbearer.expected.issuer", "sasl.oauthbearer.scope.claim.name",
    "sasl.oauthbearer.sub.claim.name", "sasl.oauthbearer.clock.skew.seconds", "sasl.server.callback.handler.class",
})
VALIDATOR_HANDLERS = ("org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler",
                      "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerValidatorCallbackHandler")
# Asymmetric algorithms only: the keys come from a published JWKS.
ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA")
# Kafka's message for any token it refuses; the reason goes to the log line.
INVALID_TOKEN = '{"status":"invalid_token"}'
_MISSING_KEY_RETRY_S = 1.0


class InvalidToken(Exception):
    """The token is refused; the message says why (for the log, never the token)."""


@dataclass(frozen=True, slots=True)
class JwtSettings:
    jwks_url: str
    refresh_ms: int = 3_600_000
    expected_audience: tuple[str, ...] = ()
    expected_issuer: str | None = None
    scope_claim: str = "scope"
    sub_claim: str = "sub"
    clock_skew_s: int = 30


@dataclass(frozen=True, slots=True)
class Token:
    principal: str
    expires_at: float  # seconds since the epoch
    scopes: frozenset[str] = frozenset()


def jwt_settings(get: Callable[[str], str | None], key_of: Callable[[str], str],
                 error: Callable[[str, str], Exception]) -> JwtSettings | None:
    """The signed-JWT settings of a listener, or None when it accepts unsecured tokens.
    `get` reads a property with the listener's prefixes, `error(key, message)` makes the
    configuration error to raise."""
    url = get("sasl.oauthbearer.jwks.endpoint.url")
    handler = get("sasl.server.callback.handler.class")
    if url is None:
        if handler in VALIDATOR_HANDLERS:
            key = key_of("sasl.oauthbearer.jwks.endpoint.url")
            raise error(key, f"{handler} needs {key} (an https: or file: URL of the JWKS)")
        return None
    if urllib.parse.urlsplit(url).scheme not in ("https", "http", "file"):
        key = key_of("sasl.oauthbearer.jwks.endpoint.url")
        raise error(key, f"invalid value for {key}: {url!r} is not an https:, http: or file: URL")

    def integer(name: str, default: int) -> int:
        text = get(name)
        if text is None:
            return default
        try:
            value = int(text)
        except ValueError:
            raise error(key_of(name), f"invalid value for {key_of(name)}: {text!r} is not a number") from None
        if value < 0:
            raise error(key_of(name), f"invalid value for {key_of(name)}: {value} is negative")
        return value

    audience = tuple(a.strip() for a in (get("sasl.oauthbearer.expected.audience") or "").split(",") if a.strip())
    return JwtSettings(
        jwks_url=url,
        refresh_ms=integer("sasl.oauthbearer.jwks.endpoint.refresh.ms", 3_600_000),
        expected_audience=audience,
        expected_issuer=get("sasl.oauthbearer.expected.issuer") or None,
        scope_claim=get("sasl.oauthbearer.scope.claim.name") or "scope",
        sub_claim=get("sasl.oauthbearer.sub.claim.name") or "sub",
        clock_skew_s=integer("sasl.oauthbearer.clock.skew.seconds", 30),
    )


class JwksKeys:
    """The keys of one JWKS URL, kept fresh as the module docstring says."""

    def __init__(self, settings: JwtSettings) -> None:
        self._settings = settings
        self._lock = threading.Lock()
        self._keys: dict[str | None, jwt.PyJWK] = {}
        self._loaded_at = 0.0
        self._file_stamp: tuple[float, int] | None = None
        self._refreshing = False
        self._last_missing_retry = 0.0
        self._load()  # at start-up: a JWKS that cannot be read is a configuration error

    @property
    def _path(self) -> str | None:
        import urllib.request

        parts = urllib.parse.urlsplit(self._settings.jwks_url)
        return urllib.request.url2pathname(parts.path) if parts.scheme == "file" else None

    def _load(self) -> None:
        import urllib.request

        import jwt

        path = self._path
        if path is not None:
            info = os.stat(path)
            with open(path, "rb") as f:
                text = f.read()
            self._file_stamp = (info.st_mtime, info.st_size)
        else:
            with urllib.request.urlopen(self._settings.jwks_url, timeout=10) as answer:  # http(s) only
                text = answer.read(1 << 20)
        keys: dict[str | None, jwt.PyJWK] = {}
        try:
            document = json.loads(text)
            for entry in document.get("keys", []) if isinstance(document, dict) else []:
                if not isinstance(entry, dict) or entry.get("use", "sig") != "sig" or entry.get("kty") == "oct":
                    continue
                try:
                    key = jwt.PyJWK.from_dict(entry)
                except (jwt.PyJWKError, jwt.InvalidKeyError, ValueError, TypeError):
                    continue  # an algorithm or key type this build cannot use: skipped, as jose4j does
                keys[entry.get("kid")] = key
        except ValueError:
            raise ValueError(f"the JWKS at {self._settings.jwks_url} is not JSON") from None
        if not keys:
            raise ValueError(f"the JWKS at {self._settings.jwks_url} holds no signing key")
        with self._lock:
            self._keys = keys
            self._loaded_at = time.monotonic()

    def _reload_quietly(self) -> None:
        try:
            self._load()
        except (OSError, ValueError) as exc:
            # The keys in hand stay in use; the next due time tries again.
            log.warning("JWKS not refreshed", url=self._settings.jwks_url, reason=str(exc))
        finally:
            self._refreshing = False

    def _refresh_if_due(self, missing_kid: bool) -> None:
        path = self._path
        if path is not None:
            try:
                info = os.stat(path)
            except OSError:
                return
            if (info.st_mtime, info.st_size) != self._file_stamp:
                self._reload_quietly()
            return
        now = time.monotonic()
        due = now - self._loaded_at > self._settings.refresh_ms / 1000
        if missing_kid and now - self._last_missing_retry > _MISSING_KEY_RETRY_S:
            self._last_missing_retry = now
            due = True
        if due and not self._refreshing:
            self._refreshing = True
            threading.Thread(target=self._reload_quietly, name="ottla-jwks", daemon=True).start()

    def key_for(self, kid: str | None) -> jwt.PyJWK:
        self._refresh_if_due(missing_kid=False)
        keys = self._keys
        key = keys.get(kid) if kid is not None else (next(iter(keys.values())) if len(keys) == 1 else None)
        if key is None:
            self._refresh_if_due(missing_kid=True)
            key = self._keys.get(kid)
        if key is None:
            raise InvalidToken(f"no key of the JWKS has the token's key id {kid!r}")
        return key


class JwtValidator:
    def __init__(self, settings: JwtSettings) -> None:
        self.settings = settings
        self.keys = JwksKeys(settings)

    def validate(self, token: str) -> Token:
        import jwt

        settings = self.settings
        try:
            header = jwt.get_unverified_header(token)
            algorithm = header.get("alg")
            if algorithm not in ALGORITHMS:
                raise InvalidToken(f"the token's algorithm {algorithm!r} is not allowed")
            key = self.keys.key_for(header.get("kid"))
            claims: dict[str, Any] = jwt.decode(
                token, key=key, algorithms=[algorithm],
                audience=list(settings.expected_audience) or None, issuer=settings.expected_issuer,
                leeway=settings.clock_skew_s,
                options={"require": ["exp", "iat"], "verify_aud": bool(settings.expected_audience),
                         "verify_iss": settings.expected_issuer is not None})
        except jwt.PyJWTError as exc:
            raise InvalidToken(f"Could not validate the access token: {exc}") from None
        subject = claims.get(settings.sub_claim)
        if not isinstance(subject, str) or not subject.strip():
            raise InvalidToken(f"the token's {settings.sub_claim} claim is missing or empty")
        raw_scopes = claims.get(settings.scope_claim)
        scopes = [raw_scopes] if isinstance(raw_scopes, str) else raw_scopes if isinstance(raw_scopes, list) else []
        if any(not isinstance(s, str) or not s.strip() for s in scopes):
            raise InvalidToken(f"the token's {settings.scope_claim} claim holds an empty or non-text value")
        return Token(subject.strip(), float(claims["exp"]), frozenset(s.strip() for s in scopes))


def unsecured_token(token: str) -> Token:
    """Kafka's OAuthBearerUnsecuredValidatorCallbackHandler: alg none, a sub, a future exp."""
    parts = token.encode().split(b".")
    if len(parts) != 3 or parts[2]:
        raise InvalidToken("not an unsecured JWS (header.claims.)")
    try:
        header, claims = (json.loads(base64.urlsafe_b64decode(p + b"=" * (-len(p) % 4))) for p in parts[:2])
    except (ValueError, UnicodeDecodeError):
        raise InvalidToken("the token is not base64url JSON") from None
    if not isinstance(header, dict) or header.get("alg") != "none" or not isinstance(claims, dict):
        raise InvalidToken("only unsecured tokens (alg none) are accepted on this listener")
    subject = claims.get("sub")
    if not isinstance(subject, str) or not subject:
        raise InvalidToken("the token has no sub claim")
    expires = claims.get("exp")
    if not isinstance(expires, (int, float)) or expires <= time.time():
        raise InvalidToken("the token has expired or has no exp claim")
    return Token(subject, float(expires))


_validators: dict[JwtSettings, JwtValidator] = {}
_validators_lock = threading.Lock()


def validator_for(settings: JwtSettings) -> JwtValidator:
    """One validator (and one copy of the keys) per distinct configuration. Raises
    OSError or ValueError when the JWKS cannot be read."""
    with _validators_lock:
        validator = _validators.get(settings)
        if validator is None:
            validator = _validators[settings] = JwtValidator(settings)
        return validator


def validate(settings: JwtSettings | None, token: str) -> Token:
    return unsecured_token(token) if settings is None else validator_for(settings).validate(token)

