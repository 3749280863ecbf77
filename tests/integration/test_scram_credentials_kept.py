"""SCRAM users created before the server side moved to the scramp library (issue 35) still
log in, with every client: librdkafka (confluent-kafka), kafka-python, aiokafka, kafkajs
and the Java client (Kafka 4.3.1's own tools), with SCRAM-SHA-256 and SCRAM-SHA-512.

tests/data/scram-credentials-59f0c0a.json was written by ScramCredentials at 59f0c0a,
the parent of the change (hashlib/hmac code): `veteran` (password veteran-secret, 4096
iterations) and `elder` (elder-secret, 8192 iterations), both mechanisms each. The
broker starts on a data directory holding that file as its scram-credentials.json.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import os
import shutil
import stat
import subprocess
import sys

import pytest
from aiokafka import AIOKafkaProducer
from confluent_kafka import KafkaException, Producer
from kafka import KafkaProducer

from ottla.protocol.errors import ErrorCode
from ottla.testing import BrokerProcess
from tests.clients import create_topic
from tests.reference.kafka import run_java
from tests.wire import WireClient, request

OLD_FILE = os.path.join(os.path.dirname(os.path.dirname(__file__)), "data", "scram-credentials-59f0c0a.json")
USERS = {"veteran": "veteran-secret", "elder": "elder-secret"}
MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
SASL_HANDSHAKE, SASL_AUTHENTICATE = 17, 36
CASES = [(mechanism, user) for mechanism in MECHANISMS for user in USERS]


@pytest.fixture(scope="module")
def old_users_broker(tmp_path_factory):
    data = tmp_path_factory.mktemp("kept") / "data"
    data.mkdir()
    shutil.copy(OLD_FILE, data / "scram-credentials.json")
    os.chmod(data / "scram-credentials.json", 0o600)
    broker = BrokerProcess(str(data), {
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": ",".join(MECHANISMS),
    }).start()
    yield broker
    broker.cleanup()


def _sasl(broker: BrokerProcess) -> str:
    return broker.listeners["SASL_PLAINTEXT"]


@pytest.mark.parametrize("mechanism,user", CASES)
def test_librdkafka(old_users_broker, topic_name, mechanism, user):
    create_topic(old_users_broker.bootstrap, topic_name, 1)
    producer = Producer({"bootstrap.servers": _sasl(old_users_broker), "security.protocol": "SASL_PLAINTEXT",
                         "sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": USERS[user],
                         "enable.idempotence": True})
    producer.produce(topic_name, b"from " + user.encode())
    assert producer.flush(20) == 0
    assert f"principal=User:{user}" in old_users_broker.log()


def test_a_wrong_password_and_an_unknown_user_are_refused_alike(old_users_broker):
    failed = "Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512"
    before = old_users_broker.log().count(failed)
    for user, password in (("veteran", "not-it"), ("stranger", "veteran-secret")):
        producer = Producer({"bootstrap.servers": _sasl(old_users_broker), "security.protocol": "SASL_PLAINTEXT",
                             "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": user, "sasl.password": password})
        with pytest.raises(KafkaException):
            producer.list_topics(timeout=5)
    assert old_users_broker.log().count(failed) - before >= 2


@pytest.mark.parametrize("mechanism,user", CASES)
def test_kafka_python(old_users_broker, topic_name, mechanism, user):
    create_topic(old_users_broker.bootstrap, topic_name, 1)
    producer = KafkaProducer(bootstrap_servers=_sasl(old_users_broker), security_protocol="SASL_PLAINTEXT",
                             sasl_mechanism=mechanism, sasl_plain_username=user, sasl_plain_password=USERS[user])
    producer.send(topic_name, b"kafka-python").get(timeout=20)
    producer.close()


@pytest.mark.parametrize("mechanism,user", CASES)
def test_aiokafka(old_users_broker, topic_name, mechanism, user):
    create_topic(old_users_broker.bootstrap, topic_name, 1)

    async def send() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=_sasl(old_users_broker), security_protocol="SASL_PLAINTEXT",
                                    sasl_mechanism=mechanism, sasl_plain_username=user,
                                    sasl_plain_password=USERS[user])
        await producer.start()
        try:
            await producer.send_and_wait(topic_name, b"aiokafka")
        finally:
            await producer.stop()

    asyncio.run(send())


@pytest.mark.parametrize("mechanism,user", CASES)
def test_kafkajs(old_users_broker, kafkajs, mechanism, user):
    security = {"sasl": {"mechanism": mechanism.lower(), "username": user, "password": USERS[user]}}
    out = subprocess.run(["node", kafkajs, _sasl(old_users_broker), json.dumps(security)],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])["got"]
    assert "committed" in got


@pytest.mark.parametrize("mechanism,user", CASES)
def test_java_client(old_users_broker, tmp_path, topic_name, mechanism, user):
    create_topic(old_users_broker.bootstrap, topic_name, 1)
    config = tmp_path / "client.properties"
    config.write_text("security.protocol=SASL_PLAINTEXT\n"
                      f"sasl.mechanism={mechanism}\n"
                      "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
                      f'username="{user}" password="{USERS[user]}";\n')
    listed = run_java("org.apache.kafka.tools.TopicCommand",
                      ["--bootstrap-server", _sasl(old_users_broker), "--command-config", str(config), "--list"])
    assert listed.returncode == 0, listed.stderr[-2000:]
    assert topic_name in listed.stdout.split()
    wrong = config.read_text().replace(USERS[user], "wrong-password")
    config.write_text(wrong)
    refused = run_java("org.apache.kafka.tools.TopicCommand",
                       ["--bootstrap-server", _sasl(old_users_broker), "--command-config", str(config), "--list"],
                       timeout=120)
    assert refused.returncode != 0 and "Authentication failed" in refused.stdout + refused.stderr


def _server_first(broker: BrokerProcess, user: str) -> dict[str, str]:
    with WireClient(_sasl(broker)) as client:
        assert client.call(request(SASL_HANDSHAKE, 1, mechanism="SCRAM-SHA-512")).error_code == ErrorCode.none
        answer = client.call(request(SASL_AUTHENTICATE, 2, auth_bytes=f"n,,n={user},r=abcdefgh".encode()))
        assert answer.error_code == ErrorCode.none
        return dict(part.split("=", 1) for part in answer.auth_bytes.decode().split(","))


def test_an_unknown_users_salt_cannot_be_computed_from_its_name(old_users_broker):
    """Issue 28 point 9, against the broker: the salt shown for a user that does not
    exist was sha256("ottla" + name), so anyone could tell unknown users from real ones.
    Now it is keyed by scram-unknown-user.key (0600), stable across attempts and
    restarts as a real user's salt is. Checked with the formula put back: the first
    assertion fails."""
    first = _server_first(old_users_broker, "stranger")
    assert first["s"] != base64.b64encode(hashlib.sha256(b"ottla" + b"stranger").digest()).decode()
    assert _server_first(old_users_broker, "stranger")["s"] == first["s"] and first["i"] == "4096"
    key_file = os.path.join(old_users_broker.data_dir, "scram-unknown-user.key")
    assert stat.S_IMODE(os.stat(key_file).st_mode) == 0o600
    old_users_broker.stop()
    old_users_broker.start()
    assert _server_first(old_users_broker, "stranger")["s"] == first["s"]
    known = _server_first(old_users_broker, "veteran")
    assert len(base64.b64decode(known["s"])) == len(base64.b64decode(first["s"]))


def test_a_stored_credential_under_4096_iterations_is_not_served(tmp_path):
    """A credentials file edited by hand to 1,000 iterations (Kafka never stores fewer than
    4,096): the broker refuses the user rather than offer a weak count (the code before
    scramp sent it), and Ottla's tools would refuse the count anyway
    (tests/unit/test_security_parts.py)."""
    from ottla.broker.security.scram_credentials import ScramCredentials, credential_from_password

    data = tmp_path / "data"
    data.mkdir()
    ScramCredentials(str(data)).change([("weak", "SCRAM-SHA-512",
                                         credential_from_password("SCRAM-SHA-512", "weak-secret", 1000))], [])
    broker = BrokerProcess(str(data), {
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "SCRAM-SHA-512"}).start()
    try:
        with WireClient(_sasl(broker)) as client:
            client.call(request(SASL_HANDSHAKE, 1, mechanism="SCRAM-SHA-512"))
            answer = client.call(request(SASL_AUTHENTICATE, 2, auth_bytes=b"n,,n=weak,r=abcdefgh"))
            assert answer.error_code == ErrorCode.sasl_authentication_failed
        config = tmp_path / "client.properties"
        config.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\n"
                          "sasl.username=weak\nsasl.password=weak-secret\n")
        listed = subprocess.run([sys.executable, "-m", "ottla.tools.cli", "topics", "list", "--bootstrap-server",
                                 _sasl(broker), "--command-config", str(config)],
                                capture_output=True, text=True, timeout=60)
        assert listed.returncode != 0
    finally:
        broker.cleanup()
