"""The nemesis's production-like faults (issue 26 item 4), each a function of the Nemesis
returning what it did:

    partition-peers     nobody reaches a busy leader (followers, forwarding brokers, the fetch
                        node), while it still reaches them (one-way), past the replica lag
    partition-postgres  a busy leader alone loses Postgres, past its lease (it still talks to
                        clients and brokers: it must stop leading, not split the brain)
    partition-clients   the workload's HTTP clients cannot reach a busy leader (they go to
                        another broker, which forwards)
    disk-full-leader    a busy leader's data dir fills to the last byte, until it hands off
    disk-full-follower  a broker leading no busy partition (if there is one) fills, until it
                        drops out of an ISR
    kill-postgres       kill -9 Postgres, restart it (crash recovery) 1-4.5 s later
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from tests.chaos.workload import TOPIC
from tests.integration.disk_full import fill, free

if TYPE_CHECKING:
    from tests.chaos.nemesis import Nemesis

LEASE_S = 3.0  # tests/integration/cluster.py FAST --lease-ms
REPLICA_LAG_S = 4.0  # FAST --replica-lag-ms
DISK_FULL_MAX_S = 12.0  # a disk stays full until its effect is seen, at most this long


def partition_peers(n: Nemesis) -> str:
    p, victim = n.busy_leader()
    hold = n.rng.uniform(REPLICA_LAG_S + 1.0, REPLICA_LAG_S + 3.0)
    _cut_for(n, victim, "peers", hold)
    return (
        f"cut the cluster's link to broker {victim} (leader of partition {p}; it still reaches "
        f"them) for {hold:.1f}s"
    )


def partition_postgres(n: Nemesis) -> str:
    p, victim = n.busy_leader()
    hold = n.rng.uniform(LEASE_S + 1.5, LEASE_S + 3.0)
    _cut_for(n, victim, "postgres", hold)
    return f"cut broker {victim}'s link to Postgres (leader of partition {p}) for {hold:.1f}s"


def partition_clients(n: Nemesis) -> str:
    p, victim = n.busy_leader()
    hold = n.rng.uniform(2.0, 5.0)
    _cut_for(n, victim, "clients", hold)
    return f"cut the clients' link to broker {victim} (leader of partition {p}) for {hold:.1f}s"


def _cut_for(n: Nemesis, victim: int, kind: str, hold: float) -> None:
    links = n.world.links
    assert links is not None
    links.cut(victim, kind)
    try:
        time.sleep(hold)
    finally:
        links.restore(victim, kind)


def disk_full_leader(n: Nemesis) -> str:
    if n.world.no_small_disks:
        return f"skipped: no small file system ({n.world.no_small_disks})"
    p, victim = n.busy_leader()

    def handed_off() -> bool:
        return bool(n.cluster.partition(TOPIC, p)["leader"] != victim)

    took, seen = _full_until(n, victim, handed_off)
    outcome = "it handed leadership off" if seen else "it still led"
    return f"filled broker {victim}'s disk (leader of partition {p}) for {took:.1f}s: {outcome}"


def disk_full_follower(n: Nemesis) -> str:
    if n.world.no_small_disks:
        return f"skipped: no small file system ({n.world.no_small_disks})"
    leaders = n.busy_leaders()
    victim = n.claim([b for b in n.cluster.brokers if b not in leaders.values()])
    if victim is None:  # every broker leads a busy partition: one that is not this one's
        p = n.rng.choice(sorted(leaders))
        victim = n.claim([b for b in n.cluster.brokers if b != leaders[p]])
    assert victim is not None, "no broker left to fill"
    followed = [p for p, b in leaders.items() if b != victim]

    def dropped_out() -> bool:
        return any(victim not in n.cluster.partition(TOPIC, p)["isr"] for p in followed)

    took, seen = _full_until(n, victim, dropped_out)
    outcome = "it left an ISR" if seen else "it stayed in sync"
    return f"filled follower broker {victim}'s disk for {took:.1f}s: {outcome}"


def _full_until(n: Nemesis, victim: int, seen: Callable[[], bool]) -> tuple[float, bool]:
    """Fill `victim`'s disk until `seen()` (polled) or DISK_FULL_MAX_S, then free it."""
    data_dir = n.cluster.brokers[victim].data_dir
    start = time.monotonic()
    fill(data_dir)
    happened = False
    try:
        while time.monotonic() - start < DISK_FULL_MAX_S and not happened:
            time.sleep(0.3)
            try:
                happened = bool(seen())
            except Exception:  # a describe failing mid-fault: look again
                happened = False
    finally:
        free(data_dir)
    return time.monotonic() - start, happened


def kill_postgres(n: Nemesis) -> str:
    down = n.rng.uniform(1.0, LEASE_S + 1.5)
    n.world.pg.kill_and_restart(down)
    return f"kill -9 Postgres, restarted after {down:.1f}s"
