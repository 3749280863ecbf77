"""TLS and SASL listeners configured the Kafka way, driven by real clients (issue 13).

One broker serves four listeners: PLAINTEXT (first), SASL_SSL (PLAIN, SCRAM-SHA-256,
SCRAM-SHA-512), SSL with required client certificates (mutual TLS), and SASL_PLAINTEXT.
Certificates come from trustme, a throwaway CA.
"""

from __future__ import annotations

import asyncio
import base64
import datetime
import json
import os
import socket
import ssl
import struct
import subprocess
import sys
import time

import pytest
import trustme
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.helpers import create_ssl_context
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)
from kafka import KafkaConsumer, KafkaProducer

from ottla.protocol.codec import encode_request
from ottla.protocol.errors import ErrorCode
from ottla.testing import BrokerProcess
from tests.clients import create_topic, poll_to_partition_ends
from tests.restarts import RESTARTS, restart
from tests.sasl_brokers import plain_jaas, sasl_plain_client_config
from tests.system_tools import require
from tests.wire import WireClient, request

PLAIN_USERS = {"alice": "alice-secret", "carol": "carol-secret"}
SCRAM_USER, SCRAM_PASSWORD = "bob", "bob-secret"
API_VERSIONS, METADATA, SASL_HANDSHAKE, SASL_AUTHENTICATE = 18, 3, 17, 36


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    directory = tmp_path_factory.mktemp("certs")
    ca = trustme.CA()
    server = ca.issue_cert("localhost", "127.0.0.1")
    client = ca.issue_cert("client.example", common_name="service-a", organization_unit_name="eng")
    paths = {name: str(directory / f"{name}.pem") for name in ("ca", "server", "client_cert", "client_key")}
    ca.cert_pem.write_to_path(paths["ca"])
    server.private_key_and_cert_chain_pem.write_to_path(paths["server"])
    for blob in client.cert_chain_pems:
        blob.write_to_path(paths["client_cert"], append=True)
    client.private_key_pem.write_to_path(paths["client_key"])
    # A client certificate of another CA, and an expired one of the right CA: both refused.
    stranger = trustme.CA().issue_cert("stranger.example")
    paths["stranger"] = str(directory / "stranger.pem")
    stranger.private_key_and_cert_chain_pem.write_to_path(paths["stranger"])
    expired = ca.issue_cert("expired.example", not_before=datetime.datetime(2020, 1, 1),
                            not_after=datetime.datetime(2021, 1, 1))
    paths["expired"] = str(directory / "expired.pem")
    expired.private_key_and_cert_chain_pem.write_to_path(paths["expired"])
    return paths


@pytest.fixture(scope="module")
def secure_broker(tmp_path_factory, certs):
    jaas = plain_jaas(PLAIN_USERS)
    properties = {
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0,MTLS://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,"
                     "REAUTH://127.0.0.1:0",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL,MTLS:SSL,"
                                          "SASL_PLAINTEXT:SASL_PLAINTEXT,"
                                          "REAUTH:SASL_PLAINTEXT",
        # KIP-368: sessions on this listener last 1.5 s, then the client authenticates again.
        "listener.name.reauth.connections.max.reauth.ms": "1500",
        "listener.name.reauth.sasl.enabled.mechanisms": "PLAIN",
        "listener.name.reauth.plain.sasl.jaas.config": jaas,
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": certs["server"],
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": jaas,
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": jaas,
        "listener.name.mtls.ssl.client.auth": "required",
        "listener.name.mtls.ssl.truststore.type": "PEM",
        "listener.name.mtls.ssl.truststore.location": certs["ca"],
        "admin.port": "0",
    }
    broker = BrokerProcess(str(tmp_path_factory.mktemp("secure") / "data"), properties)
    command = broker.command
    broker.command = lambda: command() + [  # type: ignore[method-assign]
        "--add-scram", f"SCRAM-SHA-512=[name={SCRAM_USER},password={SCRAM_PASSWORD}]",
        "--add-scram", f"SCRAM-SHA-256=[name={SCRAM_USER},password={SCRAM_PASSWORD}]",
    ]
    broker.start()
    yield broker
    broker.cleanup()


def _sasl_ssl(broker, certs, mechanism: str, user: str, password: str) -> dict[str, object]:
    return {"bootstrap.servers": broker.listeners["SASL_SSL"], "security.protocol": "SASL_SSL",
            "sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": password,
            "ssl.ca.location": certs["ca"]}


