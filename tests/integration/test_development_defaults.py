"""`ottla serve` with no settings starts with the development defaults
(broker/development_defaults.py), as `make run`, the pytest plugin and the container
image start it: DescribeConfigs serves each as Kafka started with its shipped
server.properties serves it, and a new classic group's first member is assigned at once."""

from __future__ import annotations

import datetime
import uuid

from ottla.broker.development_defaults import DEVELOPMENT_DEFAULTS
from tests.wire import WireClient, request

JOIN_GROUP, DESCRIBE_GROUPS, DESCRIBE_CONFIGS = 11, 15, 32
BROKER_RESOURCE, STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 4, 4, 5
MEMBER_ID_REQUIRED = 79


def _broker_configs(client: WireClient) -> dict:
    """This broker's configs by name, from DescribeConfigs v4 with synonyms."""
    node_id = client.call(request(3, 12, topics=[], allow_auto_topic_creation=False,
                                  include_topic_authorized_operations=False)).brokers[0].node_id
    answer = client.call(request(DESCRIBE_CONFIGS, 4, resources=[
        {"resource_type": BROKER_RESOURCE, "resource_name": str(node_id), "configuration_keys": None}],
        include_synonyms=True, include_documentation=False))
    (resource,) = answer.results
    return {c.name: c for c in resource.configs}


def test_describe_configs_serves_each_development_default_as_a_static_setting(broker):
    with WireClient(broker.bootstrap) as client:
        configs = _broker_configs(client)
    assert DEVELOPMENT_DEFAULTS["group.initial.rebalance.delay.ms"] == "0"
    for name, value in DEVELOPMENT_DEFAULTS.items():
        entry = configs[name]
        # As Kafka 4.3.1 answers with its server.properties: the value, from the static
        # configuration, with Kafka's built-in default as its DEFAULT_CONFIG synonym.
        assert (entry.value, entry.config_source) == (value, STATIC_BROKER_CONFIG), entry
        assert [(s.value, s.source) for s in entry.synonyms][0] == (value, STATIC_BROKER_CONFIG)
        assert entry.synonyms[-1].source == DEFAULT_CONFIG
    assert configs["group.initial.rebalance.delay.ms"].synonyms[-1].value == "3000"  # Kafka's own default


def _join(group: str, member_id: str) -> object:
    return request(JOIN_GROUP, 5, group_id=group, session_timeout=datetime.timedelta(seconds=30),
                   rebalance_timeout=datetime.timedelta(seconds=60), member_id=member_id, group_instance_id=None,
                   protocol_type="consumer", protocols=[{"name": "range", "metadata": b""}])


def test_a_new_classic_groups_first_member_is_assigned_without_waiting_for_more(broker):
    """With group.initial.rebalance.delay.ms=3000 a new group stays PreparingRebalance
    for 3 s after its first member joins, waiting for others; with 0 the join that
    makes the group completes the rebalance itself. The state is asked on a second
    connection until the join was handled: the first state seen after Empty tells
    which (no clock decides it: a slow machine could at worst miss the 3 s window and
    see CompletingRebalance with the delay, never PreparingRebalance without it)."""
    group = f"g-{uuid.uuid4().hex[:10]}"
    with WireClient(broker.bootstrap) as member, WireClient(broker.bootstrap) as observer:
        required = member.call(_join(group, ""))
        assert required.error_code == MEMBER_ID_REQUIRED and required.member_id
        member.send(_join(group, required.member_id))
        while True:
            (described,) = observer.call(request(DESCRIBE_GROUPS, 5, groups=[group],
                                                 include_authorized_operations=False)).groups
            if described.group_state not in ("Empty", "Dead"):
                break
        assert described.group_state == "CompletingRebalance", described
        _, joined = member.receive(JOIN_GROUP, 5)
        assert (joined.error_code, joined.generation_id, joined.leader) == (0, 1, required.member_id)


def test_a_setting_given_at_start_overrides_the_development_default(fresh_broker):
    broker = fresh_broker(group_initial_rebalance_delay_ms=3000)  # --override, as a user sets it
    with WireClient(broker.bootstrap) as client:
        entry = _broker_configs(client)["group.initial.rebalance.delay.ms"]
    # Kafka's own default again, so DEFAULT_CONFIG as Kafka reports it.
    assert (entry.value, entry.config_source) == ("3000", DEFAULT_CONFIG)
