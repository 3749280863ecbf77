"""OAUTHBEARER with signed JWTs (issue 28, point 4): a listener with
`sasl.oauthbearer.jwks.endpoint.url` (here a file: URL) takes only tokens signed by a key
of that JWKS, for the expected audience and issuer, not expired; anything else is
SASL_AUTHENTICATION_FAILED. Real clients sign in with tokens the test signs:
confluent-kafka's oauth_cb and the Java client's file token retriever."""

from __future__ import annotations

import json
import time
import uuid

import jwt
import pytest
from confluent_kafka import Consumer, Producer
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from ottla.protocol.errors import ErrorCode
from ottla.testing import BrokerProcess
from tests.reference.kafka import ReferenceUnavailable, run_java
from tests.wire import WireClient, request

SASL_HANDSHAKE, SASL_AUTHENTICATE = 17, 36
AUDIENCE, ISSUER = "ottla-test", "https://issuer.ottla.invalid"


@pytest.fixture(scope="module")
def keys():
    return {"good": rsa.generate_private_key(public_exponent=65537, key_size=2048),
            "other": rsa.generate_private_key(public_exponent=65537, key_size=2048),
            "ec": ec.generate_private_key(ec.SECP256R1())}


@pytest.fixture(scope="module")
def jwt_broker(tmp_path_factory, keys):
    work = tmp_path_factory.mktemp("oauth")
    jwks = {"keys": [
        {**json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(keys["good"].public_key())), "kid": "rsa-1", "use": "sig"},
        {**json.loads(jwt.algorithms.ECAlgorithm.to_jwk(keys["ec"].public_key())), "kid": "ec-1", "use": "sig"},
    ]}
    (work / "jwks.json").write_text(json.dumps(jwks))
    broker = BrokerProcess(str(work / "data"), {
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms": "OAUTHBEARER",
        "listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class":
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler",
        "sasl.oauthbearer.jwks.endpoint.url": (work / "jwks.json").as_uri(),
        "sasl.oauthbearer.expected.audience": AUDIENCE,
        "sasl.oauthbearer.expected.issuer": ISSUER,
        "sasl.oauthbearer.clock.skew.seconds": "5",
    }).start()
    yield broker
    broker.cleanup()


def _token(keys, sub: str = "erin", kid: str = "rsa-1", key: str = "good", algorithm: str = "RS256",
           **changes: object) -> str:
    now = int(time.time())
    claims = {"sub": sub, "aud": AUDIENCE, "iss": ISSUER, "iat": now, "exp": now + 300, "scope": "kafka"}
    claims.update(changes)
    claims = {k: v for k, v in claims.items() if v is not None}
    return jwt.encode(claims, keys[key], algorithm=algorithm, headers={"kid": kid})


def _unsigned(sub: str) -> str:
    return jwt.encode({"sub": sub, "iat": int(time.time()), "exp": int(time.time()) + 300}, None, algorithm="none")


def _authenticate(broker, token: str):  # type: ignore[no-untyped-def]
    with WireClient(broker.bootstrap) as client:
        assert client.call(request(SASL_HANDSHAKE, 1, mechanism="OAUTHBEARER")).error_code == ErrorCode.none
        answer = client.call(request(SASL_AUTHENTICATE, 2,
                                     auth_bytes=b"n,,\x01auth=Bearer " + token.encode() + b"\x01\x01"))
        return answer, client.is_closed(timeout=5) if answer.error_code != ErrorCode.none else False


def _conf(broker, token_of) -> dict[str, object]:  # type: ignore[no-untyped-def]
    return {"bootstrap.servers": broker.bootstrap, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "OAUTHBEARER", "oauth_cb": lambda _config: (token_of(), time.time() + 300)}


def test_confluent_kafka_signs_in_with_a_signed_token(jwt_broker, keys, topic_name):
    """A token signed by the JWKS's RSA key: produce and consume as User:erin."""
    conf = _conf(jwt_broker, lambda: _token(keys))
    producer = Producer(conf)
    producer.produce(topic_name, b"signed")
    assert producer.flush(20) == 0
    consumer = Consumer({**conf, "group.id": f"g-{uuid.uuid4().hex[:6]}", "auto.offset.reset": "earliest"})
    consumer.subscribe([topic_name])
    got = None
    deadline = time.monotonic() + 30
    while got is None and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and not message.error():
            got = message.value()
    consumer.close()
    assert got == b"signed"
    assert "principal=User:erin" in jwt_broker.log()


