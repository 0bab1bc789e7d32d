"""The group coordinator: join, heartbeat, leave, commit, expire, reset — each one locked
transaction on the group (metadata/groups.py) deciding from what it read.

Stateless: any node answers any member, because everything lives in Postgres and each change
is decided under the group's row lock. Every change first removes members whose session
lapsed, so a dead member's partitions are freed by the next access to its group (and by the
periodic sweep, groups/sweeper.py, when nobody calls).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import timedelta
from typing import NamedTuple, TypeVar

from groups import reconcile
from groups.requests import CommitRequest, HeartbeatRequest, JoinRequest, OffsetEntry
from logformat.errors import ErrorCode, TierlogError
from metadata.groups import GroupRepo
from metadata.types import (
    ConsumerGroupMember,
    GroupSnapshot,
    GroupWrite,
    OffsetWrite,
    PartitionMap,
    TopicNamePartition,
)

T = TypeVar("T")
MAX_MEMBERS = 1000  # per group (Kafka's group.consumer.max.size is a broker setting too)


class Assigned(NamedTuple):
    member_id: str
    member_epoch: int
    heartbeat_interval_ms: int
    assignment: PartitionMap


class _Draft:
    """A working copy of a locked group; the operations edit it, finish() makes the write."""

    def __init__(self, snap: GroupSnapshot) -> None:
        self.snap = snap
        self.group = snap.group
        self.members = {m.member_id: m for m in snap.members}
        self.removed: list[str] = []
        self.membership_changed = False

    def expire(self) -> list[str]:
        lapsed = [m for m, v in self.members.items() if v.session_expires_at <= self.snap.now]
        for member_id in lapsed:
            self.remove(member_id)
        return lapsed

    def remove(self, member_id: str) -> None:
        del self.members[member_id]
        self.removed.append(member_id)
        self.membership_changed = True

    def put(self, member: ConsumerGroupMember) -> None:
        self.members[member.member_id] = member

    def renew(self, member: ConsumerGroupMember) -> ConsumerGroupMember:
        now = self.snap.now
        return member._replace(
            last_heartbeat_at=now,
            session_expires_at=now + timedelta(milliseconds=member.session_timeout_ms),
        )

    def rebalance(self, force: bool = False) -> None:
        """A new target (and group epoch) when membership, subscriptions or topics changed."""
        topics = reconcile.subscribed_topics(self.members.values(), self.snap.topics)
        if not (force or self.membership_changed or topics != self.group.subscribed):
            return
        assignor = reconcile.choose_assignor(self.members.values(), self.group.assignor)
        targets = reconcile.compute_targets(self.members.values(), topics, assignor)
        for member_id, target in targets.items():
            self.members[member_id] = self.members[member_id]._replace(target=target)
        self.membership_changed = False
        self.group = self.group._replace(
            group_epoch=self.group.group_epoch + 1, assignor=assignor, subscribed=topics
        )

    def grant(self, member_id: str, *, bump: bool = True) -> ConsumerGroupMember:
        """Tell the member what it may own now; its epoch moves when that changes."""
        member = self.members[member_id]
        others = [m for mid, m in self.members.items() if mid != member_id]
        assigned = reconcile.grantable(member, others)
        if assigned != member.assigned:
            epoch = member.member_epoch + 1 if bump else member.member_epoch
            member = member._replace(assigned=assigned, member_epoch=epoch)
            self.put(member)
        return member

    def finish(self, offsets: Sequence[OffsetWrite] = ()) -> GroupWrite:
        group = self.group._replace(state=reconcile.group_state(self.members.values()))
        before = {m.member_id: m for m in self.snap.members}
        return GroupWrite(
            group=group if group != self.snap.group else None,
            members=tuple(m for mid, m in self.members.items() if before.get(mid) != m),
            removed=tuple(m for m in self.removed if m in before),
            offsets=tuple(offsets),
        )


def _unknown_member(member_id: str) -> TierlogError:
    return TierlogError(
        ErrorCode.UNKNOWN_MEMBER_ID,
        f"member {member_id!r} is not in the group (it left, or its session lapsed): rejoin",
    )


def _offset_writes(snap: GroupSnapshot, entries: Sequence[OffsetEntry]) -> list[OffsetWrite]:
    writes = []
    for o in entries:
        meta = snap.topics.get(o.topic)
        if meta is None or o.partition >= meta.partitions:
            raise TierlogError(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"no partition {o.topic}-{o.partition}"
            )
        writes.append(OffsetWrite(meta.id, o.partition, o.offset, o.metadata))
    return writes


def _check(outcome: T | TierlogError) -> T:
    if isinstance(outcome, TierlogError):
        raise outcome
    return outcome


def _while_empty(snap: GroupSnapshot, group: str, what: str) -> tuple[_Draft, TierlogError | None]:
    """Admin changes need an empty group: expire lapsed members first (their sessions are
    over), then NON_EMPTY_GROUP if anyone is left. The draft carries the expiries."""
    d = _Draft(snap)
    d.expire()
    d.rebalance()
    if not d.members:
        return d, None
    return d, TierlogError(
        ErrorCode.NON_EMPTY_GROUP,
        f"group {group!r} has {len(d.members)} live member(s): {what} only while it is empty",
    )


class GroupCoordinator:
    def __init__(self, repo: GroupRepo, default_assignor: str) -> None:
        self.repo = repo
        self.default_assignor = default_assignor

    def join(self, group: str, req: JoinRequest) -> Assigned:
        member_id = req.member_id or uuid.uuid4().hex

        def decide(snap: GroupSnapshot | None) -> tuple[GroupWrite, Assigned]:
            assert snap is not None  # created if missing
            d = _Draft(snap)
            d.expire()
            if member_id in d.members:  # a client-named member joined twice at once
                raise TierlogError(
                    ErrorCode.UNKNOWN_MEMBER_ID, f"member {member_id!r} joined already: rejoin"
                )
            if len(d.members) >= MAX_MEMBERS:
                raise TierlogError(
                    ErrorCode.GROUP_MAX_SIZE_REACHED,
                    f"group {group!r} already has {MAX_MEMBERS} members",
                )
            now = snap.now
            member = ConsumerGroupMember(
                member_id=member_id,
                member_epoch=1,
                topics=req.topics,
                assignor=req.assignor,
                session_timeout_ms=req.session_timeout_ms,
                joined_at=now,
                last_heartbeat_at=now,
                session_expires_at=now,
                target={},
                assigned={},
                owned={},
            )
            d.put(d.renew(member))
            d.membership_changed = True
            d.rebalance()
            m = d.grant(member_id, bump=False)
            interval = reconcile.heartbeat_interval_ms(m.session_timeout_ms)
            return d.finish(), Assigned(member_id, m.member_epoch, interval, m.assigned)

        create = req.assignor or self.default_assignor
        return self.repo.transact(group, decide, create=create, topics=req.topics)

    def heartbeat(self, group: str, member_id: str, req: HeartbeatRequest) -> Assigned:
        def decide(snap: GroupSnapshot | None) -> tuple[GroupWrite, Assigned | TierlogError]:
            if snap is None:
                return GroupWrite(), _unknown_member(member_id)
            d = _Draft(snap)
            d.expire()
            member = d.members.get(member_id)
            if member is None:
                return d.finish(), _unknown_member(member_id)
            if req.member_epoch == 0:
                # KIP-848 rejoin: the member lost its state and holds only what it reports.
                owned = reconcile.credible_owned(req.owned or (), member)
                member = member._replace(assigned={}, owned=owned)
            elif req.member_epoch not in (member.member_epoch, member.member_epoch - 1):
                # The previous epoch is accepted: the answer that moved it may have been lost.
                error = TierlogError(
                    ErrorCode.FENCED_MEMBER_EPOCH,
                    f"member {member_id!r} is at epoch {member.member_epoch}, not "
                    f"{req.member_epoch}: give up its partitions and rejoin (member_epoch 0)",
                )
                return d.finish(), error
            elif req.owned is not None:  # None (Kafka's null): it still holds what it said
                member = member._replace(owned=reconcile.credible_owned(req.owned, member))
            resubscribed = req.topics is not None and req.topics != member.topics
            if req.topics is not None:
                member = member._replace(topics=req.topics)
            d.put(d.renew(member))
            d.rebalance(force=resubscribed)
            m = d.grant(member_id)
            interval = reconcile.heartbeat_interval_ms(m.session_timeout_ms)
            return d.finish(), Assigned(member_id, m.member_epoch, interval, m.assigned)

        return _check(self.repo.transact(group, decide, topics=req.topics or ()))

    def leave(self, group: str, member_id: str) -> None:
        def decide(snap: GroupSnapshot | None) -> tuple[GroupWrite, TierlogError | None]:
            if snap is None:
                return GroupWrite(), _unknown_member(member_id)
            d = _Draft(snap)
            d.expire()
            if member_id not in d.members:
                return d.finish(), _unknown_member(member_id)
            d.remove(member_id)
            d.rebalance()
            return d.finish(), None

        _check(self.repo.transact(group, decide))

    def expire(self, group: str) -> list[str]:
        """Remove the group's lapsed members (and re-target the rest); their ids."""

        def decide(snap: GroupSnapshot | None) -> tuple[GroupWrite, list[str]]:
            if snap is None:
                return GroupWrite(), []
            d = _Draft(snap)
            gone = d.expire()
            d.rebalance()
            return d.finish(), gone

        return self.repo.transact(group, decide)

    def commit(self, group: str, req: CommitRequest) -> tuple[OffsetEntry, ...]:
        """Commit offsets: as a member, for partitions it may own, at its current epoch; or
        outside membership (no member id) while the group has no members (Kafka's simple
        consumer commits)."""
        topics = {o.topic for o in req.offsets}

        def decide(snap: GroupSnapshot | None) -> tuple[GroupWrite, TierlogError | None]:
            if snap is None:
                return GroupWrite(), _unknown_member(req.member_id or "")
            d = _Draft(snap)
            d.expire()
            d.rebalance()
            writes = _offset_writes(snap, req.offsets)  # unknown partitions first: a 404
            error = self._fence_commit(d, req)
            if error is not None:
                return d.finish(), error
            return d.finish(writes), None

        create = None if req.member_id is not None else self.default_assignor
        _check(self.repo.transact(group, decide, create=create, topics=topics))
        return req.offsets

    def commit_transactional(self, group: str, offsets: Sequence[OffsetEntry]) -> None:
        """A committed Kafka transaction's offsets (TxnOffsetCommit, applied at EndTxn): no
        member or epoch fence, as Kafka's group coordinator applies them then."""

        def decide(snap: GroupSnapshot | None) -> tuple[GroupWrite, TierlogError | None]:
            if snap is None:
                return GroupWrite(), _unknown_member("")
            return _Draft(snap).finish(_offset_writes(snap, offsets)), None

        topics = {o.topic for o in offsets}
        _check(self.repo.transact(group, decide, create=self.default_assignor, topics=topics))

    @staticmethod
    def _fence_commit(d: _Draft, req: CommitRequest) -> TierlogError | None:
        if req.member_id is None:
            if d.members:
                return TierlogError(
                    ErrorCode.UNKNOWN_MEMBER_ID,
                    "the group has members: commit with a member_id and member_epoch",
                )
            return None
        member = d.members.get(req.member_id)
        if member is None:
            return _unknown_member(req.member_id)
        if req.member_epoch != member.member_epoch:
            return TierlogError(
                ErrorCode.STALE_MEMBER_EPOCH,
                f"member {req.member_id!r} is at epoch {member.member_epoch}, not "
                f"{req.member_epoch}: heartbeat for the current assignment, then commit",
            )
        mine = reconcile.to_set(member.assigned) | reconcile.to_set(member.owned)
        foreign = [
            f"{o.topic}-{o.partition}"
            for o in req.offsets
            if TopicNamePartition(o.topic, o.partition) not in mine
        ]
        if foreign:
            return TierlogError(
                ErrorCode.STALE_MEMBER_EPOCH,
                f"member {req.member_id!r} does not own {', '.join(foreign[:10])} at epoch "
                f"{member.member_epoch}",
            )
        return None

    def delete(self, group: str) -> None:
        """Kafka's DeleteGroups: the group and its committed offsets go, only while it has no
        live members (members whose session lapsed are expired first)."""

        def decide(snap: GroupSnapshot | None) -> tuple[GroupWrite, TierlogError | None]:
            if snap is None:
                return GroupWrite(), TierlogError(
                    ErrorCode.GROUP_ID_NOT_FOUND, f"no consumer group {group!r}"
                )
            d, busy = _while_empty(snap, group, "a group can be deleted")
            return (d.finish(), busy) if busy else (GroupWrite(delete_group=True), None)

        _check(self.repo.transact(group, decide))

    def reset(self, group: str, offsets: Sequence[OffsetEntry]) -> None:
        """Admin reset: write these offsets, only while the group has no live members."""

        def decide(snap: GroupSnapshot | None) -> tuple[GroupWrite, TierlogError | None]:
            assert snap is not None  # created if missing
            d, busy = _while_empty(snap, group, "offsets can be reset")
            return (d.finish(), busy) if busy else (d.finish(_offset_writes(snap, offsets)), None)

        topics = {o.topic for o in offsets}
        _check(self.repo.transact(group, decide, create=self.default_assignor, topics=topics))
