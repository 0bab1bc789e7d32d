"""KIP-848 reconciliation rules, as pure functions of group state (no I/O).

Three assignments per member: ``target`` (the group's assignor's answer), ``assigned`` (what
the member was last told it may own) and ``owned`` (what it last reported owning). The one
safety rule: a partition enters a member's ``assigned`` only when no other member has it in
its ``assigned`` or ``owned``. A moving partition is therefore first dropped from the old
owner's ``assigned`` (its next heartbeat answer revokes it), then leaves its ``owned`` (the
heartbeat after it stopped consuming), and only then is it granted to the new owner — never
consumed by two members at once. Partitions that stay put are never revoked, whatever the
assignor (cooperative hand-over for every assignor, as in KIP-848).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping

from groups.assignors import ASSIGNORS
from groups.assignors.base import MemberSubscription
from metadata.types import ConsumerGroupMember, PartitionMap, TopicMeta, TopicNamePartition

EMPTY, RECONCILING, STABLE = "empty", "reconciling", "stable"


def to_set(pm: PartitionMap) -> set[TopicNamePartition]:
    return {TopicNamePartition(t, p) for t, ps in pm.items() for p in ps}


def to_map(tps: Iterable[TopicNamePartition]) -> PartitionMap:
    out: dict[str, list[int]] = {}
    for tp in sorted(set(tps)):
        out.setdefault(tp.topic, []).append(tp.partition)
    return out


def heartbeat_interval_ms(session_timeout_ms: int) -> int:
    """A third of the session (three chances before it lapses), between 50 ms and 5 s."""
    return max(50, min(5000, session_timeout_ms // 3))


def choose_assignor(members: Iterable[ConsumerGroupMember], current: str) -> str:
    """The assignor most members ask for (KIP-848); a tie keeps the current one, else the
    first by name; with no preference expressed, the current one."""
    votes = Counter(m.assignor for m in members if m.assignor is not None)
    if not votes:
        return current
    best = max(votes.values())
    if votes.get(current) == best:
        return current
    return min(name for name, n in votes.items() if n == best)


def subscribed_topics(
    members: Iterable[ConsumerGroupMember], topics: Mapping[str, TopicMeta]
) -> dict[str, TopicMeta]:
    """The existing topics the members subscribe to: what the target depends on."""
    names = {t for m in members for t in m.topics}
    return {t: topics[t] for t in sorted(names) if t in topics}


def compute_targets(
    members: Iterable[ConsumerGroupMember], topics: Mapping[str, TopicMeta], assignor: str
) -> dict[str, PartitionMap]:
    """The group's target assignment, sticky to each member's current target."""
    subs = [
        MemberSubscription(m.member_id, frozenset(m.topics), frozenset(to_set(m.target)))
        for m in members
    ]
    counts = {t: meta.partitions for t, meta in topics.items()}
    return {mid: to_map(tps) for mid, tps in ASSIGNORS[assignor](subs, counts).items()}


def grantable(member: ConsumerGroupMember, others: Iterable[ConsumerGroupMember]) -> PartitionMap:
    """The member's target minus what any other member may still be consuming."""
    blocked: set[TopicNamePartition] = set()
    for o in others:
        blocked |= to_set(o.assigned) | to_set(o.owned)
    return to_map(tp for tp in to_set(member.target) if tp not in blocked)


def credible_owned(
    reported: Iterable[TopicNamePartition], member: ConsumerGroupMember
) -> PartitionMap:
    """What the member reports owning, limited to what it may own: a partition it was never
    given cannot be held, and believing it would block the member that was."""
    allowed = to_set(member.assigned) | to_set(member.owned)
    return to_map(tp for tp in reported if tp in allowed)


def group_state(members: Iterable[ConsumerGroupMember]) -> str:
    members = list(members)
    if not members:
        return EMPTY
    settled = all(m.assigned == m.target and m.owned == m.assigned for m in members)
    return STABLE if settled else RECONCILING
