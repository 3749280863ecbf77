"""The differences Ottla knows it has from Kafka 4.3, each matched to its listed reason.

Every rule's id is the id of a bullet in "Where Ottla knowingly differs from Kafka"
(docs/conformance.md), written there as `<!-- diff: ID -->`. A difference
the suite observes must match a rule; a rule whose id is not listed there, or a listed
id no rule matches any more, fails the suite (tests/conformance/test_differential.py),
so the list says what is true today.

A rule matches a difference by API key (None: any), by a regular expression that must
match the whole field path (list indices as `[]`, keyed entries as `[key=value]`) and,
where the path alone says too little, by a predicate on the difference.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .harness import ABSENT, Difference

ROOT = Path(__file__).resolve().parents[2]
LISTS = (ROOT / "docs" / "conformance.md",)
LISTED = re.compile(r"<!-- diff: ([a-z0-9-]+) -->")


@dataclass(frozen=True)
class Known:
    id: str
    api: int | None
    path: str
    when: Callable[[Difference], bool] | None = None
    step: str = ".*"

    def matches(self, difference: Difference) -> bool:
        if self.api is not None and difference.api != self.api:
            return False
        if not re.fullmatch(self.path, re.sub(r"\[\d+\]", "[]", difference.path)):
            return False
        if not re.fullmatch(self.step, difference.step):
            return False
        return self.when is None or self.when(difference)


def ottla_absent(d: Difference) -> bool:
    return d.ottla == ABSENT


KNOWN: list[Known] = [
    # ApiVersions: the APIs Kafka serves that Ottla does not, and the newer versions.
    Known("api-versions-unserved-apis", 18, r"api_keys\[api_key=\d+\]", ottla_absent),
    Known("api-versions-older-max", 18, r"api_keys\[api_key=\d+\]\.max_version",
          lambda d: isinstance(d.ottla, int) and isinstance(d.kafka, int) and d.ottla < d.kafka),
    Known("api-versions-features", 18, r"(supported|finalized)_features.*"),
    # Kafka's controller records min.insync.replicas as a cluster-wide dynamic default.
    Known("min-insync-replicas-source", None, r".*configs\[(name|config_name)='min.insync.replicas'\]"
          r"\.(config_source|source|is_default|synonyms.*)"),
    Known("config-documentation-own-words", 32, r".*\.documentation",
          lambda d: isinstance(d.ottla, str) and isinstance(d.kafka, str)),
    Known("broker-configs-describe", 32, r"results\[resource_name='1'\]\.configs.*"),
    Known("broker-configs-read-only", 44, r"responses\[resource_name='1'\]\.error_code"),
    Known("incremental-alter-unknown-operation", 44, r"responses\[resource_name='[^']*'\]\.error_code",
          lambda d: (d.ottla, d.kafka) == ("invalid_request", "unknown_server_error")),
    Known("negative-array-length", 3, r".*", step=r"metadata-negative-count"),
    Known("internal-topic-create", 19, r"topics\[name='__consumer_offsets'\]\.error_code"),
    Known("metadata-auto-create-at-once", 3, r"topics\[name='[^']*'\]\.(error_code|topic_id|partitions)",
          step=r"auto-create.*"),
    Known("consumer-group-first-epoch", None, r"(.*\.)?(member_epoch|group_epoch|assignment_epoch)",
          lambda d: (d.ottla, d.kafka) == (1, 2)),
    Known("classic-member-in-consumer-group", 11, r"error_code|member_id", step=r"classic-join-into-consumer-group"),
    Known("streams-topology-size", 88, r".*", step=r"join-oversized-topology"),
]


def rule_for(difference: Difference) -> Known | None:
    for rule in KNOWN:
        if rule.matches(difference):
            return rule
    return None


def listed_ids() -> dict[str, Path]:
    """Every difference id the lists name, and the file naming it."""
    found: dict[str, Path] = {}
    for path in LISTS:
        if path.exists():
            for listed in LISTED.findall(path.read_text()):
                found[listed] = path
    return found
