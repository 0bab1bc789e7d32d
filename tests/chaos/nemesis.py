"""The nemesis: faults drawn from a seeded random generator, one at a time, each healed before
the next. Every fault is named, so a run can include or exclude it (`--faults`, `--exclude`):

    kill              kill -9 a broker (a partition leader 7 times in 10), restart it 1-5.5 s
                      later (past its lease half the time: then another broker leads)
    kill-idle-leader  kill -9 the leader of the partition nobody writes to, past its lease
    pause-leader      SIGSTOP a partition leader past its lease, then SIGCONT
    pause-postgres    SIGSTOP every Postgres process past the brokers' leases, then SIGCONT
    s3                S3 answers 500/503 and stalls requests (the proxy) for 1.5-2.5 s, or
                      until it met S3_MIN_FAULTS requests
    corrupt           flip bytes inside one frame of a sealed segment on one replica

Faults other than kill-idle-leader spare the idle partition's leader where they can (Postgres
pauses may still move it).
"""

from __future__ import annotations

import os
import random
import signal
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from logformat.frame import HEADER_SIZE, decode_header
from tests.chaos.history import History
from tests.chaos.workload import TOPIC
from tests.chaos.world import World
from tests.integration.cluster import wait_for

LEASE_S = 3.0  # tests/integration/cluster.py FAST --lease-ms
PAST_LEASE_S = LEASE_S + 1.5
S3_MIN_FAULTS = 3
RECOVERY_S = 60.0  # a fault's damage must be undone (all brokers back) within this
# Faults left out unless asked for (TIERLOG_CHAOS_EXCLUDE, --exclude ''), each for an open bug
# (none at present).
KNOWN_BROKEN = ""


class Nemesis:
    def __init__(
        self, world: World, history: History, rng: random.Random, partitions: int, idle: int
    ) -> None:
        """`idle`: the partition no producer writes to; only kill-idle-leader moves its
        leadership on purpose (the other faults spare its leader)."""
        assert world.cluster is not None
        self.world, self.cluster, self.history = world, world.cluster, history
        self.rng, self.partitions, self.idle = rng, partitions, idle

    def schedule(self, rounds: int, faults: Sequence[str]) -> list[str]:
        """`rounds` faults: each of `faults` once (shuffled) before any repeats."""
        plan: list[str] = []
        while len(plan) < rounds:
            batch = list(faults)
            self.rng.shuffle(batch)
            plan += batch
        return plan[:rounds]

    def run(self, plan: Sequence[str]) -> None:
        for i, name in enumerate(plan):
            what = FAULTS[name](self)
            self.history.fault(f"{i + 1}/{len(plan)} {name}: {what}")
            print(f"chaos nemesis {i + 1}/{len(plan)} {name}: {what}", flush=True)
            self._await_recovery(name)
            # A breath of fault-free traffic between faults (the next one needs no more).
            time.sleep(self.rng.uniform(0.3, 0.8))

    def _await_recovery(self, name: str) -> None:
        def all_alive() -> bool:
            brokers = self.cluster.any().http.get("/brokers").json()["brokers"]
            return len(brokers) == len(self.cluster.brokers) and all(b["alive"] for b in brokers)

        wait_for(f"every broker alive after {name}", all_alive, timeout=RECOVERY_S)

    def _idle_leader(self) -> int:
        return self.cluster.leader(TOPIC, self.idle).broker_id

    def _busy_leader(self) -> tuple[int, int]:
        """A busy partition and its leader, one that does not lead the idle partition too
        when there is such a leader."""
        leaders = {
            p: self.cluster.leader(TOPIC, p).broker_id
            for p in range(self.partitions)
            if p != self.idle
        }
        spare = {p: b for p, b in leaders.items() if b != self._idle_leader()} or leaders
        p = self.rng.choice(sorted(spare))
        return p, spare[p]

    # -- the faults: each returns what it did -------------------------------------------------

    def kill(self) -> str:
        if self.rng.random() < 0.7:
            p, victim = self._busy_leader()
            what = f"broker {victim} (leader of partition {p})"
        else:
            idle_leader = self._idle_leader()
            others = [b for b in sorted(self.cluster.brokers) if b != idle_leader]
            victim = self.rng.choice(others)
            what = f"broker {victim}"
        # Down past its lease half the time: then the controller elects another leader.
        return self._kill(victim, what, self.rng.uniform(1.0, PAST_LEASE_S + 1.0))

    def kill_idle_leader(self) -> str:
        victim = self._idle_leader()
        what = f"broker {victim} (leader of the idle partition {self.idle})"
        return self._kill(victim, what, self.rng.uniform(PAST_LEASE_S, PAST_LEASE_S + 1.0))

    def _kill(self, victim: int, what: str, down: float) -> str:
        broker = self.cluster.brokers[victim]
        broker.kill(signal.SIGKILL)
        time.sleep(down)
        broker.start()
        return f"kill -9 {what}, down {down:.1f}s"

    def pause_leader(self) -> str:
        p, victim = self._busy_leader()
        broker = self.cluster.brokers[victim]
        pause = self.rng.uniform(PAST_LEASE_S, PAST_LEASE_S + 1.5)
        broker.kill(signal.SIGSTOP)
        try:
            time.sleep(pause)
        finally:
            broker.kill(signal.SIGCONT)
        return f"SIGSTOP broker {victim} (leader of partition {p}) for {pause:.1f}s"

    def pause_postgres(self) -> str:
        pause = self.rng.uniform(PAST_LEASE_S, PAST_LEASE_S + 1.5)
        self.world.pg.signal_all(signal.SIGSTOP)
        try:
            time.sleep(pause)
        finally:
            self.world.pg.signal_all(signal.SIGCONT)
        return f"SIGSTOP Postgres for {pause:.1f}s"

    def s3(self) -> str:
        assert self.world.s3 is not None
        proxy, before = self.world.s3, self.world.s3.injected()
        # Short: what is checked is that faults met on S3 are survived, which the loop below
        # ensures happened (S3_MIN_FAULTS), not how long they lasted.
        window = self.rng.uniform(1.5, 2.5)
        start = time.monotonic()
        proxy.set_enabled(True)
        try:
            time.sleep(window)
            # S3 is touched only when a segment is tiered or merged: keep the faults on until
            # some requests met them (bounded: early in a run nothing may be sealed yet).
            while proxy.injected() - before < S3_MIN_FAULTS and time.monotonic() - start < 15:
                time.sleep(0.5)
        finally:
            proxy.set_enabled(False)
        took = time.monotonic() - start
        return f"S3 errors and stalls for {took:.1f}s ({proxy.injected() - before} faults)"

    def corrupt(self) -> str:
        def sealed() -> list[tuple[int, int, Path]]:
            return [
                (broker_id, p, segment)
                for broker_id, broker in sorted(self.cluster.brokers.items())
                for p in range(self.partitions)
                # every segment but the newest (the active one) is sealed
                for segment in sorted(
                    (broker.data_dir / f"{TOPIC}-{p}").glob("*.log"), key=lambda f: int(f.stem)
                )[:-1]
            ]

        # Early in a run nothing may be sealed yet: the workload seals a segment in seconds.
        broker_id, p, segment = self.rng.choice(wait_for("a sealed segment", sealed, timeout=30))
        at = corrupt_frame(segment, self.rng)
        return f"flipped bytes at {at} of {segment.name} (partition {p}) on broker {broker_id}"


