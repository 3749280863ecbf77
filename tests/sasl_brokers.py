"""Brokers whose one listener is SASL_PLAINTEXT with PLAIN users (name: password) and
Kafka's StandardAuthorizer (no ACL found means refused, `admin` the super user), and
the ways a user of theirs signs in: confluent-kafka's settings, a Java client's
properties file, a raw wire connection."""

from __future__ import annotations

from collections.abc import Iterator
from os import PathLike
from typing import Any

from confluent_kafka.admin import AdminClient

from ottla.protocol.errors import ErrorCode
from ottla.testing import BrokerProcess
from tests.wire import WireClient, request

SASL_HANDSHAKE, SASL_AUTHENTICATE = 17, 36


def plain_jaas(users: dict[str, str]) -> str:
    """The JAAS line of a PlainLoginModule that knows `users`, as a listener's
    `plain.sasl.jaas.config` takes it."""
    return ("org.apache.kafka.common.security.plain.PlainLoginModule required "
            + " ".join(f'user_{name}="{password}"' for name, password in users.items()) + ";")


def start_sasl_plain_broker(data_dir: str, users: dict[str, str], extra: dict[str, str] | None = None,
                            **options: Any) -> BrokerProcess:
    """A started broker with the one SASL_PLAINTEXT listener, PLAIN for `users`, the
    StandardAuthorizer and User:admin its super user; `extra` properties added, `options`
    passed to BrokerProcess. The caller cleans it up."""
    return BrokerProcess(data_dir, {
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": plain_jaas(users),
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:admin",
        **(extra or {}),
    }, **options).start()


def sasl_plain_client_config(bootstrap: str, user: str, password: str) -> dict[str, object]:
    """confluent-kafka's settings for `user` signing in with PLAIN over SASL_PLAINTEXT."""
    return {"bootstrap.servers": bootstrap, "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
            "sasl.username": user, "sasl.password": password}


def sasl_plain_properties(user: str, password: str) -> str:
    """The same for a Java client: the text of its properties file (--command-config)."""
    return ("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.jaas.config="
            "org.apache.kafka.common.security.plain.PlainLoginModule required "
            f'username="{user}" password="{password}";\n')


def authenticated_wire_client(bootstrap: str, user: str, password: str, source: str | None = None) -> WireClient:
    """A raw connection (from the address `source`, if given) on which `user` has passed
    SaslHandshake and SaslAuthenticate (PLAIN); any other answer than NONE fails the test."""
    client = WireClient(bootstrap, source=source)
    assert client.call(request(SASL_HANDSHAKE, 1, mechanism="PLAIN")).error_code == ErrorCode.none
    answer = client.call(request(SASL_AUTHENTICATE, 2, auth_bytes=f"\0{user}\0{password}".encode()))
    assert answer.error_code == ErrorCode.none
    return client


class PlainUsers:
    """One module's PLAIN users (name: password), the broker that knows them and the
    ways each of them signs in to it."""

    def __init__(self, passwords: dict[str, str]) -> None:
        self.passwords = passwords

    def __getitem__(self, user: str) -> str:
        return self.passwords[user]

    def broker(self, data_dir: str | PathLike[str], extra: dict[str, str] | None = None) -> Iterator[BrokerProcess]:
        """For a fixture to `yield from`: start_sasl_plain_broker for these users (and
        `extra` properties), cleaned up when the fixture ends."""
        broker = start_sasl_plain_broker(str(data_dir), self.passwords, extra)
        try:
            yield broker
        finally:
            broker.cleanup()

    def client_config(self, broker: BrokerProcess, user: str) -> dict[str, object]:
        return sasl_plain_client_config(broker.bootstrap, user, self.passwords[user])

    def admin(self, broker: BrokerProcess, user: str = "admin") -> AdminClient:
        return AdminClient(self.client_config(broker, user))

    def properties(self, user: str) -> str:
        return sasl_plain_properties(user, self.passwords[user])

    def wire_client(self, broker: BrokerProcess, user: str, source: str | None = None) -> WireClient:
        return authenticated_wire_client(broker.bootstrap, user, self.passwords[user], source)
