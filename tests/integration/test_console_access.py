"""The web console on a broker with SASL users and ACLs (issue 28 point 1): a reader signs
in with the broker's own users (HTTP Basic: a PLAIN user of the JAAS config, or a SCRAM
user) or the admin token, and sees what the authorizer lets that principal see, as
Kafka's APIs would: DESCRIBE to see a topic listed, READ for its records, DESCRIBE on a
group or transactional id for its page, the cluster's DESCRIBE_CONFIGS for the Broker
page. Before, every page answered anyone on this machine with every topic's records,
whatever the ACLs said: each refusal below was a 200 at 59f0c0a. Checked by breaking it
twice: marking the broker unsecured in access.py (the 401 tests fail), and handing the
pages the whole broker instead of the principal's view in app.py (the lists show the
hidden topic, group and transaction: three tests fail).

Also: a broker without security keeps its console to this machine unless
admin.console.remote=true."""

from __future__ import annotations

import base64
import urllib.error
import urllib.request

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from ottla.testing import BrokerProcess
from tests.host_addresses import own_non_loopback_address
from tests.sasl_brokers import sasl_plain_client_config, start_sasl_plain_broker
from tests.system_tools import require

PLAIN_USERS = {"admin": "admin-secret", "alice": "alice-secret"}
SCRAM_USER, SCRAM_PASSWORD = "carol", "carol-secret"
TOKEN = "console-token"


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    broker = start_sasl_plain_broker(
        str(tmp_path_factory.mktemp("console-access") / "data"), PLAIN_USERS,
        {"sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512", "admin.port": "0", "admin.token": TOKEN},
        args=["--add-scram", f"SCRAM-SHA-512=[name={SCRAM_USER},password={SCRAM_PASSWORD}]"])
    conf = sasl_plain_client_config(broker.bootstrap, "admin", PLAIN_USERS["admin"])
    admin = AdminClient(conf)
    for future in admin.create_topics([NewTopic("visible", 1), NewTopic("hidden", 1)]).values():
        future.result(20)

    def allow(principal: str, operation: AclOperation, resource: ResourceType, name: str) -> AclBinding:
        return AclBinding(resource, name, ResourcePatternType.LITERAL, principal, "*", operation,
                          AclPermissionType.ALLOW)

    for future in admin.create_acls([
        allow("User:alice", AclOperation.READ, ResourceType.TOPIC, "visible"),
        allow("User:alice", AclOperation.DESCRIBE, ResourceType.GROUP, "alice-group"),
        allow("User:alice", AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, "alice-txn"),
        allow("User:alice", AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, "mixed-txn"),
        allow(f"User:{SCRAM_USER}", AclOperation.DESCRIBE, ResourceType.TOPIC, "visible"),
    ]).values():
        future.result(10)
    for txn_id, topic in (("alice-txn", "visible"), ("hidden-txn", "hidden")):
        producer = Producer({**conf, "transactional.id": txn_id})
        producer.init_transactions(20)
        producer.begin_transaction()
        producer.produce(topic, key=b"k", value=f"record of {topic}".encode(), partition=0)
        producer.commit_transaction(20)
    # Left open, so that its partitions are listed: one topic alice may see, one she may not.
    mixed = Producer({**conf, "transactional.id": "mixed-txn", "transaction.timeout.ms": 600_000})
    mixed.init_transactions(20)
    mixed.begin_transaction()
    for topic in ("visible", "hidden"):
        mixed.produce(topic, value=b"open", partition=0)
    assert mixed.flush(20) == 0
    for group in ("alice-group", "hidden-group"):
        consumer = Consumer({**conf, "group.id": group, "log_level": 3})
        consumer.commit(offsets=[TopicPartition("visible", 0, 1), TopicPartition("hidden", 0, 1)],
                        asynchronous=False)
        consumer.close()
    yield broker
    mixed.abort_transaction(20)
    broker.cleanup()


def _basic(user: str, password: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}