def corrupt_frame(segment: Path, rng: random.Random) -> int:
    """Flip 16 bytes inside the Arrow body of one frame of `segment` (header intact, so only
    the CRC can tell); returns the file position flipped."""
    data = segment.read_bytes()
    frames: list[tuple[int, int]] = []  # (payload start, payload length)
    pos = 0
    while pos + HEADER_SIZE <= len(data):
        header = decode_header(data, pos)
        frames.append((pos + HEADER_SIZE, header.payload_length))
        pos += HEADER_SIZE + header.payload_length
    start, length = rng.choice(frames)
    at = start + rng.randrange(length // 2, max(length - 16, length // 2 + 1))
    flipped = bytes(b ^ 0xFF for b in data[at : at + 16])
    fd = os.open(segment, os.O_WRONLY)
    try:
        os.pwrite(fd, flipped, at)
    finally:
        os.close(fd)
    return at


FAULTS: dict[str, Callable[[Nemesis], str]] = {
    "kill": Nemesis.kill,
    "kill-idle-leader": Nemesis.kill_idle_leader,
    "pause-leader": Nemesis.pause_leader,
    "pause-postgres": Nemesis.pause_postgres,
    "s3": Nemesis.s3,
    "corrupt": Nemesis.corrupt,
}


def select(include: str | None, exclude: str | None) -> list[str]:
    """The faults named in `include` (comma-separated; default all) minus those in `exclude`
    (default: KNOWN_BROKEN's, unless `include` names faults itself)."""
    if exclude is None:
        exclude = "" if include else KNOWN_BROKEN
    names = [n.strip() for n in (include or ",".join(FAULTS)).split(",") if n.strip()]
    dropped = {n.strip() for n in (exclude or "").split(",") if n.strip()}
    unknown = sorted((set(names) | dropped) - set(FAULTS))
    if unknown:
        raise ValueError(f"unknown faults {unknown}; known: {', '.join(FAULTS)}")
    chosen = [n for n in names if n not in dropped]
    if not chosen:
        raise ValueError("no faults left to run")
    return chosen