def _round_trip(conf: dict[str, object], topic: str, group: str) -> list[bytes]:
    """An idempotent producer, a committed and an aborted transaction, then a
    read_committed consumer in a group: what the consumer read. The aborted record is
    flushed before the abort (librdkafka drops unsent records on abort: there would be
    no aborted record to hide), and a read_uncommitted reader must find it in the log.

    Checked by breaking it: with the transaction coordinator writing a COMMIT marker for
    every transaction end, the read_committed reader gets b"aborted" and the callers'
    comparisons fail."""
    producer = Producer({**conf, "enable.idempotence": True})
    for i in range(10):
        producer.produce(topic, b"m%d" % i)
    assert producer.flush(20) == 0
    txn = Producer({**conf, "transactional.id": f"txn-{group}"})
    txn.init_transactions(20)
    txn.begin_transaction()
    txn.produce(topic, b"committed")
    txn.commit_transaction(20)
    txn.begin_transaction()
    txn.produce(topic, b"aborted")
    assert txn.flush(20) == 0
    txn.abort_transaction(20)
    everything = _consume_in_group(conf, topic, f"{group}-uncommitted", isolation="read_uncommitted", assign=True)
    assert sorted(everything) == sorted(EXPECTED + [b"aborted"]), "the aborted record is in the log"
    return _consume_in_group(conf, topic, group)


def _consume_in_group(conf: dict[str, object], topic: str, group: str, isolation: str = "read_committed",
                      assign: bool = False) -> list[bytes]:
    """Everything a consumer in `group` reads up to the end of the topic's partitions
    (the high watermark, past the last transaction marker); the position is committed.
    With `assign`, the consumer reads partition 0 without joining the group."""
    consumer = Consumer({**conf, "group.id": group, "auto.offset.reset": "earliest",
                         "isolation.level": isolation, "enable.partition.eof": True})
    if assign:
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    else:
        consumer.subscribe([topic])

    def at_high_watermarks(assignment: list[TopicPartition]) -> bool:
        positions = consumer.position(assignment)
        try:
            return all(tp.offset >= consumer.get_watermark_offsets(tp, 10)[1] for tp in positions)
        except KafkaException as exc:
            # A connection closed under the client (the REAUTH listener's 1.5 s sessions
            # end on a client a little late to authenticate again on a loaded machine,
            # as Kafka closes them): librdkafka reconnects; ask again.
            if exc.args[0].code() not in (KafkaError._TRANSPORT, KafkaError._DESTROY_BROKER):
                raise
            return False

    got = poll_to_partition_ends(consumer, topic, 30, at_high_watermarks)
    consumer.commit(asynchronous=False)
    consumer.close()
    return got


EXPECTED = sorted([b"m%d" % i for i in range(10)] + [b"committed"])


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-512", "SCRAM-SHA-256"])
def test_confluent_kafka_over_sasl_ssl_with_scram(secure_broker, certs, topic_name, mechanism):
    topic = f"{topic_name}-{mechanism.lower()}"
    create_topic(secure_broker.bootstrap, topic, 1)
    got = _round_trip(_sasl_ssl(secure_broker, certs, mechanism, SCRAM_USER, SCRAM_PASSWORD), topic, topic)
    assert sorted(got) == EXPECTED
    assert "authenticated" in secure_broker.log() and SCRAM_PASSWORD not in secure_broker.log()


def test_confluent_kafka_over_sasl_plaintext_with_plain(secure_broker, topic_name):
    create_topic(secure_broker.bootstrap, topic_name, 1)
    conf = sasl_plain_client_config(secure_broker.listeners["SASL_PLAINTEXT"], "alice", PLAIN_USERS["alice"])
    assert sorted(_round_trip(conf, topic_name, topic_name)) == EXPECTED


def test_confluent_kafka_with_mutual_tls(secure_broker, certs, topic_name):
    create_topic(secure_broker.bootstrap, topic_name, 1)
    conf = {"bootstrap.servers": secure_broker.listeners["MTLS"], "security.protocol": "SSL",
            "ssl.ca.location": certs["ca"], "ssl.certificate.location": certs["client_cert"],
            "ssl.key.location": certs["client_key"]}
    assert sorted(_round_trip(conf, topic_name, topic_name)) == EXPECTED