def _get(broker: BrokerProcess, path: str, headers: dict[str, str] | None = None) -> tuple[int, str, dict[str, str]]:
    request = urllib.request.Request(f"{broker.admin_url}{path}", headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read().decode(), dict(response.headers)
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode(), dict(exc.headers)


ALICE = _basic("alice", PLAIN_USERS["alice"])
CAROL = _basic(SCRAM_USER, SCRAM_PASSWORD)


def test_nothing_is_read_without_signing_in(secured):
    for path in ("/console/topics", "/console/messages?topic=visible&partition=0", "/console/groups",
                 "/console/static/console.js"):
        status, _, headers = _get(secured, path)
        assert status == 401 and headers["WWW-Authenticate"].startswith("Basic "), path
    assert _get(secured, "/console/topics", _basic("alice", "wrong"))[0] == 401
    assert _get(secured, "/console/topics", _basic("nobody", "alice-secret"))[0] == 401
    assert _get(secured, "/console/topics", _basic(SCRAM_USER, "wrong"))[0] == 401
    assert _get(secured, "/healthz")[0] == 200


def test_a_principal_sees_what_its_acls_let_it(secured):
    status, page, _ = _get(secured, "/console/topics", ALICE)
    assert status == 200 and ">visible<" in page and ">hidden<" not in page
    status, page, _ = _get(secured, "/console/messages?topic=visible&partition=0", ALICE)
    assert status == 200 and "record of visible" in page
    for path in ("/console/messages?topic=hidden&partition=0", "/console/messages/rows?topic=hidden&partition=0",
                 "/console/topic?name=hidden", "/console/producers?topic=hidden", "/console/group?id=hidden-group",
                 "/console/transaction?id=hidden-txn", "/console/broker", "/console/stats"):
        status, page, _ = _get(secured, path, ALICE)
        assert status == 403 and "record of hidden" not in page, path
    status, page, _ = _get(secured, "/console/groups", ALICE)
    assert "alice-group" in page and "hidden-group" not in page
    status, page, _ = _get(secured, "/console/group?id=alice-group", ALICE)
    assert status == 200 and ">visible<" in page and ">hidden<" not in page  # offsets of DESCRIBEd topics only
    status, page, _ = _get(secured, "/console/transactions", ALICE)
    assert "alice-txn" in page and "hidden-txn" not in page
    # An open transaction over a topic she may see and one she may not: the first only.
    assert "mixed-txn" in page and ">visible-0<" in page and ">hidden-0<" not in page
    status, page, _ = _get(secured, "/console/transaction?id=mixed-txn", ALICE)
    assert status == 200 and ">visible-0<" in page and "hidden" not in page
    assert _get(secured, "/console/transaction?id=alice-txn", ALICE)[0] == 200
    # /metrics names every topic: a signed-in principal needs the cluster's DESCRIBE.
    assert _get(secured, "/metrics", ALICE)[0] == 403


def test_a_scram_user_signs_in_with_its_password_and_describe_is_not_read(secured):
    status, page, _ = _get(secured, "/console/topics", CAROL)
    assert status == 200 and ">visible<" in page and ">hidden<" not in page
    assert _get(secured, "/console/topic?name=visible", CAROL)[0] == 200
    status, page, _ = _get(secured, "/console/messages?topic=visible&partition=0", CAROL)
    assert status == 403 and "record of visible" not in page


def test_a_super_user_and_the_token_see_everything(secured):
    for headers in (_basic("admin", PLAIN_USERS["admin"]), _basic("anyone", TOKEN),
                    {"Authorization": f"Bearer {TOKEN}"}):
        status, page, _ = _get(secured, "/console/topics", headers)
        assert status == 200 and ">visible<" in page and ">hidden<" in page
        status, page, _ = _get(secured, "/console/messages?topic=hidden&partition=0", headers)
        assert status == 200 and "record of hidden" in page
        assert _get(secured, "/console/broker", headers)[0] == 200


def test_in_chromium_the_browser_signs_in_and_sees_only_what_it_may(secured):
    from playwright.sync_api import Error as PlaywrightError
    from playwright.sync_api import sync_playwright

    from tests.integration.test_web_console import CHROMIUM_ARGS

    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=require("chromium"), args=CHROMIUM_ARGS, headless=True)
        # No credentials, or wrong ones: chromium is answered 401 (asked to sign in) and
        # shows nothing of the console (headless, it may give up with a net:: error).
        for credentials in (None, {"username": "alice", "password": "wrong"}):
            outsider = chromium.new_context(http_credentials=credentials)  # type: ignore[arg-type]
            try:
                answer = outsider.new_page().goto(f"{secured.admin_url}/console/topics")
                assert answer is not None and answer.status == 401
            except PlaywrightError as exc:
                assert "ERR_INVALID_AUTH_CREDENTIALS" in str(exc)
            outsider.close()
        context = chromium.new_context(http_credentials={"username": "alice", "password": PLAIN_USERS["alice"]})
        page = context.new_page()
        page.goto(f"{secured.admin_url}/console/topics")
        names = page.eval_on_selector_all("#topics tbody tr td:first-child", "cells => cells.map(c => c.innerText)")
        assert names == ["visible"]
        page.click("#topics a:text-is('visible')")
        page.click("#partitions a:text-is('messages')")
        assert "record of visible" in page.inner_text("#messages")
        answer = page.goto(f"{secured.admin_url}/console/messages?topic=hidden&partition=0")
        assert answer is not None and answer.status == 403
        assert "may not READ topic 'hidden'" in page.inner_text("main")
        context.close()
        chromium.close()


