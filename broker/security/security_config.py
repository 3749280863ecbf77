"""TLS and SASL settings, read per listener as a Kafka broker reads them.

Every `ssl.*` and `sasl.*` property may be given for all listeners or for one, prefixed
with `listener.name.<listener, lower case>.`; the prefixed one wins. The SASL users of
the PLAIN mechanism come from that mechanism's JAAS config, as in a Kafka
server.properties:

    listener.name.sasl_ssl.plain.sasl.jaas.config=\\
        org.apache.kafka.common.security.plain.PlainLoginModule required \\
        user_alice="alice-secret" user_bob="bob-secret";

(SCRAM users live in the data directory: broker/security/scram_credentials.py.)

This module reads text only; broker/security/tls.py builds the TLS context from it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from .oauthbearer import PROPERTIES as OAUTHBEARER_PROPERTIES
from .oauthbearer import JwtSettings, jwt_settings

SSL_PROPERTIES = frozenset({
    "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password", "ssl.key.password",
    "ssl.keystore.certificate.chain", "ssl.keystore.key",
    "ssl.truststore.type", "ssl.truststore.location", "ssl.truststore.password", "ssl.truststore.certificates",
    "ssl.client.auth", "ssl.enabled.protocols", "ssl.protocol", "ssl.cipher.suites", "ssl.principal.mapping.rules",
    "ssl.endpoint.identification.algorithm",
})
SASL_PROPERTIES = frozenset({
    "sasl.enabled.mechanisms", "sasl.mechanism.inter.broker.protocol", "sasl.jaas.config",
    "connections.max.reauth.ms", "connection.failed.authentication.delay.ms", "sasl.server.max.receive.size",
    "security.inter.broker.protocol", "inter.broker.listener.name",
}) | OAUTHBEARER_PROPERTIES
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
CLIENT_AUTH = ("none", "requested", "required")
_LISTENER_PREFIX = "listener.name."
_SECRET_SUFFIXES = (".password", "ssl.keystore.key", "sasl.jaas.config")


def is_security_property(key: str) -> bool:
    if key.startswith(_LISTENER_PREFIX):
        return True
    return key in SSL_PROPERTIES or key in SASL_PROPERTIES


def is_secret(key: str) -> bool:
    """Passwords, private keys and JAAS configs: never logged nor described."""
    return key.endswith(_SECRET_SUFFIXES)


class SecurityConfigError(ValueError):
    def __init__(self, key: str, message: str) -> None:
        super().__init__(message)
        self.key = key


@dataclass(frozen=True, slots=True)
class SslSettings:
    keystore_type: str = "JKS"
    keystore_location: str | None = None
    keystore_password: str | None = None
    key_password: str | None = None
    certificate_chain: str | None = None  # PEM text (ssl.keystore.certificate.chain)
    private_key: str | None = None  # PEM text (ssl.keystore.key)
    truststore_type: str = "JKS"
    truststore_location: str | None = None
    truststore_password: str | None = None
    truststore_certificates: str | None = None  # PEM text
    client_auth: str = "none"
    enabled_protocols: tuple[str, ...] = ("TLSv1.2", "TLSv1.3")
    cipher_suites: tuple[str, ...] = ()
    principal_mapping_rules: str = "DEFAULT"


@dataclass(frozen=True, slots=True)
class SaslSettings:
    mechanisms: tuple[str, ...]
    plain_users: Mapping[str, str] = field(default_factory=dict)  # name -> password
    # OAUTHBEARER: how tokens are validated (None: unsecured tokens, for development).
    oauthbearer: JwtSettings | None = None


TLS_PROTOCOLS = frozenset({"SSL", "SASL_SSL"})
SASL_PROTOCOLS = frozenset({"SASL_PLAINTEXT", "SASL_SSL"})


class SecurityProtocol:
    """What a security protocol (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL) asks of a
    connection, for whatever speaks one: a listener, the client of Ottla's tools."""

    __slots__ = ()
    protocol: str

    @property
    def uses_tls(self) -> bool:
        return self.protocol in TLS_PROTOCOLS

    @property
    def uses_sasl(self) -> bool:
        return self.protocol in SASL_PROTOCOLS