def _refused(conf: dict[str, object]) -> str:
    """The error a producer gets from a connection the broker refuses."""
    errors: list[str] = []
    producer = Producer({**conf, "error_cb": lambda e: errors.append(str(e)), "message.timeout.ms": 3000})
    delivered: list[object] = []
    producer.produce("never", b"x", on_delivery=lambda error, message: delivered.append(error))
    producer.flush(10)
    assert delivered and delivered[0] is not None  # the message timed out, never delivered
    return " ".join(errors)


def test_a_wrong_password_is_refused_counted_and_never_logged(secure_broker, certs, topic_name):
    before = secure_broker.admin.metric("ottla_sasl_authentication_failures_total", mechanism="SCRAM-SHA-512")
    error = _refused(_sasl_ssl(secure_broker, certs, "SCRAM-SHA-512", SCRAM_USER, "not-the-password"))
    assert "Authentication failed during authentication due to invalid credentials" in error
    error = _refused(_sasl_ssl(secure_broker, certs, "PLAIN", "alice", "guess-123"))
    assert "Invalid username or password" in error
    error = _refused(_sasl_ssl(secure_broker, certs, "PLAIN", "mallory", "guess-456"))
    assert "Invalid username or password" in error  # the same answer whether the user exists or not
    after = secure_broker.admin.metric("ottla_sasl_authentication_failures_total", mechanism="SCRAM-SHA-512")
    assert after > before
    log = secure_broker.log()
    assert "authentication failed" in log
    assert "not-the-password" not in log and "guess-123" not in log and "guess-456" not in log
    # Others carry on.
    create_topic(secure_broker.bootstrap, topic_name, 1)
    producer = Producer({**_sasl_ssl(secure_broker, certs, "PLAIN", "carol", PLAIN_USERS["carol"])})
    producer.produce(topic_name, b"fine")
    assert producer.flush(20) == 0


def test_a_client_certificate_of_another_ca_is_refused(secure_broker, certs):
    conf = {"bootstrap.servers": secure_broker.listeners["MTLS"], "security.protocol": "SSL",
            "ssl.ca.location": certs["ca"], "ssl.certificate.location": certs["stranger"],
            "ssl.key.location": certs["stranger"]}
    assert "brokers are down" in _refused(conf)  # the handshake fails: nothing delivered
    conf = {**conf, "ssl.certificate.location": certs["expired"], "ssl.key.location": certs["expired"]}
    assert "brokers are down" in _refused(conf)
    # No certificate at all, where one is required.
    conf = {"bootstrap.servers": secure_broker.listeners["MTLS"], "security.protocol": "SSL",
            "ssl.ca.location": certs["ca"]}
    assert "brokers are down" in _refused(conf)


def _host_port(address: str) -> tuple[str, int]:
    host, port = address.rsplit(":", 1)
    return host, int(port)


def test_plaintext_on_a_tls_port_and_tls_on_a_plaintext_port_close_only_that_connection(secure_broker, certs):
    # A Kafka request in clear text to the TLS listener: the TLS handshake fails.
    with socket.create_connection(_host_port(secure_broker.listeners["SASL_SSL"]), timeout=10) as sock:
        sock.sendall(struct.pack(">ihhi", 10, API_VERSIONS, 0, 1) + struct.pack(">h", -1))
        # Whatever TLS answers (an alert), the broker then closes the connection.
        while sock.recv(4096):
            pass
    # A TLS ClientHello to the PLAINTEXT listener: not a Kafka frame, closed.
    context = ssl.create_default_context(cafile=certs["ca"])
    with socket.create_connection(_host_port(secure_broker.bootstrap), timeout=10) as raw:
        # The handshake ends on the broker's close (SSLEOFError or a reset) within the
        # socket's 10 s: a broker that hung would raise TimeoutError, which fails here.
        with pytest.raises((ssl.SSLError, ConnectionError)):
            context.wrap_socket(raw, server_hostname="localhost")
    # Logged and counted, as any client's bad input.
    assert "TLS handshake failed" in secure_broker.log()
    assert secure_broker.admin.metric("ottla_tls_handshake_failures_total") >= 1
    # The listeners still serve.
    with WireClient(secure_broker.bootstrap) as client:
        assert client.call(request(API_VERSIONS, 3, client_software_name="t", client_software_version="1"))


