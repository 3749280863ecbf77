"""HTTP Basic sign-in on the admin endpoint and the schema registry
(console/access.py, issue 40 point 5): the PBKDF2 runs in the sign-in thread,
never on the event loop; every failure is answered no sooner than the failure delay
after it began and costs one hash whether the user exists or not; an address with too
many failures, or too many sign-ins under way, is refused without hashing; a remembered
login is forgotten when the SCRAM credentials change.

Break-and-see-it-fail: with the hash run on the loop (`_password_matches` called
directly in `_verify`), test_the_hash_runs_in_the_sign_in_thread failed (MainThread);
with the unknown user's made-up hash skipped, test_every_failure_is_delayed_and_costs_one_hash
failed (0 hashes for the unknown user); with `begin` not checking the failures,
test_an_address_with_too_many_failures_is_refused failed; with the generation left out
of the remembered login, test_a_remembered_login_is_forgotten_when_credentials_change
failed (the old password still signed in).
"""

from __future__ import annotations

import asyncio
import base64
import threading
import time

import pytest

from ottla.broker.security.scram_credentials import ScramCredentials, credential_from_password
from ottla.console import access as access_module
from ottla.console.access import MAX_FAILURES, MAX_PENDING, AdminAccess, TooManyAttempts

DELAY_MS = 200


def _basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


@pytest.fixture
def scram(tmp_path) -> ScramCredentials:
    credentials = ScramCredentials(str(tmp_path))
    credentials.change([("carol", "SCRAM-SHA-512", credential_from_password("SCRAM-SHA-512", "carol-secret"))], [])
    return credentials


@pytest.fixture
def access(scram: ScramCredentials):
    access = AdminAccess(None, has_authorizer=False, sasl=True, plain_users={"alice": "alice-secret"},
                         stores=lambda: (None, scram), remote_console=False, failed_delay_ms=DELAY_MS)
    yield access
    access.close()


@pytest.fixture
def hashes(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The thread of every PBKDF2 the sign-in runs."""
    seen: list[str] = []
    real = access_module.credential_from_password

    def counted(*args, **kwargs):
        seen.append(threading.current_thread().name)
        return real(*args, **kwargs)

    monkeypatch.setattr(access_module, "credential_from_password", counted)
    return seen


async def test_the_hash_runs_in_the_sign_in_thread(access: AdminAccess, hashes: list[str]) -> None:
    assert str(await access.sign_in(_basic("carol", "carol-secret"), "10.0.0.1")) == "User:carol"
    assert str(await access.sign_in(_basic("alice", "alice-secret"), "10.0.0.1")) == "User:alice"
    assert hashes and all(name.startswith("ottla-sign-in") for name in hashes), hashes


async def test_every_failure_is_delayed_and_costs_one_hash(access: AdminAccess, hashes: list[str]) -> None:
    for user in ("nobody", "alice", "carol"):  # unknown, a PLAIN user, a SCRAM user
        hashes.clear()
        started = time.monotonic()
        assert await access.sign_in(_basic(user, "wrong"), f"10.0.1.{len(user)}") is None
        assert time.monotonic() - started >= DELAY_MS / 1000, user
        assert len(hashes) == 1, (user, hashes)
    # Not Basic at all, or not base64: refused after the delay too.
    for header in ("Bearer nope", "Basic !!!"):
        started = time.monotonic()
        assert await access.sign_in(header, "10.0.2.1") is None
        assert time.monotonic() - started >= DELAY_MS / 1000


async def test_an_address_with_too_many_failures_is_refused(access: AdminAccess, hashes: list[str]) -> None:
    await asyncio.gather(*(access.sign_in(_basic("carol", f"guess{i}"), "10.0.3.1") for i in range(MAX_PENDING)))
    for i in range(MAX_FAILURES - MAX_PENDING):
        assert await access.sign_in(_basic("carol", f"more{i}"), "10.0.3.1") is None
    hashes.clear()
    with pytest.raises(TooManyAttempts) as refused:
        await access.sign_in(_basic("carol", "carol-secret"), "10.0.3.1")  # even the right one
    assert 0 < refused.value.retry_after <= access_module.FAILURE_WINDOW and not hashes
    # Another address is not held by it.
    assert str(await access.sign_in(_basic("carol", "carol-secret"), "10.0.3.2")) == "User:carol"


async def test_too_many_sign_ins_under_way_are_refused(access: AdminAccess) -> None:
    tries = [asyncio.ensure_future(access.sign_in(_basic("carol", f"g{i}"), "10.0.4.1"))
             for i in range(MAX_PENDING + 1)]
    done = await asyncio.gather(*tries, return_exceptions=True)
    assert done[:MAX_PENDING] == [None] * MAX_PENDING and isinstance(done[-1], TooManyAttempts)
    # The same header sent again while it is verified shares the verification.
    same = await asyncio.gather(*(access.sign_in(_basic("carol", "carol-secret"), "10.0.4.2")
                                  for _ in range(3 * MAX_PENDING)))
    assert {str(p) for p in same} == {"User:carol"}


async def test_a_remembered_login_is_forgotten_when_credentials_change(access: AdminAccess, scram: ScramCredentials,
                                                                       hashes: list[str]) -> None:
    header = _basic("carol", "carol-secret")
    assert str(await access.sign_in(header, "10.0.5.1")) == "User:carol"
    hashes.clear()
    assert str(await access.sign_in(header, "10.0.5.1")) == "User:carol" and not hashes  # remembered
    scram.change([("carol", "SCRAM-SHA-512", credential_from_password("SCRAM-SHA-512", "new-secret"))], [])
    assert await access.sign_in(header, "10.0.5.1") is None
    assert str(await access.sign_in(_basic("carol", "new-secret"), "10.0.5.1")) == "User:carol"
    scram.change([], [("carol", "SCRAM-SHA-512")])
    assert await access.sign_in(_basic("carol", "new-secret"), "10.0.5.1") is None
