"""TLS for SSL and SASL_SSL listeners: the server context from Kafka's ssl.* settings,
and the principal a client certificate stands for.

Keystores and truststores come as Kafka has them: PEM files (a file holding the
certificate chain and the private key), PEM text in the properties (KIP-651:
`ssl.keystore.certificate.chain`, `ssl.keystore.key`, `ssl.truststore.certificates`)
or PKCS12 files. JKS, Java's own format, cannot be read outside Java: convert it with
`keytool -importkeystore -deststoretype PKCS12`.

With `ssl.client.auth=required` (or `requested`, when the client offers one) the client
certificate's subject, in RFC 2253 form (`CN=alice,OU=eng,O=Example`), is mapped by
`ssl.principal.mapping.rules` to the principal's name, as Kafka's SslPrincipalMapper does.
"""

from __future__ import annotations

import os
import re
import ssl
import tempfile
from dataclasses import dataclass

from ..logging import get_logger
from .security_config import SecurityConfigError, SslSettings

log = get_logger("ottla.tls")

_VERSIONS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
_VERIFY = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}


class _LoggedHandshakes(ssl.SSLObject):
    """A failed handshake (a plaintext client, an unknown certificate, a protocol the
    listener does not allow) is logged and counted: the event loop's TLS closes the
    connection without a word."""

    failures = 0

    def do_handshake(self) -> None:
        try:
            super().do_handshake()
        except (ssl.SSLWantReadError, ssl.SSLWantWriteError):
            raise
        except ssl.SSLError as exc:
            _LoggedHandshakes.failures += 1
            log.warning("closing connection", reason=f"TLS handshake failed: {exc.reason or exc}")
            raise


def failed_handshakes() -> int:
    return _LoggedHandshakes.failures


def server_context(settings: SslSettings) -> ssl.SSLContext:
    """The context of a TLS listener. Raises SecurityConfigError naming the property
    whose file or value cannot be used."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.sslobject_class = _LoggedHandshakes
    versions = sorted(_VERSIONS[name] for name in settings.enabled_protocols)
    context.minimum_version, context.maximum_version = versions[0], versions[-1]
    if settings.cipher_suites:
        try:
            context.set_ciphers(":".join(settings.cipher_suites))
        except ssl.SSLError:
            raise SecurityConfigError("ssl.cipher.suites", "invalid value for ssl.cipher.suites: no cipher suite "
                                                           "OpenSSL knows (give OpenSSL names, such as "
                                                           "ECDHE-RSA-AES128-GCM-SHA256)") from None
    chain, key = _keystore(settings)
    _load_chain(context, chain, key)
    context.verify_mode = _VERIFY[settings.client_auth]
    if settings.client_auth != "none":
        cadata = _truststore(settings)
        if cadata is None:
            context.load_default_certs(ssl.Purpose.CLIENT_AUTH)
        else:
            try:
                context.load_verify_locations(cadata=cadata)
            except ssl.SSLError as exc:
                raise SecurityConfigError("ssl.truststore.location", f"the truststore cannot be used: {exc}") from None
    return context


def _keystore(settings: SslSettings) -> tuple[bytes, bytes]:
    """The certificate chain and the unencrypted private key, both PEM."""
    # cryptography, here and below: imported by a listener that has TLS, not by every broker.
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.serialization import pkcs12

    kind = settings.keystore_type
    if kind == "PEM":
        if settings.certificate_chain is not None:
            if settings.private_key is None:
                raise SecurityConfigError("ssl.keystore.key", "ssl.keystore.certificate.chain needs ssl.keystore.key")
            chain, key = settings.certificate_chain.encode(), settings.private_key.encode()
        else:
            data = _read("ssl.keystore.location", settings.keystore_location)
            chain, key = data, data
        return chain, _unencrypted_key(key, settings.key_password)
    if kind == "PKCS12":
        data = _read("ssl.keystore.location", settings.keystore_location)
        password = settings.keystore_password.encode() if settings.keystore_password else None
        try:
            private_key, certificate, extra = pkcs12.load_key_and_certificates(data, password)
        except ValueError as exc:
            raise SecurityConfigError("ssl.keystore.location", f"the PKCS12 keystore cannot be read: {exc}") from None
        if private_key is None or certificate is None:
            raise SecurityConfigError("ssl.keystore.location", "the PKCS12 keystore holds no key and certificate")
        chain = b"".join(c.public_bytes(serialization.Encoding.PEM) for c in (certificate, *extra))
        key = private_key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                        serialization.NoEncryption())
        return chain, key
    raise SecurityConfigError("ssl.keystore.type", f"invalid value for ssl.keystore.type: {kind} (Ottla reads PEM and "
                                                   "PKCS12; convert a JKS keystore with keytool -importkeystore "
                                                   "-deststoretype PKCS12)")


def _unencrypted_key(pem: bytes, password: str | None) -> bytes:
    from cryptography.hazmat.primitives import serialization

    try:
        key = serialization.load_pem_private_key(_pem_key_block(pem), password.encode() if password else None)
    except (ValueError, TypeError) as exc:
        raise SecurityConfigError("ssl.keystore.key", f"the private key cannot be read: {exc}") from None
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _pem_key_block(pem: bytes) -> bytes:
    match = re.search(rb"-----BEGIN ([A-Z ]*)PRIVATE KEY-----.*?-----END \1PRIVATE KEY-----", pem, re.S)
    if match is None:
        raise SecurityConfigError("ssl.keystore.key", "no private key in the keystore")
    return match.group(0)


def _truststore(settings: SslSettings) -> str | None:
    """The trusted certificates as PEM text; None for the system's own."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.serialization import pkcs12

    if settings.truststore_certificates is not None:
        return settings.truststore_certificates
    if settings.truststore_location is None:
        return None
    data = _read("ssl.truststore.location", settings.truststore_location)
    if settings.truststore_type == "PKCS12":
        password = settings.truststore_password.encode() if settings.truststore_password else None
        try:
            _, certificate, extra = pkcs12.load_key_and_certificates(data, password)
        except ValueError as exc:
            raise SecurityConfigError("ssl.truststore.location",
                                      f"the PKCS12 truststore cannot be read: {exc}") from None
        certificates = [c for c in (certificate, *extra) if c is not None]
        return "".join(c.public_bytes(serialization.Encoding.PEM).decode() for c in certificates)
    if settings.truststore_type not in ("PEM", "JKS") or b"-----BEGIN CERTIFICATE-----" not in data:
        raise SecurityConfigError("ssl.truststore.type", "the truststore must be PEM or PKCS12")
    return data.decode()