def _sasl_plaintext_socket(broker) -> socket.socket:
    return socket.create_connection(_host_port(broker.listeners["SASL_PLAINTEXT"]), timeout=10)


def test_requests_before_authentication_close_the_connection(secure_broker):
    with WireClient(secure_broker.listeners["SASL_PLAINTEXT"]) as client:
        # ApiVersions is served before authentication ...
        assert client.call(request(API_VERSIONS, 3, client_software_name="t", client_software_version="1"))
        # ... Metadata is not: the connection is closed without an answer.
        client.send(request(METADATA, 12, topics=None, allow_auto_topic_creation=False,
                            include_topic_authorized_operations=False))
        # Closed, not left hanging (is_closed is False after 10 s of silence) nor answered.
        assert client.is_closed(timeout=10)
    with WireClient(secure_broker.listeners["SASL_PLAINTEXT"]) as client:
        # SaslAuthenticate before any handshake: ILLEGAL_SASL_STATE, then closed.
        answer = client.call(request(SASL_AUTHENTICATE, 2, auth_bytes=b"\0alice\0alice-secret"))
        assert answer.error_code == ErrorCode.illegal_sasl_state


def test_an_unknown_mechanism_and_malformed_tokens_get_kafkas_errors(secure_broker):
    with WireClient(secure_broker.listeners["SASL_PLAINTEXT"]) as client:
        answer = client.call(request(SASL_HANDSHAKE, 1, mechanism="GSSAPI"))
        assert answer.error_code == ErrorCode.unsupported_sasl_mechanism
        assert set(answer.mechanisms) == {"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"}
    for mechanism, token in (("PLAIN", b"no separators"), ("PLAIN", b"\xff\0\xfe\0\xfd"),
                             ("SCRAM-SHA-512", b"garbage"), ("SCRAM-SHA-512", b"n,,n=bob"),
                             ("SCRAM-SHA-256", b"p=tls-unique,,n=bob,r=abc"), ("SCRAM-SHA-512", b"\0" * 100_000),
                             ("OAUTHBEARER", b"n,,\x01auth=Bearer not.a.jwt\x01\x01"),
                             ("OAUTHBEARER",
                              b"n,,\x01auth=Bearer " + _unsecured_jwt({"sub": "x", "exp": 1}) + b"\x01\x01"),
                             ("OAUTHBEARER", b"garbage")):
        with WireClient(secure_broker.listeners["SASL_PLAINTEXT"]) as client:
            assert client.call(request(SASL_HANDSHAKE, 1, mechanism=mechanism)).error_code == ErrorCode.none
            answer = client.call(request(SASL_AUTHENTICATE, 2, auth_bytes=token))
            assert answer.error_code == ErrorCode.sasl_authentication_failed, (mechanism, token[:20])
    with WireClient(secure_broker.listeners["SASL_PLAINTEXT"]) as client:
        assert client.call(request(API_VERSIONS, 3, client_software_name="t", client_software_version="1"))


def _unsecured_jwt(claims: dict[str, object]) -> bytes:
    def part(value: dict[str, object]) -> bytes:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=")
    return part({"alg": "none"}) + b"." + part(claims) + b"."


def test_confluent_kafka_with_an_unsecured_oauthbearer_token(secure_broker, certs, topic_name):
    create_topic(secure_broker.bootstrap, topic_name, 1)
    conf = {"bootstrap.servers": secure_broker.listeners["SASL_SSL"], "security.protocol": "SASL_SSL",
            "ssl.ca.location": certs["ca"], "sasl.mechanism": "OAUTHBEARER",
            "enable.sasl.oauthbearer.unsecure.jwt": True, "sasl.oauthbearer.config": "principal=erin"}
    assert sorted(_round_trip(conf, topic_name, topic_name)) == EXPECTED
    assert "principal=User:erin" in secure_broker.log()


def test_sessions_are_authenticated_again_when_connections_max_reauth_ms_says(secure_broker, topic_name):
    create_topic(secure_broker.bootstrap, topic_name, 1)
    before = secure_broker.log().count("principal=User:carol")
    conf = sasl_plain_client_config(secure_broker.listeners["REAUTH"], "carol", PLAIN_USERS["carol"])
    producer = Producer({**conf, "enable.idempotence": True})
    failures: list[object] = []
    for i in range(12):
        producer.produce(topic_name, b"r%d" % i, on_delivery=lambda error, message: failures.append(error) if error
                         else None)
        producer.flush(10)
        time.sleep(0.5)
    assert not failures
    # One authentication per connection at first, then one every 1.5 s on each.
    assert secure_broker.log().count("principal=User:carol") - before >= 4
    # The client authenticated again in time on the same connections: none was closed for it.
    assert "re-authentication is due" not in secure_broker.log()
    got = _consume_in_group(conf, topic_name, topic_name)
    assert got == [b"r%d" % i for i in range(12)]


