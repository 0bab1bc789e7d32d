"""The leader's view of its followers: progress, caught-up times, ISR and high watermark.

Kafka's rules: a follower is caught up when it has fetched up to the leader's log end
offset as of its previous fetch; it leaves the ISR after `replica.lag.time.max.ms` without
being caught up; it joins the ISR once its log end offset reaches the high watermark and
the start of the current leader epoch. The high watermark is the smallest log end offset
in the ISR and never moves back.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class FollowerProgress:
    leo: int = -1  # unknown until the follower's first fetch since we became leader
    last_caught_up_ms: float = 0.0
    last_fetch_ms: float = 0.0
    leader_leo_at_last_fetch: int = -1

    def on_fetch(self, fetch_offset: int, leader_leo: int, now_ms: float) -> None:
        if fetch_offset >= leader_leo:
            self.last_caught_up_ms = now_ms
        elif fetch_offset >= self.leader_leo_at_last_fetch >= 0:
            self.last_caught_up_ms = max(self.last_caught_up_ms, self.last_fetch_ms)
        self.leo = fetch_offset
        self.last_fetch_ms = now_ms
        self.leader_leo_at_last_fetch = leader_leo


def high_watermark(
    me: int, leader_leo: int, isr: list[int], followers: dict[int, FollowerProgress], current: int
) -> int:
    """min(LEO over the ISR), never below the current high watermark."""
    hw = leader_leo
    for broker in isr:
        if broker == me:
            continue
        progress = followers.get(broker)
        if progress is None or progress.leo < 0:
            return current  # a member we have not heard from yet holds the watermark
        hw = min(hw, progress.leo)
    return max(hw, current)


def lagging(
    me: int, isr: list[int], followers: dict[int, FollowerProgress], now_ms: float, lag_ms: int
) -> list[int]:
    """ISR members that have not been caught up within lag_ms."""
    out = []
    for broker in isr:
        if broker == me:
            continue
        progress = followers.get(broker)
        if progress is None or now_ms - progress.last_caught_up_ms > lag_ms:
            out.append(broker)
    return out


def may_join(progress: FollowerProgress, hw: int, epoch_start: int) -> bool:
    """Can this follower (re-)enter the ISR? It must hold everything committed so far."""
    return progress.leo >= hw and progress.leo >= epoch_start
