"""Who is asking the admin endpoint, and what they may see (issue 28 point 1).

A request names itself in one of two ways:

- `Authorization: Bearer <admin.token>` (or HTTP Basic with the token as the password,
  which a browser's login prompt can send): the operator, allowed everything;
- HTTP Basic with one of the broker's own SASL users: a PLAIN user of any listener's
  JAAS config, or a SCRAM user (the password is checked against the stored keys, as the
  SCRAM exchange would: the broker never holds the password). The principal is
  `User:<name>`, and every page goes through the broker's authorizer as that principal,
  with Kafka's operations (DESCRIBE to see a topic listed, READ to see its records...).

A broker is *secured* when it has an authorizer or a SASL listener: then nothing but
/healthz is read without one of the two. An unsecured broker has no users to ask for:
its console answers this machine only unless `admin.console.remote=true` (or the
request carries the token).
"""

from __future__ import annotations

import base64
import hmac
import secrets
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Mapping

from ..security.authorizer import Operation, ResourceType
from ..security.scram_credentials import MECHANISMS as SCRAM_MECHANISMS
from ..security.scram_credentials import credential_from_password

if TYPE_CHECKING:
    from ..security.authorizer import Authorizer
    from ..security.scram_credentials import ScramCredentials

# A verified Basic header is remembered this long, so that a page's every request (the
# page, its script, its style sheet, the charts' polls) does not cost a PBKDF2 of the
# SCRAM iterations each.
VERIFIED_FOR_SECONDS = 300.0
_MAX_REMEMBERED = 1024


@dataclass(frozen=True, slots=True)
class Principal:
    name: str  # Kafka's form: User:alice
    operator: bool = False  # holds admin.token: allowed everything

    def __str__(self) -> str:
        return self.name


OPERATOR = Principal("User:admin-token", operator=True)


class AdminAccess:
    def __init__(self, token: str | None, *, has_authorizer: bool, sasl: bool, plain_users: Mapping[str, str],
                 stores: Callable[[], "tuple[Authorizer | None, ScramCredentials | None]"],
                 remote_console: bool) -> None:
        self.token = token
        self.secured = has_authorizer or sasl
        self._has_authorizer = has_authorizer
        self.remote_console = remote_console
        self._plain_users = dict(plain_users)
        # The ACLs and the SCRAM users live in the data directory, which the broker loads
        # after the endpoint exists: asked for at each check, (None, None) until loaded.
        self._stores = stores
        self._key = secrets.token_bytes(32)  # the remembered headers are kept as MACs under it
        self._verified: dict[bytes, tuple[float, Principal]] = {}

    def holds_token(self, authorization: str) -> bool:
        if self.token is None:
            return False
        scheme, _, value = authorization.partition(" ")
        scheme = scheme.lower()
        if scheme == "bearer":
            given = value.strip()
        elif scheme == "basic":
            given = _basic(value)[1] or ""
        else:
            return False
        return hmac.compare_digest(given.encode(), self.token.encode())

    def principal(self, authorization: str) -> Principal | None:
        """Who the Authorization header says is asking, if it proves it."""
        if not authorization:
            return None
        if self.holds_token(authorization):
            return OPERATOR
        scheme, _, value = authorization.partition(" ")
        if scheme.lower() != "basic":
            return None
        mac = hmac.digest(self._key, authorization.encode("utf-8", "surrogateescape"), "sha256")
        now = time.monotonic()
        remembered = self._verified.get(mac)
        if remembered is not None and remembered[0] > now:
            return remembered[1]
        user, password = _basic(value)
        if user is None or password is None or not self._password_matches(user, password):
            return None
        principal = Principal(f"User:{user}")
        if len(self._verified) >= _MAX_REMEMBERED:
            self._verified = {k: v for k, v in self._verified.items() if v[0] > now}
            if len(self._verified) >= _MAX_REMEMBERED:
                self._verified.clear()
        self._verified[mac] = (now + VERIFIED_FOR_SECONDS, principal)
        return principal

    def _password_matches(self, user: str, password: str) -> bool:
        expected = self._plain_users.get(user)
        if expected is not None and hmac.compare_digest(expected.encode(), password.encode()):
            return True
        scram = self._stores()[1]
        if scram is None:
            return False
        for mechanism in SCRAM_MECHANISMS:
            stored = scram.get(user, mechanism)
            if stored is None:
                continue
            derived = credential_from_password(mechanism, password, stored.iterations, stored.salt)
            if hmac.compare_digest(derived.stored_key, stored.stored_key):
                return True
        return False

    def allows(self, principal: Principal | None, operation: Operation, resource_type: ResourceType, name: str,
               host: str) -> bool:
        """Whether the principal may do this; everything is allowed where no authorizer
        decides (a broker with SASL listeners only: being a user is enough)."""
        if principal is not None and principal.operator:
            return True
        authorizer = self._stores()[0]
        if authorizer is None:
            # No authorizer configured: being a user is enough on a secured broker. One
            # configured but not loaded yet (the broker is starting) allows nothing.
            return (not self.secured or principal is not None) and not self._has_authorizer
        if principal is None:
            return False
        return authorizer.authorize(principal.name, host, operation, resource_type, name)


def admin_access(broker: Any) -> AdminAccess:
    """The endpoint's access rules from the broker (server.Broker: its config, listeners'
    security, authorizer and SCRAM users): the users are the SASL listeners' (PLAIN users
    of every listener) and the SCRAM users."""
    sasl = [security.sasl for security in broker.kafka_listeners.security.values()
            if security.uses_sasl and security.sasl]
    plain_users: dict[str, str] = {}
    for settings in sasl:
        plain_users.update(settings.plain_users)
    config = broker.config

    def stores() -> tuple[Any, Any]:
        services = broker.services
        return (None, None) if services is None else (services.authorizer, services.scram)

    return AdminAccess(config.admin_token, has_authorizer=bool(config.authorizer_class_name), sasl=bool(sasl),
                       plain_users=plain_users, stores=stores, remote_console=config.admin_console_remote)


def _basic(value: str) -> tuple[str | None, str | None]:
    try:
        decoded = base64.b64decode(value.strip(), validate=True).decode("utf-8")
    except (ValueError, UnicodeDecodeError):
        return None, None
    user, sep, password = decoded.partition(":")
    return (user, password) if sep and user else (None, None)