def test_handshake_v0_takes_bare_tokens(secure_broker):
    """The older clients' way: after SaslHandshake v0 the token goes in a bare frame."""
    with WireClient(secure_broker.listeners["SASL_PLAINTEXT"]) as client:
        assert client.call(request(SASL_HANDSHAKE, 0, mechanism="PLAIN")).error_code == ErrorCode.none
        token = b"\0alice\0" + PLAIN_USERS["alice"].encode()
        client.send_raw(struct.pack(">i", len(token)) + token)
        assert client.sock.recv(4) == b"\0\0\0\0"  # an empty answer: authenticated
        answer = client.call(request(METADATA, 12, topics=None, allow_auto_topic_creation=False,
                                     include_topic_authorized_operations=False))
        assert answer.brokers


@pytest.mark.parametrize("how", RESTARTS)
def test_scram_users_are_managed_through_the_admin_api_and_survive_a_restart(secure_broker, certs, topic_name,
                                                                           how):
    admin = AdminClient({"bootstrap.servers": secure_broker.bootstrap})
    futures = admin.alter_user_scram_credentials([
        UserScramCredentialUpsertion("dave", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192), b"dave-secret"),
    ])
    for future in futures.values():
        future.result(10)
    described = admin.describe_user_scram_credentials(["dave"])["dave"].result(10)
    (info,) = described.scram_credential_infos
    assert info.mechanism == ScramMechanism.SCRAM_SHA_512 and info.iterations == 8192
    with pytest.raises(KafkaException) as missing:
        admin.describe_user_scram_credentials(["nobody"])["nobody"].result(10)
    assert "RESOURCE_NOT_FOUND" in str(missing.value) or "does not exist" in str(missing.value)
    # Too few iterations: Kafka's UNACCEPTABLE_CREDENTIAL.
    futures = admin.alter_user_scram_credentials([
        UserScramCredentialUpsertion("erin", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 100), b"erin-secret"),
    ])
    with pytest.raises(KafkaException) as weak:
        futures["erin"].result(10)
    assert "UNACCEPTABLE_CREDENTIAL" in str(weak.value) or "Iterations" in str(weak.value)
    restart(secure_broker, how)
    create_topic(secure_broker.bootstrap, topic_name, 1)
    producer = Producer(_sasl_ssl(secure_broker, certs, "SCRAM-SHA-512", "dave", "dave-secret"))
    producer.produce(topic_name, b"from dave")
    assert producer.flush(20) == 0
    admin = AdminClient({"bootstrap.servers": secure_broker.bootstrap})
    for future in admin.alter_user_scram_credentials([
            UserScramCredentialDeletion("dave", ScramMechanism.SCRAM_SHA_512)]).values():
        future.result(10)
    assert "Authentication failed" in _refused(_sasl_ssl(secure_broker, certs, "SCRAM-SHA-512", "dave",
                                                         "dave-secret"))


def _python_ssl_context(certs) -> ssl.SSLContext:
    return create_ssl_context(cafile=certs["ca"])


@pytest.mark.parametrize("mechanism,user,password", [("PLAIN", "alice", PLAIN_USERS["alice"]),
                                                     ("SCRAM-SHA-512", SCRAM_USER, SCRAM_PASSWORD)])
