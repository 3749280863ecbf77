"""Broker configs changed at run time (IncrementalAlterConfigs or AlterConfigs on the
BROKER resource), kept in the data directory so that they survive a restart, as Kafka
keeps them in its metadata log.

What may change is what Kafka lets change dynamically and has a meaning on one node:
the broker-wide defaults of the topic configs (`log.retention.ms`, `log.segment.bytes`,
`log.cleaner.delete.retention.ms`, `message.max.bytes`, `compression.type`,
`min.insync.replicas`...). They act at once on every topic that does not override
them. Anything else is refused with Kafka's INVALID_REQUEST "Cannot update these configs
dynamically".

Kafka has two scopes: the cluster-wide default (resource name "") and one broker
(its id); the broker's wins. Both are kept; a single node has both at hand.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from .json_files import read_json, write_json

FILE_NAME = "broker-configs.json"
CLUSTER_DEFAULT, THIS_BROKER = "default", "broker"


class DynamicBrokerConfigs:
    def __init__(self, data_dir: str) -> None:
        self.path = os.path.join(data_dir, FILE_NAME)
        stored = read_json(self.path, {})
        self.scopes: dict[str, dict[str, str]] = {CLUSTER_DEFAULT: dict(stored.get(CLUSTER_DEFAULT, {})),
                                                  THIS_BROKER: dict(stored.get(THIS_BROKER, {}))}

    def values(self) -> dict[str, str]:
        """The dynamic values in force: the cluster default's, then this broker's over them."""
        return {**self.scopes[CLUSTER_DEFAULT], **self.scopes[THIS_BROKER]}

    def source_of(self, key: str) -> str | None:
        if key in self.scopes[THIS_BROKER]:
            return THIS_BROKER
        if key in self.scopes[CLUSTER_DEFAULT]:
            return CLUSTER_DEFAULT
        return None

    def replace(self, scope: str, values: Mapping[str, str]) -> None:
        self.scopes[scope] = dict(values)
        write_json(self.path, self.scopes)
