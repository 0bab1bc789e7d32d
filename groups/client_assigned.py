"""Kafka's classic protocol with a client leader: the rules for groups whose members are all
Kafka clients (groups/classic.py routes them here; a group with an HTTP member stays
server-assigned there).

A round, as Kafka's group coordinator runs it: a JoinGroup opens the round (phase
"joining"), every current member must rejoin (their heartbeats answer REBALANCE_IN_PROGRESS)
until all have, or the round's deadline (the largest rebalance timeout) removes the late
ones. The round then gets its generation, its leader (the previous one if it rejoined, else
the first member to have joined) and the protocol every member supports that most members
prefer; the leader's JoinGroup answer carries each member's metadata for it (phase
"syncing"). The leader's SyncGroup stores each member's assignment bytes as they came, user
data included (phase "stable"); every member's SyncGroup answers its own bytes. A member
leaving or lapsing opens a new round. The state lives on the group's row and members' rows
(metadata/groups.py), so any broker answers any member; waiting is the caller's polling.

Each function decides on a locked draft and answers the member, or None for "not yet".
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Sequence
from datetime import timedelta

from cluster.kafka_groups import ClassicGroupError, Joined, JoinGroup, MemberAssignment
from groups import reconcile
from groups.coordinator import MAX_MEMBERS, _Draft, _unknown_member
from logformat.errors import ErrorCode, TierlogError
from metadata.types import ConsumerGroupMember, KafkaMembership, KafkaRound

JOINING, SYNCING, STABLE = "joining", "syncing", "stable"
Outcome = TierlogError | ClassicGroupError


def client_assigned(d: _Draft, joining: str | None = None) -> bool:
    """True when every member (but the one joining now) is a Kafka client."""
    return all(m.kafka is not None for mid, m in d.members.items() if mid != joining)


def _rebalancing(group: str) -> ClassicGroupError:
    return ClassicGroupError(
        "REBALANCE_IN_PROGRESS", f"group {group!r} is rebalancing: rejoin (JoinGroup)"
    )


def _round(d: _Draft) -> KafkaRound:
    return d.group.kafka or KafkaRound(0, STABLE, None, None, (), None)


def _open_round(d: _Draft) -> KafkaRound:
    """A new round collecting joins, unless one is open already."""
    r = _round(d)
    if r.phase == JOINING:
        return r
    timeouts = [m.kafka.rebalance_timeout_ms for m in d.members.values() if m.kafka]
    deadline = d.snap.now + timedelta(milliseconds=max(timeouts, default=0))
    r = r._replace(phase=JOINING, deadline=deadline)
    d.group = d.group._replace(kafka=r)
    return r


def _common_protocols(members: Sequence[ConsumerGroupMember]) -> set[str]:
    names: set[str] | None = None
    for m in members:
        mine = {name for name, _ in m.kafka.protocols} if m.kafka else set()
        names = mine if names is None else names & mine
    return names or set()


def _vote(members: Sequence[ConsumerGroupMember]) -> str:
    """Kafka's selection: each member votes for its first protocol that all support."""
    common = _common_protocols(members)
    votes: Counter[str] = Counter()
    for m in members:
        assert m.kafka is not None
        votes[next(name for name, _ in m.kafka.protocols if name in common)] += 1
    best = max(votes.values())
    return min(name for name, n in votes.items() if n == best)


def join(d: _Draft, group: str, req: JoinGroup) -> str | Outcome:
    """Enter the member into the open (or a new) round; its id."""
    others = [m for mid, m in d.members.items() if mid != req.member_id]
    if others and not _common_protocols(others) & set(req.assignors):
        return ClassicGroupError(
            "INCONSISTENT_GROUP_PROTOCOL",
            f"none of the protocols {', '.join(req.assignors)} is one every member of group "
            f"{group!r} supports ({', '.join(sorted(_common_protocols(others))) or 'none'})",
        )
    now = d.snap.now
    old = d.members.get(req.member_id) if req.member_id else None
    if req.member_id and old is None:
        return _unknown_member(req.member_id)
    if old is not None and _rejoins_unchanged(d, old, req):
        d.put(d.renew(old._replace(session_timeout_ms=req.session_timeout_ms)))
        return old.member_id  # await_join answers with the current generation
    if old is None:
        if len(d.members) >= MAX_MEMBERS:
            return TierlogError(
                ErrorCode.GROUP_MAX_SIZE_REACHED, f"group {group!r} has {MAX_MEMBERS} members"
            )
        old = ConsumerGroupMember(
            uuid.uuid4().hex, 1, req.topics, None, 0, now, now, now, {}, {}, {}
        )
        d.membership_changed = True
    r = _open_round(d)
    kafka = KafkaMembership(req.protocols, r.generation + 1, None, req.rebalance_timeout_ms)
    member = old._replace(
        topics=req.topics, assignor=None, session_timeout_ms=req.session_timeout_ms, kafka=kafka
    )
    d.put(d.renew(member))
    return member.member_id


def _rejoins_unchanged(d: _Draft, member: ConsumerGroupMember, req: JoinGroup) -> bool:
    """Kafka's rule for a member of the current generation joining again with the same
    protocols (a client that missed its JoinGroup answer, or gave up waiting and asks again):
    while the leader assigns, any such member, and in a stable group a follower, gets the
    current generation back with no new round. A leader's join in a stable group is how it
    asks for one (its topics' partitions changed), and changed protocols always open one."""
    r = _round(d)
    if member.kafka is None or member.kafka.protocols != req.protocols:
        return False
    if _joined(member) != r.generation or member.member_id not in r.members:
        return False
    return r.phase == SYNCING or (r.phase == STABLE and member.member_id != r.leader)