def test_kafka_python_over_sasl_ssl(secure_broker, certs, topic_name, mechanism, user, password):
    topic = f"{topic_name}-{mechanism.lower()}"
    create_topic(secure_broker.bootstrap, topic, 1)
    common = dict(bootstrap_servers=secure_broker.listeners["SASL_SSL"], security_protocol="SASL_SSL",
                  ssl_cafile=certs["ca"], ssl_check_hostname=False, sasl_mechanism=mechanism,
                  sasl_plain_username=user, sasl_plain_password=password)
    producer = KafkaProducer(**common)
    for i in range(5):
        producer.send(topic, b"kp%d" % i)
    producer.flush(20)
    producer.close()
    txn = KafkaProducer(transactional_id=f"kp-{topic}", **common)
    txn.init_transactions()
    txn.begin_transaction()
    txn.send(topic, b"committed")
    txn.commit_transaction()
    txn.close()
    # consumer_timeout_ms bounds a failure; a pass stops at the sixth record.
    consumer = KafkaConsumer(topic, group_id=topic, auto_offset_reset="earliest", consumer_timeout_ms=30_000,
                             isolation_level="read_committed", **common)
    got: list[bytes] = []
    for message in consumer:
        got.append(message.value)
        if len(got) == 6:
            break
    consumer.close()
    assert sorted(got) == [b"committed", *[b"kp%d" % i for i in range(5)]]


@pytest.mark.parametrize("mechanism,user,password", [("PLAIN", "carol", PLAIN_USERS["carol"]),
                                                     ("SCRAM-SHA-256", SCRAM_USER, SCRAM_PASSWORD)])
def test_aiokafka_over_sasl_ssl_with_a_transaction(secure_broker, certs, topic_name, mechanism, user, password):
    topic = f"{topic_name}-{mechanism.lower()}"
    create_topic(secure_broker.bootstrap, topic, 1)
    common = dict(bootstrap_servers=secure_broker.listeners["SASL_SSL"], security_protocol="SASL_SSL",
                  ssl_context=_python_ssl_context(certs), sasl_mechanism=mechanism, sasl_plain_username=user,
                  sasl_plain_password=password)

    async def scenario() -> list[bytes]:
        producer = AIOKafkaProducer(transactional_id=f"aio-{topic}", **common)
        await producer.start()
        async with producer.transaction():
            for i in range(5):
                await producer.send(topic, b"aio%d" % i)
        await producer.stop()
        consumer = AIOKafkaConsumer(topic, group_id=topic, auto_offset_reset="earliest",
                                    isolation_level="read_committed", **common)
        await consumer.start()
        got: list[bytes] = []
        try:
            while len(got) < 5:
                batches = await asyncio.wait_for(consumer.getmany(timeout_ms=500), 20)
                got += [m.value for messages in batches.values() for m in messages]
        finally:
            await consumer.stop()
        return got

    assert sorted(asyncio.run(scenario())) == [b"aio%d" % i for i in range(5)]


