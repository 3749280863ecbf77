"""The client side of TLS and SASL, for Ottla's own tools (`--command-config`).

The file is a client properties file as Kafka's tools take it: `security.protocol`,
`sasl.mechanism`, the credentials in `sasl.jaas.config` (Java's form) or in
`sasl.username`/`sasl.password` (librdkafka's), and the CA in `ssl.truststore.location`
(PEM) or `ssl.ca.location`; a client certificate in `ssl.keystore.location` (PEM with the
key) or `ssl.certificate.location` + `ssl.key.location`. The file `ottla serve
--dev-security` writes works as it is.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets
import socket
import ssl
from dataclasses import dataclass
from typing import Callable

from ..config import read_properties
from ..security.scram_credentials import MECHANISMS as SCRAM_MECHANISMS
from ..security.security_config import uses_sasl, uses_tls

# A request/response exchange on the connection: SaslHandshake or SaslAuthenticate.
Exchange = Callable[[bytes], bytes]


@dataclass(frozen=True, slots=True)
class ClientSecurity:
    protocol: str = "PLAINTEXT"
    mechanism: str = "GSSAPI"
    username: str | None = None
    password: str | None = None
    ca_file: str | None = None
    certificate_file: str | None = None
    key_file: str | None = None
    check_hostname: bool = True

    @property
    def uses_tls(self) -> bool:
        return uses_tls(self.protocol)

    @property
    def uses_sasl(self) -> bool:
        return uses_sasl(self.protocol)

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
    digest = SCRAM_MECHANISMS[security.mechanism][0]
    name = security.username.replace("=", "=3D").replace(",", "=2C").encode()
    first_bare = b"n=" + name + b",r=" + base64.b64encode(secrets.token_bytes(18))
    server_first = step(b"n,," + first_bare)
    attributes = dict(part.split(b"=", 1) for part in server_first.split(b",") if b"=" in part)
    if not attributes.get(b"r", b"").startswith(first_bare.split(b",r=")[1]):
        raise SaslFailed("the broker's SCRAM nonce does not extend ours")
    salted = hashlib.pbkdf2_hmac(digest, security.password.encode(), base64.b64decode(attributes[b"s"]),
                                 int(attributes[b"i"]))
    client_key = hmac.digest(salted, b"Client Key", digest)
    without_proof = b"c=biws,r=" + attributes[b"r"]
    auth_message = first_bare + b"," + server_first + b"," + without_proof
    signature = hmac.digest(hashlib.new(digest, client_key).digest(), auth_message, digest)
    proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
    server_final = step(without_proof + b",p=" + base64.b64encode(proof))
    expected = b"v=" + base64.b64encode(hmac.digest(hmac.digest(salted, b"Server Key", digest), auth_message, digest))
    if not hmac.compare_digest(server_final, expected):
        raise SaslFailed("the broker's SCRAM signature is wrong: it does not know this password")