def _close_joining(d: _Draft, r: KafkaRound) -> KafkaRound:
    """Every member has rejoined (or the deadline passed): the round's generation begins."""
    for late in [mid for mid, m in d.members.items() if _joined(m) != r.generation + 1]:
        d.remove(late)
    joined = sorted(d.members.values(), key=lambda m: (m.joined_at, m.member_id))
    leader = r.leader if r.leader in d.members else joined[0].member_id
    generation = r.generation + 1
    timeouts = [m.kafka.rebalance_timeout_ms for m in joined if m.kafka]
    r = KafkaRound(
        generation,
        SYNCING,
        leader,
        _vote(joined),
        tuple(sorted(d.members)),
        d.snap.now + timedelta(milliseconds=max(timeouts)),
    )
    for m in joined:
        d.put(m._replace(member_epoch=generation))
    # What the members subscribe to now: the server's own rebalance (run by commits and
    # expiries, groups/coordinator.py) then sees nothing changed.
    subscribed = reconcile.subscribed_topics(d.members.values(), d.snap.topics)
    d.group = d.group._replace(kafka=r, subscribed=subscribed)
    return r


def _joined(m: ConsumerGroupMember) -> int | None:
    return m.kafka.generation if m.kafka else None


def _answer(d: _Draft, r: KafkaRound, member_id: str) -> Joined:
    protocol = r.protocol or ""
    members: tuple[tuple[str, bytes], ...] = ()
    if member_id == r.leader:
        members = tuple(
            (mid, dict(m.kafka.protocols)[protocol])
            for mid, m in sorted(d.members.items())
            if m.kafka is not None
        )
    return Joined(member_id, r.generation, protocol, r.leader or "", members)


def await_join(d: _Draft, group: str, member_id: str) -> Joined | Outcome | None:
    """The member's JoinGroup answer once its round has closed; None while it is open."""
    d.expire()
    member = d.members.get(member_id)
    if member is None or member.kafka is None:
        return _unknown_member(member_id)
    if not client_assigned(d):
        return _rebalancing(group)  # an HTTP member joined: rejoin, server-assigned
    r = _round(d)
    if r.phase == JOINING:
        if _joined(member) != r.generation + 1:  # it joined an earlier round: it is in this one
            member = member._replace(kafka=member.kafka._replace(generation=r.generation + 1))
        d.put(d.renew(member))
        pending = [m for m in d.members.values() if _joined(m) != r.generation + 1]
        if pending and r.deadline is not None and d.snap.now < r.deadline:
            return None
        r = _close_joining(d, r)
    if _joined(d.members[member_id]) != r.generation:
        return _rebalancing(group)
    return _answer(d, r, member_id)


def _check_generation(
    d: _Draft, group: str, member_id: str, generation: int
) -> ConsumerGroupMember | Outcome:
    member = d.members.get(member_id)
    if member is None or member.kafka is None:
        return _unknown_member(member_id)
    r = _round(d)
    stale = _joined(member) != r.generation
    if r.phase == JOINING or set(d.members) != set(r.members) or stale:
        _open_round(d)
        return _rebalancing(group)
    if generation != r.generation:
        return ClassicGroupError(
            "ILLEGAL_GENERATION",
            f"group {group!r} is at generation {r.generation}, not {generation}: rejoin",
        )
    d.put(d.renew(member))
    return d.members[member_id]


def heartbeat(d: _Draft, group: str, member_id: str, generation: int) -> Outcome | None:
    d.expire()
    checked = _check_generation(d, group, member_id, generation)
    return None if isinstance(checked, ConsumerGroupMember) else checked


def sync(
    d: _Draft,
    group: str,
    member_id: str,
    generation: int,
    assignments: Sequence[MemberAssignment],
) -> bytes | Outcome | None:
    """The member's assignment bytes once its leader has sent them; None until then."""
    d.expire()
    checked = _check_generation(d, group, member_id, generation)
    if not isinstance(checked, ConsumerGroupMember):
        return checked
    r = _round(d)
    if r.phase == SYNCING and member_id == r.leader:
        _store(d, assignments)
        r = r._replace(phase=STABLE, deadline=None)
        d.group = d.group._replace(kafka=r)
    elif r.phase == SYNCING and r.deadline is not None and d.snap.now >= r.deadline:
        d.remove(r.leader or "")  # the leader never assigned: a new round without it
        _open_round(d)
        return _rebalancing(group)
    if r.phase != STABLE:
        return None
    kafka = d.members[member_id].kafka
    return kafka.assignment if kafka and kafka.assignment is not None else b""


def _store(d: _Draft, assignments: Sequence[MemberAssignment]) -> None:
    """The leader's answer, as the members will get it; the partitions in it are what each
    member owns now (commits are fenced by them, and an HTTP member joining later is granted
    only what no Kafka member holds)."""
    given = {a.member_id: a for a in assignments}
    for mid, m in list(d.members.items()):
        a = given.get(mid)
        raw, partitions = (a.raw, reconcile.to_map(a.partitions)) if a else (b"", {})
        assert m.kafka is not None
        kafka = m.kafka._replace(assignment=raw)
        d.put(m._replace(kafka=kafka, target=partitions, assigned=partitions, owned=partitions))
