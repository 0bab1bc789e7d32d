"""One chaos run: the world, the workload, the nemesis's schedule, then the checks: the ISR whole
again (and partitions back on their preferred leaders) within a bound after the nemesis stops,
the history checker on the final log, every in-sync follower serving the leader's records,
replicas byte-identical up to the high watermark, and the cold tier agreeing with the hot log."""

from __future__ import annotations

import random
import re
import threading
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from logformat.partitioner import partition_for_key
from tests.chaos.checker import allowed_losses, check
from tests.chaos.cold import cold_agrees
from tests.chaos.history import History, Kind, Row, value_of
from tests.chaos.kafka_workload import FLUSH_S as KAFKA_FLUSH_S
from tests.chaos.kafka_workload import PRODUCER as KAFKA_PRODUCER
from tests.chaos.kafka_workload import KafkaChaosConsumer, KafkaChaosProducer
from tests.chaos.nemesis import Nemesis
from tests.chaos.replicas import REPAIR_S, replicas_identical, replicas_serve
from tests.chaos.workload import TOPIC, ChaosConsumer, ChaosProducer, EpochWatcher
from tests.chaos.world import World
from tests.integration.cluster import Cluster, wait_for

PARTITIONS = 4
# No producer key maps here: after a few records at the start the partition idles, so a
# leader the nemesis moves appends nothing in its epoch (issue 12's stuck-ISR case).
IDLE_PARTITION = 3
ISR_BOUND_S = 45.0  # the ISR must be whole again this long after the nemesis stops
STABLE_S = 3.0  # ... and stay whole this long
TRUNCATION_LOOP = 100  # a follower truncating more often than this is stuck in a loop
# Every client finishes within this once stopped: an HTTP idempotent producer's batch (retried
# up to 60 s), the Kafka producer's flush (each record delivered or given up).
JOIN_S = max(75.0, KAFKA_FLUSH_S + 5)
PRODUCERS = (
    ("idem1", Kind.IDEMPOTENT_ALL),
    ("idem2", Kind.IDEMPOTENT_ALL),
    ("plain", Kind.PLAIN_ALL),
    ("one", Kind.PLAIN_ONE),
)


@dataclass
class Outcome:
    seed: int
    faults: list[str] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)
    stats: str = ""
    logs: str = ""

    def report(self) -> str:
        lines = [f"chaos seed {self.seed}: {self.stats}", *self.faults]
        if self.violations:
            lines += ["VIOLATIONS:", *self.violations, self.logs]
        return "\n".join(lines)


@dataclass(frozen=True)
class Plan:
    """What the nemesis does: `steps` steps over `faults`, each two faults at once with
    probability `overlap`; with `minutes`, steps go on until that much time has passed."""

    faults: Sequence[str]
    steps: int
    overlap: float = 1.0
    minutes: float | None = None


def run(root: Path, seed: int, rounds: int, faults: Sequence[str], **plan: Any) -> Outcome:
    """One run: the workload under `rounds` steps of faults drawn from `faults` (`plan`: the
    rest of a Plan), then every check."""
    return run_plan(root, seed, Plan(faults, rounds, **plan))


def run_plan(root: Path, seed: int, plan: Plan) -> Outcome:
    print(f"chaos seed {seed} (replay: python -m tests.chaos --seed {seed})", flush=True)
    rng = random.Random(seed)
    outcome = Outcome(seed)
    began = time.monotonic()
    with World(root, seed) as world:
        assert world.cluster is not None
        print(f"chaos world up in {time.monotonic() - began:.0f}s", flush=True)
        history = History()
        try:
            _create_topic(world.cluster)
            _fill_idle_partition(world.cluster, history)
            stats = _workload_under_faults(world, history, rng, plan, outcome)
            print(f"chaos faults over at {time.monotonic() - began:.0f}s", flush=True)
            violations, allowed = _checks(world, history)
            print(f"chaos checks done at {time.monotonic() - began:.0f}s", flush=True)
            outcome.violations += violations
            outcome.stats = f"{stats}, {len(plan.faults)} fault kinds, allowed: {allowed}"
        except Exception as exc:  # a run that could not finish still reports its seed and logs
            outcome.violations.append(f"run aborted: {exc!r}")
        outcome.faults = list(history.faults)
        if len(history.acks) < 200:
            outcome.violations.append(f"too little traffic to mean anything: {outcome.stats}")
        if outcome.violations:
            outcome.logs = world.log_tails() + history.client_tail()
    return outcome


