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

Signing in is guarded as Kafka guards SASL (issue 40 point 5): the password is hashed
(SCRAM's PBKDF2) in a thread of its own, never on the event loop; a failure is answered
`connection.failed.authentication.delay.ms` after the attempt began (100 ms, Kafka's
default), whether the user exists or not (an unknown user costs the same hash, of
made-up credentials); a client address with MAX_FAILURES failures in the last
FAILURE_WINDOW seconds, or MAX_PENDING sign-ins under way, is refused at once
(TooManyAttempts: 429) without hashing; and a remembered login is forgotten as soon
as the SCRAM credentials change (AlterUserScramCredentials).
"""

from __future__ import annotations

import asyncio
import base64
import hmac
import secrets
import time
from collections import deque
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ottla.broker.security.authorizer import Operation, ResourceType
from ottla.broker.security.scram_credentials import MECHANISMS as SCRAM_MECHANISMS
from ottla.broker.security.scram_credentials import credential_from_password

if TYPE_CHECKING:
    from ottla.broker.security.authorizer import Authorizer
    from ottla.broker.security.scram_credentials import ScramCredentials

# A verified Basic header is remembered this long, so that a page's every request (the
# page, its script, its style sheet, the charts' polls) does not cost a PBKDF2 of the
# SCRAM iterations each.
VERIFIED_FOR_SECONDS = 300.0
_MAX_REMEMBERED = 1024
# Sign-in attempts of one client address: failures counted over a sliding window, and
# how many may be verified at once (a browser's page sends its first requests together,
# each with the same header: those share one verification).
MAX_FAILURES = 10
FAILURE_WINDOW = 60.0
MAX_PENDING = 4
_MAX_ADDRESSES = 10_000  # addresses whose failures are remembered (past it, expired ones go)


@dataclass(frozen=True, slots=True)
class Principal:
    name: str  # Kafka's form: User:alice
    operator: bool = False  # holds admin.token: allowed everything

    def __str__(self) -> str:
        return self.name


OPERATOR = Principal("User:admin-token", operator=True)


class TooManyAttempts(Exception):
    """The client address failed to sign in too often, or has too many sign-ins under
    way: refused (429) without hashing, for `retry_after` seconds."""

    def __init__(self, retry_after: float) -> None:
        super().__init__(f"too many sign-in attempts from this address; retry in {retry_after:.0f} s")
        self.retry_after = retry_after


class SignInAttempts:
    """Per client address: the times of its failed sign-ins within FAILURE_WINDOW, and
    how many of its sign-ins are being verified."""

    def __init__(self) -> None:
        self._failures: dict[str, deque[float]] = {}
        self._pending: dict[str, int] = {}

    def begin(self, peer: str, now: float) -> None:
        """Count a sign-in under way, or raise TooManyAttempts."""
        failures = self._failures.get(peer)
        while failures and failures[0] <= now - FAILURE_WINDOW:
            failures.popleft()
        if failures is not None and len(failures) >= MAX_FAILURES:
            raise TooManyAttempts(failures[0] + FAILURE_WINDOW - now)
        if self._pending.get(peer, 0) >= MAX_PENDING:
            raise TooManyAttempts(1.0)
        self._pending[peer] = self._pending.get(peer, 0) + 1

    def end(self, peer: str, failed: bool, now: float) -> None:
        left = self._pending.get(peer, 1) - 1
        if left:
            self._pending[peer] = left
        else:
            self._pending.pop(peer, None)
        if failed:
            if peer not in self._failures and len(self._failures) >= _MAX_ADDRESSES:
                self._failures = {p: f for p, f in self._failures.items() if f and f[-1] > now - FAILURE_WINDOW}
                if len(self._failures) >= _MAX_ADDRESSES:
                    self._failures.clear()
            self._failures.setdefault(peer, deque()).append(now)


class AdminAccess:
    def __init__(self, token: str | None, *, has_authorizer: bool, sasl: bool, plain_users: Mapping[str, str],
                 stores: Callable[[], tuple[Authorizer | None, ScramCredentials | None]],
                 remote_console: bool, failed_delay_ms: int = 100) -> None:
        self.token = token
        self.secured = has_authorizer or sasl
        self._has_authorizer = has_authorizer
        self.remote_console = remote_console
        self._plain_users = dict(plain_users)
        # The ACLs and the SCRAM users live in the data directory, which the broker loads
        # after the endpoint exists: asked for at each check, (None, None) until loaded.
        self._stores = stores
        self._key = secrets.token_bytes(32)  # the remembered headers are kept as MACs under it
        # MAC -> (until, the SCRAM credentials' generation then, principal)
        self._verified: dict[bytes, tuple[float, int, Principal]] = {}
        self._verifying: dict[bytes, asyncio.Future[Principal | None]] = {}
        self._failed_delay = failed_delay_ms / 1000
        self._attempts = SignInAttempts()
        self._hashing = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ottla-sign-in")

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

    async def sign_in(self, authorization: str, peer: str) -> Principal | None:
        """Who the Authorization header proves is asking: None for no header, or one that
        proves nobody (answered only after the failure delay); TooManyAttempts for an
        address that tried too often."""
        if not authorization:
            return None
        if self.holds_token(authorization):
            return OPERATOR
        mac = hmac.digest(self._key, authorization.encode("utf-8", "surrogateescape"), "sha256")
        remembered = self._verified.get(mac)
        if remembered is not None and remembered[0] > time.monotonic() and remembered[1] == self._generation():
            return remembered[2]
        started = time.monotonic()
        under_way = self._verifying.get(mac)
        if under_way is not None:  # the same header, sent again before its check ended
            shared = await asyncio.shield(under_way)
            if shared is None:  # that check's delay ran from its start: this one's from its own
                await self._until_failure_delay(started)
            return shared
        self._attempts.begin(peer, started)
        verifying: asyncio.Future[Principal | None] = asyncio.get_running_loop().create_future()
        self._verifying[mac] = verifying
        principal: Principal | None = None
        verified = False
        try:
            generation = self._generation()
            principal = await self._verify(authorization)
            verified = True
            if principal is not None:
                self._remember(mac, generation, principal)
            else:
                # Every failure leaves at the same moment after its start, whether the user
                # exists or not, as Kafka's failed SASL authentications do.
                await self._until_failure_delay(started)
        finally:
            del self._verifying[mac]
            self._attempts.end(peer, verified and principal is None, time.monotonic())
            if not verifying.done():
                verifying.set_result(principal)  # a request sharing it, if this one was cancelled: refused
        return principal

    async def _until_failure_delay(self, started: float) -> None:
        # The event loop may wake a sleeper up to its clock's resolution early: sleep on.
        while (left := started + self._failed_delay - time.monotonic()) > 0:
            await asyncio.sleep(left)

    async def _verify(self, authorization: str) -> Principal | None:
        scheme, _, value = authorization.partition(" ")
        if scheme.lower() != "basic":
            return None
        user, password = _basic(value)
        if user is None or password is None:
            return None
        matches = await asyncio.get_running_loop().run_in_executor(self._hashing, self._password_matches, user,
                                                                   password)
        return Principal(f"User:{user}") if matches else None

    def _generation(self) -> int:
        scram = self._stores()[1]
        return scram.generation if scram is not None else 0

    def _remember(self, mac: bytes, generation: int, principal: Principal) -> None:
        now = time.monotonic()
        if len(self._verified) >= _MAX_REMEMBERED:
            self._verified = {k: v for k, v in self._verified.items() if v[0] > now}
            if len(self._verified) >= _MAX_REMEMBERED:
                self._verified.clear()
        self._verified[mac] = (now + VERIFIED_FOR_SECONDS, generation, principal)

    def _password_matches(self, user: str, password: str) -> bool:
        """In the sign-in thread: whether `password` is the user's (PLAIN or SCRAM). A
        user without SCRAM credentials costs the same PBKDF2, of made-up ones."""
        expected = self._plain_users.get(user)
        if expected is not None and hmac.compare_digest(expected.encode(), password.encode()):
            return True
        scram = self._stores()[1]
        if scram is None:
            return False
        found = False
        for mechanism in SCRAM_MECHANISMS:
            stored = scram.get(user, mechanism)
            if stored is None:
                continue
            found = True
            derived = credential_from_password(mechanism, password, stored.iterations, stored.salt)
            if hmac.compare_digest(derived.stored_key, stored.stored_key):
                return True
        if not found:
            made_up = scram.unknown_user(user, "SCRAM-SHA-512")
            credential_from_password("SCRAM-SHA-512", password, made_up.iterations, made_up.salt)
        return False

    def close(self) -> None:
        self._hashing.shutdown(wait=False, cancel_futures=True)

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

    # Kafka's delay for a failed authentication, per listener: the endpoints take the longest.
    delay_ms = max((security.failed_auth_delay_ms for security in broker.kafka_listeners.security.values()),
                   default=100)
    return AdminAccess(config.admin_token, has_authorizer=bool(config.authorizer_class_name), sasl=bool(sasl),
                       plain_users=plain_users, stores=stores, remote_console=config.admin_console_remote,
                       failed_delay_ms=delay_ms)


def _basic(value: str) -> tuple[str | None, str | None]:
    try:
        decoded = base64.b64decode(value.strip(), validate=True).decode("utf-8")
    except (ValueError, UnicodeDecodeError):
        return None, None
    user, sep, password = decoded.partition(":")
    return (user, password) if sep and user else (None, None)

