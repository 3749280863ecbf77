"""ApiVersions, Metadata, topic creation, Produce, Fetch and ListOffsets at every version."""

from __future__ import annotations

import struct

from ..harness import Context, Scenario, Step, sweep
from .common import API_VERSIONS, FETCH, LIST_OFFSETS, METADATA, PRODUCE, batch, create, produce

SCENARIOS = [
    Scenario("api-versions", [
        *sweep("api-versions", API_VERSIONS, {"client_software_name": "conformance",
                                              "client_software_version": "1.0"}),
        # The header's tagged fields, then v3's body: the newest a client knows.
        Step("unsupported-version", API_VERSIONS, 5, raw=b"\x00\x0cconformance\x041.0\x00"),
        Step("invalid-software-name", API_VERSIONS, 3, {"client_software_name": "bad name!",
                                                         "client_software_version": "1.0"}),
    ]),
    Scenario("metadata", [
        create("create", 3),
        *sweep("topic", METADATA, lambda c: {"topics": [{"name": c.topic()}], "allow_auto_topic_creation": False,
                                             "include_cluster_authorized_operations": False,
                                             "include_topic_authorized_operations": False}),
        *sweep("unknown-topic", METADATA, lambda c: {"topics": [{"name": c.topic("nope")}],
                                                     "allow_auto_topic_creation": False}, range(4, 13)),
        *sweep("invalid-name", METADATA, lambda c: {"topics": [{"name": "bad name!"}],
                                                    "allow_auto_topic_creation": False}, range(4, 13)),
        *sweep("authorized-operations", METADATA, lambda c: {
            "topics": [{"name": c.topic()}], "allow_auto_topic_creation": False,
            "include_cluster_authorized_operations": True, "include_topic_authorized_operations": True},
            range(8, 13)),
        Step("auto-create", METADATA, 12, lambda c: {"topics": [{"name": c.topic("auto")}],
                                                     "allow_auto_topic_creation": True}),
    ]),
    Scenario("produce-fetch", [
        create("create", 2),
        *sweep("produce", PRODUCE, lambda c: produce(c.topic(), 0, batch([b"a", b"b"])), range(3, 12)),
        *sweep("produce-unknown-partition", PRODUCE, lambda c: produce(c.topic(), 7, batch([b"x"])), range(3, 12)),
        *sweep("produce-unknown-topic", PRODUCE, lambda c: produce(c.topic("nope"), 0, batch([b"x"])), range(3, 12)),
        *[Step(f"produce-v{v}-dropped", PRODUCE, v, raw=lambda c: produce_v0_to_v2(c.topic()))
          for v in range(3)],
        Step("produce-acks-2", PRODUCE, 9, lambda c: {**produce(c.topic(), 0, batch([b"x"])), "acks": 2}),
        Step("produce-acks-0", PRODUCE, 9, lambda c: {**produce(c.topic(), 0, batch([b"y"])), "acks": 0},
             expect_answer=False),
        *sweep("fetch", FETCH, lambda c: fetch(c, 0, 0)),
        *sweep("fetch-offset-out-of-range", FETCH, lambda c: fetch(c, 0, 1000)),
        *sweep("fetch-unknown-partition", FETCH, lambda c: fetch(c, 9, 0)),
        *sweep("list-offsets-latest", LIST_OFFSETS, lambda c: list_offsets(c, -1)),
        *sweep("list-offsets-earliest", LIST_OFFSETS, lambda c: list_offsets(c, -2)),
        *sweep("list-offsets-max-timestamp", LIST_OFFSETS, lambda c: list_offsets(c, -3)),
        *sweep("list-offsets-local-start", LIST_OFFSETS, lambda c: list_offsets(c, -4)),
        *sweep("list-offsets-tiered", LIST_OFFSETS, lambda c: list_offsets(c, -5)),
        *sweep("list-offsets-unknown-spec", LIST_OFFSETS, lambda c: list_offsets(c, -6)),
        *sweep("list-offsets-by-time", LIST_OFFSETS, lambda c: list_offsets(c, 1_700_000_000_000)),
        *sweep("list-offsets-unknown-partition", LIST_OFFSETS, lambda c: list_offsets(c, -1, partition=5)),
    ]),
]


def produce_v0_to_v2(topic: str) -> bytes:
    """Produce v0-v2's body by hand (kio has no schema for versions Kafka 4 dropped):
    acks, timeout, one topic with one partition's records."""
    name = topic.encode()
    records = batch([b"old"])
    return (struct.pack(">hii", -1, 30000, 1) + struct.pack(">h", len(name)) + name
            + struct.pack(">iii", 1, 0, len(records)) + records)


def fetch(c: Context, partition: int, offset: int) -> dict:
    return {"replica_id": -1, "max_wait": 0, "min_bytes": 0, "max_bytes": 1 << 20, "isolation_level": 0,
            "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": c.topic(), "topic_id": c["create"].topics[0].topic_id, "partitions": [
                {"partition": partition, "fetch_offset": offset, "partition_max_bytes": 1 << 20,
                 "current_leader_epoch": -1, "log_start_offset": -1, "last_fetched_epoch": -1}]}],
            "forgotten_topics_data": [], "rack_id": ""}


def list_offsets(c: Context, timestamp: int, partition: int = 0) -> dict:
    return {"replica_id": -1, "isolation_level": 0, "topics": [
        {"name": c.topic(), "partitions": [{"partition_index": partition, "timestamp": timestamp,
                                            "current_leader_epoch": -1}]}]}
