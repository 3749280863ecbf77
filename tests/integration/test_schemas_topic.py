"""`_schemas`, the built-in registry's state, attacked through the Kafka API (issue 40
point 3), with confluent-kafka as the attacker:

- a record no registry wrote (a key of 100,000 "[": RecursionError in the JSON parser;
  an id of 1e999: OverflowError; an id past 2^31-1) is skipped with a log line at
  start-up, as Confluent's reader skips what it cannot deserialize; the broker starts
  and serves every other schema;
- with the registry on, `_schemas` is kept from clients as Kafka's internal topics are
  (coordinator/internal_topics.py, the one mechanism): no Produce, DeleteRecords,
  config change, DeleteTopics or CreatePartitions;
- a `_schemas` that is not compacted (made while the registry was off) stops the start
  with a message saying what to do; with the registry off it is an ordinary topic, as
  for a registry of Confluent's pointed at the broker.

Break-and-see-it-fail: on main (b8b7895) the poisoned broker did not start
(RecursionError, then OverflowError, in SchemaStore._apply_record), the producer's
records to `_schemas` were delivered, and the non-compacted topic started; with
`add_internal_topic` not called in SchemaStore.open, the protection test failed at its
first produce.
"""

from __future__ import annotations

import json

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewPartitions

from ottla.testing import BrokerProcess

from ..schema_registry_http import REGISTRY_ON as REGISTRY
from ..schema_registry_http import RegistryHttp, produce_to_schemas, registry_over_copied_schemas


def _key(subject: str, version: int = 1) -> bytes:
    return json.dumps({"keytype": "SCHEMA", "subject": subject, "version": version, "magic": 1}).encode()


def _value(subject: str, schema_id: object) -> bytes:
    # Written by hand: json.dumps cannot write 1e999.
    return (f'{{"subject":"{subject}","version":1,"id":{schema_id},"schema":"\\"string\\"",'
            f'"deleted":false}}').encode()


def test_a_poisoned_schemas_record_is_skipped_at_start(tmp_path) -> None:
    broker, errors = registry_over_copied_schemas(str(tmp_path / "data"), [
        (b"[" * 100_000, b"{}"),
        (_key("inf"), _value("inf", "1e999")),
        (_key("wide"), _value("wide", 2**40)),
        (_key("good"), _value("good", 7)),
    ])
    assert errors == [None] * 4
    try:
        http = RegistryHttp(broker.schema_registry_url)
        assert http.get("/subjects") == (200, ["good"])
        assert http.get("/schemas/ids/7") == (200, {"schema": '"string"'})
        assert broker.log().count("skipped a record of _schemas it cannot read") == 3
        for reason in ("RecursionError", "ValueError"):
            assert reason in broker.log()
        # The next schema's id follows the highest one read, not the skipped 2^40.
        assert http.register("next", '"int"') == (200, {"id": 8})
    finally:
        broker.stop()
        broker.cleanup()


def test_schemas_is_kept_from_clients_while_the_registry_is_on(tmp_path) -> None:
    broker = BrokerProcess(str(tmp_path / "data"), REGISTRY).start()
    try:
        http = RegistryHttp(broker.schema_registry_url)
        assert http.register("kept", '"string"') == (200, {"id": 1})
        errors = produce_to_schemas(broker.bootstrap, [(_key("forged"), _value("forged", 1))])
        assert len(errors) == 1 and errors[0] is not None and errors[0].code() == KafkaError.TOPIC_EXCEPTION  # type: ignore[attr-defined]

        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        deleted = admin.delete_records([TopicPartition("_schemas", 0, 1)])
        with pytest.raises(KafkaException, match="TOPIC_EXCEPTION|internal topic"):
            next(iter(deleted.values())).result(15)
        for name, value in (("retention.ms", "1"), ("cleanup.policy", "delete")):
            resource = ConfigResource(ConfigResource.Type.TOPIC, "_schemas", incremental_configs=[
                ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)])
            with pytest.raises(KafkaException, match="POLICY_VIOLATION|cannot be changed"):
                next(iter(admin.incremental_alter_configs([resource]).values())).result(15)
            legacy = ConfigResource(ConfigResource.Type.TOPIC, "_schemas", set_config={name: value})
            with pytest.raises(KafkaException, match="POLICY_VIOLATION|cannot be changed"):
                next(iter(admin.alter_configs([legacy]).values())).result(15)
        with pytest.raises(KafkaException, match="TOPIC_EXCEPTION|internal topic"):
            admin.delete_topics(["_schemas"])["_schemas"].result(15)
        with pytest.raises(KafkaException, match="INVALID_PARTITIONS|cannot be changed"):
            admin.create_partitions([NewPartitions("_schemas", 2)])["_schemas"].result(15)
        # The registry writes on, and a restart reads what it wrote, nothing forged.
        assert http.register("kept2", '"int"') == (200, {"id": 2})
    finally:
        broker.stop()
    again = BrokerProcess(broker.data_dir, REGISTRY).start()
    try:
        assert RegistryHttp(again.schema_registry_url).get("/subjects") == (200, ["kept", "kept2"])
    finally:
        again.stop()
        again.cleanup()


@pytest.mark.parametrize("policy", ["delete", "compact,delete"])
def test_a_schemas_topic_that_is_not_compacted_stops_the_start(tmp_path, policy: str) -> None:
    data = str(tmp_path / "data")
    plain = BrokerProcess(data).start()
    try:
        plain.create_topic("_schemas", 1, {"cleanup.policy": policy})
    finally:
        plain.stop()
    refused = BrokerProcess(data, REGISTRY)
    try:
        with pytest.raises(RuntimeError, match="broker did not start"):
            refused.start()
        assert "ottla serve: the topic _schemas holds the schema registry's state but is not compacted only " \
               f"(cleanup.policy={policy})" in refused.log()
        assert "set cleanup.policy=compact" in refused.log()
    finally:
        refused.cleanup()
