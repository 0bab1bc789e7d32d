"""N brokers in this process, on one event loop and one manual clock (Kafka's MockTime),
with real local logs in a temp dir and the tests' real Postgres.

The test cuts links instead of stopping processes: a broker's replica fetches to another
(`cut`), its Postgres connections (`cut_postgres`, through a TcpProxy of its own), or both
(`isolate`); and it moves time on (`advance`) instead of sleeping: leases and the ISR's lag
rule read the manual clock, and the database's leases of brokers cut from it are shifted by
the same amount (the database's clock cannot be moved, so the harness moves the deadlines).
Duties still run on the loop's short real timers; nothing that depends on time happens until
the test advances it.
"""

from __future__ import annotations

import contextlib
import logging
import shutil
import subprocess
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import func, update

from cluster.clock import ManualClock
from metadata.brokers import BrokerRepo
from metadata.db import make_engine
from metadata.schema import brokers
from tests.harness.cut_leases import CutLeases
from tests.harness.links import Links
from tests.harness.loop import LoopThread
from tests.harness.node import REPLICA_LAG_MS, BrokerLogs, Node, until
from tests.integration.cluster import wait_for

# Errors after which the same batch may be sent again (Kafka's retriable produce errors).
_RETRIABLE = frozenset(
    {
        "NOT_LEADER_OR_FOLLOWER",
        "LEADER_NOT_AVAILABLE",
        "NOT_ENOUGH_REPLICAS",
        "NOT_ENOUGH_REPLICAS_AFTER_APPEND",
        "REQUEST_TIMED_OUT",
        "KAFKA_STORAGE_ERROR",
    }
)
# advance() moves time in steps no longer than this, and lets every connected follower fetch
# in between: a follower that keeps fetching never looks lagging, one that cannot does.
STEP_S = REPLICA_LAG_MS / 4000


