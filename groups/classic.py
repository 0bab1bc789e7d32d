"""Kafka's classic group protocol (JoinGroup / SyncGroup / Heartbeat / LeaveGroup /
OffsetCommit / OffsetFetch) on the same group rows as HTTP groups, behind the seam in
cluster/kafka_groups.py.

The mapping onto the KIP-848 model (groups/reconcile.py):
- a generation is the member's epoch: every JoinGroup of a member starts a new one, and
  SyncGroup, Heartbeat and OffsetCommit must name it (else ILLEGAL_GENERATION);
- the assignment is computed here, by the server-side assignor of the name the client's
  protocol carries (range, roundrobin, sticky, cooperative-sticky), not by a client leader:
  JoinGroup names no member the leader, so no client runs its assignor, and SyncGroup hands
  each member its own share. So no per-member protocol bytes need storing;
- the safety rule stays: a member is granted only partitions no other member holds; a member
  whose target differs from what it holds is told REBALANCE_IN_PROGRESS at its next
  heartbeat and rejoins (an eager member gives up everything first, a cooperative one
  reports what it keeps), until every member holds its target.
"""

from __future__ import annotations

import asyncio
import functools
import uuid
from collections.abc import Sequence
from typing import TypeVar

from cluster.kafka_groups import (
    ClassicGroupError,
    CommitEntry,
    ConsumerAssigned,
    ConsumerHeartbeat,
    GroupDescription,
    Joined,
    JoinGroup,
    MemberAssignment,
    Synced,
)
from groups import client_assigned, consumer_protocol, kafka_admin, reconcile
from groups.assignors import ASSIGNORS
from groups.coordinator import MAX_MEMBERS, GroupCoordinator, _Draft, _unknown_member
from groups.deps import Blocking
from groups.requests import (
    MAX_SESSION_MS,
    MAX_TOPICS,
    MIN_SESSION_MS,
    CommitRequest,
    OffsetEntry,
    group_name,
)
from groups.requests import member_id as valid_member
from logformat.errors import ErrorCode, TierlogError
from metadata.configs import validate_topic_name
from metadata.types import (
    ConsumerGroupMember,
    GroupSnapshot,
    GroupWrite,
    KafkaMembership,
    TopicNamePartition,
)

T = TypeVar("T")
ROUND_POLL_S = 0.05  # how often a member waiting in a client-assigned round looks again
Outcome = TierlogError | ClassicGroupError


def _raise(outcome: T | Outcome) -> T:
    if isinstance(outcome, TierlogError | ClassicGroupError):
        raise outcome
    return outcome


def _illegal_generation(member: ConsumerGroupMember, generation: int) -> ClassicGroupError:
    return ClassicGroupError(
        "ILLEGAL_GENERATION",
        f"member {member.member_id!r} is at generation {member.member_epoch}, not "
        f"{generation}: rejoin",
    )


def pick_assignor(assignors: Sequence[str]) -> str:
    """The first of the client's protocols the server can run."""
    for name in assignors:
        if name in ASSIGNORS:
            return name
    raise ClassicGroupError(
        "INCONSISTENT_GROUP_PROTOCOL",
        f"none of the protocols {', '.join(assignors) or '(none)'} is served: use one of "
        f"{', '.join(sorted(ASSIGNORS))}",
    )


def _member_of(d: _Draft, member_id: str, generation: int) -> ConsumerGroupMember | Outcome:
    member = d.members.get(member_id)
    if member is None:
        return _unknown_member(member_id)
    if generation != member.member_epoch:
        return _illegal_generation(member, generation)
    return member


