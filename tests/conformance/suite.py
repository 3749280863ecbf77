"""Run the scenarios against Ottla and Kafka, and write the per-API-and-version verdicts.

    python -m tests.conformance.suite          # starts both brokers, rewrites docs/kafka-conformance.md
    python -m tests.conformance.suite --check  # the same, but only says whether the file is current

tests/conformance/test_differential.py runs the same `Results` under pytest and checks
that docs/kafka-conformance.md is what `table` makes of them.
"""

from __future__ import annotations

import argparse
import socket
import struct
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ottla.protocol.apis import SUPPORTED
from ottla.protocol.codec import decode_response, encode_request, request_class
from ottla.protocol.entities import make
from ottla.tools.client import recv_exactly

from . import known
from .harness import Difference, Scenario, differences, run
from .scenarios import ALL

TABLE = known.ROOT / "docs" / "kafka-conformance.md"
# Ottla configured as the reference Kafka is (tests/reference/kafka.py).
OTTLA_PROPERTIES = {"group.initial.rebalance.delay.ms": "0", "group.streams.initial.rebalance.delay.ms": "0"}


def node_id(bootstrap: str) -> int:
    """The broker's own node id (Metadata v1's controller: a single node is its own)."""
    host, port = bootstrap.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        cls = request_class(3, 1)
        assert cls is not None
        sock.sendall(encode_request(1, "conformance", make(cls, topics=[])))
        size = struct.unpack(">i", recv_exactly(sock, 4))[0]
        _, answer = decode_response(3, 1, recv_exactly(sock, size))
    return int(answer.controller_id)


class Results:
    """Each scenario run once against both brokers, on first asking."""

    def __init__(self, ottla: str, kafka: str, secured: Callable[[], tuple[str, str]] | None = None) -> None:
        """`secured`: started on first need, the (ottla, kafka) SASL bootstraps of the pair
        the secured scenarios run against (secured.py); their node ids are the same."""
        self.ottla, self.kafka = ottla, kafka
        self.nodes = (node_id(ottla), node_id(kafka))
        self._secured = secured
        self._found: dict[str, list[Difference]] = {}
        self.exercised: dict[str, set[tuple[int, int]]] = {}

    def of(self, scenario: Scenario) -> list[Difference]:
        if scenario.name not in self._found:
            run_id = uuid.uuid4().hex[:10]
            ottla_at, kafka_at = self.ottla, self.kafka
            if scenario.secured:
                if self._secured is None:
                    raise RuntimeError(f"{scenario.name} needs the secured brokers")
                ottla_at, kafka_at = self._secured()
            ottla, kafka = run(ottla_at, scenario, run_id), run(kafka_at, scenario, run_id)
            self._found[scenario.name] = differences(scenario, ottla, kafka, *self.nodes)
            self.exercised[scenario.name] = {(step.api, step.version) for step in scenario.steps}
        return self._found[scenario.name]

    def everything(self) -> list[Difference]:
        return [d for scenario in ALL for d in self.of(scenario)]


def unlisted(found: list[Difference]) -> list[Difference]:
    """The differences no rule of a listed id explains."""
    listed = known.listed_ids()
    return [d for d in found if (rule := known.rule_for(d)) is None or rule.id not in listed]


# What the suite found that Ottla answered differently and was fixed in Ottla (the
# commits say how); the differences kept are listed, with their reasons, under "Where
# Ottla knowingly differs from Kafka 4".
FIXED = [
    ("Fetch: a partition not read (offset out of range, unknown partition) answers its offsets as -1; "
    "errors found before reading carry an empty aborted-transaction list"),
    ("ListOffsets: a special timestamp older than the request's version, or an unknown negative one, is "
    "UNSUPPORTED_VERSION"),
    "Metadata: a topic name no topic may have is INVALID_TOPIC_EXCEPTION",
    ("ApiVersions: an unsupported version lists ApiVersions' own range only; a client software name or "
    "version outside Kafka's pattern is INVALID_REQUEST"),
    ("Produce: errors found against the log (sequence, epoch, records, timestamps, replicas) carry the log "
    "start offset; a duplicate of a cached batch answers the batch's timestamp as its append time; empty or "
    "truncated records are INVALID_RECORD (CORRUPT_MESSAGE stays for damaged ones); transactional batches "
    "without a transactional id are TRANSACTIONAL_ID_AUTHORIZATION_FAILED"),
    ("InitProducerId: a producer id without an epoch (or the reverse), and an empty transactional id, are "
    "INVALID_REQUEST"),
    "DescribeTransactions: an unknown transactional id answers producer id and epoch 0 (the schema's defaults)",
    "ListTransactions v2: the transactional id pattern filters (an invalid one is INVALID_REGULAR_EXPRESSION)",
    "OffsetCommit, TxnOffsetCommit, OffsetDelete: partitions no topic has are UNKNOWN_TOPIC_OR_PARTITION",
    ("DescribeGroups, ConsumerGroupDescribe: client_host as Java prints it (\"/127.0.0.1\"); no subscribed "
    "regex is \"\""),
    ("CreateTopics: error answers carry an empty config list; a name given twice is answered once with "
    "INVALID_REQUEST; validate_only answers a topic id"),
    "CreatePartitions: a name given twice is answered once",
    "DeleteTopics v6: a name and an id together are INVALID_REQUEST",
    "IncrementalAlterConfigs: a config named twice is INVALID_REQUEST",
    "OffsetForLeaderEpoch: only -1 means no current leader epoch (-2 is FENCED_LEADER_EPOCH)",
    ("DescribeCluster: the controllers' endpoint type asked of a broker is MISMATCHED_ENDPOINT_TYPE, with an "
    "empty cluster id"),
    "SaslAuthenticate on a plaintext listener: ILLEGAL_SASL_STATE, and the connection stays open",
    ("SaslHandshake and SaslAuthenticate on a connection already authenticated: ILLEGAL_SASL_STATE (no "
    "mechanisms), and the connection stays open"),
    "DescribeUserScramCredentials refused for want of DESCRIBE on the cluster: one result per user asked for",
    "DescribeTransactions refused for want of DESCRIBE: producer id and epoch 0, the schema's defaults",
    "Authorized operations (Metadata, DescribeCluster, DescribeGroups, ConsumerGroupDescribe, "
    "DescribeTopicPartitions) computed when asked for, instead of 'not computed'",
    "DescribeConfigs: a topic config's synonyms leave out the broker properties Kafka's defaults leave null "
    "(log.retention.ms, log.roll.ms, log.roll.jitter.ms, log.flush.interval.ms)",
]


