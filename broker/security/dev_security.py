"""`ottla serve --dev-security`: a SASL_SSL broker in one line, for development and CI.

On first use it makes, in `<data dir>/dev-security/`, a throwaway certificate authority
and a server certificate for localhost, 127.0.0.1 and the advertised host (with trustme,
a library made for exactly this), and a SCRAM user `ottla` with a random password. The
first listener then speaks SASL_SSL with SCRAM-SHA-512 and SCRAM-SHA-256, and the client
properties to use are printed and written to `client.properties` beside the CA. Later
starts reuse the same material, so clients keep working across restarts.

Never for production: the CA's key sits next to the data.
"""

from __future__ import annotations

import json
import os
import secrets
from dataclasses import dataclass

import trustme

from .scram_credentials import ScramCredential, credential_from_password

USER = "ottla"
DIRECTORY = "dev-security"


@dataclass(frozen=True, slots=True)
class DevSecurity:
    directory: str
    ca_path: str
    password: str
    # The TLS and SASL properties of the SASL_SSL listener.
    properties: dict[str, str]
    scram: list[tuple[str, str, ScramCredential]]

    def librdkafka_config(self, bootstrap: str) -> dict[str, str]:
        """For confluent-kafka, kcat (-F) and every librdkafka client."""
        return {"bootstrap.servers": bootstrap, "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
                "sasl.username": USER, "sasl.password": self.password, "ssl.ca.location": self.ca_path}

    def java_properties(self, bootstrap: str) -> dict[str, str]:
        """For the Java client and Kafka's tools (--command-config)."""
        return {"bootstrap.servers": bootstrap, "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
                "sasl.jaas.config": ("org.apache.kafka.common.security.scram.ScramLoginModule required "
                                     f'username="{USER}" password="{self.password}";'),
                "ssl.truststore.type": "PEM", "ssl.truststore.location": self.ca_path}

    def write_client_files(self, bootstrap: str) -> tuple[str, str]:
        """librdkafka.config and client.properties beside the CA."""
        paths = []
        for name, values in (("librdkafka.config", self.librdkafka_config(bootstrap)),
                             ("client.properties", self.java_properties(bootstrap))):
            path = os.path.join(self.directory, name)
            with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w", encoding="utf-8") as f:
                f.writelines(f"{key}={value}\n" for key, value in values.items())
            paths.append(path)
        return paths[0], paths[1]


def prepare(data_dir: str, listener_name: str, hosts: list[str]) -> DevSecurity:
    directory = os.path.join(data_dir, DIRECTORY)
    os.makedirs(directory, mode=0o700, exist_ok=True)
    ca_path = os.path.join(directory, "ca.pem")
    server_path = os.path.join(directory, "server.pem")
    secret_path = os.path.join(directory, "user.json")
    if not (os.path.exists(ca_path) and os.path.exists(server_path) and os.path.exists(secret_path)):
        ca = trustme.CA(organization_name="Ottla dev security")
        names = list(dict.fromkeys(["localhost", "127.0.0.1", "::1", *hosts]))
        ca.issue_cert(*names).private_key_and_cert_chain_pem.write_to_path(server_path)
        os.chmod(server_path, 0o600)
        ca.cert_pem.write_to_path(ca_path)
        with open(os.open(secret_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as f:
            json.dump({"user": USER, "password": secrets.token_urlsafe(18)}, f)
    with open(secret_path, encoding="utf-8") as f:
        password = json.load(f)["password"]
    prefix = f"listener.name.{listener_name.lower()}."
    properties = {
        prefix + "ssl.keystore.type": "PEM",
        prefix + "ssl.keystore.location": server_path,
        prefix + "sasl.enabled.mechanisms": "SCRAM-SHA-512,SCRAM-SHA-256",
    }
    scram = [(USER, mechanism, credential_from_password(mechanism, password))
             for mechanism in ("SCRAM-SHA-512", "SCRAM-SHA-256")]
    return DevSecurity(directory, ca_path, password, properties, scram)
