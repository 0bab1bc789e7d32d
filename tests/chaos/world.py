"""The chaos run's world, all real processes it may fault: a private Postgres (pausing the
test session's shared one would stall every other test of the worker), moto's S3 behind a
fault-injecting proxy, three brokers, and a tiering and a compaction worker."""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path
from types import TracebackType

from coldstore.object_store import ObjectStore, ObjectStoreConfig
from metadata.db import make_engine, migrate
from tests.integration.cluster import Cluster, wait_for
from tests.integration.s3 import MotoServer, config_for
from tests.integration.s3_faults import FaultyS3Proxy
from tierlog.devstack.localpg import LocalPostgres
from tierlog.devstack.parent_watch import child_env

BROKERS = 3


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
        self.database_url = ""
        self.direct_s3: ObjectStoreConfig | None = None  # moto itself, for the final checks

    def start(self) -> World:
        self.database_url = self.pg.start()
        engine = make_engine(self.database_url)
        migrate(engine)
        engine.dispose()
        self.moto.start()
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
        self.cluster = Cluster(self.database_url, self.root, BROKERS, env=env).start()
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
        # Up before the nemesis starts: a fault then meets a running worker, as it would in
        # production, not one still importing its libraries.
        for role in self.workers:
            wait_for(f"the {role} worker", functools.partial(self._worker_started, role), 60)
        return self

    def _worker_started(self, role: str) -> bool | None:
        return f"{role} worker started" in (self.root / f"{role}.log").read_text() or None

    def log_tails(self, lines: int = 12) -> str:
        parts = []
        if self.cluster is not None:
            for i, b in self.cluster.brokers.items():
                parts.append(f"--- broker {i} ({b.log_path}):\n{b.log_tail(lines)}")
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
        if self.cluster is not None:
            self.cluster.stop()
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
