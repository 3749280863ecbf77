"""The pair of brokers the SASL and ACL scenarios run against: Kafka and Ottla alike
with a SASL_PLAINTEXT listener (PLAIN, the users below), the StandardAuthorizer and
`admin` as the super user.

Kafka keeps its plaintext listener for its own broker-to-controller traffic (its
principal, ANONYMOUS, is a super user there); the scenarios use only the SASL one.
"""

from __future__ import annotations

from typing import Any

from ottla.testing import BrokerProcess
from tests.reference.kafka import KafkaBroker, free_port

USERS = {"admin": "admin-secret", "alice": "alice-secret"}
JAAS = ("org.apache.kafka.common.security.plain.PlainLoginModule required "
        + " ".join(f'user_{name}="{password}"' for name, password in USERS.items()) + ";")
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
OTTLA_SECURED = {
    "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
    "sasl.enabled.mechanisms": "PLAIN",
    "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
    "authorizer.class.name": AUTHORIZER,
    "super.users": "User:admin",
    "group.initial.rebalance.delay.ms": "0",
}


class SecuredKafka(KafkaBroker):
    """The reference Kafka with a SASL_PLAINTEXT listener beside its plaintext one."""

    def __init__(self, work_dir: str | None = None) -> None:
        super().__init__(work_dir)
        self.sasl_port = 0

    @property
    def sasl_bootstrap(self) -> str:
        return f"127.0.0.1:{self.sasl_port}"

    def properties(self) -> dict[str, str]:
        props = super().properties()
        if not self.sasl_port:
            self.sasl_port = free_port()
        sasl = f"SASL_PLAINTEXT://127.0.0.1:{self.sasl_port}"
        props.update({
            "listeners": f"{props['listeners']},{sasl}",
            "advertised.listeners": f"{props['advertised.listeners']},{sasl}",
            "listener.security.protocol.map": f"{props['listener.security.protocol.map']},"
                                              "SASL_PLAINTEXT:SASL_PLAINTEXT",
            "sasl.enabled.mechanisms": "PLAIN",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
            "authorizer.class.name": AUTHORIZER,
            "super.users": "User:admin;User:ANONYMOUS",
        })
        return props


def start_pair(kafka_dir: str | None = None, ottla_dir: str | None = None) -> tuple[Any, Any, str, str]:
    """(kafka, ottla, kafka's SASL bootstrap, ottla's), both started."""
    kafka = SecuredKafka(kafka_dir)
    kafka.start()
    try:
        ottla = BrokerProcess(ottla_dir, OTTLA_SECURED).start()
    except Exception:
        kafka.cleanup()
        raise
    return kafka, ottla, kafka.sasl_bootstrap, ottla.bootstrap