@dataclass(frozen=True, slots=True)
class ListenerSecurity(SecurityProtocol):
    """What a connection on one listener goes through before it is served."""

    protocol: str = "PLAINTEXT"
    ssl: SslSettings | None = None
    sasl: SaslSettings | None = None
    # KIP-368: a SASL session lasts this long before the client must authenticate again
    # (0: for ever, Kafka's default).
    reauth_ms: int = 0
    # Kafka answers a failed authentication only after this delay, to slow guessing.
    failed_auth_delay_ms: int = 100
    # The largest frame read before the client has authenticated (Kafka's
    # sasl.server.max.receive.size): a larger size prefix closes the connection.
    max_receive_bytes: int = 524288


PLAINTEXT = ListenerSecurity()


def listener_security(listener: str, protocol: str, properties: Mapping[str, str]) -> ListenerSecurity:
    """The security of listener `listener` speaking `protocol`, from the broker's
    properties. Raises SecurityConfigError naming the property at fault."""
    prefix = f"{_LISTENER_PREFIX}{listener.lower()}."

    def get(key: str, default: str | None = None) -> str | None:
        value = properties.get(prefix + key)
        return value if value is not None else properties.get(key, default)

    def key_of(key: str) -> str:
        return prefix + key if prefix + key in properties else key

    def integer(key: str, default: int) -> int:
        text = get(key)
        if text is None:
            return default
        try:
            value = int(text)
        except ValueError:
            raise SecurityConfigError(key_of(key),
                                      f"invalid value for {key_of(key)}: {text!r} is not a number") from None
        if value < 0:
            raise SecurityConfigError(key_of(key), f"invalid value for {key_of(key)}: {value} is negative")
        return value

    ssl = _ssl_settings(get, key_of) if protocol in TLS_PROTOCOLS else None
    sasl = None
    if protocol in SASL_PROTOCOLS:
        # Kafka's default is GSSAPI (Kerberos), which Ottla does not speak: say so.
        mechanisms = tuple(m.strip().upper() for m in (get("sasl.enabled.mechanisms") or "GSSAPI").split(",")
                           if m.strip())
        for mechanism in mechanisms:
            if mechanism not in MECHANISMS:
                raise SecurityConfigError(
                    key_of("sasl.enabled.mechanisms"),
                    f"invalid value for {key_of('sasl.enabled.mechanisms')}: {mechanism} is not supported "
                    f"(Ottla speaks {', '.join(MECHANISMS)})")
        plain_users: dict[str, str] = {}
        if "PLAIN" in mechanisms:
            jaas_key = f"{prefix}plain.sasl.jaas.config"
            jaas = properties.get(jaas_key)
            if jaas is None:
                raise SecurityConfigError(jaas_key, f"listener {listener} enables PLAIN but {jaas_key} is not set "
                                                    "(PlainLoginModule with user_NAME=\"password\" entries)")
            plain_users = plain_users_of(jaas_key, jaas)
        oauthbearer = None
        if "OAUTHBEARER" in mechanisms:
            # Kafka reads a mechanism's settings with listener.name.<l>.oauthbearer. first.
            mechanism_prefix = f"{prefix}oauthbearer."

            def get_oauth(key: str) -> str | None:
                value = properties.get(mechanism_prefix + key)
                return value if value is not None else get(key)

            def key_of_oauth(key: str) -> str:
                return mechanism_prefix + key if mechanism_prefix + key in properties else key_of(key)

            oauthbearer = jwt_settings(get_oauth, key_of_oauth, SecurityConfigError)
        sasl = SaslSettings(mechanisms, plain_users, oauthbearer)
    return ListenerSecurity(
        protocol=protocol, ssl=ssl, sasl=sasl,
        reauth_ms=integer("connections.max.reauth.ms", 0),
        failed_auth_delay_ms=integer("connection.failed.authentication.delay.ms", 100),
        max_receive_bytes=integer("sasl.server.max.receive.size", 524288),
    )