class ClassicCoordinator:
    """Blocking decisions, one locked transaction each (as GroupCoordinator's)."""

    def __init__(self, coordinator: GroupCoordinator) -> None:
        self.coordinator = coordinator
        self.repo = coordinator.repo

    def join(self, group: str, req: JoinGroup) -> Joined | str:
        """A server-assigned member's answer, or (client-assigned) the member's id, whose
        answer await_join gives once its round closes."""
        req = req._replace(topics=tuple(sorted({validate_topic_name(t) for t in req.topics})))
        if len(req.topics) > MAX_TOPICS:
            raise TierlogError(
                ErrorCode.INVALID_REQUEST, f"a subscription names at most {MAX_TOPICS} topics"
            )
        timeout = min(max(req.session_timeout_ms, MIN_SESSION_MS), MAX_SESSION_MS)
        req = req._replace(session_timeout_ms=timeout)
        create = next((a for a in req.assignors if a in ASSIGNORS), None)

        def decide(snap: GroupSnapshot | None) -> tuple[GroupWrite, Joined | str | Outcome]:
            assert snap is not None  # created if missing
            d = _Draft(snap)
            d.expire()
            if client_assigned.client_assigned(d, req.member_id):
                member_or_error = client_assigned.join(d, group, req)
                return d.finish(), member_or_error
            try:
                assignor = pick_assignor(req.assignors)
            except ClassicGroupError as exc:
                return d.finish(), exc
            kafka = KafkaMembership(req.protocols, None, None, req.rebalance_timeout_ms)
            if req.member_id:
                old = d.members.get(req.member_id)
                if old is None:
                    return d.finish(), _unknown_member(req.member_id)
                # A new generation: the member holds only what it reports (an eager member
                # revoked everything before rejoining).
                owned = reconcile.credible_owned(req.owned, old)
                member = old._replace(
                    member_epoch=old.member_epoch + 1, assigned={}, owned=owned, topics=req.topics
                )
            elif len(d.members) >= MAX_MEMBERS:
                return d.finish(), TierlogError(
                    ErrorCode.GROUP_MAX_SIZE_REACHED, f"group {group!r} has {MAX_MEMBERS} members"
                )
            else:
                now = snap.now
                member = ConsumerGroupMember(
                    uuid.uuid4().hex, 1, req.topics, assignor, timeout, now, now, now, {}, {}, {}
                )
                d.membership_changed = True
            member = member._replace(assignor=assignor, session_timeout_ms=timeout, kafka=kafka)
            d.put(d.renew(member))
            d.rebalance(force=bool(req.member_id))
            m = d.grant(member.member_id, bump=False)
            chosen = d.group.assignor if d.group.assignor in req.assignors else assignor
            return d.finish(), Joined(m.member_id, m.member_epoch, chosen)

        default = create or self.coordinator.default_assignor
        outcome: Joined | str | Outcome = self.repo.transact(
            group, decide, create=default, topics=req.topics
        )
        if isinstance(outcome, Outcome):
            raise outcome
        return outcome

    def await_join(self, group: str, member_id: str) -> Joined | None:
        def decide(snap: GroupSnapshot | None) -> tuple[GroupWrite, Joined | Outcome | None]:
            if snap is None:
                return GroupWrite(), _unknown_member(member_id)
            d = _Draft(snap)
            answer = client_assigned.await_join(d, group, member_id)
            return d.finish(), answer

        return _raise(self.repo.transact(group, decide))

    def sync(
        self,
        group: str,
        member_id: str,
        generation: int,
        assignments: Sequence[MemberAssignment] = (),
    ) -> Synced | None:
        """The member's assignment; None while its leader has not sent it."""

        def decide(snap: GroupSnapshot | None) -> tuple[GroupWrite, Synced | Outcome | None]:
            if snap is None:
                return GroupWrite(), _unknown_member(member_id)
            d = _Draft(snap)
            if client_assigned.client_assigned(d):
                got = client_assigned.sync(d, group, member_id, generation, assignments)
                return d.finish(), Synced((), got) if isinstance(got, bytes) else got
            d.expire()
            d.rebalance()
            member = _member_of(d, member_id, generation)
            if not isinstance(member, ConsumerGroupMember):
                return d.finish(), member
            d.put(d.renew(member._replace(owned=member.assigned)))  # it takes them now
            return d.finish(), Synced(tuple(sorted(reconcile.to_set(member.assigned))))

        return _raise(self.repo.transact(group, decide))

    def heartbeat(self, group: str, member_id: str, generation: int) -> None:
        def decide(snap: GroupSnapshot | None) -> tuple[GroupWrite, Outcome | None]:
            if snap is None:
                return GroupWrite(), _unknown_member(member_id)
            d = _Draft(snap)
            if client_assigned.client_assigned(d):
                error = client_assigned.heartbeat(d, group, member_id, generation)
                return d.finish(), error
            d.expire()
            member = _member_of(d, member_id, generation)
            if not isinstance(member, ConsumerGroupMember):
                return d.finish(), member
            d.put(d.renew(member._replace(owned=member.assigned)))
            d.rebalance()
            m = d.members[member_id]
            if m.target != m.assigned:
                return d.finish(), ClassicGroupError(
                    "REBALANCE_IN_PROGRESS",
                    f"group {group!r} is rebalancing (generation {d.group.group_epoch}): rejoin",
                )
            return d.finish(), None

        _raise(self.repo.transact(group, decide))

    def commit(
        self, group: str, member_id: str | None, generation: int, offsets: Sequence[CommitEntry]
    ) -> None:
        entries = tuple(OffsetEntry(o.topic, o.partition, o.offset, o.metadata) for o in offsets)
        req = CommitRequest(member_id or None, generation if member_id else None, entries)
        try:
            self.coordinator.commit(group, req)
        except TierlogError as exc:
            if exc.code in (ErrorCode.STALE_MEMBER_EPOCH, ErrorCode.FENCED_MEMBER_EPOCH):
                raise ClassicGroupError("ILLEGAL_GENERATION", exc.message) from None
            raise

    def commit_transactional(self, group: str, offsets: Sequence[CommitEntry]) -> None:
        entries = tuple(OffsetEntry(o.topic, o.partition, o.offset, o.metadata) for o in offsets)
        self.coordinator.commit_transactional(group, entries)

    def committed(self, group: str) -> tuple[CommitEntry, ...]:
        rows = self.repo.offsets(group) or []
        return tuple(CommitEntry(r.topic, r.partition, r.offset, r.metadata) for r in rows)