def test_confluent_kafka_with_an_expired_token_is_refused(jwt_broker, keys, topic_name):
    """librdkafka gets SASL_AUTHENTICATION_FAILED (its _AUTHENTICATION) and delivers nothing."""
    errors: list[str] = []
    now = int(time.time())
    conf = {**_conf(jwt_broker, lambda: _token(keys, sub="late", iat=now - 7200, exp=now - 3600)),
            "error_cb": lambda e: errors.append(str(e)), "message.timeout.ms": 3000}
    producer = Producer(conf)
    delivered: list[object] = []
    producer.produce(topic_name, b"x", on_delivery=lambda error, message: delivered.append(error))
    producer.flush(10)
    assert delivered and delivered[0] is not None
    assert any("Authentication" in e or "SASL" in e for e in errors), errors
    assert "principal=User:late" not in jwt_broker.log()


@pytest.mark.parametrize("case", ["expired", "other key", "unsigned super user", "wrong audience", "wrong issuer",
                                  "no iat", "no sub", "unknown kid", "hmac with the public key", "not yet valid"])
def test_tokens_that_do_not_validate_get_sasl_authentication_failed(jwt_broker, keys, case):
    """Raw frames, one token of each kind Kafka's validator refuses. Broken by skipping
    the signature check (PyJWT's verify_signature False, which also skips the time
    claims): the other key's token, the expired and the not-yet-valid ones were accepted."""
    now = int(time.time())
    token = {
        "expired": lambda: _token(keys, iat=now - 600, exp=now - 60),
        "other key": lambda: _token(keys, key="other"),
        "unsigned super user": lambda: _unsigned("admin"),
        "wrong audience": lambda: _token(keys, aud="someone-else"),
        "wrong issuer": lambda: _token(keys, iss="https://evil.invalid"),
        "no iat": lambda: _token(keys, iat=None),
        "no sub": lambda: _token(keys, sub=None),
        "unknown kid": lambda: _token(keys, kid="rsa-9"),
        "not yet valid": lambda: _token(keys, nbf=now + 600),
        "hmac with the public key": lambda: _forged_hmac(keys),
    }[case]()
    answer, closed = _authenticate(jwt_broker, token)
    assert answer.error_code == ErrorCode.sasl_authentication_failed, case
    assert "invalid_token" in (answer.error_message or "")
    assert closed


def _forged_hmac(keys) -> str:  # type: ignore[no-untyped-def]
    """The classic confusion attack: HS256 keyed with the RSA public key's PEM."""
    import base64
    import hashlib
    import hmac

    from cryptography.hazmat.primitives import serialization

    def part(value: object) -> bytes:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=")
    now = int(time.time())
    signing_input = part({"alg": "HS256", "kid": "rsa-1"}) + b"." + part(
        {"sub": "admin", "aud": AUDIENCE, "iss": ISSUER, "iat": now, "exp": now + 300})
    pem = keys["good"].public_key().public_bytes(serialization.Encoding.PEM,
                                                 serialization.PublicFormat.SubjectPublicKeyInfo)
    signature = base64.urlsafe_b64encode(hmac.digest(pem, signing_input, hashlib.sha256)).rstrip(b"=")
    return (signing_input + b"." + signature).decode()


def test_a_token_within_the_clock_skew_and_an_ec_key_are_accepted(jwt_broker, keys):
    now = int(time.time())
    for token in (_token(keys, sub="skewed", exp=now - 2, iat=now - 60),
                  _token(keys, sub="elliptic", kid="ec-1", key="ec", algorithm="ES256")):
        answer, _ = _authenticate(jwt_broker, token)
        assert answer.error_code == ErrorCode.none, answer


def test_the_java_client_signs_in_with_a_token_from_a_file(jwt_broker, keys, topic_name, tmp_path):
    """Kafka's own client (OAuthBearerLoginCallbackHandler reading a file: token endpoint)
    lists topics as User:jo."""
    token_file = tmp_path / "token.jwt"
    token_file.write_text(_token(keys, sub="jo"))
    config = tmp_path / "client.properties"
    config.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=OAUTHBEARER\n"
                      "sasl.login.callback.handler.class="
                      "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler\n"
                      f"sasl.oauthbearer.token.endpoint.url={token_file.as_uri()}\n"
                      "sasl.jaas.config="
                      "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required ;\n")
    try:
        listed = run_java("org.apache.kafka.tools.TopicCommand",
                          ["--bootstrap-server", jwt_broker.bootstrap, "--command-config", str(config), "--list"],
                          jvm_options=["-Xmx256m",
                                       f"-Dorg.apache.kafka.sasl.oauthbearer.allowed.urls={token_file.as_uri()}"])
    except ReferenceUnavailable as exc:
        pytest.fail(f"the Java client is needed: {exc}", pytrace=False)
    assert listed.returncode == 0, listed.stdout[-2000:] + listed.stderr[-2000:]
    assert "principal=User:jo" in jwt_broker.log()