def test_kcat_over_sasl_ssl_with_scram(secure_broker, certs, topic_name):
    kcat = require("kcat")
    create_topic(secure_broker.bootstrap, topic_name, 1)
    options = ["-b", secure_broker.listeners["SASL_SSL"], "-X", "security.protocol=SASL_SSL",
               "-X", "sasl.mechanisms=SCRAM-SHA-256", "-X", f"sasl.username={SCRAM_USER}",
               "-X", f"sasl.password={SCRAM_PASSWORD}", "-X", f"ssl.ca.location={certs['ca']}"]
    subprocess.run([kcat, *options, "-P", "-t", topic_name], input="one\ntwo\n", text=True, check=True, timeout=60)
    out = subprocess.run([kcat, *options, "-C", "-t", topic_name, "-o", "beginning", "-e", "-q"],
                         capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.split() == ["one", "two"]
    # And in a consumer group (kcat's balanced consumer).
    out = subprocess.run([kcat, *options, "-G", f"kcat-{topic_name}", topic_name, "-e", "-q",
                          "-X", "auto.offset.reset=earliest"], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.split() == ["one", "two"]


@pytest.mark.parametrize("mechanism,user,password", [("plain", "alice", PLAIN_USERS["alice"]),
                                                     ("scram-sha-512", SCRAM_USER, SCRAM_PASSWORD)])
def test_kafkajs_over_sasl_ssl(secure_broker, certs, kafkajs, mechanism, user, password):
    security = {"ca": certs["ca"], "sasl": {"mechanism": mechanism, "username": user, "password": password}}
    out = subprocess.run(["node", kafkajs, secure_broker.listeners["SASL_SSL"], json.dumps(security)],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    read = json.loads(out.stdout.strip().splitlines()[-1])
    committed = sorted([f"v{i}" for i in range(50)] + ["committed"])
    assert sorted(read["got"]) == committed
    assert sorted(read["everything"]) == sorted(committed + ["aborted"])


def test_dev_security_in_one_line_and_the_tools_with_its_client_properties(tmp_path, topic_name):
    """`ottla serve --dev-security`: SASL_SSL with SCRAM, the client files written, and
    both work as they are: confluent-kafka with librdkafka.config, Ottla's (and Kafka's)
    tools with client.properties."""
    broker = BrokerProcess(str(tmp_path / "data"), args=["--dev-security"]).start()
    try:
        config = broker.dev_security_config()
        assert config["security.protocol"] == "SASL_SSL" and config["sasl.mechanism"] == "SCRAM-SHA-512"
        producer = Producer({**config, "enable.idempotence": True})
        producer.produce(topic_name, b"secured")
        assert producer.flush(20) == 0
        properties = os.path.join(broker.data_dir, "dev-security", "client.properties")
        listed = subprocess.run([sys.executable, "-m", "ottla.tools.cli", "topics", "list", "--bootstrap-server",
                                 broker.bootstrap, "--command-config", properties],
                                capture_output=True, text=True, timeout=60)
        assert listed.returncode == 0, listed.stderr
        assert topic_name in listed.stdout
        password = config["sasl.password"]
        broker.stop()
        broker.start()  # the same CA and user after a restart
        assert broker.dev_security_config()["sasl.password"] == password
        producer = Producer({**broker.dev_security_config(), "enable.idempotence": True})
        producer.produce(topic_name, b"again")
        assert producer.flush(20) == 0
    finally:
        broker.cleanup()


def test_dev_security_refuses_no_credentials_a_wrong_password_and_a_client_without_its_ca(tmp_path):
    """`--dev-security` is secure, not only convenient: its one listener refuses a
    client that does not authenticate (the connection is closed, unanswered, within
    10 s), a wrong password (Kafka's SASL error), and a client that does not trust the
    CA it wrote (the certificate is not publicly trusted).

    Checked by breaking it: with the SASL check before a request (broker/network/connection.py,
    `if self._sasl and ... needs_authentication`) made `if False`, the TLS client without
    credentials gets its Metadata answered and the test fails; with the SCRAM proof's
    `raise failure` (broker/security/sasl.py, _client_final) made `pass`, the wrong password is
    accepted by the broker (the client then rejects the server's signature instead),
    and the 'invalid credentials' check fails."""
    broker = BrokerProcess(str(tmp_path / "data"), args=["--dev-security"]).start()
    try:
        config = broker.dev_security_config()
        ca = config["ssl.ca.location"]
        context = ssl.create_default_context(cafile=ca)
        context.check_hostname = False
        with socket.create_connection(_host_port(config["bootstrap.servers"]), timeout=10) as raw:
            with context.wrap_socket(raw) as tls:
                metadata = encode_request(1, "no-credentials", request(
                    METADATA, 12, topics=None, allow_auto_topic_creation=False,
                    include_topic_authorized_operations=False))
                tls.sendall(metadata)
                assert tls.recv(1) == b"", "closed without an answer"
        error = _refused({**config, "sasl.password": config["sasl.password"] + "-wrong"})
        assert "Authentication failed during authentication due to invalid credentials" in error, error[:500]
        without_ca = {key: value for key, value in config.items() if key != "ssl.ca.location"}
        assert "certificate verify failed" in _refused(without_ca)
    finally:
        broker.cleanup()


def test_large_fetch_answers_over_tls_carry_the_records(secure_broker, certs, topic_name):
    """A Fetch answer's records are sent from the segment files with sendfile on a
    plaintext listener (broker/network/file_sender.py); TLS must encrypt them, so there
    they are read into memory first. Sent from the file on a TLS connection, they would
    reach the client unencrypted, in the middle of its TLS stream."""
    create_topic(secure_broker.bootstrap, topic_name, 1)
    values = [b"%05d" % i * 2_000 for i in range(300)]  # 3 MB: answers of up to 1 MiB each
    producer = Producer({"bootstrap.servers": secure_broker.bootstrap, "linger.ms": 50})
    for value in values:
        producer.produce(topic_name, value)
    assert producer.flush(20) == 0
    conf = {"bootstrap.servers": secure_broker.listeners["MTLS"], "security.protocol": "SSL",
            "ssl.ca.location": certs["ca"], "ssl.certificate.location": certs["client_cert"],
            "ssl.key.location": certs["client_key"]}
    assert _consume_in_group(conf, topic_name, topic_name, isolation="read_uncommitted", assign=True) == values
