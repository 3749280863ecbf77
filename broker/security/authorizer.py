"""ACLs, with the semantics of Kafka's StandardAuthorizer.

An ACL says: `principal` from `host` is ALLOWed or DENYed `operation` on resources of a
type whose name matches a pattern (LITERAL: the name itself, or `*` for every name;
PREFIXED: every name starting with it). A request is decided so:

1. a super user (`super.users=User:admin;User:ops`) may do anything;
2. any matching DENY refuses it;
3. any matching ALLOW grants it, where ALLOW of READ, WRITE, DELETE or ALTER also
   grants DESCRIBE, and ALLOW of ALTER_CONFIGS grants DESCRIBE_CONFIGS, as in Kafka;
4. with no ACL at all on the resource, `allow.everyone.if.no.acl.found` decides
   (false by default: refused).

The ACLs are kept in the data directory (`acls.json`, replaced whole on each change),
so they survive restarts; CreateAcls, DescribeAcls and DeleteAcls change and list them.
`authorizer.class.name` switches authorization on, as in Kafka.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from enum import IntEnum

from ..json_files import read_json, write_json


class ResourceType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class Operation(IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class Permission(IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


CLUSTER_NAME = "kafka-cluster"
WILDCARD = "*"
FILE_NAME = "acls.json"
# The class names that switch authorization on (Kafka 4's, and the ZooKeeper-era one).
AUTHORIZER_CLASSES = ("org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                      "kafka.security.authorizer.AclAuthorizer")
# ALLOW of these grants the key too.
_IMPLIED_BY = {
    Operation.DESCRIBE: (Operation.READ, Operation.WRITE, Operation.DELETE, Operation.ALTER),
    Operation.DESCRIBE_CONFIGS: (Operation.ALTER_CONFIGS,),
}


@dataclass(frozen=True, slots=True)
class AclBinding:
    resource_type: ResourceType
    resource_name: str
    pattern_type: PatternType
    principal: str
    host: str
    operation: Operation
    permission: Permission

    def matches_resource(self, resource_type: ResourceType, name: str) -> bool:
        if self.resource_type != resource_type:
            return False
        if self.pattern_type == PatternType.LITERAL:
            return self.resource_name == name or self.resource_name == WILDCARD
        return name.startswith(self.resource_name)  # PREFIXED


@dataclass(frozen=True, slots=True)
class AclFilter:
    """What DescribeAcls and DeleteAcls select: ANY (and null names) match everything;
    pattern MATCH selects the ACLs that would apply to the named resource."""

    resource_type: ResourceType
    resource_name: str | None
    pattern_type: PatternType
    principal: str | None
    host: str | None
    operation: Operation
    permission: Permission

    def matches(self, acl: AclBinding) -> bool:
        if self.resource_type != ResourceType.ANY and acl.resource_type != self.resource_type:
            return False
        if self.pattern_type == PatternType.MATCH:
            if self.resource_name is not None and not acl.matches_resource(acl.resource_type, self.resource_name):
                return False
        else:
            if self.pattern_type != PatternType.ANY and acl.pattern_type != self.pattern_type:
                return False
            if self.resource_name is not None and acl.resource_name != self.resource_name:
                return False
        if self.principal is not None and acl.principal != self.principal:
            return False
        if self.host is not None and acl.host != self.host:
            return False
        if self.operation != Operation.ANY and acl.operation != self.operation:
            return False
        return self.permission == Permission.ANY or acl.permission == self.permission


class Authorizer:
    def __init__(self, data_dir: str, super_users: frozenset[str], allow_if_no_acl: bool) -> None:
        self.path = os.path.join(data_dir, FILE_NAME)
        self.super_users = super_users
        self.allow_if_no_acl = allow_if_no_acl
        # Counts every change of the ACLs: the Metadata answers the broker keeps
        # (broker/handlers/metadata.py) are good while it stands still.
        self.changes = 0
        self._acls: list[AclBinding] = []
        for item in read_json(self.path, []):
            self._acls.append(AclBinding(ResourceType[item["resource_type"]], item["resource_name"],
                                         PatternType[item["pattern_type"]], item["principal"], item["host"],
                                         Operation[item["operation"]], Permission[item["permission"]]))

    @property
    def acls(self) -> list[AclBinding]:
        return list(self._acls)

    def authorize(self, principal: str, host: str, operation: Operation, resource_type: ResourceType,
                  name: str) -> bool:
        if principal in self.super_users:
            return True
        on_resource = [acl for acl in self._acls if acl.matches_resource(resource_type, name)]
        if not on_resource:
            return self.allow_if_no_acl
        applying = [acl for acl in on_resource
                    if acl.principal in (principal, "User:*") and acl.host in (host, WILDCARD)]
        if any(acl.permission == Permission.DENY and acl.operation in (operation, Operation.ALL) for acl in applying):
            return False
        granting = (operation, Operation.ALL, *_IMPLIED_BY.get(operation, ()))
        return any(acl.permission == Permission.ALLOW and acl.operation in granting for acl in applying)

    def authorize_any(self, principal: str, host: str, operation: Operation, resource_type: ResourceType) -> bool:
        """Whether some resource of the type allows the operation (Kafka's
        authorizeByResourceType: an idempotent producer needs WRITE on some topic)."""
        if principal in self.super_users:
            return True
        candidates = {acl.resource_name for acl in self._acls if acl.resource_type == resource_type
                      and acl.permission == Permission.ALLOW}
        return any(self.authorize(principal, host, operation, resource_type, name) for name in candidates)

    def add(self, acls: list[AclBinding]) -> None:
        for acl in acls:
            if acl not in self._acls:
                self._acls.append(acl)
        self.changes += 1
        self._save()

    def delete(self, filters: list[AclFilter]) -> list[list[AclBinding]]:
        """Delete what each filter selects; per filter, what it deleted."""
        deleted = [[acl for acl in self._acls if f.matches(acl)] for f in filters]
        gone = {acl for group in deleted for acl in group}
        if gone:
            self._acls = [acl for acl in self._acls if acl not in gone]
            self.changes += 1
            self._save()
        return deleted

    def describe(self, acl_filter: AclFilter) -> list[AclBinding]:
        return [acl for acl in self._acls if acl_filter.matches(acl)]

    def _save(self) -> None:
        data = [{key: (value.name if isinstance(value, IntEnum) else value) for key, value in asdict(acl).items()}
                for acl in self._acls]
        write_json(self.path, data, mode=0o600)  # who may do what: the owner's alone


def parse_super_users(text: str | None) -> frozenset[str]:
    """`super.users`: principals separated by semicolons."""
    return frozenset(p.strip() for p in (text or "").split(";") if p.strip())