class InProcessCluster:
    def __init__(self, database_url: str, root: Path, size: int = 3) -> None:
        self.clock = ManualClock()
        self.links = Links()
        self.loop = LoopThread()
        self.logs = BrokerLogs()
        self._tierlog = logging.getLogger("tierlog")
        self._level = self._tierlog.level
        self._engine = make_engine(database_url)  # the harness's own, never cut
        self._cut_leases = CutLeases(self._engine)
        self.brokers = {
            i: Node(i, database_url, root / f"data-{i}", self.clock, self.links, self.loop)
            for i in range(1, size + 1)
        }
        self._pg_cut: set[int] = set()
        self._producer_id: int | None = None
        self._sequences: dict[tuple[str, int], int] = {}

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> InProcessCluster:
        self._tierlog.setLevel(logging.INFO)
        self._tierlog.addHandler(self.logs)
        for node in self.brokers.values():
            node.start()
        wait_for("all brokers alive", self._all_alive)
        return self

    def stop(self) -> None:
        self.heal()
        for node in self.brokers.values():
            with contextlib.suppress(Exception):
                node.close()
        self.loop.close()
        self._engine.dispose()
        self._tierlog.removeHandler(self.logs)
        self._tierlog.setLevel(self._level)

    # -- faults --------------------------------------------------------------------------------

    def cut(self, a: int, b: int) -> None:
        """Cut the replication link between brokers a and b (both ways)."""

        async def on_loop() -> None:
            self.links.cut(a, b)

        self.loop.run(on_loop())

    def cut_one_way(self, src: int, dst: int) -> None:
        """Only broker src's requests to dst fail (dst still reaches src)."""

        async def on_loop() -> None:
            self.links.restore(src, dst)
            self.links.cut_one_way(src, dst)

        self.loop.run(on_loop())

    def cut_postgres(self, i: int) -> None:
        node = self.brokers[i]
        if i not in self._pg_cut and node.running:
            # Connected until now, its lease is current as at this manual instant: renew it
            # before it is pinned. The database counts what is left in real time, and a
            # starved loop (a loaded machine) could have put off the last heartbeat by
            # seconds, so a test's advance short of the lease let it lapse (a fresh-clone
            # run: test_lease_answers.py's leader replaced before its write was committed).
            with contextlib.suppress(Exception):
                self.loop.run(node.b.lease.heartbeat())
        self._pg_cut.add(i)
        node.to_postgres.cut()
        self._cut_leases.cut(i)

    def crash(self, i: int) -> None:
        """Broker i dies at once (kill -9): its port refuses connections, those in flight are
        reset, its Postgres connections drop. Its lease in the database runs on until it
        lapses or a peer proves it dead (ingest/replication/death_signal.py). For good: the
        module's cluster keeps a crashed broker down."""
        self.cut_postgres(i)

        async def on_loop() -> None:
            self.links.crash(i)

        self.loop.run(on_loop())

    def close_port(self, i: int, closed: bool = True) -> None:
        """Broker i's port refuses connections while its process lives (a broker shutting
        down has closed its listener); closed=False opens it again."""

        async def on_loop() -> None:
            if closed:
                self.links.apps.pop(i, None)
            else:
                self.links.apps[i] = self.brokers[i].app

        self.loop.run(on_loop())

    def hold_lease(self, i: int, seconds: float = 3600) -> None:
        """Broker i's lease in the database runs `seconds` from now, whatever time it is in
        real time: only a proof of its death can end it sooner."""
        with self._engine.begin() as conn:
            conn.execute(
                update(brokers)
                .where(brokers.c.id == i)
                .values(lease_expires_at=func.now() + timedelta(seconds=seconds))
            )

    def isolate(self, i: int) -> None:
        """Broker i reaches neither Postgres nor any other broker (the test still reaches it)."""
        self.cut_postgres(i)
        for j in self.brokers:
            if j != i:
                self.cut(i, j)

    def heal(self) -> None:
        """Every link back."""
        for i in self.brokers:
            for j in self.brokers:
                self.links.restore(i, j)
            self.brokers[i].to_postgres.restore()
        self._pg_cut.clear()
        self._cut_leases.restore_all()

    def recover(self) -> None:
        """Every link back and every broker's lease current again, so that a test that failed
        half-way (a broker left fenced) does not fail the next one of the module as well."""
        self.heal()
        deadline = time.monotonic() + 30
        while not self._all_alive() and time.monotonic() < deadline:
            self.advance(STEP_S)

    def _all_alive(self) -> bool:
        listed = self.any().http.get("/brokers").json()["brokers"]
        if len(listed) != len(self.brokers) or not all(b["alive"] for b in listed):
            return False
        # And each running broker holds its Postgres session again (below): until then the
        # cluster is still settling from a cut, and the next test would meet that.
        return all(self.holds_session(i) for i, node in self.brokers.items() if node.running)

    def holds_session(self, i: int) -> bool:
        """Whether broker i holds its named Postgres session: the death signal's proof that
        its process lives. After a Postgres cut it comes back up to a listener's connect
        timeout (5 s) after the lease does."""
        return BrokerRepo(self._engine).has_session(i)

    @contextlib.contextmanager
    def failing_storage(self, node: Node, topic: str, p: int = 0) -> Iterator[Path]:
        """The broker's active segment of topic-p fails every write (immutable: root's
        writes get EPERM, as on a failing disk) until the block ends."""
        assert shutil.which("chattr"), "needs chattr (e2fsprogs)"
        segment = max((node.data_dir / f"{topic}-{p}").glob("*.log"))
        subprocess.run(["chattr", "+i", str(segment)], check=True)
        try:
            yield segment
        finally:
            subprocess.run(["chattr", "-i", str(segment)], check=True)

    # -- time ------------------------------------------------------------------------------

    def advance(self, seconds: float) -> None:
        """Move the clock on by `seconds`, in steps, as if that much time had passed: brokers
        that reach Postgres renew their leases, followers that reach their leader fetch,
        and the database's leases of brokers cut from it run down."""
        left = seconds
        while left > 0:
            step = min(STEP_S, left)
            left -= step
            self.clock.advance(step)
            self._cut_leases.advance(step)
            self.loop.run(self._after_step())

    async def _after_step(self) -> None:
        running = [n for n in self.brokers.values() if n.running]
        for node in running:
            if node.broker_id not in self._pg_cut:
                # Its heartbeat, as at this time: a connected broker's lease stays current.
                with contextlib.suppress(Exception):
                    await node.b.lease.heartbeat()
        active = self._active_links()
        marks = {link: self.links.completed.get(link, 0) for link in active}

        def fetched() -> bool:
            for node in running:  # long polls answer now rather than after their wait
                node.b.fetch_handler.notify_append()
            # A link that stopped meanwhile (a fetcher moved to a new leader at this time, a
            # link cut) has nothing more to wait for: waiting on it ran out until's timeout.
            still = set(self._active_links())
            return all(self.links.completed.get(k, 0) >= marks[k] + 2 for k in active if k in still)

        await until("followers fetched at the new time", fetched)

    def _active_links(self) -> list[tuple[int, int]]:
        """(follower, leader) pairs whose fetcher runs and whose link is up."""
        out = []
        gone = self.links.crashed  # a crashed broker answers no fetch: nothing to wait for
        for node in self.brokers.values():
            if not node.running or node.b.replicas is None or node.broker_id in gone:
                continue
            for leader, fetcher in node.b.replicas.fetchers.items():
                up = self.brokers[leader].running and not self.links.is_cut(node.broker_id, leader)
                up = up and leader not in gone
                if up and fetcher.partitions:
                    out.append((node.broker_id, leader))
        return out

    # -- the HTTP API, as the process tests use it ------------------------------------------

    def any(self, exclude: int | None = None) -> Node:
        """A running broker that reaches Postgres (an isolated one's metadata is stale)."""
        return next(
            n
            for n in self.brokers.values()
            if n.running and n.broker_id != exclude and n.broker_id not in self._pg_cut
        )

    def create_topic(
        self, name: str, partitions: int = 1, rf: int = 3, **configs: object
    ) -> dict[str, Any]:
        r = self.any().http.post(
            "/topics",
            json={
                "name": name,
                "partitions": partitions,
                "replication_factor": rf,
                "configs": {k.replace("_", "."): v for k, v in configs.items()},
            },
        )
        assert r.status_code == 201, r.text
        wait_for(
            f"{name}'s replicas ready",
            lambda: all(len(p["isr"]) == rf for p in self.describe(name)["partitions"]),
        )
        return dict(r.json())

    def describe(self, topic: str, via: Node | None = None) -> dict[str, Any]:
        r = (via or self.any()).http.get(f"/topics/{topic}")
        assert r.status_code == 200, r.text
        return dict(r.json())

    def partition(self, topic: str, p: int = 0, via: Node | None = None) -> dict[str, Any]:
        return dict(self.describe(topic, via)["partitions"][p])

    def leader(self, topic: str, p: int = 0) -> Node:
        """The partition's leader, once it knows it leads (its own metadata may lag what
        another broker describes: its followers' lag counts from when it took over)."""

        def known() -> int | None:
            leader = self.partition(topic, p)["leader"]
            node = self.brokers.get(leader) if leader is not None else None
            return leader if node and node.running and node.b.leader_state(topic, p) else None

        return self.brokers[wait_for("a leader that knows it", known)]

    def produce(
        self, topic: str, records: list[dict[str, Any]], partition: int = 0, via: int | None = None
    ) -> list[dict[str, int]]:
        """Append exactly once at acks=all, retried through leader changes (an idempotent
        producer: a retried batch is answered with its original offsets)."""
        if self._producer_id is None:
            r = self.any().http.post("/producers")
            assert r.status_code == 201, r.text
            self._producer_id = int(r.json()["producer_id"])
        sequence = self._sequences.get((topic, partition), 0)
        headers = {
            "X-Tierlog-Producer-Id": str(self._producer_id),
            "X-Tierlog-Producer-Epoch": "0",
            "X-Tierlog-Sequence": str(sequence),
        }
        body = {"records": [{**rec, "partition": partition} for rec in records]}
        deadline = time.monotonic() + 30
        while True:
            node = self.brokers[via] if via else self.leader(topic, partition)
            r = node.http.post(
                f"/topics/{topic}/records", params={"acks": "all"}, json=body, headers=headers
            )
            if r.status_code == 200:
                self._sequences[(topic, partition)] = sequence + len(records)
                return list(r.json()["offsets"])
            assert r.json().get("error_code") in _RETRIABLE, r.text
            assert time.monotonic() < deadline, f"produce to {topic} kept failing: {r.text}"
            time.sleep(0.05)
