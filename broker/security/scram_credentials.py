"""SCRAM credentials, kept in the data directory as Kafka keeps them in its metadata:
per user and mechanism the salt, the iteration count, and the stored and server keys
(RFC 5802) - never the password, nor anything a client could log in with.

They change through AlterUserScramCredentials (what `kafka-configs --alter --add-config
'SCRAM-SHA-512=[password=...]'` and the admin clients send), or at start-up with
`ottla serve --add-scram` (kafka-storage's `--add-scram` syntax). The file is
`scram-credentials.json`, rewritten whole and renamed into place on each change, so a
crash leaves the old set or the new one.

Beside it, `scram-unknown-user.key`: 32 random bytes (0600) made the first time someone
tries a user that does not exist. The made-up credentials such a user is answered with
are derived from the name under this key, so they are the same on every attempt (as a
real user's are) and nobody without the key can tell them from a real user's.

Passwords are turned into keys as Kafka's ScramFormatter does (the UTF-8 bytes of the
password as given, no SASLprep), so the keys of a password set through Kafka's tools and
through Ottla's are the same.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import re
import secrets
from dataclasses import dataclass

from ..json_files import read_json, write_json

FILE_NAME = "scram-credentials.json"
UNKNOWN_USER_KEY_FILE = "scram-unknown-user.key"
# Kafka's names and its ApiMessage codes (ScramMechanism: 1, 2).
MECHANISMS = {"SCRAM-SHA-256": ("sha256", 1), "SCRAM-SHA-512": ("sha512", 2)}
BY_CODE = {code: name for name, (_, code) in MECHANISMS.items()}
# Kafka accepts iteration counts from 4096 (ScramMechanism's minimum) to 16384.
MIN_ITERATIONS, MAX_ITERATIONS = 4096, 16384


@dataclass(frozen=True, slots=True)
class ScramCredential:
    salt: bytes
    iterations: int
    stored_key: bytes
    server_key: bytes


def credential_from_salted_password(mechanism: str, salt: bytes, iterations: int,
                                    salted_password: bytes) -> ScramCredential:
    digest = MECHANISMS[mechanism][0]
    client_key = hmac.digest(salted_password, b"Client Key", digest)
    return ScramCredential(salt, iterations, hashlib.new(digest, client_key).digest(),
                           hmac.digest(salted_password, b"Server Key", digest))


def credential_from_password(mechanism: str, password: str, iterations: int = MIN_ITERATIONS,
                             salt: bytes | None = None) -> ScramCredential:
    salt = salt if salt is not None else secrets.token_bytes(32)
    salted = hashlib.pbkdf2_hmac(MECHANISMS[mechanism][0], password.encode(), salt, iterations)
    return credential_from_salted_password(mechanism, salt, iterations, salted)


class ScramCredentials:
    def __init__(self, data_dir: str) -> None:
        self.path = os.path.join(data_dir, FILE_NAME)
        self._data_dir = data_dir
        self._key: bytes | None = None
        self._users: dict[str, dict[str, ScramCredential]] = {}
        # Counts changes: a login verified against older credentials (the HTTP
        # endpoints' remembered Basic headers) is verified again.
        self.generation = 0
        stored = read_json(self.path, {})
        for user, mechanisms in stored.items():
            self._users[user] = {
                mechanism: ScramCredential(base64.b64decode(c["salt"]), c["iterations"],
                                           base64.b64decode(c["stored_key"]), base64.b64decode(c["server_key"]))
                for mechanism, c in mechanisms.items()
            }

    def get(self, user: str, mechanism: str) -> ScramCredential | None:
        return self._users.get(user, {}).get(mechanism)

    def unknown_user(self, user: str, mechanism: str) -> ScramCredential:
        """Credentials for a user who has none, shaped as the ones this broker makes (a
        32-byte salt, the default iteration count), from the name under the broker's key."""
        key = self._unknown_user_key()
        digest = MECHANISMS[mechanism][0]
        name = mechanism.encode() + b"\0" + user.encode("utf-8", "surrogateescape")
        return ScramCredential(hmac.digest(key, b"salt\0" + name, "sha256"), MIN_ITERATIONS,
                               hmac.digest(key, b"stored key\0" + name, digest),
                               hmac.digest(key, b"server key\0" + name, digest))

    def _unknown_user_key(self) -> bytes:
        if self._key is None:
            path = os.path.join(self._data_dir, UNKNOWN_USER_KEY_FILE)
            try:
                with open(path, "rb") as f:
                    key = f.read()
            except FileNotFoundError:
                key = b""
            if len(key) != 32:
                key = secrets.token_bytes(32)
                fd = os.open(path + ".tmp", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                with os.fdopen(fd, "wb") as f:
                    f.write(key)
                    f.flush()
                    os.fsync(f.fileno())
                os.replace(path + ".tmp", path)
            self._key = key
        return self._key

    def of_user(self, user: str) -> dict[str, ScramCredential]:
        return dict(self._users.get(user, {}))

    def users(self) -> list[str]:
        return sorted(self._users)

    def change(self, upserts: list[tuple[str, str, ScramCredential]], deletions: list[tuple[str, str]]) -> None:
        """Apply (user, mechanism, credential) upserts and (user, mechanism) deletions
        together, durably."""
        for user, mechanism in deletions:
            self._users.get(user, {}).pop(mechanism, None)
            if not self._users.get(user, True):
                del self._users[user]
        for user, mechanism, credential in upserts:
            self._users.setdefault(user, {})[mechanism] = credential
        self.generation += 1
        self._save()

    def _save(self) -> None:
        data = {
            user: {mechanism: {"salt": _b64(c.salt), "iterations": c.iterations, "stored_key": _b64(c.stored_key),
                               "server_key": _b64(c.server_key)} for mechanism, c in mechanisms.items()}
            for user, mechanisms in self._users.items()
        }
        write_json(self.path, data, mode=0o600)  # secrets: the owner's alone


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


_ADD_SCRAM = re.compile(r"\s*(SCRAM-SHA-256|SCRAM-SHA-512)\s*=\s*\[(.*)\]\s*")


def parse_add_scram(text: str) -> tuple[str, str, ScramCredential]:
    """`SCRAM-SHA-512=[name=alice,password=alice-secret]` (kafka-storage format's
    --add-scram; `iterations=` and `salt=` optional) as (user, mechanism, credential)."""
    # The text holds a password: no message repeats any of it.
    match = _ADD_SCRAM.fullmatch(text)
    if match is None:
        raise ValueError("--add-scram: expected SCRAM-SHA-256=[name=...,password=...] or SCRAM-SHA-512=[...] "
                         "(the value is not shown: it holds a password)")
    mechanism = match.group(1)
    fields: dict[str, str] = {}
    for number, part in enumerate(match.group(2).split(","), 1):
        key, sep, value = part.partition("=")
        if not sep:
            raise ValueError(f"--add-scram: item {number} of {mechanism}=[...] is not key=value "
                             "(the value is not shown: it holds a password; a password may not hold a comma)")
        fields[key.strip()] = value.strip().strip('"')
    if not fields.get("name") or "password" not in fields:
        raise ValueError(f"--add-scram: {mechanism}=[...] needs name= and password=")
    iterations = int(fields.get("iterations", MIN_ITERATIONS))
    if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
        raise ValueError(f"iterations must be from {MIN_ITERATIONS} to {MAX_ITERATIONS}, got {iterations}")
    salt = base64.b64decode(fields["salt"]) if "salt" in fields else None
    return fields["name"], mechanism, credential_from_password(mechanism, fields["password"], iterations, salt)
