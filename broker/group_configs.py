"""Configs of groups (the GROUP config resource: DescribeConfigs, IncrementalAlterConfigs),
kept in the data directory so that they survive a restart, as Kafka keeps them in its
metadata log. Ottla serves Kafka 4.3.1's consumer.*, share.* and streams.* configs
(coordinator/group_resource_configs.py, with Kafka's bounds)."""

from __future__ import annotations

import os
from collections.abc import Mapping

from .json_files import read_json, write_json

FILE_NAME = "group-configs.json"


class GroupConfigs:
    def __init__(self, data_dir: str) -> None:
        self.path = os.path.join(data_dir, FILE_NAME)
        self.groups: dict[str, dict[str, str]] = {g: dict(v) for g, v in read_json(self.path, {}).items()}

    def of(self, group_id: str) -> Mapping[str, str]:
        return self.groups.get(group_id, {})

    def replace(self, group_id: str, values: Mapping[str, str]) -> None:
        if values:
            self.groups[group_id] = dict(values)
        else:
            self.groups.pop(group_id, None)
        write_json(self.path, self.groups)
