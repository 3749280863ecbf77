"""The web console (console/) in a real headless browser: Debian's chromium
driven by Playwright, against a broker holding a committed, an aborted and an open
transaction, plain records, and a consumer group with a live member and a committed
offset; each page is checked for what a person looks at.

UPDATE_CONSOLE_SCREENSHOTS=1 saves each page as docs/console/<page>.png (docs/console.md
shows them); normal runs leave the tree alone.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient
from playwright.sync_api import sync_playwright

from ottla.protocol.apis import CREATE_TOPICS
from ottla.testing import BrokerProcess
from ottla.tools.client import Cluster

from ..clients import create_topic, idempotent_producer, produce_all, transactional_producer
from ..system_tools import require

CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run"]
SCREENSHOTS = pathlib.Path(__file__).resolve().parents[2] / "docs" / "console"
TOPIC = "ledger"
# Transactional and group ids are the client's to choose: these carry markup, which
# must reach the page as text.
OPEN_TXN = "payments-<i>open</i>"
XSS_KEY = b"<script>window.__xss = 1</script>"
XSS_VALUE = b'<img src=x onerror="window.__xss = 1">'
GROUP = "billing"
GROUP_848 = "shipping"  # a KIP-848 consumer group (group.protocol=consumer)
COMMITTED = 5


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """The broker and its state. ledger-0 holds, in order:
    0-2 committed transaction, 3 COMMIT marker, 4-5 aborted transaction, 6 ABORT marker,
    7-8 plain idempotent records (one with markup in its key, value and header),
    9-10 an open transaction (LSO 9, high watermark 11)."""
    broker = BrokerProcess(str(tmp_path_factory.mktemp("console-data")), {"admin.port": "0"}).start()
    try:
        yield from _populate(broker)
    finally:
        broker.cleanup()


def _populate(broker: BrokerProcess):
    bootstrap = broker.bootstrap
    create_topic(bootstrap, TOPIC, 1)
    committer = transactional_producer(bootstrap, "payments-committed")
    committer.begin_transaction()
    for i in range(3):
        committer.produce(TOPIC, key=b"order-%d" % i, value=json.dumps({"order": i, "total": 9.5 + i}).encode(),
                          partition=0, headers=[("source", b"checkout")])
    committer.commit_transaction(30)
    aborter = transactional_producer(bootstrap, "payments-aborted")
    aborter.begin_transaction()
    for i in range(2):
        aborter.produce(TOPIC, key=b"refund-%d" % i, value=b"never happened %d" % i, partition=0)
    aborter.flush(30)
    aborter.abort_transaction(30)
    plain = idempotent_producer(bootstrap)
    plain.produce(TOPIC, key=XSS_KEY, value=XSS_VALUE, partition=0, headers=[("<b>h</b>", b"<u>x</u>")])
    plain.produce(TOPIC, key=None, value=bytes(range(256)), partition=0)
    assert plain.flush(30) == 0
    opener = transactional_producer(bootstrap, OPEN_TXN, **{"transaction.timeout.ms": 600_000})
    opener.begin_transaction()
    opener.produce(TOPIC, key=b"pending-0", value=b"in flight", partition=0)
    opener.produce(TOPIC, key=b"pending-1", value=b"in flight", partition=0)
    assert opener.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP, "enable.auto.commit": False,
                         "isolation.level": "read_committed", "auto.offset.reset": "earliest", "log_level": 3})
    consumer.subscribe([TOPIC])
    deadline = time.monotonic() + 30
    while not consumer.assignment() and time.monotonic() < deadline:
        consumer.poll(0.2)
    assert consumer.assignment(), "the group's member got no assignment"
    consumer.commit(offsets=[TopicPartition(TOPIC, 0, COMMITTED)], asynchronous=False)
    member_848 = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP_848, "group.protocol": "consumer",
                           "enable.auto.commit": False, "log_level": 3})
    member_848.subscribe([TOPIC])
    deadline = time.monotonic() + 30
    while not member_848.assignment() and time.monotonic() < deadline:
        member_848.poll(0.2)
    assert member_848.assignment(), "the consumer group's member got no assignment"
    try:
        yield broker
    finally:
        member_848.close()
        consumer.close()
        opener.abort_transaction(30)


@pytest.fixture(scope="module")
def browser():
    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=require("chromium"), args=CHROMIUM_ARGS, headless=True)
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    tab = context.new_page()
    tab.on("dialog", lambda dialog: dialog.accept())  # the delete button's confirm()
    yield tab
    context.close()


def console(world: BrokerProcess, path: str = "") -> str:
    return f"{world.admin_url}/console/{path}"


def screenshot(page, name: str) -> None:
    if os.environ.get("UPDATE_CONSOLE_SCREENSHOTS"):
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=True)


def cells(page, selector: str) -> list[list[str]]:
    return page.eval_on_selector_all(
        f"{selector} tbody tr", "rows => rows.map(r => [...r.cells].map(c => c.innerText.trim()))")


def test_topics_page_shows_the_partition_and_the_transaction_holding_its_lso(world, page):
    page.goto(console(world, f"topics?q={TOPIC}"))
    rows = cells(page, "#topics")
    assert [row[0] for row in rows] == [TOPIC]
    assert rows[0][3] == "11"  # offsets 0..10
    assert rows[0][5] == "1 partition held back"
    page.goto(console(world, "topics"))
    assert [row[0] for row in cells(page, "#topics")] == ["__consumer_offsets", "__transaction_state", TOPIC]
    screenshot(page, "topics")
    page.goto(console(world, f"topics?q={TOPIC}"))

    page.click(f"#topics a:text-is('{TOPIC}')")
    (partition,) = cells(page, "#partitions")
    assert partition[:2] == ["0", "0"]
    assert partition[2] == f"9 held by transaction {OPEN_TXN}"  # the id's markup shown as text
    assert partition[3] == "11"
    page.click("#partitions details summary")
    assert "00000000000000000000.log (1.0 KiB) and its indexes" in page.inner_text("#partitions")
    configs = dict((row[0], row[1]) for row in cells(page, "#configs"))
    assert configs["cleanup.policy"] == "delete"
    screenshot(page, "topic")

    page.click(f"#partitions a:text-is('transaction {OPEN_TXN}')")
    assert page.inner_text("h1") == f"Transaction {OPEN_TXN}"


def test_lists_are_paginated_and_searched(world, page):
    with Cluster(world.bootstrap) as cluster:
        answer = cluster.call(CREATE_TOPICS, timeout=30_000, validate_only=False, topics=[
            {"name": f"many-{i:03d}", "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}
            for i in range(120)])
        assert all(t.error_code == 0 for t in answer.topics)
    page.goto(console(world, "topics?q=many-"))
    assert page.inner_text(".pager span") == "1–50 of 120"
    assert [row[0] for row in cells(page, "#topics")] == [f"many-{i:03d}" for i in range(50)]
    page.click(".pager a:text-is('next »')")
    page.click(".pager a:text-is('next »')")
    assert page.inner_text(".pager span") == "101–120 of 120"
    assert [row[0] for row in cells(page, "#topics")] == [f"many-{i:03d}" for i in range(100, 120)]
    assert page.query_selector(".pager a:text-is('next »')") is None
    page.goto(console(world, "topics?q=MANY-11"))
    assert [row[0] for row in cells(page, "#topics")] == [f"many-11{i}" for i in range(10)]


def test_messages_marks_aborted_records_markers_and_the_open_transaction(world, page):
    page.goto(console(world, f"messages?topic={TOPIC}&partition=0&isolation=read_uncommitted&limit=50"))
    rows = {int(tr.get_attribute("data-offset")): tr.get_attribute("class")
            for tr in page.query_selector_all("#messages tbody tr")}
    assert rows == {0: "committed", 1: "committed", 2: "committed", 3: "marker commit",
                    4: "aborted", 5: "aborted", 6: "marker abort", 7: "plain", 8: "plain", 9: "open", 10: "open"}
    table = cells(page, "#messages")
    assert table[4][7] == "aborted" and table[4][2] == "refund-0"
    assert table[3][2] == "COMMIT marker" and table[6][2] == "ABORT marker"
    assert table[4][5] == table[5][5] and table[4][5].endswith(" / 0")  # producer id / epoch
    assert [row[6] for row in table[:3]] == ["0", "1", "2"]  # sequences
    assert '"total": 9.5' in table[0][3]  # JSON pretty-printed
    assert table[8][3].startswith("00 01 02 03")  # not UTF-8: hex
    assert table[8][2] == "null"
    assert "last stable offset" in page.inner_text("dl") and "9 held by" in page.inner_text("dl")
    screenshot(page, "messages")

    page.goto(console(world, f"messages?topic={TOPIC}&partition=0&isolation=read_committed"))
    offsets = [int(tr.get_attribute("data-offset")) for tr in page.query_selector_all("#messages tbody tr")]
    assert offsets == [0, 1, 2, 3, 6, 7, 8]  # no aborted record, nothing past the LSO
    assert "2 aborted record(s) left out" in page.inner_text("main")

    # Page by page: the next page starts where the last one stopped.
    page.goto(console(world, f"messages?topic={TOPIC}&partition=0&limit=4"))
    shown = []
    for _ in range(3):
        shown += [int(tr.get_attribute("data-offset")) for tr in page.query_selector_all("#messages tbody tr")]
        page.click(".pager a:text-is('next page »')")
    assert shown == list(range(11))


def test_keys_values_and_headers_are_shown_as_text_never_run(world, page):
    page.goto(console(world, f"messages?topic={TOPIC}&partition=0&offset=7&limit=1"))
    (row,) = cells(page, "#messages")
    assert row[2] == XSS_KEY.decode() and row[3] == XSS_VALUE.decode()
    assert row[4] == "<b>h</b>: <u>x</u>"
    assert page.evaluate("window.__xss") is None
    assert page.query_selector("#messages img, #messages script, #messages u") is None
    # The offset and time pickers: from a timestamp, in hex.
    page.goto(console(world, f"messages?topic={TOPIC}&partition=0&timestamp=0&format=hex&limit=1"))
    (row,) = cells(page, "#messages")
    assert row[0] == "0" and row[2] == b"order-0".hex(" ")


def test_live_tail_shows_records_as_they_arrive(world, page):
    create_topic(world.bootstrap, "tailed", 1)
    page.goto(console(world, "messages?topic=tailed&partition=0"))
    assert cells(page, "#messages") == [["nothing to show"]]
    page.click("#tail")
    producer = idempotent_producer(world.bootstrap)
    for i in range(2):
        producer.produce("tailed", key=b"late", value=b"arrived while tailing %d" % i, partition=0)
        assert producer.flush(30) == 0
        page.wait_for_selector(f"#messages tbody tr[data-offset='{i}']", timeout=15000)
    assert [row[3] for row in cells(page, "#messages")] == ["arrived while tailing 0", "arrived while tailing 1"]
    page.click("#tail")  # stop


def test_transactions_page_links_the_open_transaction_to_the_partition_it_holds(world, page):
    page.goto(console(world, "transactions"))
    rows = {row[0]: row for row in cells(page, "#transactions")}
    assert rows[OPEN_TXN][1] == "Ongoing"
    assert rows[OPEN_TXN][7] == f"{TOPIC}-0"
    assert rows["payments-committed"][1] == "CompleteCommit" and rows["payments-committed"][7] == "–"
    assert rows["payments-aborted"][1] == "CompleteAbort"
    screenshot(page, "transactions")

    page.click(f"#transactions a:text-is('{OPEN_TXN}')")
    (partition,) = cells(page, "#txn-partitions")
    assert partition[1] == "9" and partition[2] == "9"
    assert partition[4].startswith("yes: read_committed consumers stop at offset 9")
    assert [row[2] for row in cells(page, "#history")] == ["Empty", "Ongoing"]
    screenshot(page, "transaction")

    page.goto(console(world, "transaction?id=payments-aborted"))
    states = [row[2] for row in cells(page, "#history")]
    assert states[-3:] == ["Ongoing", "PrepareAbort", "CompleteAbort"]

    # A long history: its newest records, said so.
    create_topic(world.bootstrap, "tailed-busy", 1)
    busy = transactional_producer(world.bootstrap, "payments-busy")
    for _ in range(40):
        busy.begin_transaction()
        busy.produce("tailed-busy", value=b"b")
        busy.commit_transaction(30)
    page.goto(console(world, "transaction?id=payments-busy"))
    history = cells(page, "#history")
    assert len(history) == 100 and history[-1][2] == "CompleteCommit"
    assert [int(row[0]) for row in history] == sorted(int(row[0]) for row in history)
    assert "the newest 100 of its 121 records shown" in page.inner_text("main")


def test_producers_page_shows_what_describe_producers_knows(world, page):
    page.goto(console(world, "producers"))
    assert TOPIC in [row[0] for row in cells(page, "#producer-topics")]
    page.goto(console(world, f"producers?topic={TOPIC}"))
    rows = cells(page, "#producers-0")
    assert len(rows) == 4  # committed, aborted, plain and open producers
    by_txn = {row[0].split(" ", 1)[1] if " " in row[0] else "": row for row in rows}
    committed = by_txn["(payments-committed)"]
    assert committed[1] == "0" and committed[2] == "2"  # epoch, last sequence
    assert "seq 0–2 → offsets 0–2" in committed[5]
    assert committed[6] == "–"
    open_row = by_txn[f"({OPEN_TXN})"]
    assert open_row[6] == "9 holds the LSO"
    screenshot(page, "producers")


def test_group_page_shows_members_offsets_and_lag(world, page):
    page.goto(console(world, "groups"))
    rows = {row[0]: row for row in cells(page, "#groups")}
    assert rows[GROUP][1:] == ["classic", "consumer", "Stable", "1"]
    page.click(f"#groups a:text-is('{GROUP}')")
    (member,) = cells(page, "#members")
    assert member[2].startswith("rdkafka") and member[4] == f"{TOPIC} 0"
    (offsets,) = cells(page, "#offsets")
    high_watermark = int(offsets[3])
    assert offsets[:3] == [TOPIC, "0", str(COMMITTED)]
    assert int(offsets[4]) == high_watermark - COMMITTED
    assert offsets[5] == str(9 - COMMITTED)  # the open transaction holds the LSO at 9
    assert page.inner_text("#total-lag") == str(high_watermark - COMMITTED)
    screenshot(page, "group")


def test_a_consumer_group_of_kip_848_shows_its_type_epoch_and_assignment(world, page):
    page.goto(console(world, "groups"))
    rows = {row[0]: row for row in cells(page, "#groups")}
    assert rows[GROUP_848][1:] == ["consumer", "consumer", "Stable", "1"]
    page.click(f"#groups a:text-is('{GROUP_848}')")
    assert "group epoch" in page.inner_text("main")
    (member,) = cells(page, "#members")
    # Its partitions are held by topic id in the group; the page names the topic.
    assert member[2].startswith("rdkafka") and member[4] == f"{TOPIC} 0"


def test_broker_page_charts_and_fault_controls(world, page):
    page.goto(console(world, "broker"))
    (listener,) = cells(page, "#listeners")
    assert listener[0] == "PLAINTEXT" and listener[3] == world.bootstrap
    page.click("details.config summary")
    config = {row[0]: row for row in cells(page, "#config")}
    assert config["admin.port"][2] == "static: command line"  # `ottla serve --override admin.port=0`
    assert config["num.partitions"][2] == "default"
    assert any(row[0] == "Produce" for row in cells(page, "#apis"))
    # Two polls of the counters make the first rate.
    page.wait_for_function("() => document.querySelectorAll('.chart svg polyline').length === 7 && "
                           "document.querySelector('.chart[data-series=records] .now').textContent !== '…'",
                           timeout=15000)

    page.select_option("#add-fault select[name=kind]", "delay")
    page.select_option("#add-fault select[name=api]", "Metadata")
    page.fill("#add-fault input[name=delay_ms]", "10")
    page.fill("#add-fault input[name=count]", "1000")
    page.click("#add-fault button[type=submit]")
    page.wait_for_selector("#faults button[data-remove-fault]")
    assert world.admin.faults()[0]["kind"] == "delay"
    assert cells(page, "#faults")[0][1:8] == ["delay", "Metadata", "", "", "", "10", "1000"]
    if os.environ.get("UPDATE_CONSOLE_SCREENSHOTS"):  # some traffic for the charts to show
        create_topic(world.bootstrap, "chart-traffic", 1)
        traffic = threading.Thread(target=_produce_for, args=(world.bootstrap, "chart-traffic", 9.0))
        traffic.start()
        page.wait_for_timeout(9000)
        traffic.join()
    screenshot(page, "broker")
    page.click("#faults button[data-remove-fault]")
    page.wait_for_selector("#faults td.empty")
    assert world.admin.faults() == []


def _produce_for(bootstrap: str, topic: str, seconds: float) -> None:
    producer = idempotent_producer(bootstrap)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for _ in range(200):
            producer.produce(topic, value=b"t" * 200)
        producer.flush(10)
        time.sleep(0.05 + 0.1 * (time.monotonic() % 2))


def test_a_topic_created_in_the_console_exists_for_kafka_clients_and_is_deleted_there(world, page):
    page.goto(console(world, "topics"))
    page.fill("#create-topic input[name=name]", "made-in-console")
    page.fill("#create-topic input[name=partitions]", "3")
    page.fill("#create-topic input[name=configs]", "retention.ms=3600000")
    page.click("#create-topic button[type=submit]")
    page.wait_for_url("**/console/topic?name=made-in-console")
    admin = AdminClient({"bootstrap.servers": world.bootstrap})
    metadata = admin.list_topics(timeout=10)
    assert len(metadata.topics["made-in-console"].partitions) == 3
    produce_all(idempotent_producer(world.bootstrap), [("made-in-console", 2, b"k", b"v")])
    assert dict((row[0], row[1]) for row in cells(page, "#configs"))["retention.ms"] == "3600000"

    page.click("button[data-delete-topic]")
    page.wait_for_url("**/console/topics")
    assert "made-in-console" not in admin.list_topics(timeout=10).topics


def _request(url: str, method: str, body: bytes | None = None, **headers: str) -> tuple[int, str]:
    request = urllib.request.Request(url, data=body, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_the_admin_endpoint_root_sends_a_browser_to_the_console(world, page):
    """A browser pointed at the admin endpoint lands on the console (a 302 to /console/),
    not on a JSON error."""
    page.goto(world.admin_url)
    assert page.url == f"{world.admin_url}/console/"
    assert page.title().startswith("Topics")


def test_changes_need_a_same_origin_request_and_gets_change_nothing(world):
    url = console(world, "topics")
    body = json.dumps({"name": "cross-site", "partitions": 1}).encode()
    cross_site = {"Content-Type": "application/json", "Origin": "http://evil.example"}
    assert _request(url, "POST", body, **cross_site)[0] == 403
    # A cross-site form can only send a form encoding: refused before the console.
    assert _request(url, "POST", b"name=cross-site", **{"Content-Type": "application/x-www-form-urlencoded"})[0] == 415
    # DNS rebinding: the page's address names the attacker's host.
    assert _request(url, "POST", body, **{"Content-Type": "application/json", "Host": "evil.example"})[0] == 403
    assert _request(console(world, f"topics/{TOPIC}"), "DELETE", Origin="http://evil.example")[0] == 403
    # A GET of the deleting address, or of the creating one with the topic as its query, does nothing.
    assert _request(console(world, f"topics/{TOPIC}"), "GET")[0] == 404
    assert _request(console(world, "topics?name=cross-site&partitions=1"), "GET")[0] == 200
    topics = AdminClient({"bootstrap.servers": world.bootstrap}).list_topics(timeout=10).topics
    assert TOPIC in topics and "cross-site" not in topics
    # What a change asks for is checked as CreateTopics checks it.
    json_post = {"Content-Type": "application/json"}
    for spec, error in (({"name": "bad name!"}, "INVALID_TOPIC_EXCEPTION"), ({"name": "p0", "partitions": 0},
                        "partitions: 1 to 10000"), ({"name": TOPIC}, "TOPIC_ALREADY_EXISTS"),
                        ({"name": "__consumer_offsets"}, "INVALID_REQUEST"),
                        ({"name": "c", "configs": {"retention.ms": "soon"}}, "INVALID_CONFIG")):
        status, text = _request(url, "POST", json.dumps(spec).encode(), **json_post)
        assert status == 400 and error in text, (spec, text)
    # Internal topics are the coordinators'.
    status, text = _request(console(world, "topics/__transaction_state"), "DELETE")
    assert status == 400 and "INVALID_TOPIC_EXCEPTION" in text
    # DNS rebinding cannot read records either: a page is served to requests addressed to the endpoint.
    messages = console(world, f"messages?topic={TOPIC}")
    assert _request(messages, "GET", Host="evil.example:80")[0] == 403
    assert _request(messages, "GET", Host=f"localhost:{world.admin_url.rsplit(':', 1)[1]}")[0] == 200
    # Every answer forbids framing and foreign scripts.
    with urllib.request.urlopen(console(world, "topics"), timeout=10) as response:
        assert response.headers["X-Frame-Options"] == "DENY"
        assert "default-src 'self'" in response.headers["Content-Security-Policy"]


def test_with_an_admin_token_the_console_sends_the_token_typed_in(tmp_path, browser):
    broker = BrokerProcess(str(tmp_path / "data"), {"admin.port": "0", "admin.token": "s3cret"}).start()
    try:
        body = json.dumps({"name": "no-token", "partitions": 1}).encode()
        assert _request(console(broker, "topics"), "POST", body, **{"Content-Type": "application/json"})[0] == 401
        context = browser.new_context()
        page = context.new_page()
        page.goto(console(broker, "topics"))
        page.fill("#create-topic input[name=name]", "with-token")
        page.click("#create-topic button[type=submit]")
        page.wait_for_selector("#notice.error")
        assert "401" in page.inner_text("#notice")
        page.fill("#admin-token", "s3cret")
        page.dispatch_event("#admin-token", "change")
        page.click("#create-topic button[type=submit]")
        page.wait_for_url("**/console/topic?name=with-token")
        context.close()
        assert "with-token" in AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=10).topics
    finally:
        broker.cleanup()


def test_bounded_requests(world):
    # Page sizes are clamped: a request for a million rows gets a page.
    status, text = _request(console(world, f"messages?topic={TOPIC}&partition=0&limit=1000000"), "GET")
    assert status == 200 and text.count("data-offset=") <= 500
    status, _ = _request(console(world, "messages?topic=nope&partition=0"), "GET")
    assert status == 404
    status, text = _request(console(world, f"messages?topic={TOPIC}&partition=0&timestamp=yesterday"), "GET")
    assert status == 400 and "not a time" in text
    status, _ = _request(console(world, "static/../../admin_http.py"), "GET")
    assert status == 404


def _ottla_console(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ottla.tools.cli", "console", *args], capture_output=True,
                          text=True, timeout=60, env=env)


def test_ottla_console_prints_the_address_and_opens_a_browser_if_there_is_one(world, tmp_path):
    opened = tmp_path / "opened"
    browser = tmp_path / "browser"
    browser.write_text(f'#!/bin/sh\necho "$1" > {opened}\n')
    browser.chmod(0o755)
    headless = {k: v for k, v in os.environ.items() if k not in ("BROWSER", "DISPLAY", "WAYLAND_DISPLAY")}
    address = f"{world.admin_url}/console/"

    ran = _ottla_console("--admin-url", world.admin_url, env={**headless, "BROWSER": str(browser)})
    assert ran.returncode == 0 and ran.stdout == f"Ottla console: {address}\n"
    assert opened.read_text().strip() == address

    opened.unlink()
    ran = _ottla_console("--admin-url", world.admin_url, "--no-browser", env={**headless, "BROWSER": str(browser)})
    assert ran.returncode == 0 and address in ran.stdout and not opened.exists()

    # No browser on this machine (no display, none named): the address, and no failure.
    ran = _ottla_console("--admin-url", world.admin_url, env=headless)
    assert ran.returncode == 0 and address in ran.stdout and "no browser" in ran.stderr

    ran = _ottla_console("--admin-url", "http://127.0.0.1:1", env=headless)
    assert ran.returncode == 1 and "--admin-port" in ran.stderr
