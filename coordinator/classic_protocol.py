"""Kafka's classic group protocol: JoinGroup, SyncGroup, Heartbeat, LeaveGroup and the
changes time makes (session expiry, the end of a rebalance window).

The broker does not compute assignments: it picks the protocol every member supports
(by the members' votes), hands the leader the member list in the JoinGroup answer, and
passes the leader's assignment to each member in SyncGroup. The group's record is
written to `__consumer_offsets` when a generation gets its assignment and when the
group empties, which is what a restart brings back.

JoinGroup and SyncGroup wait (asyncio futures) for the rest of the group; everything
else answers at once. Time-driven changes happen in `tick`, which the coordinator calls
periodically for each classic group.

The protocol holds no groups: the registry (groups.py) looks them up and hands them in,
and gives it the two things it needs from outside, a way to register a new group and a
way to write the group's records (writes.py: appended, then replayed into the group by
ClassicGroup.replay, as at start-up). The two changes that write are a generation's
assignment (the leader's SyncGroup) and a generation that ends with no member; each is
decided first, and made by the replay of its record. The rest of a rebalance (who has
joined, who waits, the timers) is not in the log, as in Kafka, and changes in memory.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from typing import Any

from ottla.protocol.errors import ErrorCode, KafkaError
from ottla.protocol.loggers import get_logger

from .classic_group import ClassicGroup, GroupState, JoinRequest, JoinResult, Member, SyncResult
from .group import GroupConfig
from .writes import CoordinatorResult

# Writes a result to the group's `__consumer_offsets` partition (records, then the change).
Write = Callable[[str, CoordinatorResult[Any]], Any]

log = get_logger("ottla.groups")


class ClassicProtocol:
    def __init__(self, config: GroupConfig, register: Callable[[ClassicGroup], None], write: Write,
                 clock: Callable[[], float] = time.monotonic, wall_clock: Callable[[], float] = time.time) -> None:
        self.config = config
        self.register = register
        self.write = write
        self.clock = clock
        self.wall_clock = wall_clock

    def _now_ms(self) -> int:
        return int(self.wall_clock() * 1000)

    # --- joining -------------------------------------------------------------------------

    async def join(self, request: JoinRequest, group: ClassicGroup | None) -> JoinResult:
        """JoinGroup, for the group of that id (None if there is none yet). A request
        refused raises KafkaError; the result's error is the group's answer
        (MEMBER_ID_REQUIRED with the new member id, or why this member was dropped
        while it waited)."""
        member_id = request.member_id
        group = self.joinable(request, group)
        # A new group exists once a request was not refused (as in Kafka, the group of
        # a rebalance that has not ended is in memory only).
        self.register(group)
        now = self.clock()

        if request.group_instance_id is not None:
            known = group.static_members.get(request.group_instance_id)
            if member_id and known is not None and member_id != known:
                raise KafkaError(ErrorCode.fenced_instance_id, f"{request.group_instance_id} now belongs to {known}")
            if not member_id:
                # A static member (re)joining: it takes a new member id; the old one, if
                # any, is replaced.
                member_id = f"{request.group_instance_id}-{uuid.uuid4()}"
                if known is not None:
                    self._remove_member(group, known, ErrorCode.fenced_instance_id)
                group.static_members[request.group_instance_id] = member_id
        elif not member_id:
            member_id = f"{request.client_id}-{uuid.uuid4()}"
            if request.require_known_member_id:
                # KIP-394: the client must come back with this id, so a member that never
                # returns does not hold up the rebalance.
                group.pending_members[member_id] = now + request.session_timeout_ms / 1000
                return JoinResult(ErrorCode.member_id_required, member_id)
        elif member_id in group.pending_members:
            del group.pending_members[member_id]
        elif member_id not in group.members:
            raise KafkaError(ErrorCode.unknown_member_id, f"{member_id!r} is not a member of {group.group_id!r}")

        member = group.members.get(member_id)
        if member is None:
            member = Member(member_id, request.group_instance_id, request.client_id, request.client_host,
                            request.session_timeout_ms, request.rebalance_timeout_ms, request.protocol_type,
                            list(request.protocols), last_heartbeat=now)
            group.members[member_id] = member
            if group.is_(GroupState.EMPTY):
                group.protocol_type = request.protocol_type
            self._prepare_rebalance(group, f"member {member_id} joined")
        else:
            changed = member.protocols != list(request.protocols)
            member.protocols = list(request.protocols)
            member.session_timeout_ms = request.session_timeout_ms
            member.rebalance_timeout_ms = request.rebalance_timeout_ms
            member.last_heartbeat = now
            if group.is_(GroupState.STABLE) and not changed and member_id != group.leader_id:
                # A follower rejoining with what it had: answer with the current generation.
                return self._join_result(group, member)
            self._prepare_rebalance(group, f"member {member_id} rejoined")
        waiter: asyncio.Future[JoinResult] = asyncio.get_running_loop().create_future()
        member.join_waiter = waiter
        self._maybe_complete_join(group)
        return await waiter

    def joinable(self, request: JoinRequest, group: ClassicGroup | None) -> ClassicGroup:
        """The group a JoinGroup joins (a new one, not registered, for None), or the
        KafkaError that refuses the request whatever the group's members do."""
        if not self.config.min_session_timeout_ms <= request.session_timeout_ms <= self.config.max_session_timeout_ms:
            raise KafkaError(ErrorCode.invalid_session_timeout,
                             f"session timeout {request.session_timeout_ms} ms is outside the broker's bounds")
        if group is None:
            if request.member_id and request.group_instance_id is None:
                raise KafkaError(ErrorCode.unknown_member_id, f"group {request.group_id!r} does not exist")
            group = ClassicGroup(request.group_id)
        if not group.supports(request.protocol_type, request.protocols):
            raise KafkaError(ErrorCode.inconsistent_group_protocol, "no protocol in common with the group's")
        return group

    @staticmethod
    def _join_result(group: ClassicGroup, member: Member) -> JoinResult:
        members = []
        if member.member_id == group.leader_id:
            members = [(m.member_id, m.group_instance_id, m.metadata(group.protocol_name))
                       for m in group.members.values()]
        return JoinResult(ErrorCode.none, member.member_id, group.generation, group.protocol_type,
                          group.protocol_name, group.leader_id or "", members)

    def _prepare_rebalance(self, group: ClassicGroup, reason: str) -> None:
        if group.is_(GroupState.PREPARING_REBALANCE):
            return  # already collecting members; the window stays as it was
        now = self.clock()
        if group.is_(GroupState.COMPLETING_REBALANCE):
            # Members waiting for their assignment must rejoin instead.
            for m in group.members.values():
                self._resolve_sync(m, SyncResult(ErrorCode.rebalance_in_progress))
        was_empty = group.is_(GroupState.EMPTY)
        group.state = GroupState.PREPARING_REBALANCE
        timeout = max((m.rebalance_timeout_ms for m in group.members.values()), default=0) / 1000
        group.rebalance_deadline = now + timeout
        if was_empty:
            # Kafka waits a little for more members of a new group before the first
            # rebalance (group.initial.rebalance.delay.ms).
            delay = self.config.initial_rebalance_delay_ms / 1000
            group.initial_delay_until = now + delay
            group.rebalance_deadline = max(now + min(delay, timeout), now)

    def _maybe_complete_join(self, group: ClassicGroup, deadline_passed: bool = False) -> None:
        if not group.is_(GroupState.PREPARING_REBALANCE):
            return
        now = self.clock()
        if now < group.initial_delay_until and not deadline_passed:
            return
        everyone_joined = all(m.join_waiter is not None and not m.join_waiter.done() for m in group.members.values())
        if not (everyone_joined and not group.pending_members) and not deadline_passed:
            return
        late = [member_id for member_id, member in group.members.items()
                if member.join_waiter is None or member.join_waiter.done()]
        if len(late) == len(group.members):
            self.write(group.group_id, self._emptied(group, late))
            return
        for member_id in late:
            self._remove_member(group, member_id, ErrorCode.unknown_member_id)
        group.pending_members.clear()
        group.generation += 1
        group.state = GroupState.COMPLETING_REBALANCE
        group.protocol_name = group.select_protocol()
        if group.leader_id not in group.members:
            group.leader_id = next(iter(group.members))
        for member in group.members.values():
            member.assignment = b""
            member.last_heartbeat = now
            waiter = member.join_waiter
            member.join_waiter = None
            if waiter is not None and not waiter.done():
                waiter.set_result(self._join_result(group, member))

    def _emptied(self, group: ClassicGroup, leaving: list[str]) -> CoordinatorResult[None]:
        """The generation ends with no member: `leaving` (every member the group has)
        go, and the group's next generation, empty, is recorded (its replay removes
        them); whatever they wait for is answered."""
        members = [group.members[member_id] for member_id in leaving]

        def then() -> None:
            for member in members:
                self._answer_removed(member, ErrorCode.unknown_member_id)
            group.pending_members.clear()

        return CoordinatorResult([group.empty_record(self._now_ms())], None, then)

    def _departure(self, group: ClassicGroup, leaving: list[str], reason: str) -> CoordinatorResult[None]:
        """Members that left or whose session expired: the group rebalances without
        them, or ends its generation empty when none is left."""
        if leaving and set(group.members) <= set(leaving):
            return self._emptied(group, leaving)

        def then() -> None:
            # Not recorded: the group's record changes with the next generation's.
            for member_id in leaving:
                self._remove_member(group, member_id, ErrorCode.unknown_member_id)
                self._after_departure(group, f"member {member_id} {reason}")

        return CoordinatorResult([], None, then)

    def _remove_member(self, group: ClassicGroup, member_id: str, error: ErrorCode) -> None:
        member = group.members.pop(member_id, None)
        if member is None:
            return
        if member.group_instance_id and group.static_members.get(member.group_instance_id) == member_id:
            del group.static_members[member.group_instance_id]
        self._answer_removed(member, error)
        if group.leader_id == member_id:
            group.leader_id = next(iter(group.members), None)

    def _answer_removed(self, member: Member, error: ErrorCode) -> None:
        """A member is no longer in the group: what it waits for is answered `error`."""
        if member.join_waiter is not None and not member.join_waiter.done():
            member.join_waiter.set_result(JoinResult(error, member.member_id))
        self._resolve_sync(member, SyncResult(error))

    @staticmethod
    def _resolve_sync(member: Member, result: SyncResult) -> None:
        if member.sync_waiter is not None and not member.sync_waiter.done():
            member.sync_waiter.set_result(result)
        member.sync_waiter = None

    # --- syncing, heartbeats, leaving -------------------------------------------------------

    @staticmethod
    def _member(group: ClassicGroup | None, member_id: str, group_instance_id: str | None,
                generation: int) -> tuple[ClassicGroup, Member]:
        if group is None:
            raise KafkaError(ErrorCode.unknown_member_id, "no such group")
        return group, group.check_member(member_id, group_instance_id, generation)

    async def sync(self, group: ClassicGroup | None, member_id: str, group_instance_id: str | None, generation: int,
                   protocol_type: str | None, protocol_name: str | None,
                   assignments: dict[str, bytes]) -> SyncResult:
        group, member = self._member(group, member_id, group_instance_id, generation)
        if (protocol_type is not None and protocol_type != group.protocol_type) or (
                protocol_name is not None and protocol_name != group.protocol_name):
            raise KafkaError(ErrorCode.inconsistent_group_protocol, "protocol differs from the group's")
        member.last_heartbeat = self.clock()
        if group.is_(GroupState.PREPARING_REBALANCE):
            raise KafkaError(ErrorCode.rebalance_in_progress, "the group is rebalancing")
        if group.is_(GroupState.STABLE):
            return SyncResult(ErrorCode.none, member.assignment, group.protocol_type, group.protocol_name)
        waiter: asyncio.Future[SyncResult] = asyncio.get_running_loop().create_future()
        member.sync_waiter = waiter
        if member_id == group.leader_id:
            assigned = {m: assignments.get(m, b"") for m in group.members}
            try:
                self.write(group.group_id, CoordinatorResult([group.record(self._now_ms(), assigned)], None,
                                                             lambda: self._hand_out(group)))
            except KafkaError as exc:
                # As Kafka: every member waiting for this generation's assignment gets
                # the error, and the group rebalances.
                for m in group.members.values():
                    m.assignment = b""
                    self._resolve_sync(m, SyncResult(exc.code))
                self._prepare_rebalance(group, f"the assignment could not be written: {exc.code.name}")
        return await waiter

    def _hand_out(self, group: ClassicGroup) -> None:
        """The generation's assignment is in the log and replayed (the group is Stable):
        hand every member its part."""
        for m in group.members.values():
            self._resolve_sync(m, SyncResult(ErrorCode.none, m.assignment, group.protocol_type, group.protocol_name))

    def leave(self, group: ClassicGroup | None, members: list[tuple[str, str | None]]) -> list[ErrorCode]:
        """LeaveGroup for (member id, group instance id) pairs: an error code for each.
        The departures are one change: if their record cannot be written, none is made
        and the KafkaError is raised."""
        if group is None:
            raise KafkaError(ErrorCode.unknown_member_id, "no such group")
        codes = []
        leaving: list[str] = []
        pending: list[str] = []
        for member_id, instance_id in members:
            if instance_id is not None:
                known = group.static_members.get(instance_id)
                if known is None or known in leaving:
                    codes.append(ErrorCode.unknown_member_id)
                    continue
                if member_id and member_id != known:
                    codes.append(ErrorCode.fenced_instance_id)
                    continue
                member_id = known
            if member_id in group.pending_members and member_id not in pending:
                pending.append(member_id)
                codes.append(ErrorCode.none)
            elif member_id in group.members and member_id not in leaving:
                leaving.append(member_id)
                codes.append(ErrorCode.none)
            else:
                codes.append(ErrorCode.unknown_member_id)
        departure = self._departure(group, leaving, "left")

        def then() -> None:
            for member_id in pending:
                group.pending_members.pop(member_id, None)
            departure.then()

        return self.write(group.group_id, CoordinatorResult(departure.records, codes, then))

    def _after_departure(self, group: ClassicGroup, reason: str) -> None:
        if group.is_(GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._prepare_rebalance(group, reason)
        self._maybe_complete_join(group, deadline_passed=not group.members)

    def tick(self, group: ClassicGroup) -> list[str]:
        """Expire the group's members whose session ran out and finish its rebalance if
        the window closed. Returns the member ids expired. A change whose record cannot
        be written is not made: the next tick tries again."""
        now = self.clock()
        expired = []
        for member_id, deadline in list(group.pending_members.items()):
            if deadline < now:
                del group.pending_members[member_id]
        try:
            for member_id, member in list(group.members.items()):
                if not member.awaiting and member.last_heartbeat + member.session_timeout_ms / 1000 < now:
                    self.write(group.group_id, self._departure(group, [member_id], "session expired"))
                    expired.append(member_id)
            if group.is_(GroupState.PREPARING_REBALANCE):
                self._maybe_complete_join(group, deadline_passed=now >= group.rebalance_deadline)
        except KafkaError as exc:
            log.warning("group not changed: its record cannot be written", group=group.group_id,
                        error=exc.code.name)
        return expired
