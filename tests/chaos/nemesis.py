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

and the production-like ones of tests/chaos/nemesis_faults.py: network partitions (peers,
postgres, clients), a full disk on a leader and on a follower, Postgres killed and restarted.

Faults other than kill-idle-leader spare the idle partition's leader where they can (Postgres
pauses may still move it). A step of the schedule may be two faults at once (`overlapping`),
and a short one that claims no broker (RIDERS: corrupt, s3) may join it as a third: they run
on threads of their own, each with a generator drawn from the seed, and never pick
the same broker (a fault claims its victim) nor two Postgres-wide faults together.
"""

from __future__ import annotations

import math
import os
import random
import signal
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from logformat.frame import HEADER_SIZE, decode_header
from tests.chaos import nemesis_faults
from tests.chaos.history import History
from tests.chaos.workload import TOPIC
from tests.chaos.world import BROKER_START_S, World
from tests.integration.cluster import wait_for

LEASE_S = 3.0  # tests/integration/cluster.py FAST --lease-ms
PAST_LEASE_S = LEASE_S + 1.5
S3_MIN_FAULTS = 3
S3_MAX_S = 20.0
RECOVERY_S = 60.0  # a fault's damage must be undone (all brokers back) within this
# Faults left out unless asked for (TIERLOG_CHAOS_EXCLUDE, --exclude ''), each for an open bug.
# (partition-postgres was, until a leader whose lease lapsed stopped answering as the leader.)
KNOWN_BROKEN = ""
# Brokers ask Linux for SIGTERM when the *thread* that started them exits (PR_SET_PDEATHSIG,
# tierlog/devstack/parent_watch.py), and each fault runs on a thread of its own: a broker the
# nemesis restarts is started from this one, which lives as long as the process.
_SPAWNER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="nemesis-spawner")
# Faults on the one Postgres: never two at once.
POSTGRES_WIDE = frozenset({"pause-postgres", "kill-postgres"})
CLAIM_WAIT_S = 60.0
# Faults that restart a broker, the longest part of any step.
RESTARTS = frozenset({"kill", "kill-idle-leader"})
# Faults that claim no broker and take seconds at most (a flipped frame; S3 errors until a few
# requests met them): in an overlapping schedule they ride along on another step, a third
# fault at once, rather than take a step of their own.
RIDERS = frozenset({"corrupt", "s3"})


class Nemesis:
    def __init__(
        self, world: World, history: History, rng: random.Random, partitions: int, idle: int
    ) -> None:
        """`idle`: the partition no producer writes to; only kill-idle-leader moves its
        leadership on purpose (the other faults spare its leader)."""
        assert world.cluster is not None
        self.world, self.cluster, self.history = world, world.cluster, history
        self.rng, self.partitions, self.idle = rng, partitions, idle
        self._claims: dict[int, int] = {}  # broker -> the thread whose fault holds it
        self._claims_changed = threading.Condition()

    # Each fault of an overlapping step draws from a generator of its own (a thread's), so
    # the two threads' timing never changes what either draws.
    _local = threading.local()

    @property
    def rng(self) -> random.Random:
        mine = getattr(self._local, "rng", None)
        return mine if isinstance(mine, random.Random) else self._rng

    @rng.setter
    def rng(self, value: random.Random) -> None:
        self._rng = value

    def schedule(self, rounds: int, faults: Sequence[str]) -> list[str]:
        """`rounds` faults: each of `faults` once (shuffled) before any repeats."""
        plan: list[str] = []
        while len(plan) < rounds:
            batch = list(faults)
            self.rng.shuffle(batch)
            plan += batch
        return plan[:rounds]

    def overlapping(self, steps: int, faults: Sequence[str], share: float) -> list[tuple[str, ...]]:
        """`steps` steps covering each of `faults` once (shuffled) before any repeats; a step
        is two faults at once with probability `share` (1.0: always, when two can overlap),
        and a RIDERS fault joins it as a third with that probability too."""
        plan: list[tuple[str, ...]] = []
        batch: list[str] = []
        while len(plan) < steps:
            if not batch:
                batch = list(faults)
                self.rng.shuffle(batch)
            hosts = [f for f in batch if f not in RIDERS]
            first = hosts[-1] if hosts else batch[-1]  # riders alone only when none else is left
            batch.remove(first)
            mates = [f for f in batch if f not in RIDERS and _can_overlap(first, f)]
            # A broker restart (20-40 s on a loaded machine) dominates its step: two in one
            # step restart in parallel, and the other steps need none.
            alike = [f for f in mates if (f in RESTARTS) == (first in RESTARTS)]
            # Postgres-wide faults never pair with each other: paired early, they are never
            # the last two left (which would take a step each).
            wide = [f for f in alike if f in POSTGRES_WIDE]
            mate = (wide or alike or mates or [None])[0]
            step: tuple[str, ...] = (first,)
            if mate is not None and self.rng.random() < share:
                batch.remove(mate)
                step = (first, mate)
            # Riders join the last steps of a batch: early in a run nothing is tiered yet,
            # and the s3 fault would wait for a request to meet its errors.
            riders = [f for f in batch if f in RIDERS]
            later = math.ceil(sum(f not in RIDERS for f in batch) / 2)
            if riders and later < len(riders) and self.rng.random() < share:
                batch.remove(riders[0])
                step = (*step, riders[0])
            plan.append(step)
        return plan

    def run(self, plan: Sequence[str | tuple[str, ...]], until: float | None = None) -> int:
        """Each step of `plan` (a fault, or faults at once), healed before the next; stops
        early at monotonic time `until`. Returns the steps run."""
        for i, step in enumerate(plan):
            if until is not None and time.monotonic() >= until:
                return i
            names = (step,) if isinstance(step, str) else step
            self._step(f"{i + 1}/{len(plan)}", names)
            self._await_recovery("+".join(names))
            # A breath of fault-free traffic between faults (the next one needs no more).
            time.sleep(self.rng.uniform(0.3, 0.8))
        return len(plan)

    def _step(self, label: str, names: tuple[str, ...]) -> None:
        seeds = [self.rng.randrange(2**32) for _ in names]
        threads = [
            threading.Thread(target=self._one, args=(label, name, seed), name=f"nemesis-{name}")
            for name, seed in zip(names, seeds, strict=True)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    def _one(self, label: str, name: str, seed: int) -> None:
        self._local.rng = random.Random(seed)
        try:
            what = FAULTS[name](self)
        except Exception as exc:  # a fault that could not be injected fails the run
            what = f"FAILED: {exc!r}"
            self.history.error(f"nemesis {name}: {exc!r}")
        finally:
            self._release()
        self.history.fault(f"{label} {name}: {what}")
        print(f"chaos nemesis {label} {name}: {what}", flush=True)

    # -- victims: a broker is claimed by one fault at a time ----------------------------------

    def claim(self, candidates: Sequence[int]) -> int | None:
        """One of `candidates` no other fault holds, now this thread's; None if none."""
        me = threading.get_ident()
        with self._claims_changed:
            free = sorted(b for b in candidates if self._claims.get(b, me) == me)
            if not free:
                return None
            victim = self.rng.choice(free)
            self._claims[victim] = me
            return victim

    def claim_when_free(self, broker: int) -> None:
        me = threading.get_ident()
        with self._claims_changed:
            ok = self._claims_changed.wait_for(
                lambda: self._claims.get(broker, me) == me, CLAIM_WAIT_S
            )
            assert ok, f"broker {broker} stayed claimed by another fault"
            self._claims[broker] = me

    def _release(self) -> None:
        me = threading.get_ident()
        with self._claims_changed:
            for b in [b for b, t in self._claims.items() if t == me]:
                del self._claims[b]
            self._claims_changed.notify_all()

    def _await_recovery(self, name: str) -> None:
        def all_alive() -> bool:
            brokers = self.cluster.any().http.get("/brokers").json()["brokers"]
            return len(brokers) == len(self.cluster.brokers) and all(b["alive"] for b in brokers)

        wait_for(f"every broker alive after {name}", all_alive, timeout=RECOVERY_S)

    def _idle_leader(self) -> int:
        return self.cluster.leader(TOPIC, self.idle).broker_id

    def busy_leaders(self) -> dict[int, int]:
        """Each busy partition's leader."""
        return {
            p: self.cluster.leader(TOPIC, p).broker_id
            for p in range(self.partitions)
            if p != self.idle
        }

    def busy_leader(self) -> tuple[int, int]:
        """A busy partition and its leader, now claimed: one no other fault holds, and one
        that does not lead the idle partition too when there is such a leader."""
        leaders = self.busy_leaders()
        idle_leader = self._idle_leader()
        spare = {p: b for p, b in leaders.items() if b != idle_leader} or leaders
        victim = self.claim(sorted(set(spare.values()))) or self.claim(
            sorted(set(leaders.values()))
        )
        if victim is None:  # the other fault holds every leader: any broker it does not hold
            victim = self.claim(sorted(self.cluster.brokers))
            assert victim is not None, "every broker is claimed"
            return -1, victim
        p = self.rng.choice(sorted(p for p, b in leaders.items() if b == victim))
        return p, victim

    # -- the faults: each returns what it did -------------------------------------------------

    def kill(self) -> str:
        if self.rng.random() < 0.7:
            p, victim = self.busy_leader()
            what = f"broker {victim} (leader of partition {p})"
        else:
            idle_leader = self._idle_leader()
            chosen = self.claim([b for b in sorted(self.cluster.brokers) if b != idle_leader])
            if chosen is None:
                return self.kill()  # the other fault holds them: a busy leader it is
            victim = chosen
            what = f"broker {victim}"
        # Down past its lease half the time: then the controller elects another leader.
        return self._kill(victim, what, self.rng.uniform(1.0, PAST_LEASE_S + 1.0))

    def kill_idle_leader(self) -> str:
        victim = self._idle_leader()
        self.claim_when_free(victim)
        what = f"broker {victim} (leader of the idle partition {self.idle})"
        return self._kill(victim, what, self.rng.uniform(PAST_LEASE_S, PAST_LEASE_S + 1.0))

    def _kill(self, victim: int, what: str, down: float) -> str:
        broker = self.cluster.brokers[victim]
        broker.kill(signal.SIGKILL)
        time.sleep(down)
        _SPAWNER.submit(broker.start, False).result()  # see _SPAWNER
        broker.wait_ready(BROKER_START_S)
        return f"kill -9 {what}, down {down:.1f}s"

    def pause_leader(self) -> str:
        p, victim = self.busy_leader()
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
        errors_before = _s3_errors(proxy.counts())
        proxy.set_enabled(True)
        try:
            time.sleep(window)
            # S3 is touched only when a segment is tiered or merged: keep the faults on until
            # some requests met errors (bounded: early in a run nothing may be sealed yet).
            while (
                _s3_errors(proxy.counts()) - errors_before < S3_MIN_FAULTS
                and time.monotonic() - start < S3_MAX_S
            ):
                time.sleep(0.5)
        finally:
            proxy.set_enabled(False)
        took = time.monotonic() - start
        errors = _s3_errors(proxy.counts()) - errors_before
        if not errors:  # a fault that injected nothing proved nothing: the run fails
            self.history.error(f"s3 fault: no S3 request met an injected error in {took:.1f}s")
        injected = proxy.injected() - before
        return f"S3 errors and stalls for {took:.1f}s ({injected} faults, {errors} errors)"

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


def _s3_errors(counts: dict[str, int]) -> int:
    return sum(n for kind, n in counts.items() if kind.startswith("error_"))


def ci_steps(faults: Sequence[str]) -> int:
    """Steps of an overlapping schedule (share 1.0) that run each of `faults` once: the
    others two at a time, the riders on their steps."""
    hosts = [f for f in faults if f not in RIDERS]
    return max(1, math.ceil(len(hosts) / 2)) if hosts else len(faults)


def _can_overlap(a: str, b: str) -> bool:
    return a != b and not (a in POSTGRES_WIDE and b in POSTGRES_WIDE)


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
    "partition-peers": nemesis_faults.partition_peers,
    "partition-postgres": nemesis_faults.partition_postgres,
    "partition-clients": nemesis_faults.partition_clients,
    "disk-full-leader": nemesis_faults.disk_full_leader,
    "disk-full-follower": nemesis_faults.disk_full_follower,
    "kill-postgres": nemesis_faults.kill_postgres,
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
