"""`ottla topics|groups|transactions`: the administration commands of Kafka's scripts
(kafka-topics, kafka-consumer-groups, kafka-transactions), over the wire protocol
against any broker address.

    ottla topics create --topic T [--partitions N] [--config K=V ...]
    ottla topics list [--exclude-internal]
    ottla topics describe [--topic T]
    ottla topics delete --topic T
    ottla groups list
    ottla groups describe --group G
    ottla transactions list
    ottla transactions describe --transactional-id ID
    ottla acls add|remove --allow-principal User:alice --operation Read --topic T [--group G ...]
    ottla acls list [--topic T] [--principal User:alice]

Every command takes `--command-config FILE`: client properties (security.protocol,
sasl.*, ssl.*) for a secured broker, as Kafka's scripts do.

Output follows the Kafka script's layout, so what people know how to read reads the
same.
"""

from __future__ import annotations

import argparse
import base64
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from ottla.broker.security.authorizer import CLUSTER_NAME, Operation, PatternType, Permission, ResourceType
from ottla.protocol import apis
from ottla.protocol.member_assignment import consumer_assignment

from .client import GROUP_KEY, REQUEST_TIMEOUT_MS, TRANSACTION_KEY, ClientError, Cluster, check
from .client_security import ClientSecurity, read_command_config

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"


def add_parsers(sub: argparse._SubParsersAction) -> None:
    topics = _command(sub, "topics", "create, list, describe and delete topics (kafka-topics)")
    create = _action(topics, "create", _topics_create)
    create.add_argument("--topic", required=True)
    create.add_argument("--partitions", type=int, default=1)
    create.add_argument("--replication-factor", type=int, default=1)
    create.add_argument("--config", action="append", default=[], metavar="KEY=VALUE", help="a topic config")
    listing = _action(topics, "list", _topics_list)
    listing.add_argument("--exclude-internal", action="store_true", help="leave out __consumer_offsets and the like")
    _action(topics, "describe", _topics_describe).add_argument("--topic", help="one topic (default: every topic)")
    _action(topics, "delete", _topics_delete).add_argument("--topic", required=True)

    groups = _command(sub, "groups", "list and describe consumer groups (kafka-consumer-groups)")
    _action(groups, "list", _groups_list)
    _action(groups, "describe", _groups_describe).add_argument("--group", required=True)

    transactions = _command(sub, "transactions", "list and describe transactions (kafka-transactions)")
    _action(transactions, "list", _transactions_list)
    _action(transactions, "describe", _transactions_describe).add_argument("--transactional-id", required=True)

    acls = _command(sub, "acls", "add, list and remove ACLs (kafka-acls)")
    for name, run in (("add", _acls_add), ("remove", _acls_remove), ("list", _acls_list)):
        parser = _action(acls, name, run)
        _acl_resource_options(parser)
        if name == "list":
            parser.add_argument("--principal", help="only the ACLs of this principal")
            continue
        parser.add_argument("--allow-principal", action="append", default=[], metavar="PRINCIPAL")
        parser.add_argument("--deny-principal", action="append", default=[], metavar="PRINCIPAL")
        parser.add_argument("--allow-host", action="append", default=[], metavar="HOST")
        parser.add_argument("--deny-host", action="append", default=[], metavar="HOST")
        parser.add_argument("--operation", action="append", default=[], metavar="OPERATION",
                            help="Read, Write, Create, Delete, Alter, Describe, ClusterAction, DescribeConfigs, "
                                 "AlterConfigs, IdempotentWrite, All")


def _command(sub: argparse._SubParsersAction, name: str, help_text: str) -> argparse._SubParsersAction:
    parser = sub.add_parser(name, help=help_text)
    return parser.add_subparsers(dest="action", required=True)


def _action(sub: argparse._SubParsersAction, name: str, run: Callable[[Cluster, argparse.Namespace], None]
            ) -> argparse.ArgumentParser:
    parser = sub.add_parser(name)
    parser.add_argument("--bootstrap-server", default=DEFAULT_BOOTSTRAP, metavar="HOST:PORT",
                        help="a broker to start from (default %(default)s)")
    parser.add_argument("--command-config", metavar="FILE",
                        help="client properties: security.protocol, sasl.*, ssl.* (a secured broker)")
    parser.set_defaults(run=lambda args: run_tool(args, run))
    return parser


