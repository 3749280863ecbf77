"""The pytest plugin shipped with the package, used the way a project uses it: a test
file that only names the fixtures, run by pytest with the plugin found through its
`pytest11` entry point (pytester runs it in a subprocess, so the session broker starts
and stops as in a real suite)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

pytest_plugins = ["pytester"]

USER_TESTS = textwrap.dedent('''
    import os
    import pytest
    from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

    BOOTSTRAPS = []

    def read(bootstrap, topic, partitions=1):
        # To the end of the partitions (EOF), not the 5 s a consume(10, 5) of fewer waits.
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "g", "isolation.level": "read_committed",
                             "enable.partition.eof": True})
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        got, ended = [], set()
        for _ in range(100):
            message = consumer.poll(0.2)
            if message is None:
                continue
            if message.error():
                assert message.error().code() == KafkaError._PARTITION_EOF, message.error()
                ended.add(message.partition())
                if len(ended) == partitions:
                    break
            else:
                got.append(message.value())
        consumer.close()
        return got

    def test_produce_and_consume(ottla_broker, ottla_topic):
        BOOTSTRAPS.append(ottla_broker.bootstrap)
        producer = Producer({"bootstrap.servers": ottla_broker.bootstrap, "enable.idempotence": True})
        producer.produce(ottla_topic, b"hello")
        assert producer.flush(10) == 0
        assert read(ottla_broker.bootstrap, ottla_topic) == [b"hello"]
        with open(os.environ["PLUGIN_TEST_DATA_DIRS"], "a") as out:
            out.write(ottla_broker.data_dir + "\\n")

    @pytest.mark.ottla_topic(partitions=3)
    def test_a_fresh_topic_per_test(ottla_broker, ottla_topic):
        BOOTSTRAPS.append(ottla_broker.bootstrap)
        assert ottla_broker.bootstrap_servers == ottla_broker.bootstrap  # the name clients use
        assert ottla_topic.startswith("test_a_fresh_topic_per_test-")
        assert f"{ottla_topic}-2" in os.listdir(ottla_broker.data_dir)

    def test_faults_on_demand(ottla_broker, ottla_topic, ottla_faults):
        BOOTSTRAPS.append(ottla_broker.bootstrap)
        ottla_faults.add_fault(kind="drop", api="Produce", topic=ottla_topic)
        producer = Producer({"bootstrap.servers": ottla_broker.bootstrap, "enable.idempotence": True,
                             "socket.timeout.ms": 1500, "linger.ms": 0})
        producer.produce(ottla_topic, b"once")
        assert producer.flush(30) == 0
        assert read(ottla_broker.bootstrap, ottla_topic) == [b"once"]
        assert ottla_faults.metric("ottla_faults_injected_total", kind="drop", api="Produce") == 1

    def test_faults_are_cleared_between_tests(ottla_faults):
        assert ottla_faults.faults() == []

    def test_one_broker_for_the_session():
        assert len(set(BOOTSTRAPS)) == 1
''')


def test_the_fixtures_give_a_session_broker_fresh_topics_and_faults(pytester, monkeypatch, tmp_path):
    pytester.makepyfile(test_user=USER_TESTS)
    out = tmp_path / "data-dirs"
    monkeypatch.setenv("PLUGIN_TEST_DATA_DIRS", str(out))
    # -p no:cacheprovider: nothing written next to the test file; the plugin itself is
    # not named: its entry point loads it, as in any project that installs Ottla.
    result = pytester.runpytest_subprocess("-q", "-p", "no:cacheprovider", timeout=180)
    result.assert_outcomes(passed=5)
    data_dir = out.read_text().strip()
    assert data_dir and not os.path.exists(data_dir), "the broker's data is removed at the end"


SECURE_USER_TESTS = textwrap.dedent('''
    from confluent_kafka import Consumer, KafkaError, Producer

    def test_a_secure_broker_in_one_fixture(ottla_secure_broker):
        broker, config = ottla_secure_broker
        assert config["security.protocol"] == "SASL_SSL"
        producer = Producer({**config, "enable.idempotence": True})
        producer.produce("secured", b"over SASL_SSL")
        assert producer.flush(20) == 0
        consumer = Consumer({**config, "group.id": "g", "auto.offset.reset": "earliest"})
        consumer.subscribe(["secured"])
        got = []
        for _ in range(40):
            message = consumer.poll(0.5)
            if message is not None and not message.error():
                got.append(message.value())
                break
        consumer.close()
        assert got == [b"over SASL_SSL"]
        # Without the credentials: refused.
        errors = []
        stranger = Producer({"bootstrap.servers": config["bootstrap.servers"], "error_cb": errors.append,
                             "message.timeout.ms": 2000})
        stranger.produce("secured", b"x")
        stranger.flush(5)
        # The TLS listener closes a client that speaks plaintext: its one broker is down
        # (a broker that hung would leave the connection up: no such error in the 5 s).
        assert any(e.code() == KafkaError._ALL_BROKERS_DOWN for e in errors), errors
''')


def test_the_secure_fixture_gives_a_sasl_ssl_broker_and_its_client_config(pytester):
    pytester.makepyfile(test_secure=SECURE_USER_TESTS)
    result = pytester.runpytest_subprocess("-q", "-p", "no:cacheprovider", timeout=180)
    result.assert_outcomes(passed=1)


def test_running_broker_outside_pytest(tmp_path):
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent('''
        from confluent_kafka import Producer
        from ottla.testing import running_broker

        with running_broker(num_partitions="2") as broker:
            producer = Producer({"bootstrap.servers": broker.bootstrap})
            producer.produce("from-a-script", b"x")
            assert producer.flush(10) == 0
            print(broker.bootstrap)
    '''))
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().startswith("127.0.0.1:")