def _read(key: str, path: str | None) -> bytes:
    if path is None:
        raise SecurityConfigError(key, f"{key} is not set")
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as exc:
        raise SecurityConfigError(key, f"invalid value for {key}: {exc}") from None


def _load_chain(context: ssl.SSLContext, chain: bytes, key: bytes) -> None:
    # The ssl module loads certificates from files only: a private file, gone at once.
    with tempfile.TemporaryDirectory(prefix="ottla-tls-") as directory:
        path = os.path.join(directory, "keystore.pem")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(chain + b"\n" + key)
        try:
            context.load_cert_chain(path)
        except ssl.SSLError as exc:
            raise SecurityConfigError("ssl.keystore.location", f"the keystore cannot be used: {exc}") from None


# --- the principal of a client certificate -------------------------------------------


@dataclass(frozen=True, slots=True)
class _Rule:
    pattern: re.Pattern[str] | None  # None: DEFAULT
    replacement: str = ""
    case: str = ""  # "L", "U" or ""


_RULE = re.compile(r"\s*(DEFAULT|RULE:((?:\\.|[^\\/])*)/((?:\\.|[^\\/])*)/([LU]?)[^,\n]*?)\s*(?:[,\n]\s*|$)")


def parse_mapping_rules(text: str) -> tuple[_Rule, ...]:
    """`ssl.principal.mapping.rules`: `DEFAULT` and `RULE:pattern/replacement/[LU]`
    entries, comma-separated, tried in order (SslPrincipalMapper's syntax)."""
    rules: list[_Rule] = []
    pos = 0
    text = text.strip()
    while pos < len(text):
        match = _RULE.match(text, pos)
        if match is None or match.end() == pos:
            raise SecurityConfigError("ssl.principal.mapping.rules",
                                      f"invalid value for ssl.principal.mapping.rules: cannot read {text[pos:]!r}")
        if match.group(1) == "DEFAULT":
            rules.append(_Rule(None))
        else:
            # Java's $1 is Python's \g<1>.
            replacement = re.sub(r"\$(\d+)", r"\\g<\1>", match.group(3))
            rules.append(_Rule(re.compile(match.group(2)), replacement, match.group(4)))
        pos = match.end()
    return tuple(rules) or (_Rule(None),)


def certificate_principal(der: bytes, rules: tuple[_Rule, ...]) -> str | None:
    """The principal name of a client certificate (DER), or None when no rule maps it
    (Kafka refuses such a client)."""
    from cryptography import x509

    subject = x509.load_der_x509_certificate(der).subject.rfc4514_string()
    for rule in rules:
        if rule.pattern is None:
            return subject
        match = rule.pattern.fullmatch(subject)
        if match is not None:
            name = match.expand(rule.replacement)
            return name.lower() if rule.case == "L" else name.upper() if rule.case == "U" else name
    return None