@pytest.mark.parametrize("remote", [False, True])
def test_without_security_the_console_answers_this_machine_unless_opened(tmp_path, remote):
    address = own_non_loopback_address()
    assert address is not None, "this test needs a non-loopback IPv4 address to connect from"
    properties = {"admin.port": "0", "admin.host": "0.0.0.0"}
    if remote:
        properties["admin.console.remote"] = "true"
    broker = BrokerProcess(str(tmp_path / "data"), properties).start()
    try:
        port = int(broker.admin_url.rsplit(":", 1)[1])
        request = urllib.request.Request(f"http://{address}:{port}/console/topics",
                                         headers={"Host": f"127.0.0.1:{port}"})
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                status = response.status
        except urllib.error.HTTPError as exc:
            status = exc.code
        assert status == (200 if remote else 403)
        assert _get(broker, "/console/topics")[0] == 200  # from this machine
        request = urllib.request.Request(f"http://{address}:{port}/metrics", headers={"Host": f"127.0.0.1:{port}"})
        with urllib.request.urlopen(request, timeout=10) as response:  # the metrics are not the console's
            assert response.status == 200
    finally:
        broker.cleanup()


def test_in_chromium_a_signed_in_user_creates_only_the_topics_its_acls_allow(tmp_path):
    """Without admin.token, a change on a secured broker comes from this machine and is
    authorized as the signed-in user: CREATE, as CreateTopics asks. The page's script
    sends no credentials of its own; the browser adds the user's."""
    from playwright.sync_api import sync_playwright

    from tests.integration.test_web_console import CHROMIUM_ARGS

    broker = start_sasl_plain_broker(str(tmp_path / "data"), PLAIN_USERS, {"admin.port": "0"})
    try:
        admin = AdminClient(sasl_plain_client_config(broker.bootstrap, "admin", PLAIN_USERS["admin"]))
        for future in admin.create_acls([AclBinding(ResourceType.TOPIC, "alices-", ResourcePatternType.PREFIXED,
                                                    "User:alice", "*", AclOperation.CREATE,
                                                    AclPermissionType.ALLOW)]).values():
            future.result(10)
        with sync_playwright() as p:
            chromium = p.chromium.launch(executable_path=require("chromium"), args=CHROMIUM_ARGS, headless=True)
            context = chromium.new_context(http_credentials={"username": "alice", "password": PLAIN_USERS["alice"]})
            page = context.new_page()
            page.goto(f"{broker.admin_url}/console/topics")
            page.fill("#create-topic input[name=name]", "someone-elses")
            page.click("#create-topic button[type=submit]")
            page.wait_for_selector("#notice.error")
            assert "403" in page.inner_text("#notice") and "CREATE" in page.inner_text("#notice")
            page.fill("#create-topic input[name=name]", "alices-topic")
            page.click("#create-topic button[type=submit]")
            page.wait_for_url("**/console/topic?name=alices-topic")
            context.close()
            chromium.close()
        topics = admin.list_topics(timeout=10).topics
        assert "alices-topic" in topics and "someone-elses" not in topics
    finally:
        broker.cleanup()
