"""The chaos run's world, all real processes it may fault: a private Postgres (pausing the
test session's shared one would stall every other test of the worker), moto's S3 behind a
fault-injecting proxy, three brokers (HTTP and Kafka listeners, each on a small file system
of its own and behind TCP proxies a partition can cut: tests/chaos/links.py), a fetch node,
and a tiering and a compaction worker."""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import TracebackType

import httpx

from coldstore.object_store import ObjectStore, ObjectStoreConfig
from metadata.db import make_engine, migrate
from tests.chaos.links import Links
from tests.chaos.logged_errors import logged_errors
from tests.integration.cluster import Cluster, wait_for
from tests.integration.disk_full import MountError, mount_small, unmount
from tests.integration.fetch_nodes import FetchNodeProcess
from tests.integration.s3 import MotoServer, config_for
from tests.integration.s3_faults import FaultyS3Proxy
from tierlog.devstack.localpg import LocalPostgres
from tierlog.devstack.parent_watch import child_env

BROKERS = 3
# A broker's start takes 20-30 s on a loaded 2-core machine (imports, RocksDB, recovery):
# waited for this long, so a slow start is not taken for a failed one.
BROKER_START_S = 180.0
DISK_MIB = 160  # each broker's data dir: room for a soak's log, small enough to fill at once


class PausablePostgres(LocalPostgres):
    """A LocalPostgres whose every process (postmaster and backends) can be SIGSTOPped."""

    def pids(self) -> list[int]:
        postmaster = int((self.pgdata / "postmaster.pid").read_text().split()[0])
        children = []
        for stat in Path("/proc").glob("[0-9]*/stat"):
            with contextlib.suppress(OSError, IndexError, ValueError):
                if int(stat.read_text().rsplit(")", 1)[1].split()[1]) == postmaster:
                    children.append(int(stat.parent.name))
        return [postmaster, *children]

    def signal_all(self, sig: int) -> None:
        for pid in self.pids():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)

    def kill_and_restart(self, down_s: float) -> None:
        """kill -9 every Postgres process (a crash: no checkpoint, no goodbye to clients), then
        start it again on the same port after `down_s` (crash recovery replays its WAL)."""
        self.requested_port = self.port
        self.signal_all(signal.SIGKILL)
        time.sleep(down_s)
        self.stop(timeout=5)
        self.start()


