"""The settings every `ottla serve` starts with over Kafka's built-in defaults: the
choices Kafka's own development configuration makes for a broker on a laptop or a CI
runner, kept here and nowhere else.

`make run`, `ottla serve`, the pytest plugin and the container image all start the broker
through `config.resolve_config`, which lays these under everything a user gives (a
server.properties file, OTTLA_<KEY> variables, flags): any of them sets a value back.
Each setting keeps Kafka's built-in default as its default, so DescribeConfigs reports
it as Kafka started with its shipped server.properties does: the value with source
STATIC_BROKER_CONFIG, Kafka's default as its DEFAULT_CONFIG synonym.
docs/configuration.md lists each beside Kafka's.
"""

from __future__ import annotations

from collections.abc import Mapping

# Where these values came from, as `resolve_config` names a setting's source.
SOURCE = "development defaults"

DEVELOPMENT_DEFAULTS: Mapping[str, str] = {
    # Kafka's default is 3000: a new classic group waits 3 s for more members before its
    # first rebalance. Kafka's server.properties sets 0 "for a better out-of-the-box
    # experience for development and testing", and its Docker examples set
    # KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS=0: a test's first consumer gets its
    # assignment at once.
    "group.initial.rebalance.delay.ms": "0",
    # The same delay for KIP-1071 streams groups (Kafka's default 3000 too): a new
    # group's first member is answered ASSIGNMENT_DELAYED for 3 s. Kafka's development
    # files predate streams groups; the reasoning above is the same: a test's one
    # Streams instance gets its tasks at once.
    "group.streams.initial.rebalance.delay.ms": "0",
}
