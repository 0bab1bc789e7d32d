"""Rebalance listeners, and reconciling a group member's assignment inside poll().

Callbacks run on the thread that calls poll(), as in Kafka: they may commit, seek or look
up positions, and never run concurrently with the application's record processing.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from tierlog.client.buffer import RecordBuffer
from tierlog.client.group import GroupMember
from tierlog.client.subscription import SubscriptionState
from tierlog.client.types import TopicPartition

log = logging.getLogger("tierlog.client.group")


class ConsumerRebalanceListener:
    """Subclass and override what you need; every method gets a set of TopicPartitions."""

    def on_partitions_revoked(self, partitions: set[TopicPartition]) -> None:
        """About to give these up (their positions are still readable, commits still work)."""

    def on_partitions_assigned(self, partitions: set[TopicPartition]) -> None:
        """Newly owned; positions are looked up on the next fetch unless you seek."""

    def on_partitions_lost(self, partitions: set[TopicPartition]) -> None:
        """Owned no longer, without a chance to commit: another member may own them already."""
        self.on_partitions_revoked(partitions)


class Reconciler:
    """Applies the group's wishes to the consumer's assignment (the poll thread's side)."""

    def __init__(
        self,
        member: GroupMember,
        subscription: SubscriptionState,
        buffer: RecordBuffer,
        commit_revoked: Callable[[set[TopicPartition]], None],
    ) -> None:
        self.member = member
        self.subscription = subscription
        self.buffer = buffer
        self.commit_revoked = commit_revoked
        self.listener: ConsumerRebalanceListener | None = None

    def handle_lost(self) -> bool:
        """If the membership was lost: drop every partition (on_partitions_lost)."""
        if self.member.lost is None:
            return False
        lost = set(self.subscription.assigned)
        self.member.lost = None
        self._drop(lost)
        if lost and self.listener is not None:
            self.listener.on_partitions_lost(lost)
        return True

    def reconcile(self) -> bool:
        """Release what the group revoked, then take what it assigned. True if changed."""
        target = self.member.assignment
        if target is None:
            return False
        wanted = {tp for tp in target if tp.topic in self.subscription.topics}
        owned = set(self.subscription.assigned)
        revoked, added = owned - wanted, wanted - owned
        if revoked:
            try:
                self.commit_revoked(revoked)
            except Exception as exc:  # the partitions go anyway; the next owner re-reads
                log.warning("commit before revoking %s failed: %s", sorted(revoked), exc)
            if self.listener is not None:
                self.listener.on_partitions_revoked(revoked)
            self._drop(revoked)
        if added:
            self.subscription.add(sorted(added))
        self.member.owned = frozenset(self.subscription.assigned)
        if added and self.listener is not None:
            self.listener.on_partitions_assigned(added)
        if revoked or added:
            log.info(
                "group %s: revoked %s, assigned %s",
                self.member.group_id,
                sorted(revoked),
                sorted(added),
            )
        return bool(revoked or added)

    def _drop(self, partitions: set[TopicPartition]) -> None:
        self.subscription.remove(partitions)
        self.buffer.drop(partitions)
        self.member.owned = frozenset(self.subscription.assigned)