def test_unsecured_tokens_are_refused_where_jwks_is_set_and_warned_about_where_not(fresh_broker):
    broker = fresh_broker(listeners="SASL_PLAINTEXT://127.0.0.1:0", sasl_enabled_mechanisms="OAUTHBEARER")
    assert "OAUTHBEARER accepts unsecured tokens" in broker.log()
    answer, _ = _authenticate(broker, _unsigned("dev"))
    assert answer.error_code == ErrorCode.none


def test_with_reauthentication_on_the_session_ends_when_the_token_does(fresh_broker, keys, tmp_path):
    """As Kafka's SaslServerAuthenticator: connections.max.reauth.ms caps the session,
    and a token expiring sooner shortens it. Broken by ignoring the token's exp in
    Session.authenticated_as: the lifetime was the full hour."""
    jwks = {"keys": [{**json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(keys["good"].public_key())),
                      "kid": "rsa-1", "use": "sig"}]}
    (tmp_path / "jwks.json").write_text(json.dumps(jwks))
    broker = fresh_broker(**{"listeners": "SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms": "OAUTHBEARER",
                             "sasl.oauthbearer.jwks.endpoint.url": (tmp_path / "jwks.json").as_uri(),
                             "connections.max.reauth.ms": "3600000"})
    now = int(time.time())
    answer, _ = _authenticate(broker, _token(keys, aud=None, iss=None, exp=now + 120))
    lifetime_ms = answer.session_lifetime.total_seconds() * 1000
    assert answer.error_code == ErrorCode.none and 0 < lifetime_ms <= 120_000, answer


def _jwks(*entries: tuple[object, str]) -> str:
    keys = []
    for key, kid in entries:
        algorithm = jwt.algorithms.ECAlgorithm if isinstance(key, ec.EllipticCurvePrivateKey) else \
            jwt.algorithms.RSAAlgorithm
        keys.append({**json.loads(algorithm.to_jwk(key.public_key())), "kid": kid, "use": "sig"})
    return json.dumps({"keys": keys})


def test_keys_rotate_without_a_restart_in_a_file_and_over_http(fresh_broker, keys, tmp_path):
    """A JWKS file rewritten with a new key, and an HTTP JWKS that gains one, are read
    again: a token signed with the new key is accepted without a restart (the HTTP set
    is fetched again when a token names a key id it does not hold). Broken by never
    re-reading the file: the rotated token stayed refused."""
    import http.server
    import threading

    new_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    keys = {**keys, "new": new_key}
    jwks_file = tmp_path / "jwks.json"
    jwks_file.write_text(_jwks((keys["good"], "rsa-1")))
    served = {"body": _jwks((keys["good"], "rsa-1")).encode()}

    class Jwks(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # the http.server API
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(served["body"])

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Jwks)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        for url, rotate in ((jwks_file.as_uri(), lambda: jwks_file.write_text(
                                _jwks((keys["good"], "rsa-1"), (new_key, "rsa-2")))),
                            (f"http://127.0.0.1:{server.server_address[1]}/jwks.json", lambda: served.update(
                                body=_jwks((keys["good"], "rsa-1"), (new_key, "rsa-2")).encode()))):
            broker = fresh_broker(**{"listeners": "SASL_PLAINTEXT://127.0.0.1:0",
                                     "sasl.enabled.mechanisms": "OAUTHBEARER",
                                     "sasl.oauthbearer.jwks.endpoint.url": url})
            rotated = _token(keys, key="new", kid="rsa-2", aud=None, iss=None)
            answer, _ = _authenticate(broker, rotated)
            assert answer.error_code == ErrorCode.sasl_authentication_failed, url
            rotate()
            deadline = time.monotonic() + 10
            while True:
                answer, _ = _authenticate(broker, rotated)
                if answer.error_code == ErrorCode.none or time.monotonic() > deadline:
                    break
                time.sleep(0.5)
            assert answer.error_code == ErrorCode.none, url
            broker.stop()
    finally:
        server.shutdown()
