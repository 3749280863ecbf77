"""The APIs Ottla serves and the version range of each.

This table is the single source of the ApiVersions answer and of request routing: a
request whose (api_key, version) is outside it is refused before any handler runs.
An API appears here only once a handler implements it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Api:
    key: int
    name: str
    min_version: int
    max_version: int
    # Versions advertised in ApiVersions but refused when used. Only Produce v0-v2:
    # Kafka 4 dropped them, yet librdkafka decides whether a broker can produce at all
    # from the advertised minimum, so Kafka advertises 0 (KAFKA-18659) and so do we.
    advertised_min: int | None = None

    def handles(self, version: int) -> bool:
        return self.min_version <= version <= self.max_version


PRODUCE = Api(0, "Produce", 3, 12, advertised_min=0)
FETCH = Api(1, "Fetch", 4, 16)
LIST_OFFSETS = Api(2, "ListOffsets", 1, 11)
METADATA = Api(3, "Metadata", 0, 12)
API_VERSIONS = Api(18, "ApiVersions", 0, 4)
CREATE_TOPICS = Api(19, "CreateTopics", 2, 7)
DELETE_TOPICS = Api(20, "DeleteTopics", 1, 6)
INIT_PRODUCER_ID = Api(22, "InitProducerId", 0, 5)
FIND_COORDINATOR = Api(10, "FindCoordinator", 0, 6)
ADD_PARTITIONS_TO_TXN = Api(24, "AddPartitionsToTxn", 0, 5)
ADD_OFFSETS_TO_TXN = Api(25, "AddOffsetsToTxn", 0, 4)
END_TXN = Api(26, "EndTxn", 0, 5)
WRITE_TXN_MARKERS = Api(27, "WriteTxnMarkers", 1, 2)
DESCRIBE_PRODUCERS = Api(61, "DescribeProducers", 0, 0)
DESCRIBE_TRANSACTIONS = Api(65, "DescribeTransactions", 0, 0)
LIST_TRANSACTIONS = Api(66, "ListTransactions", 0, 2)
OFFSET_COMMIT = Api(8, "OffsetCommit", 2, 9)
OFFSET_FETCH = Api(9, "OffsetFetch", 1, 9)
JOIN_GROUP = Api(11, "JoinGroup", 0, 9)
HEARTBEAT = Api(12, "Heartbeat", 0, 4)
LEAVE_GROUP = Api(13, "LeaveGroup", 0, 5)
SYNC_GROUP = Api(14, "SyncGroup", 0, 5)
DESCRIBE_GROUPS = Api(15, "DescribeGroups", 0, 6)
LIST_GROUPS = Api(16, "ListGroups", 0, 5)
TXN_OFFSET_COMMIT = Api(28, "TxnOffsetCommit", 0, 5)
DELETE_GROUPS = Api(42, "DeleteGroups", 0, 2)
OFFSET_DELETE = Api(47, "OffsetDelete", 0, 0)
DELETE_RECORDS = Api(21, "DeleteRecords", 0, 2)
DESCRIBE_CONFIGS = Api(32, "DescribeConfigs", 1, 4)
ALTER_CONFIGS = Api(33, "AlterConfigs", 0, 2)
INCREMENTAL_ALTER_CONFIGS = Api(44, "IncrementalAlterConfigs", 0, 1)
SASL_HANDSHAKE = Api(17, "SaslHandshake", 0, 1)
SASL_AUTHENTICATE = Api(36, "SaslAuthenticate", 0, 2)
DESCRIBE_USER_SCRAM_CREDENTIALS = Api(50, "DescribeUserScramCredentials", 0, 0)
ALTER_USER_SCRAM_CREDENTIALS = Api(51, "AlterUserScramCredentials", 0, 0)
DESCRIBE_ACLS = Api(29, "DescribeAcls", 1, 3)
CREATE_ACLS = Api(30, "CreateAcls", 1, 3)
DELETE_ACLS = Api(31, "DeleteAcls", 1, 3)
DESCRIBE_TOPIC_PARTITIONS = Api(75, "DescribeTopicPartitions", 0, 0)
CREATE_PARTITIONS = Api(37, "CreatePartitions", 0, 3)
DESCRIBE_CLUSTER = Api(60, "DescribeCluster", 0, 1)
DESCRIBE_LOG_DIRS = Api(35, "DescribeLogDirs", 1, 4)
OFFSET_FOR_LEADER_EPOCH = Api(23, "OffsetForLeaderEpoch", 2, 4)
ELECT_LEADERS = Api(43, "ElectLeaders", 0, 2)
ALTER_PARTITION_REASSIGNMENTS = Api(45, "AlterPartitionReassignments", 0, 1)
LIST_PARTITION_REASSIGNMENTS = Api(46, "ListPartitionReassignments", 0, 0)
DESCRIBE_CLIENT_QUOTAS = Api(48, "DescribeClientQuotas", 0, 1)
ALTER_CLIENT_QUOTAS = Api(49, "AlterClientQuotas", 0, 1)
CONSUMER_GROUP_HEARTBEAT = Api(68, "ConsumerGroupHeartbeat", 0, 1)
CONSUMER_GROUP_DESCRIBE = Api(69, "ConsumerGroupDescribe", 0, 1)
SHARE_GROUP_HEARTBEAT = Api(76, "ShareGroupHeartbeat", 1, 1)
SHARE_GROUP_DESCRIBE = Api(77, "ShareGroupDescribe", 1, 1)
SHARE_FETCH = Api(78, "ShareFetch", 1, 2)
SHARE_ACKNOWLEDGE = Api(79, "ShareAcknowledge", 1, 2)
DESCRIBE_SHARE_GROUP_OFFSETS = Api(90, "DescribeShareGroupOffsets", 0, 1)
ALTER_SHARE_GROUP_OFFSETS = Api(91, "AlterShareGroupOffsets", 0, 0)
DELETE_SHARE_GROUP_OFFSETS = Api(92, "DeleteShareGroupOffsets", 0, 0)
STREAMS_GROUP_HEARTBEAT = Api(88, "StreamsGroupHeartbeat", 0, 0)
STREAMS_GROUP_DESCRIBE = Api(89, "StreamsGroupDescribe", 0, 0)

SUPPORTED: dict[int, Api] = {
    api.key: api
    for api in (
        PRODUCE,
        FETCH,
        LIST_OFFSETS,
        METADATA,
        API_VERSIONS,
        CREATE_TOPICS,
        DELETE_TOPICS,
        INIT_PRODUCER_ID,
        FIND_COORDINATOR,
        ADD_PARTITIONS_TO_TXN,
        ADD_OFFSETS_TO_TXN,
        END_TXN,
        WRITE_TXN_MARKERS,
        DESCRIBE_PRODUCERS,
        DESCRIBE_TRANSACTIONS,
        LIST_TRANSACTIONS,
        OFFSET_COMMIT,
        OFFSET_FETCH,
        JOIN_GROUP,
        HEARTBEAT,
        LEAVE_GROUP,
        SYNC_GROUP,
        DESCRIBE_GROUPS,
        LIST_GROUPS,
        TXN_OFFSET_COMMIT,
        DELETE_GROUPS,
        OFFSET_DELETE,
        DELETE_RECORDS,
        DESCRIBE_CONFIGS,
        ALTER_CONFIGS,
        INCREMENTAL_ALTER_CONFIGS,
        SASL_HANDSHAKE,
        SASL_AUTHENTICATE,
        DESCRIBE_USER_SCRAM_CREDENTIALS,
        ALTER_USER_SCRAM_CREDENTIALS,
        DESCRIBE_ACLS,
        CREATE_ACLS,
        DELETE_ACLS,
        DESCRIBE_TOPIC_PARTITIONS,
        CREATE_PARTITIONS,
        DESCRIBE_CLUSTER,
        DESCRIBE_LOG_DIRS,
        OFFSET_FOR_LEADER_EPOCH,
        ELECT_LEADERS,
        ALTER_PARTITION_REASSIGNMENTS,
        LIST_PARTITION_REASSIGNMENTS,
        DESCRIBE_CLIENT_QUOTAS,
        ALTER_CLIENT_QUOTAS,
        CONSUMER_GROUP_HEARTBEAT,
        CONSUMER_GROUP_DESCRIBE,
        SHARE_GROUP_HEARTBEAT,
        SHARE_GROUP_DESCRIBE,
        SHARE_FETCH,
        SHARE_ACKNOWLEDGE,
        DESCRIBE_SHARE_GROUP_OFFSETS,
        ALTER_SHARE_GROUP_OFFSETS,
        DELETE_SHARE_GROUP_OFFSETS,
        STREAMS_GROUP_HEARTBEAT,
        STREAMS_GROUP_DESCRIBE,
    )
}
