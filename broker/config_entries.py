"""The broker's configs as DescribeConfigs shows them, and Kafka's ids for where a
config's value comes from (ConfigSource) and what type it is (ConfigType): one
definition for the DescribeConfigs and CreateTopics handlers and the web console."""

from __future__ import annotations

from enum import IntEnum
from typing import Any

from ottla.storage.log_config import TOPIC_CONFIGS

from .config import BrokerConfig
from .dynamic_config import THIS_BROKER


class ConfigSource(IntEnum):
    """Kafka's DescribeConfigsResponse ConfigSource."""

    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6


class ConfigType(IntEnum):
    """Kafka's DescribeConfigsResponse ConfigType."""

    BOOLEAN = 1
    STRING = 2
    INT = 3
    LONG = 5
    DOUBLE = 6
    LIST = 7


# Broker properties that give a topic config's default: the ones that change at run time.
DYNAMIC_BROKER_CONFIGS = {c.broker_property: c for c in TOPIC_CONFIGS.values() if c.broker_property is not None}


def broker_config_entries(services: Any, keys: Any, synonyms: bool = False) -> list[dict[str, Any]]:
    """The broker's configs with Kafka's ConfigSource of each (DescribeConfigs, the web
    console's Broker page); with `synonyms`, each config's chain of values from its own
    source down to the default, as Kafka lists them."""
    static = services.static_config.broker_properties()
    defaults = BrokerConfig().broker_properties()
    entries = []
    for name, value in sorted(services.config.broker_properties().items()):
        if keys is not None and name not in keys:
            continue
        scope = services.dynamic_configs.source_of(name)
        if scope is not None:
            source = (ConfigSource.DYNAMIC_BROKER_CONFIG if scope == THIS_BROKER
                      else ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)
        elif static.get(name) == defaults.get(name):
            source = ConfigSource.DEFAULT_CONFIG
        else:
            source = ConfigSource.STATIC_BROKER_CONFIG
        chain = []
        if synonyms and value is not None:
            chain.append({"name": name, "value": value, "source": source})
            if source in (ConfigSource.DYNAMIC_BROKER_CONFIG, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG) \
                    and static.get(name) != defaults.get(name):
                chain.append({"name": name, "value": static.get(name), "source": ConfigSource.STATIC_BROKER_CONFIG})
            if source != ConfigSource.DEFAULT_CONFIG and defaults.get(name) is not None:
                chain.append({"name": name, "value": defaults.get(name), "source": ConfigSource.DEFAULT_CONFIG})
        entries.append({"name": name, "value": value, "read_only": name not in DYNAMIC_BROKER_CONFIGS,
                        "config_source": source,
                        # A secret (admin.token, a password): broker_properties gives no value for it.
                        "is_sensitive": value is None, "synonyms": chain, "config_type": ConfigType.STRING})
    return entries