class KafkaClassicGroups:
    """``cluster.kafka_groups.ClassicGroups`` over ClassicCoordinator, off the event loop.
    Names are checked first, as HTTP's are (groups/requests.py): bad ones are the caller's
    INVALID_GROUP_ID / UNKNOWN_MEMBER_ID, never a database error."""

    def __init__(self, coordinator: GroupCoordinator, run: Blocking) -> None:
        self.classic = ClassicCoordinator(coordinator)
        self.run = run

    async def join(self, group: str, req: JoinGroup) -> Joined:
        if req.member_id:
            valid_member(req.member_id)
        group = group_name(group)
        joined: Joined | str = await self.run(self.classic.join, group, req)
        while isinstance(joined, str):  # a client-assigned round: wait for it to close
            answer: Joined | None = await self.run(self.classic.await_join, group, joined)
            if answer is not None:
                return answer
            await asyncio.sleep(ROUND_POLL_S)
        return joined

    async def sync(
        self,
        group: str,
        member: str,
        generation: int,
        assignments: Sequence[MemberAssignment] = (),
    ) -> Synced:
        group, member = group_name(group), valid_member(member)
        while True:  # bounded by the round's deadline (groups/client_assigned.py)
            got: Synced | None = await self.run(
                self.classic.sync, group, member, generation, assignments
            )
            if got is not None:
                return got
            assignments = ()  # stored: the leader now waits as any member
            await asyncio.sleep(ROUND_POLL_S)

    async def heartbeat(self, group: str, member: str, generation: int) -> None:
        await self.run(self.classic.heartbeat, group_name(group), valid_member(member), generation)

    async def leave(self, group: str, member: str) -> None:
        await self.run(self.classic.coordinator.leave, group_name(group), valid_member(member))

    async def commit(
        self, group: str, member: str | None, generation: int, offsets: Sequence[CommitEntry]
    ) -> None:
        member = valid_member(member) if member else None
        await self.run(self.classic.commit, group_name(group), member, generation, offsets)

    async def commit_transactional(self, group: str, offsets: Sequence[CommitEntry]) -> None:
        await self.run(self.classic.commit_transactional, group_name(group), offsets)

    async def committed(self, group: str) -> tuple[CommitEntry, ...]:
        rows: tuple[CommitEntry, ...] = await self.run(self.classic.committed, group_name(group))
        return rows

    async def consumer_heartbeat(self, group: str, hb: ConsumerHeartbeat) -> ConsumerAssigned:
        if hb.member_id or hb.member_epoch != 0:
            valid_member(hb.member_id)
        got: ConsumerAssigned = await self.run(
            consumer_protocol.heartbeat, self.classic.coordinator, group_name(group), hb
        )
        return got

    async def list_groups(self) -> tuple[GroupDescription, ...]:
        rows = await self.run(self.classic.repo.list)
        return tuple(
            GroupDescription(g.name, kafka_admin.summary_state(g.state, g.members), "", ())
            for g in rows
        )

    async def describe(self, group: str) -> GroupDescription:
        group = group_name(group)
        snap = await self.run(self.classic.repo.read, group)
        return kafka_admin.describe(group, snap)

    async def delete(self, group: str) -> None:
        await self.run(self.classic.coordinator.delete, group_name(group))

    async def delete_offsets(
        self, group: str, partitions: Sequence[TopicNamePartition]
    ) -> dict[TopicNamePartition, str | None]:
        group = group_name(group)

        def decide(
            snap: GroupSnapshot | None,
        ) -> tuple[GroupWrite, dict[TopicNamePartition, str | None] | TierlogError]:
            if snap is None:
                return GroupWrite(), TierlogError(
                    ErrorCode.GROUP_ID_NOT_FOUND, f"no consumer group {group!r}"
                )
            return kafka_admin.delete_offsets(snap, partitions)

        topics = {tp.topic for tp in partitions}
        transact = functools.partial(self.classic.repo.transact, topics=topics)
        answers: dict[TopicNamePartition, str | None] = _raise(
            await self.run(transact, group, decide)
        )
        return answers
