"""Kafka's own command-line tools (their Java main classes from kafka-tools 4.3.1) run
against a broker, and their output normalised so Ottla's and Kafka's can be compared."""

from __future__ import annotations

import re
import subprocess

from .reference.kafka import run_java

TOOLS = "org.apache.kafka.tools."
TOPIC_COMMAND = TOOLS + "TopicCommand"
CONFIG_COMMAND = "kafka.admin.ConfigCommand"
GROUP_COMMAND = TOOLS + "consumer.group.ConsumerGroupCommand"
TRANSACTIONS_COMMAND = TOOLS + "TransactionsCommand"
ACL_COMMAND = TOOLS + "AclCommand"
FEATURE_COMMAND = TOOLS + "FeatureCommand"
LOG_DIRS_COMMAND = TOOLS + "LogDirsCommand"
GET_OFFSET_SHELL = TOOLS + "GetOffsetShell"
DELETE_RECORDS_COMMAND = TOOLS + "DeleteRecordsCommand"
LEADER_ELECTION_COMMAND = TOOLS + "LeaderElectionCommand"
PRODUCER_PERFORMANCE = TOOLS + "ProducerPerformance"
CONSUMER_PERFORMANCE = TOOLS + "ConsumerPerformance"
DUMP_LOG_SEGMENTS = TOOLS + "DumpLogSegments"


def kafka_tool(main_class: str, bootstrap: str | None, *args: str, check: bool = True,
               timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run one tool (with `--bootstrap-server bootstrap` first when given); with `check`,
    a non-zero exit fails the test with the tool's output."""
    arguments = (["--bootstrap-server", bootstrap] if bootstrap else []) + list(args)
    result = run_java(main_class, arguments, timeout=timeout)
    if check:
        assert result.returncode == 0, (f"{main_class} {' '.join(arguments)} exited with {result.returncode}:\n"
                                        f"{result.stdout[-3000:]}\n{result.stderr[-3000:]}")
    return result


def normalise(text: str, broker: object) -> str:
    """What legitimately differs between two brokers' answers, replaced by placeholders:
    the address, topic ids, the data directory."""
    text = text.replace(broker.bootstrap, "HOST:PORT")  # type: ignore[attr-defined]
    text = re.sub(r"TopicId: \S+", "TopicId: ID", text)
    text = re.sub(r'"logDir":"[^"]*"', '"logDir":"DIR"', text)
    return text


def table(text: str) -> list[dict[str, str]]:
    """The rows of a whitespace- or tab-separated table whose first line names the columns
    (kafka-transactions, kafka-consumer-groups): [{column: value}]."""
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        return []
    split = (lambda line: [cell.strip() for cell in line.split("\t")]) if "\t" in lines[0] else str.split
    header = [cell for cell in split(lines[0]) if cell]
    return [dict(zip(header, split(line), strict=False)) for line in lines[1:]]  # a last empty cell may be cut