def _clients(
    world: World, history: History, rng: random.Random, stop: threading.Event
) -> tuple[list[ChaosProducer], list[threading.Thread]]:
    """The workload: HTTP producers of each kind and HTTP consumers (through the client
    links a partition can cut), a consumer on the fetch node, and Kafka-protocol clients."""
    assert world.cluster is not None and world.links is not None and world.fetch_node
    cluster, urls, node_url = world.cluster, world.links.client_urls, world.fetch_node.url
    keys = [k for k in (f"key-{i}" for i in range(48)) if not _idle(k)][:24]
    producers = [
        ChaosProducer(
            cluster, history, name, kind, keys[i :: len(PRODUCERS)], PARTITIONS, stop, s, urls
        )
        for i, (name, kind) in enumerate(PRODUCERS)
        for s in [rng.randrange(2**32)]
    ]
    others: list[threading.Thread] = [
        *(ChaosConsumer(cluster, history, f"c{i}", PARTITIONS, stop, urls) for i in range(2)),
        ChaosConsumer(cluster, history, "c-fetch-node", PARTITIONS, stop, lambda: [node_url]),
        KafkaChaosConsumer(cluster, history, "c-kafka", PARTITIONS, stop),
        EpochWatcher(cluster, history, stop),
    ]
    kafka_seed = rng.randrange(2**32)
    if KAFKA_PRODUCER != "off":  # tests/chaos/kafka_workload.py
        others.append(KafkaChaosProducer(cluster, history, "kafka", keys[1::2], stop, kafka_seed))
    return producers, others


def _workload_under_faults(
    world: World, history: History, rng: random.Random, plan: Plan, outcome: Outcome
) -> str:
    """Producers, consumers and the epoch watcher run through the nemesis's schedule."""
    stop = threading.Event()
    producers, others = _clients(world, history, rng, stop)
    threads = [*producers, *others]
    for t in threads:
        t.start()
    try:
        time.sleep(1)  # every producer and consumer under way before the first fault
        nemesis = Nemesis(world, history, rng, PARTITIONS, IDLE_PARTITION)
        until = None if plan.minutes is None else time.monotonic() + plan.minutes * 60
        steps = plan.steps if plan.minutes is None else max(plan.steps, int(plan.minutes * 60))
        ran = nemesis.run(nemesis.overlapping(steps, plan.faults, plan.overlap), until)
        history.healed()  # every broker back: what is sent from now on must be delivered
        time.sleep(1)  # traffic on the healed cluster
    finally:
        stop.set()
        deadline = time.monotonic() + JOIN_S
        for t in threads:
            t.join(max(0.0, deadline - time.monotonic()))
    outcome.violations += [f"{t.name} still running" for t in threads if t.is_alive()]
    retries = sum(p.retries for p in producers)
    return (
        f"{ran} nemesis steps, {len(history.faults)} faults, {len(history.acks)} acknowledged, "
        f"{len(history.reads)} read, {retries} HTTP retries"
    )


def _checks(world: World, history: History) -> tuple[list[str], dict[str, int]]:
    """Everything checked once the nemesis has stopped."""
    assert world.cluster is not None and world.direct_s3 is not None
    cluster = world.cluster
    unhealthy = _isr_whole(cluster)
    loops = _truncation_loops(cluster) if unhealthy else {}
    violations = [
        f"{msg}; {loops[p]}" if p in loops else msg for p, msg in sorted(unhealthy.items())
    ]
    final, hws, unreadable = _final_log(cluster)
    violations += unreadable
    violations += check(history, final, hws)
    s3 = world.direct_s3
    for name, one in (
        ("replicas serve", lambda: replicas_serve(cluster, world.database_url, final)),
        ("replicas identical", lambda: replicas_identical(cluster, list(range(PARTITIONS)))),
        ("cold tier", lambda: cold_agrees(s3, final)),
    ):
        try:  # a check that cannot finish is a violation, and the others are still reported
            violations += one()
        except Exception as exc:
            violations.append(f"{name}: the check failed: {exc!r}"[:2000])
    return violations, allowed_losses(history, final)


def _create_topic(cluster: Cluster) -> None:
    r = cluster.any().http.post(
        "/topics",
        json={
            "name": TOPIC,
            "partitions": PARTITIONS,
            "replication_factor": 3,
            "configs": {"min.insync.replicas": 2, "segment.bytes": 64 * 1024},
        },
    )
    assert r.status_code == 201, r.text
    wait_for("full ISRs", lambda: _isrs_full(cluster))


