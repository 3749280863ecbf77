"""The client side of TLS and SASL, for Ottla's own tools (`--command-config`).

The file is a client properties file as Kafka's tools take it: `security.protocol`,
`sasl.mechanism`, the credentials in `sasl.jaas.config` (Java's form) or in
`sasl.username`/`sasl.password` (librdkafka's), and the CA in `ssl.truststore.location`
(PEM) or `ssl.ca.location`; a client certificate in `ssl.keystore.location` (PEM with the
key) or `ssl.certificate.location` + `ssl.key.location`. The file `ottla serve
--dev-security` writes works as it is.
"""

from __future__ import annotations

import re
import socket
import ssl
from collections.abc import Callable
from dataclasses import dataclass

from scramp import ScramClient, ScramException

from ottla.broker.config import read_properties
from ottla.broker.security.scram_credentials import MECHANISMS as SCRAM_MECHANISMS
from ottla.broker.security.scram_credentials import MIN_ITERATIONS
from ottla.broker.security.security_config import SecurityProtocol

# A request/response exchange on the connection: SaslHandshake or SaslAuthenticate.
Exchange = Callable[[bytes], bytes]


@dataclass(frozen=True, slots=True)
class ClientSecurity(SecurityProtocol):
    protocol: str = "PLAINTEXT"
    mechanism: str = "GSSAPI"
    username: str | None = None
    password: str | None = None
    ca_file: str | None = None
    certificate_file: str | None = None
    key_file: str | None = None
    check_hostname: bool = True

    def wrap(self, sock: socket.socket, host: str) -> socket.socket:
        if not self.uses_tls:
            return sock
        context = ssl.create_default_context(cafile=self.ca_file)
        context.check_hostname = self.check_hostname
        if self.certificate_file is not None:
            context.load_cert_chain(self.certificate_file, self.key_file)
        return context.wrap_socket(sock, server_hostname=host)


def read_command_config(path: str) -> ClientSecurity:
    values = read_properties(path)
    username, password = values.get("sasl.username"), values.get("sasl.password")
    jaas = values.get("sasl.jaas.config")
    if jaas:
        found = dict(re.findall(r'(username|password)\s*=\s*"((?:[^"\\]|\\.)*)"', jaas))
        username, password = found.get("username", username), found.get("password", password)
    return ClientSecurity(
        protocol=values.get("security.protocol", "PLAINTEXT").upper(),
        mechanism=values.get("sasl.mechanism", values.get("sasl.mechanisms", "GSSAPI")).upper(),
        username=username,
        password=password,
        ca_file=values.get("ssl.ca.location") or values.get("ssl.truststore.location"),
        certificate_file=values.get("ssl.certificate.location") or values.get("ssl.keystore.location"),
        key_file=values.get("ssl.key.location"),
        check_hostname=values.get("ssl.endpoint.identification.algorithm", "https").lower() == "https",
    )


class SaslFailed(Exception):
    pass


def authenticate(security: ClientSecurity, step: Exchange) -> None:
    """Run the mechanism's exchange through `step` (one SaslAuthenticate round trip)."""
    if security.username is None or security.password is None:
        raise SaslFailed("the command config has no SASL username and password")
    if security.mechanism == "PLAIN":
        step(b"\0" + security.username.encode() + b"\0" + security.password.encode())
        return
    if security.mechanism not in SCRAM_MECHANISMS:
        raise SaslFailed(f"these tools speak PLAIN and SCRAM, not {security.mechanism}")
    try:
        client = ScramClient([security.mechanism], security.username, security.password)
        server_first = step(client.get_client_first().encode()).decode("utf-8")
        # Kafka's client refuses a server that asks for fewer iterations than the
        # mechanism's minimum: a weak count would let whoever answers (a rogue broker,
        # a man in the middle without TLS) brute-force the password cheaply from the proof.
        iterations = re.search(r"(?:^|,)i=(\d+)(?:,|$)", server_first)
        if iterations is not None and int(iterations.group(1)) < MIN_ITERATIONS:
            raise SaslFailed(f"Requested iterations {iterations.group(1)} is less than the minimum "
                             f"{MIN_ITERATIONS} for {security.mechanism}")
        client.set_server_first(server_first)
        server_final = step(client.get_client_final().encode()).decode("utf-8")
        client.set_server_final(server_final)
    except UnicodeDecodeError:
        raise SaslFailed("the broker's SCRAM message is not UTF-8") from None
    except ScramException as exc:
        raise SaslFailed(f"SCRAM with the broker failed: {exc}") from None
