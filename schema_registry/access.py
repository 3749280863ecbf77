"""Who may use the registry, on a broker with SASL users or ACLs.

The registry signs users in with HTTP Basic against the broker's own users (a PLAIN user
of a SASL listener's JAAS config, or a SCRAM user), and asks the broker's authorizer, as
that principal, about the topic a subject describes. A subject names its topic by
Confluent's default TopicNameStrategy (`<topic>-key`, `<topic>-value`); a subject without
that suffix stands for the topic of its own name. The mapping is Ottla's own:

    read a subject (versions, lookup, compatibility, config, mode)   DESCRIBE on the topic
    change a subject (register, delete, its config or mode)          WRITE on the topic
    read a schema by id                                              DESCRIBE on a topic of a subject holding it
    list subjects (and an id's subjects and versions)                only those readable as above
    change the global config or mode                                 ALTER on the cluster
    put a subject in IMPORT mode (it chooses schema ids)             ALTER on the cluster
    read the global config or mode, /schemas/types                   any signed-in user

So a producer allowed to WRITE a topic registers its schemas, a consumer allowed to READ
it (READ implies DESCRIBE) fetches them, and super users and the admin token may do
everything. The rules come from the broker (`ottla serve`, tools/serve.py, hands in its admin access): this
room knows only the two questions below.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Protocol

READ = "read"
WRITE = "write"
ALTER_CLUSTER = "alter-cluster"


class SignInLimited(Exception):
    """The client's address tried to sign in too often: 429, for `retry_after` seconds."""

    def __init__(self, retry_after: float) -> None:
        super().__init__(f"too many sign-in attempts; retry in {retry_after:.0f} s")
        self.retry_after = retry_after


class RegistryAccess(Protocol):
    """The broker's answer to the two questions: who is asking (None: nobody proven;
    SignInLimited: the address tried too often), and may they do this (action READ/WRITE
    on a subject's topic, or ALTER_CLUSTER)."""

    secured: bool

    async def sign_in(self, authorization: str, peer: str) -> str | None: ...

    def allows(self, principal: str, action: str, topic: str, peer: str) -> bool: ...


def topic_of(subject: str) -> str:
    for suffix in ("-key", "-value"):
        if subject.endswith(suffix) and len(subject) > len(suffix):
            return subject[: -len(suffix)]
    return subject


class Unsecured:
    """A broker without SASL users or ACLs: nobody to sign in, the registry answers this
    machine only (rest.py)."""

    secured = False

    async def sign_in(self, authorization: str, peer: str) -> str | None:
        return None

    def allows(self, principal: str, action: str, topic: str, peer: str) -> bool:
        return True


class CallableAccess:
    """RegistryAccess from two functions (the broker's admin access, adapted in tools/serve.py)."""

    def __init__(self, secured: bool, sign_in: Callable[[str, str], Awaitable[str | None]],
                 allows: Callable[[str, str, str, str], bool]) -> None:
        self.secured = secured
        self._sign_in = sign_in
        self._allows = allows

    async def sign_in(self, authorization: str, peer: str) -> str | None:
        return await self._sign_in(authorization, peer)

    def allows(self, principal: str, action: str, topic: str, peer: str) -> bool:
        return self._allows(principal, action, topic, peer)