def table(results: Results) -> str:
    found = results.everything()
    ids: dict[tuple[int, int], set[str]] = {}
    for d in found:
        rule = known.rule_for(d)
        ids.setdefault((d.api, d.version), set()).add(rule.id if rule else "UNLISTED")
    exercised = set().union(*results.exercised.values())
    lines = [
        "# Ottla against Apache Kafka 4.3, API by API",
        "",
        "<!-- generated by `python -m tests.conformance.suite`; tests/conformance checks it is current -->",
        "",
        "Every API and version Ottla serves, sent by the scenarios of tests/conformance/ to",
        "Ottla and to Apache Kafka 4.3.1 and compared field by field. \"identical\": every",
        "answer was the same once normalised (see tests/conformance/harness.py: node ids, host,",
        "port, cluster id, throttle times, error messages, allocated producer and topic ids,",
        "member ids, fetch session ids and broker-set times are not compared as values).",
        "Otherwise the ids of the differences seen, each explained under \"Where Ottla",
        "knowingly differs from Kafka 4\".",
        "",
        "Where Kafka answers \"not yet\" for a moment (COORDINATOR_LOAD_IN_PROGRESS and the like",
        "while it creates its internal topics, CONCURRENT_TRANSACTIONS while it writes a",
        "transaction's markers, NOT_LEADER_OR_FOLLOWER just after creating a topic), a step is",
        "sent again until the answer is final, on both brokers, as a client would. Listings of",
        "the whole broker (ListTransactions, ListGroups, SCRAM users) are compared for the",
        "scenario's own names only: the reference Kafka serves the whole test session.",
        "",
        "| API | key | version | verdict |",
        "|---|---|---|---|",
    ]
    for key in sorted(SUPPORTED):
        api = SUPPORTED[key]
        low = api.advertised_min if api.advertised_min is not None else api.min_version
        for version in range(low, api.max_version + 1):
            if (key, version) in ids:
                verdict = ", ".join(f"`{i}`" for i in sorted(ids[key, version]))
            elif (key, version) in exercised:
                verdict = "identical"
            else:
                verdict = "not compared"
            lines.append(f"| {api.name} | {key} | {version} | {verdict} |")
    lines += ["", "## Differences found and fixed in Ottla", ""]
    lines += [f"- {fixed}" for fixed in FIXED]
    lines += ["", "## Differences kept", "",
              "Each id above is a point of \"Where Ottla knowingly differs from Kafka 4\", with its reason.", ""]
    lines += [f"- `{known_id}`" for known_id in sorted({rule.id for rule in known.KNOWN})]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="only say whether the file is current")
    args = parser.parse_args(argv)
    from ottla.testing import BrokerProcess
    from tests.reference.kafka import KafkaBroker

    from .secured import start_pair

    started: list[Any] = []

    def secured() -> tuple[str, str]:
        if not started:
            started.extend(start_pair())
        return started[3], started[2]

    with KafkaBroker() as kafka:
        ottla = BrokerProcess(properties=OTTLA_PROPERTIES).start()
        try:
            results = Results(ottla.bootstrap, kafka.bootstrap, secured)
            text = table(results)
            for d in unlisted(results.everything()):
                print(f"unlisted: {d}", file=sys.stderr)
        finally:
            ottla.cleanup()
            if started:
                started[1].cleanup()
                started[0].cleanup()
    if args.check:
        current = TABLE.exists() and TABLE.read_text() == text
        print(f"{TABLE} is {'current' if current else 'NOT current'}")
        return 0 if current else 1
    Path(TABLE).write_text(text)
    print(f"wrote {TABLE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
