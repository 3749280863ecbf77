"""ConsumerGroupHeartbeat and ConsumerGroupDescribe as raw requests against a running
broker: what ApiVersions advertises, Kafka's error codes for bad input, and the group
APIs every type shares (ListGroups, DescribeGroups) answering for consumer groups."""

from __future__ import annotations

import datetime

from tests.clients import create_topic
from tests.wire import WireClient, request

HEARTBEAT, DESCRIBE = 68, 69
NONE, UNKNOWN_MEMBER_ID, INVALID_REQUEST, GROUP_ID_NOT_FOUND = 0, 25, 42, 69
FENCED_MEMBER_EPOCH, UNSUPPORTED_ASSIGNOR, INVALID_REGULAR_EXPRESSION = 110, 112, 128


def _heartbeat(client: WireClient, group: str, member: str, epoch: int, version: int = 1, **fields):
    if epoch == 0:
        fields.setdefault("rebalance_timeout", datetime.timedelta(milliseconds=30_000))
        fields.setdefault("topic_partitions", [])
    fields.setdefault("topic_partitions", None)
    if version == 0:
        fields.pop("subscribed_topic_regex", None)
    return client.call(request(HEARTBEAT, version, group_id=group, member_id=member, member_epoch=epoch, **fields))


def test_api_versions_advertises_the_consumer_group_apis_and_group_version(broker):
    with WireClient(broker.bootstrap) as client:
        answer = client.call(request(18, 4, client_software_name="t", client_software_version="1"))
    keys = {k.api_key: (k.min_version, k.max_version) for k in answer.api_keys}
    assert keys[HEARTBEAT] == (0, 1) and keys[DESCRIBE] == (0, 1)
    assert {f.name: f.max_version_level for f in answer.finalized_features}["group.version"] == 1


def test_bad_heartbeats_get_kafkas_errors_and_disturb_nothing(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, 2)
    group = f"g-{topic_name}"
    with WireClient(broker.bootstrap) as client:
        joined = _heartbeat(client, group, "member-1", 0, subscribed_topic_names=[topic_name])
        assert (joined.error_code, joined.member_epoch) == (NONE, 1)
        assert sorted(joined.assignment.topic_partitions[0].partitions) == [0, 1]

        cases = [
            (dict(member="ghost", epoch=1), UNKNOWN_MEMBER_ID),
            (dict(member="member-1", epoch=7), FENCED_MEMBER_EPOCH),
            (dict(member="member-1", epoch=1, group="nowhere"), GROUP_ID_NOT_FOUND),
            (dict(member="", epoch=1), INVALID_REQUEST),
            (dict(member="m", epoch=0, subscribed_topic_regex="a[b"), INVALID_REGULAR_EXPRESSION),
            (dict(member="m", epoch=0, subscribed_topic_names=[topic_name], server_assignor="sticky"),
             UNSUPPORTED_ASSIGNOR),
            (dict(member="m", epoch=0, subscribed_topic_names=[topic_name],
                  topic_partitions=[{"topic_id": joined.assignment.topic_partitions[0].topic_id,
                                     "partitions": [0]}]), INVALID_REQUEST),
            (dict(member="m", epoch=0, subscribed_topic_names=["t"] * 20_000), INVALID_REQUEST),
        ]
        for fields, code in cases:
            answer = _heartbeat(client, fields.pop("group", group), fields.pop("member"), fields.pop("epoch"),
                                **fields)
            assert answer.error_code == code, (fields, answer)
            assert answer.error_message

        # The member is where it was, on the same connection.
        again = _heartbeat(client, group, "member-1", 1, topic_partitions=[])
        assert (again.error_code, again.member_epoch) == (NONE, 1)
        described = client.call(request(DESCRIBE, 1, group_ids=[group, "nowhere"], include_authorized_operations=False))
        found, missing = described.groups
        assert ((found.error_code, found.group_state, found.group_epoch, found.assignment_epoch)
                == (NONE, "Stable", 1, 1))
        assert found.assignor_name == "uniform"
        (member,) = found.members
        assert member.member_id == "member-1" and member.member_type == 1
        assert member.assignment.topic_partitions[0].topic_name == topic_name
        assert missing.error_code == GROUP_ID_NOT_FOUND


def test_a_v0_member_is_given_its_id_and_leaving_is_acknowledged(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, 1)
    group = f"g-{topic_name}"
    with WireClient(broker.bootstrap) as client:
        joined = _heartbeat(client, group, "", 0, version=0, subscribed_topic_names=[topic_name])
        assert joined.error_code == NONE and joined.member_id
        left = _heartbeat(client, group, joined.member_id, -1, version=0)
        assert (left.error_code, left.member_epoch) == (NONE, -1)
        assert _heartbeat(client, group, joined.member_id, -1).error_code == UNKNOWN_MEMBER_ID


def test_list_groups_and_describe_groups_report_consumer_groups_as_kafka_does(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, 1)
    group = f"g-{topic_name}"
    with WireClient(broker.bootstrap) as client:
        _heartbeat(client, group, "member-1", 0, subscribed_topic_names=[topic_name])
        listed = client.call(request(16, 5, states_filter=[], types_filter=["consumer"]))
        mine = [g for g in listed.groups if g.group_id == group]
        assert [(g.group_type, g.protocol_type, g.group_state) for g in mine] == [("consumer", "consumer", "Stable")]
        assert all(g.group_type == "consumer" for g in listed.groups)
        classic_only = client.call(request(16, 5, states_filter=[], types_filter=["classic"]))
        assert group not in [g.group_id for g in classic_only.groups]
        # DescribeGroups describes classic groups: a consumer group is answered as none.
        described = client.call(request(15, 5, groups=[group], include_authorized_operations=False))
        assert described.groups[0].group_state == "Dead" and not described.groups[0].members