def _idle(key: str) -> bool:
    return partition_for_key(key.encode(), PARTITIONS) == IDLE_PARTITION


def _fill_idle_partition(cluster: Cluster, history: History) -> None:
    """Three records in the idle partition, acknowledged as an idempotent producer's."""
    history.producer("idle", Kind.IDEMPOTENT_ALL)
    values = [value_of("idle", "idle", n) for n in range(3)]
    offsets = cluster.produce(TOPIC, [{"key": "idle", "value": v} for v in values], IDLE_PARTITION)
    for o, v in zip(offsets, values, strict=True):
        history.ack("idle", IDLE_PARTITION, o["offset"], "idle", v)


def _isrs_full(cluster: Cluster) -> bool:
    parts = cluster.describe(TOPIC)["partitions"]
    return all(len(p["isr"]) == len(cluster.brokers) for p in parts)


def _healthy(cluster: Cluster) -> bool:
    """Every replica in the ISR and every partition led by its preferred replica (the
    controller moves leadership back: until then the ISR may still change)."""
    return all(
        sorted(p["isr"]) == sorted(p["replicas"]) and p["leader"] == p["replicas"][0]
        for p in cluster.describe(TOPIC)["partitions"]
    )


def _isr_whole(cluster: Cluster) -> dict[int, str]:
    """Partitions whose ISR is not whole, or not for good, ISR_BOUND_S after the faults,
    each with what is wrong."""
    deadline = time.monotonic() + ISR_BOUND_S
    try:
        while True:
            wait_for("a healthy cluster", lambda: _healthy(cluster), deadline - time.monotonic())
            time.sleep(STABLE_S)  # and still so a little later (a replica may drop out again)
            if _healthy(cluster):
                return {}
    except AssertionError:
        return {
            p["partition"]: (
                f"partition {p['partition']}: ISR {p['isr']} of replicas {p['replicas']} (leader "
                f"{p['leader']}, epoch {p['leader_epoch']}) {ISR_BOUND_S:.0f}s after the faults"
            )
            for p in cluster.describe(TOPIC)["partitions"]
            if sorted(p["isr"]) != sorted(p["replicas"]) or p["leader"] != p["replicas"][0]
        }


def _truncation_loops(cluster: Cluster) -> dict[int, str]:
    """The stuck-ISR symptom of issue 12 ("Found" 1), per partition: a follower truncating to
    the same offset over and over instead of fetching."""
    counts: Counter[tuple[int, int]] = Counter()
    for i, b in cluster.brokers.items():
        text = b.log_path.read_text(errors="replace") if b.log_path.exists() else ""
        for line in text.splitlines():
            if '"truncated divergent tail"' in line and f'"topic":"{TOPIC}"' in line:
                m = re.search(r'"partition":(\d+)', line)
                if m:
                    counts[(i, int(m.group(1)))] += 1
    return {
        p: f"broker {i} logged 'truncated divergent tail' {n} times for partition {p}"
        for (i, p), n in sorted(counts.items())
        if n > TRUNCATION_LOOP
    }


def _read_in_full(cluster: Cluster, p: int) -> list[dict[str, Any]]:
    deadline = time.monotonic() + REPAIR_S
    while True:
        try:
            return cluster.leader(TOPIC, p).fetch_all(TOPIC, p)
        except (AssertionError, httpx.HTTPError):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)  # refused (a corrupt frame is never served): repairing?


def _final_log(
    cluster: Cluster,
) -> tuple[dict[int, list[Row]], dict[int, int], list[str]]:
    """Each partition read in full from its leader, its high watermark, and the partitions
    that could not be read within REPAIR_S (a corrupt frame refused: the checker then leaves
    them out)."""
    final: dict[int, list[Row]] = {}
    hws: dict[int, int] = {}
    unreadable: list[str] = []
    for p in range(PARTITIONS):
        try:
            rows = _read_in_full(cluster, p)
            hws[p] = int(cluster.partition(TOPIC, p)["high_watermark"])
        except (AssertionError, httpx.HTTPError) as exc:
            unreadable.append(f"partition {p}: the final read failed: {exc}")
            continue
        final[p] = [Row(r["offset"], r.get("key"), r.get("value")) for r in rows]
    return final, hws, unreadable
