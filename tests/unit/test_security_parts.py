"""The parts of TLS and SASL that need no socket: the JAAS users, the principal mapping
rules, the SCRAM exchange (against an RFC 5802 client written here), the config checks."""

from __future__ import annotations


import pytest
import trustme
from cryptography import x509
from cryptography.hazmat.primitives import serialization

from ottla.broker.tools.client_security import ClientSecurity, authenticate
from ottla.broker.config import BrokerConfig, ConfigError
from ottla.broker.security.sasl import AuthenticationFailed, PlainServer, ScramServer
from ottla.broker.security.scram_credentials import ScramCredentials, credential_from_password, parse_add_scram
from ottla.broker.security.security_config import SecurityConfigError, plain_users_of
from ottla.broker.security.tls import certificate_principal, parse_mapping_rules


def test_plain_users_come_from_the_jaas_config():
    jaas = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
            'password="admin-secret" user_admin="admin-secret" user_alice="a \\"quoted\\" secret";')
    assert plain_users_of("k", jaas) == {"admin": "admin-secret", "alice": 'a "quoted" secret'}
    with pytest.raises(SecurityConfigError):
        plain_users_of("k", 'org.apache.kafka.common.security.scram.ScramLoginModule required;')
    with pytest.raises(SecurityConfigError):
        plain_users_of("k", 'org.apache.kafka.common.security.plain.PlainLoginModule required user_a="x"')  # no ;


def test_plain_refuses_wrong_passwords_and_foreign_authorization_ids():
    server = PlainServer({"alice": "secret"})
    assert server.step(b"\0alice\0secret") == b"" and server.complete and server.user == "alice"
    for token, message in ((b"\0alice\0wrong", "Invalid username or password"),
                           (b"\0mallory\0secret", "Invalid username or password"),
                           (b"bob\0alice\0secret", "authorization id"),
                           (b"alice-secret", "expected 3 tokens")):
        with pytest.raises(AuthenticationFailed, match=message):
            PlainServer({"alice": "secret"}).step(token)


def _scram_client(server: ScramServer, user: str, password: str) -> None:
    """The tools' client side (client_security.py) against the broker's side; real
    clients (librdkafka, kafka-python, kafkajs) speak to it in tests/integration."""
    authenticate(ClientSecurity("SASL_PLAINTEXT", server.mechanism, user, password), server.step)


def test_scram_authenticates_with_the_stored_keys_only(tmp_path):
    store = ScramCredentials(str(tmp_path))
    store.change([("bob", "SCRAM-SHA-512", credential_from_password("SCRAM-SHA-512", "pencil", 4096))], [])
    server = ScramServer("SCRAM-SHA-512", ScramCredentials(str(tmp_path)))  # read back from the file
    _scram_client(server, "bob", "pencil")
    assert server.complete and server.user == "bob"
    assert b"pencil" not in (tmp_path / "scram-credentials.json").read_bytes()
    for user, password in (("bob", "wrong"), ("nobody", "pencil")):
        with pytest.raises(AuthenticationFailed, match="invalid credentials"):
            _scram_client(ScramServer("SCRAM-SHA-512", store), user, password)


def test_add_scram_reads_kafka_storage_syntax():
    user, mechanism, credential = parse_add_scram("SCRAM-SHA-256=[name=alice,password=alice-secret,iterations=8192]")
    assert (user, mechanism, credential.iterations) == ("alice", "SCRAM-SHA-256", 8192)
    for bad in ("SCRAM-SHA-1=[name=a,password=b]", "SCRAM-SHA-256=[name=a]", "SCRAM-SHA-256=[name=a,password=b,"
                                                                                "iterations=10]"):
        with pytest.raises(ValueError):
            parse_add_scram(bad)


def _certificate_der(**names: str) -> bytes:
    pem = trustme.CA().issue_cert("x.example", **names).cert_chain_pems[0].bytes()
    return x509.load_pem_x509_certificate(pem).public_bytes(serialization.Encoding.DER)


def test_principal_mapping_rules_as_kafka_applies_them():
    der = _certificate_der(common_name="Service-A", organization_unit_name="ServiceUsers")
    subject = certificate_principal(der, parse_mapping_rules("DEFAULT"))
    assert subject is not None and subject.startswith("CN=Service-A,OU=ServiceUsers")
    rules = parse_mapping_rules("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L,DEFAULT")
    assert certificate_principal(der, rules) == "service-a"
    rules = parse_mapping_rules("RULE:^CN=(.*?),OU=Admins.*$/$1/")
    assert certificate_principal(der, rules) is None  # no rule maps it: refused


def test_security_settings_are_checked_when_the_config_is_read():
    base = {"listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0"}
    with pytest.raises(ConfigError, match="GSSAPI is not supported"):
        BrokerConfig().with_kafka_properties(base)
    with pytest.raises(ConfigError, match="plain.sasl.jaas.config"):
        BrokerConfig().with_kafka_properties({**base, "sasl.enabled.mechanisms": "PLAIN"})
    with pytest.raises(ConfigError, match="ssl.keystore.location"):
        BrokerConfig().with_kafka_properties({"listeners": "SSL://127.0.0.1:0"})
    with pytest.raises(ConfigError, match="ssl.client.auth"):
        BrokerConfig().with_kafka_properties({"listeners": "SSL://127.0.0.1:0", "ssl.keystore.location": "k",
                                              "ssl.client.auth": "sometimes"})
    config = BrokerConfig().with_kafka_properties({**base, "sasl.enabled.mechanisms": "SCRAM-SHA-512",
                                                   "listener.name.sasl_plaintext.connections.max.reauth.ms": "60000"})
    security = config.listener_security(config.listeners[1])
    assert security.sasl is not None and security.sasl.mechanisms == ("SCRAM-SHA-512",)
    assert security.reauth_ms == 60000
