"""The authorizer's decisions, as Kafka's StandardAuthorizer makes them."""

from __future__ import annotations

from ottla.broker.security.authorizer import AclBinding, AclFilter, Authorizer, PatternType, Permission
from ottla.broker.security.authorizer import Operation as Op
from ottla.broker.security.authorizer import ResourceType as RT

ALLOW, DENY = Permission.ALLOW, Permission.DENY


def _acl(principal: str, op: Op, name: str, permission: Permission = ALLOW, *, rt: RT = RT.TOPIC,
         pattern: PatternType = PatternType.LITERAL, host: str = "*") -> AclBinding:
    return AclBinding(rt, name, pattern, principal, host, op, permission)


def test_rules(tmp_path):
    authorizer = Authorizer(str(tmp_path), frozenset({"User:root"}), allow_if_no_acl=False)
    authorizer.add([
        _acl("User:alice", Op.READ, "orders"),
        _acl("User:alice", Op.WRITE, "logs-", pattern=PatternType.PREFIXED),
        _acl("User:*", Op.DESCRIBE, "*"),
        _acl("User:bob", Op.ALL, "orders"),
        _acl("User:bob", Op.WRITE, "orders", DENY),
        _acl("User:carol", Op.READ, "orders", host="10.0.0.1"),
        _acl("User:dave", Op.ALTER_CONFIGS, "orders"),
    ])

    def may(principal: str, op: Op, name: str, host: str = "127.0.0.1") -> bool:
        return authorizer.authorize(principal, host, op, RT.TOPIC, name)

    assert may("User:alice", Op.READ, "orders") and not may("User:alice", Op.WRITE, "orders")
    assert may("User:alice", Op.WRITE, "logs-app") and not may("User:alice", Op.WRITE, "log")
    assert may("User:alice", Op.DESCRIBE, "logs-app")  # WRITE implies DESCRIBE
    assert may("User:anyone", Op.DESCRIBE, "orders")  # the wildcard resource and principal
    assert may("User:bob", Op.READ, "orders") and not may("User:bob", Op.WRITE, "orders")  # DENY wins over ALL
    assert may("User:carol", Op.READ, "orders", "10.0.0.1") and not may("User:carol", Op.READ, "orders", "10.0.0.2")
    assert may("User:dave", Op.DESCRIBE_CONFIGS, "orders") and not may("User:dave", Op.ALTER, "orders")
    assert may("User:root", Op.DELETE, "anything")  # a super user
    assert not authorizer.authorize("User:alice", "h", Op.READ, RT.GROUP, "no-acl-here")  # no ACL: refused
    assert Authorizer(str(tmp_path), frozenset(), allow_if_no_acl=True).authorize(
        "User:alice", "h", Op.READ, RT.GROUP, "no-acl-here")
    # Kept in the data directory.
    assert len(Authorizer(str(tmp_path), frozenset(), False).acls) == 7


def test_filters_select_as_kafkas_do(tmp_path):
    authorizer = Authorizer(str(tmp_path), frozenset(), False)
    authorizer.add([_acl("User:a", Op.READ, "orders"), _acl("User:a", Op.READ, "ord", pattern=PatternType.PREFIXED),
                    _acl("User:b", Op.WRITE, "*")])
    match = AclFilter(RT.TOPIC, "orders", PatternType.MATCH, None, None, Op.ANY, Permission.ANY)
    assert len(authorizer.describe(match)) == 3  # literal, prefix and wildcard all apply to "orders"
    literal = AclFilter(RT.ANY, "orders", PatternType.LITERAL, None, None, Op.ANY, Permission.ANY)
    assert len(authorizer.describe(literal)) == 1
    (deleted,) = authorizer.delete([AclFilter(RT.ANY, None, PatternType.ANY, "User:b", None, Op.ANY, Permission.ANY)])
    assert len(deleted) == 1 and len(authorizer.acls) == 2