def _ready(node: FetchNodeProcess) -> bool:
    """Its /readyz answers 200 (FetchNodeProcess.wait_ready gives up after 60 s)."""
    assert node.proc is not None
    if node.proc.poll() is not None:
        raise RuntimeError(f"the fetch node exited:\n{node.log_tail()}")
    try:
        return httpx.get(f"{node.url}/readyz", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


class World:
    def __init__(self, root: Path, seed: int) -> None:
        self.root = root
        self.seed = seed
        # Not under /root or pytest's tmp dir (mode 700): the postgres user must traverse it.
        self._pg_dir = Path(tempfile.mkdtemp(prefix="tierlog-chaos-pg-"))
        self._pg_dir.chmod(0o755)
        self.pg = PausablePostgres(self._pg_dir / "pg", fast=True)
        self.moto = MotoServer()
        self.s3: FaultyS3Proxy | None = None
        self.cluster: Cluster | None = None
        self.workers: dict[str, subprocess.Popen[bytes]] = {}
        self.links: Links | None = None
        self.fetch_node: FetchNodeProcess | None = None
        self.small_disks: list[Path] = []
        self.no_small_disks = ""  # why the disk-full faults cannot run, if they cannot
        self.database_url = ""
        self.direct_s3: ObjectStoreConfig | None = None  # moto itself, for the final checks

    def start(self) -> World:
        # Postgres (with its schema) and moto start side by side: each is seconds of waiting
        # for a process that needs nothing of the other, and the brokers need both.
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="chaos-moto") as pool:
            moto = pool.submit(self.moto.start)
            self.database_url = self.pg.start()
            engine = make_engine(self.database_url)
            migrate(engine)
            engine.dispose()
            moto.result()
        bucket, prefix = f"chaos-{uuid.uuid4().hex[:12]}", "t"
        self.direct_s3 = config_for(self.moto.endpoint, bucket, prefix)
        ObjectStore(self.direct_s3).ensure_bucket()
        # Faults off until the nemesis turns them on; stalls outlast the clients' timeouts.
        self.s3 = FaultyS3Proxy(
            self.moto.endpoint, error_rate=0.3, stall_rate=0.1, stall_s=3, seed=self.seed
        ).start()
        self.s3.set_enabled(False)
        env = {
            "TIERLOG_S3_ENDPOINT": self.s3.endpoint,
            "TIERLOG_S3_BUCKET": bucket,
            "TIERLOG_S3_PREFIX": prefix,
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_REGION": "us-east-1",
        }
        cluster = self.cluster = Cluster(self.database_url, self.root, BROKERS, env=env, kafka=True)
        assert self.pg.port is not None
        self.links = Links(cluster, self.pg.port)
        self._mount_small_disks()
        # Every process starts at once: each spends its first 10-30 s (on a loaded machine)
        # importing and opening its stores, which need no other one to be up yet.
        self.fetch_node = FetchNodeProcess(self.database_url, self.root / "fetch.log", env)
        self.fetch_node.launch()
        worker_env = child_env({**os.environ, **env, "TIERLOG_DATABASE_URL": self.database_url})
        for role, args in (
            ("tiering", ["--poll-ms", "200", "--lease-ms", "5000"]),
            ("compaction", ["--poll-ms", "500", "--min-grace-ms", "0"]),
        ):
            with open(self.root / f"{role}.log", "ab") as log:
                self.workers[role] = subprocess.Popen(
                    [sys.executable, "-m", "tierlog", role, *args],
                    env=worker_env,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                )
        cluster.start(BROKER_START_S)
        # Up before the nemesis starts: a fault then meets a running worker, as it would in
        # production, not one still importing its libraries.
        for role in self.workers:
            wait_for(f"the {role} worker", functools.partial(self._worker_started, role), 60)
        node = self.fetch_node
        wait_for("the fetch node", lambda: _ready(node), BROKER_START_S, every=0.5)
        return self

    def _mount_small_disks(self) -> None:
        """A small tmpfs per broker data dir, for the disk-full faults; without one (not root,
        no mount) those faults say they were skipped and why."""
        assert self.cluster is not None
        try:
            for b in self.cluster.brokers.values():
                mount_small(b.data_dir, DISK_MIB)
                self.small_disks.append(b.data_dir)
        except MountError as exc:
            self.no_small_disks = str(exc)
            self._unmount_small_disks()

    def _unmount_small_disks(self) -> None:
        for d in self.small_disks:
            unmount(d)
        self.small_disks = []

    def _worker_started(self, role: str) -> bool | None:
        return f"{role} worker started" in (self.root / f"{role}.log").read_text() or None

    def log_paths(self) -> dict[str, Path]:
        """Every node's log, by a name for the report."""
        paths: dict[str, Path] = {}
        if self.cluster is not None:
            paths |= {f"broker {i}": b.log_path for i, b in self.cluster.brokers.items()}
        if self.fetch_node is not None:
            paths["fetch node"] = self.fetch_node.log_path
        return paths | {role: self.root / f"{role}.log" for role in self.workers}

    def log_tails(self, lines: int = 12) -> str:
        parts = [logged_errors(self.log_paths())]
        if self.cluster is not None:
            for i, b in self.cluster.brokers.items():
                parts.append(f"--- broker {i} ({b.log_path}):\n{b.log_tail(lines)}")
        if self.fetch_node is not None:
            parts.append(f"--- fetch node:\n{self.fetch_node.log_tail(lines)}")
        for role in self.workers:
            path = self.root / f"{role}.log"
            text = path.read_text(errors="replace") if path.exists() else ""
            parts.append(f"--- {role} ({path}):\n" + "\n".join(text.splitlines()[-lines:]))
        return "\n".join(parts)

    def close(self) -> None:
        with contextlib.suppress(OSError, ValueError):
            self.pg.signal_all(signal.SIGCONT)  # a failed run may leave it paused
        for proc in self.workers.values():
            proc.terminate()
        for proc in self.workers.values():
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if self.links is not None:
            self.links.restore_all()  # a failed run may leave a link cut
        if self.fetch_node is not None:
            self.fetch_node.stop()
        if self.cluster is not None:
            self.cluster.stop()
        self._unmount_small_disks()
        if self.links is not None:
            self.links.close()
        if self.s3 is not None:
            self.s3.stop()
        self.moto.stop()
        self.pg.stop()
        shutil.rmtree(self._pg_dir, ignore_errors=True)

    def __enter__(self) -> World:
        try:
            return self.start()
        except BaseException:
            self.close()
            raise

    def __exit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