def run_tool(args: argparse.Namespace, run: Callable[[Cluster, argparse.Namespace], None]) -> int:
    """Connect, run one command, and turn a failed request into a message and exit 1."""
    try:
        path = getattr(args, "command_config", None)
        security = read_command_config(path) if path else ClientSecurity()
    except OSError as exc:
        print(f"ottla: cannot read --command-config: {exc}", file=sys.stderr)
        return 1
    try:
        with Cluster(args.bootstrap_server, security=security) as cluster:
            run(cluster, args)
    except ClientError as exc:
        print(f"ottla {' '.join(filter(None, (args.command, args.action)))}: {exc}", file=sys.stderr)
        return 1
    return 0


def print_table(headers: list[str], rows: Iterable[list[Any]]) -> None:
    rows = [["-" if value is None else str(value) for value in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    for row in [headers, *rows]:
        print(" ".join(value.ljust(width) for value, width in zip(row, widths, strict=False)).rstrip())


# --- topics ------------------------------------------------------------------------------


def _topics_create(cluster: Cluster, args: argparse.Namespace) -> None:
    configs = []
    for item in args.config:
        key, sep, value = item.partition("=")
        if not sep:
            raise ClientError(f"--config expects KEY=VALUE, got {item!r}")
        configs.append({"name": key, "value": value})
    answer = cluster.call(apis.CREATE_TOPICS, timeout=REQUEST_TIMEOUT_MS, validate_only=False, topics=[{
        "name": args.topic, "num_partitions": args.partitions, "replication_factor": args.replication_factor,
        "assignments": [], "configs": configs,
    }])
    (result,) = answer.topics
    check(result.error_code, f"creating {args.topic}", result.error_message)
    print(f"Created topic {args.topic}.")


def _topics_list(cluster: Cluster, args: argparse.Namespace) -> None:
    for topic in sorted(cluster.metadata(None).topics, key=lambda t: t.name):
        if not (args.exclude_internal and topic.is_internal):
            print(topic.name)


def _topics_describe(cluster: Cluster, args: argparse.Namespace) -> None:
    answer = cluster.metadata([args.topic] if args.topic else None)
    for topic in sorted(answer.topics, key=lambda t: t.name):
        check(topic.error_code, f"topic {topic.name}")
        print(f"Topic: {topic.name}\tTopicId: {_topic_id(topic)}\tPartitionCount: {len(topic.partitions)}\t"
              f"ReplicationFactor: {len(topic.partitions[0].replica_nodes) if topic.partitions else 0}")
        for p in sorted(topic.partitions, key=lambda p: p.partition_index):
            print(f"\tTopic: {topic.name}\tPartition: {p.partition_index}\tLeader: {p.leader_id}\t"
                  f"Replicas: {_ids(p.replica_nodes)}\tIsr: {_ids(p.isr_nodes)}")


def _topic_id(topic: Any) -> str:
    # Kafka prints topic ids in URL-safe base64, without padding.
    topic_id = getattr(topic, "topic_id", None)
    return base64.urlsafe_b64encode(topic_id.bytes).decode().rstrip("=") if topic_id else "-"


def _ids(nodes: Iterable[int]) -> str:
    return ",".join(str(n) for n in nodes)


def _topics_delete(cluster: Cluster, args: argparse.Namespace) -> None:
    # DeleteTopics names topics in `topic_names` up to v5 and in `topics` from v6; the
    # version negotiated keeps the one it has.
    answer = cluster.call(apis.DELETE_TOPICS, timeout=REQUEST_TIMEOUT_MS, topic_names=[args.topic],
                          topics=[{"name": args.topic}])
    (result,) = answer.responses
    check(result.error_code, f"deleting {args.topic}", getattr(result, "error_message", None))
    print(f"Deleted topic {args.topic}.")


# --- consumer groups ---------------------------------------------------------------------


def _groups_list(cluster: Cluster, args: argparse.Namespace) -> None:
    answer = cluster.call(apis.LIST_GROUPS, states_filter=[], types_filter=[])
    check(answer.error_code, "ListGroups")
    for group in sorted(answer.groups, key=lambda g: g.group_id):
        print(group.group_id)


def _groups_describe(cluster: Cluster, args: argparse.Namespace) -> None:
    coordinator = cluster.coordinator(args.group, GROUP_KEY)
    (group,) = coordinator.call(apis.DESCRIBE_GROUPS, groups=[args.group],
                                include_authorized_operations=False).groups
    check(group.error_code, f"group {args.group}")
    owners: dict[tuple[str, int], Any] = {}
    if group.protocol_type == "consumer":
        for member in group.members:
            for topic, partitions in consumer_assignment(member.member_assignment):
                for partition in partitions:
                    owners[(topic, partition)] = member
    committed = _committed_offsets(coordinator, args.group)
    ends: dict[tuple[str, int], int] = {}
    for topic in sorted({t for t, _ in [*committed, *owners]}):
        partitions = sorted({p for t, p in [*committed, *owners] if t == topic})
        ends.update({(topic, p): end for p, end in cluster.list_offsets(topic, partitions, -1).items()})
    print(f"Consumer group '{args.group}' is {group.group_state} with {len(group.members)} member(s).\n")
    rows = []
    for topic, partition in sorted(set(committed) | set(owners)):
        offset = committed.get((topic, partition))
        end = ends.get((topic, partition))
        member = owners.get((topic, partition))
        rows.append([args.group, topic, partition, offset, end,
                     end - offset if offset is not None and end is not None else None,
                     member.member_id if member else None, member.client_host if member else None,
                     member.client_id if member else None])
    print_table(["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST",
                 "CLIENT-ID"], rows)


def _committed_offsets(coordinator: Any, group_id: str) -> dict[tuple[str, int], int]:
    # OffsetFetch asks for one group up to v7 and for a list of groups from v8 on.
    answer = coordinator.call(apis.OFFSET_FETCH, group_id=group_id, topics=None, require_stable=True,
                              groups=[{"group_id": group_id, "topics": None}])
    if coordinator.version(apis.OFFSET_FETCH) >= 8:
        (answer,) = answer.groups
    check(answer.error_code, f"OffsetFetch for {group_id}")
    offsets = {}
    for topic in answer.topics:
        for p in topic.partitions:
            check(p.error_code, f"OffsetFetch {topic.name}-{p.partition_index}")
            if p.committed_offset >= 0:
                offsets[(topic.name, int(p.partition_index))] = int(p.committed_offset)
    return offsets


# --- transactions ------------------------------------------------------------------------


def _transactions_list(cluster: Cluster, args: argparse.Namespace) -> None:
    # Each broker knows the transactions it coordinates: ask them all, as Kafka's tool does.
    rows = []
    for node_id in sorted(b.node_id for b in cluster.metadata([]).brokers):
        answer = cluster.broker(node_id).call(apis.LIST_TRANSACTIONS, state_filters=[], producer_id_filters=[],
                                              duration_filter=-1)
        check(answer.error_code, "ListTransactions")
        rows += [[t.transactional_id, node_id, t.producer_id, t.transaction_state] for t in answer.transaction_states]
    print_table(["TransactionalId", "Coordinator", "ProducerId", "TransactionState"], sorted(rows))


def _transactions_describe(cluster: Cluster, args: argparse.Namespace) -> None:
    txn_id = args.transactional_id
    coordinator = cluster.coordinator(txn_id, TRANSACTION_KEY)
    (state,) = coordinator.call(apis.DESCRIBE_TRANSACTIONS, transactional_ids=[txn_id]).transaction_states
    check(state.error_code, f"transaction {txn_id}")
    started = state.transaction_start_time
    start_ms = int(started.timestamp() * 1000) if started is not None else -1
    partitions = ",".join(f"{t.topic}-{p}" for t in state.topics for p in t.partitions)
    print_table(
        ["Coordinator", "TransactionalId", "ProducerId", "ProducerEpoch", "TransactionState",
         "TransactionTimeoutMs", "CurrentTransactionStartTimeMs", "TransactionDurationMs", "TopicPartitions"],
        [[coordinator.address, txn_id, state.producer_id, state.producer_epoch, state.transaction_state,
          int(state.transaction_timeout.total_seconds() * 1000), start_ms if start_ms >= 0 else None,
          int(time.time() * 1000) - start_ms if start_ms >= 0 else None, partitions or None]],
    )


# --- acls ----------------------------------------------------------------------------------


def _acl_resource_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--topic", action="append", default=[])
    parser.add_argument("--group", action="append", default=[])
    parser.add_argument("--transactional-id", action="append", default=[])
    parser.add_argument("--cluster", action="store_true")
    parser.add_argument("--resource-pattern-type", default=None,
                        choices=["literal", "prefixed", "match", "any"], type=str.lower)


def _resources(args: argparse.Namespace) -> list[tuple[ResourceType, str]]:
    resources = [(ResourceType.TOPIC, t) for t in args.topic] + [(ResourceType.GROUP, g) for g in args.group]
    resources += [(ResourceType.TRANSACTIONAL_ID, t) for t in args.transactional_id]
    if args.cluster:
        resources.append((ResourceType.CLUSTER, CLUSTER_NAME))
    return resources


def _operation(text: str) -> Operation:
    # Kafka's tool takes CamelCase (ClusterAction); READ and cluster_action work too.
    camel = not (text.isupper() or text.islower() or "_" in text)
    name = "".join("_" + c if camel and c.isupper() and i else c for i, c in enumerate(text)).upper()
    try:
        return Operation[name]
    except KeyError:
        raise ClientError(f"unknown operation {text!r}") from None


def _entries(args: argparse.Namespace) -> list[tuple[str, str, Operation, Permission]]:
    if not args.operation:
        raise ClientError("give at least one --operation")
    if not args.allow_principal and not args.deny_principal:
        raise ClientError("give --allow-principal or --deny-principal")
    entries = []
    for principals, hosts, permission in ((args.allow_principal, args.allow_host, Permission.ALLOW),
                                          (args.deny_principal, args.deny_host, Permission.DENY)):
        for principal in principals:
            for host in hosts or ["*"]:
                entries += [(principal, host, _operation(op), permission) for op in args.operation]
    return entries


def _acls_add(cluster: Cluster, args: argparse.Namespace) -> None:
    resources = _resources(args)
    if not resources:
        raise ClientError("name a resource: --topic, --group, --transactional-id or --cluster")
    pattern = PatternType[(args.resource_pattern_type or "literal").upper()]
    creations = [{"resource_type": rt, "resource_name": name, "resource_pattern_type": pattern,
                  "principal": principal, "host": host, "operation": op, "permission_type": permission}
                 for rt, name in resources for principal, host, op, permission in _entries(args)]
    answer = cluster.call(apis.CREATE_ACLS, creations=creations)
    for result in answer.results:
        check(result.error_code, "CreateAcls", result.error_message)
    print(f"Added {len(creations)} ACLs.")


def _acls_remove(cluster: Cluster, args: argparse.Namespace) -> None:
    resources = _resources(args)
    pattern = PatternType[(args.resource_pattern_type or "literal").upper()]
    filters = [{"resource_type_filter": rt, "resource_name_filter": name, "pattern_type_filter": pattern,
                "principal_filter": principal, "host_filter": host, "operation": op, "permission_type": permission}
               for rt, name in resources for principal, host, op, permission in _entries(args)]
    answer = cluster.call(apis.DELETE_ACLS, filters=filters)
    removed = 0
    for result in answer.filter_results:
        check(result.error_code, "DeleteAcls", result.error_message)
        removed += len(result.matching_acls)
    print(f"Removed {removed} ACLs.")


def _acls_list(cluster: Cluster, args: argparse.Namespace) -> None:
    resources: Sequence[tuple[ResourceType, str | None]] = _resources(args) or [(ResourceType.ANY, None)]
    pattern = PatternType[(args.resource_pattern_type or ("any" if resources[0][1] is None else "literal")).upper()]
    rows = []
    for rt, name in resources:
        answer = cluster.call(apis.DESCRIBE_ACLS, resource_type_filter=rt, resource_name_filter=name,
                              pattern_type_filter=pattern, principal_filter=args.principal, host_filter=None,
                              operation=Operation.ANY, permission_type=Permission.ANY)
        check(answer.error_code, "DescribeAcls", answer.error_message)
        for resource in answer.resources:
            for acl in resource.acls:
                rows.append([ResourceType(resource.resource_type).name, resource.resource_name,
                             PatternType(resource.pattern_type).name, acl.principal, acl.host,
                             Operation(acl.operation).name, Permission(acl.permission_type).name])
    print_table(["ResourceType", "Name", "PatternType", "Principal", "Host", "Operation", "Permission"], sorted(rows))