def _ssl_settings(get: Callable[[str], str | None], key_of: Callable[[str], str]) -> SslSettings:
    client_auth = (get("ssl.client.auth") or "none").strip().lower()
    if client_auth not in CLIENT_AUTH:
        raise SecurityConfigError(key_of("ssl.client.auth"),
                                  f"invalid value for {key_of('ssl.client.auth')}: {client_auth!r} is not one of "
                                  f"{', '.join(CLIENT_AUTH)}")
    protocols = tuple(p.strip() for p in (get("ssl.enabled.protocols") or "TLSv1.2,TLSv1.3").split(",") if p.strip())
    for name in protocols:
        if name not in ("TLSv1.2", "TLSv1.3"):
            raise SecurityConfigError(key_of("ssl.enabled.protocols"),
                                      f"invalid value for {key_of('ssl.enabled.protocols')}: {name} is not "
                                      "TLSv1.2 or TLSv1.3")
    settings = SslSettings(
        keystore_type=(get("ssl.keystore.type") or "JKS").upper(),
        keystore_location=get("ssl.keystore.location"),
        keystore_password=get("ssl.keystore.password"),
        key_password=get("ssl.key.password"),
        certificate_chain=get("ssl.keystore.certificate.chain"),
        private_key=get("ssl.keystore.key"),
        truststore_type=(get("ssl.truststore.type") or "JKS").upper(),
        truststore_location=get("ssl.truststore.location"),
        truststore_password=get("ssl.truststore.password"),
        truststore_certificates=get("ssl.truststore.certificates"),
        client_auth=client_auth,
        enabled_protocols=protocols,
        cipher_suites=tuple(c.strip() for c in (get("ssl.cipher.suites") or "").split(",") if c.strip()),
        principal_mapping_rules=get("ssl.principal.mapping.rules") or "DEFAULT",
    )
    if settings.keystore_location is None and settings.certificate_chain is None:
        raise SecurityConfigError(key_of("ssl.keystore.location"),
                                  f"a TLS listener needs {key_of('ssl.keystore.location')} (or "
                                  "ssl.keystore.certificate.chain and ssl.keystore.key with ssl.keystore.type=PEM)")
    return settings


# key="value" or key=value, in a JAAS entry.
_JAAS_OPTION = re.compile(r'\s*([A-Za-z0-9_.\-]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s;"]+))')


def plain_users_of(key: str, jaas: str) -> dict[str, str]:
    """The `user_NAME="password"` options of a PlainLoginModule JAAS entry."""
    text = jaas.strip()
    match = re.match(r"([A-Za-z0-9_.$]+)\s+(required|requisite|sufficient|optional)\b", text)
    if match is None or not text.endswith(";"):
        raise SecurityConfigError(
            key, f"invalid value for {key}: expected 'LoginModuleClass required option=\"value\" ...;'")
    if not match.group(1).endswith("PlainLoginModule"):
        raise SecurityConfigError(key, f"invalid value for {key}: PLAIN needs "
                                       "org.apache.kafka.common.security.plain.PlainLoginModule")
    rest = text[match.end():-1]
    users: dict[str, str] = {}
    pos = 0
    last = ""
    while rest[pos:].strip():
        option = _JAAS_OPTION.match(rest, pos)
        if option is None:
            # Which option, never the text: it holds passwords.
            after = f"after option {last!r}" if last else "at the first option"
            raise SecurityConfigError(key, f"invalid value for {key}: cannot read the options {after} "
                                           "(expected name=\"value\"; the value is not shown: it holds passwords)")
        name = option.group(1)
        value = option.group(2) if option.group(2) is not None else option.group(3)
        if name.startswith("user_"):
            users[name[len("user_"):]] = re.sub(r"\\(.)", r"\1", value)
        last = name
        pos = option.end()
    return users
