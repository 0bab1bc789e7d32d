"""`tierlog dev`: Postgres, an S3 endpoint, N brokers, a fetch node, and the tiering and
compaction workers on one machine.

Each broker and worker runs as its own process, as in production; this supervisor starts them,
restarts one that dies, and stops everything on Ctrl-C in order: brokers, workers, S3, Postgres.
All state lives under --data-dir, so a second `tierlog dev` finds its topics and records again
(the S3 endpoint is SeaweedFS, which keeps objects on disk: see tierlog/devstack/local_s3.py).
TIERLOG_DATABASE_URL / TIERLOG_S3_ENDPOINT, when set, replace the embedded servers.
"""

from __future__ import annotations

import logging
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx

from tierlog import logs
from tierlog.devstack.local_s3 import LocalS3
from tierlog.devstack.local_server import Readiness, stop_process, wait_ready
from tierlog.devstack.localpg import LocalPostgres
from tierlog.devstack.parent_watch import child_env

log = logging.getLogger("tierlog.devstack.dev")


class Child:
    def __init__(self, name: str, argv: list[str], env: dict[str, str]) -> None:
        self.name, self.argv, self.env = name, argv, env
        self.proc: subprocess.Popen[bytes] | None = None
        self.restarts = 0

    def start(self) -> None:
        self.proc = subprocess.Popen(self.argv, env=child_env(self.env))

    def stop(self, timeout: float = 10) -> None:
        stop_process(self.proc, ((signal.SIGTERM, timeout), (signal.SIGKILL, None)))

    def wait_ready(self, url: str, timeout: float = 60) -> None:
        def answers() -> bool:
            try:
                return httpx.get(f"{url}/readyz", timeout=1).status_code == 200
            except httpx.HTTPError:
                return False

        assert self.proc is not None
        outcome = wait_ready(self.proc, answers, time.monotonic() + timeout, 0.2)
        if outcome is Readiness.EXITED:
            raise RuntimeError(
                f"{self.name} exited with code {self.proc.returncode} while starting"
            )
        if outcome is Readiness.TIMED_OUT:
            raise RuntimeError(f"{self.name} was not ready at {url} within {timeout:.0f}s")


class Supervisor:
    """Starts the children, restarts one that dies until told to stop, then stops them all
    in start order (brokers first, then the fetch node and the workers)."""

    def __init__(self) -> None:
        self.children: list[Child] = []
        self.stopping = False

    def on_signal(self, signum: int, _frame: object) -> None:
        self.stopping = True

    def start_ready(self, children: list[tuple[Child, str]]) -> None:
        """Start every child, then wait until each is ready at its URL (/readyz)."""
        for child, _url in children:
            self.start(child)
        for child, url in children:
            child.wait_ready(url)

    def start(self, child: Child) -> None:
        self.children.append(child)
        child.start()

    def watch(self) -> None:
        while not self.stopping:
            time.sleep(0.5)
            for child in self.children:
                if not self.stopping and child.proc is not None and child.proc.poll() is not None:
                    self._restart(child)

    def _restart(self, child: Child) -> None:
        assert child.proc is not None
        child.restarts += 1
        log.warning(
            "child exited; restarting",
            extra={"child": child.name, "code": child.proc.returncode, "restarts": child.restarts},
        )
        time.sleep(min(5.0, 0.5 * child.restarts))
        child.start()

    def stop_all(self) -> None:
        for child in self.children:
            child.stop()


# Worker roles started beside the brokers; each default worker id is unique.
_WORKER_ROLES = ("tiering", "compaction")


def _role_argv(role: str, log_level: str, *extra: str) -> list[str]:
    return [sys.executable, "-m", "tierlog", role, "--log-level", log_level, *extra]


def fetch_port(port: int, brokers: int) -> int:
    """The fetch node's port: 8090 beside brokers on 8080.., past them in bigger clusters."""
    return port + max(10, brokers)


def _start_s3(data_dir: Path, env: dict[str, str]) -> tuple[LocalS3 | None, dict[str, str]]:
    """The S3 environment for children: TIERLOG_S3_ENDPOINT's, or a local SeaweedFS's.

    Creates the bucket, and writes the S3 variables to data_dir/s3.env for the user's tools.
    """
    s3 = None if env.get("TIERLOG_S3_ENDPOINT") else LocalS3(data_dir / "s3")
    try:
        s3_env = s3.start() if s3 is not None else {}
        s3_env["TIERLOG_S3_BUCKET"] = env.get("TIERLOG_S3_BUCKET") or "tierlog"
        from coldstore.object_store import ObjectStore, ObjectStoreConfig

        config = ObjectStoreConfig.from_env({**env, **s3_env})
        store = ObjectStore(config)
        try:
            store.ensure_bucket()
        except Exception as exc:
            where = config.endpoint_url or "AWS S3"
            raise RuntimeError(f"cannot create bucket {config.bucket!r} at {where}: {exc}") from exc
        finally:
            store.close()
        # `set -a; . .tierlog/s3.env; set +a` then aws-cli / boto3 reach the same bucket.
        fd = os.open(data_dir / "s3.env", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            shown = {"TIERLOG_S3_ENDPOINT": config.endpoint_url or "", **s3_env}
            f.writelines(f"{k}={shlex.quote(v)}\n" for k, v in shown.items())
    except BaseException:
        if s3 is not None:
            s3.stop()
        raise
    if s3 is not None:
        log.info("s3 started", extra={"endpoint": s3.endpoint, "data_dir": str(s3.data_dir)})
    return s3, s3_env


def _start_postgres(data_dir: Path) -> tuple[LocalPostgres | None, str]:
    """TIERLOG_DATABASE_URL's database, or a local Postgres's."""
    database_url = os.environ.get("TIERLOG_DATABASE_URL")
    if database_url:
        return None, database_url
    pg = LocalPostgres(data_dir / "postgres")
    database_url = pg.start()
    log.info("postgres started", extra={"data_dir": str(data_dir / "postgres")})
    return pg, database_url


def _broker(i: int, brokers: int, port: int, data_dir: Path, log_level: str) -> list[str]:
    return _role_argv(
        "broker",
        log_level,
        *("--broker-id", str(i), "--listen", f"127.0.0.1:{port + i - 1}"),
        *("--data-dir", str(data_dir / f"broker-{i}")),
        *("--default-replication-factor", str(min(3, brokers))),
        "--insecure",  # dev is open on loopback (and says so when it is up)
    )


def run_dev(data_dir: Path, brokers: int, port: int, log_level: str = "INFO") -> int:
    logs.setup("dev", log_level)
    data_dir.mkdir(parents=True, exist_ok=True)
    pg: LocalPostgres | None = None
    s3: LocalS3 | None = None
    supervisor = Supervisor()
    signal.signal(signal.SIGINT, supervisor.on_signal)
    signal.signal(signal.SIGTERM, supervisor.on_signal)
    try:
        pg, database_url = _start_postgres(data_dir)
        env = dict(os.environ, TIERLOG_DATABASE_URL=database_url)
        s3, s3_env = _start_s3(data_dir, env)
        env.update(s3_env)
        broker_urls = [f"http://127.0.0.1:{port + i - 1}" for i in range(1, brokers + 1)]
        supervisor.start_ready(
            [
                (Child(f"broker-{i}", _broker(i, brokers, port, data_dir, log_level), env), url)
                for i, url in enumerate(broker_urls, 1)
            ]
        )
        fetch_listen = f"127.0.0.1:{fetch_port(port, brokers)}"
        fetch_argv = _role_argv("fetch", log_level, "--listen", fetch_listen, "--insecure")
        supervisor.start_ready([(Child("fetch", fetch_argv, env), f"http://{fetch_listen}")])
        for role in _WORKER_ROLES:
            supervisor.start(Child(role, _role_argv(role, log_level), env))
        where = s3.endpoint if s3 else env["TIERLOG_S3_ENDPOINT"]
        print(
            f"tierlog dev is up: brokers at {', '.join(broker_urls)} (open, no auth: loopback "
            f"only); fetch node at http://{fetch_listen}; "
            f"S3 at {where} bucket {env['TIERLOG_S3_BUCKET']} "
            f"(credentials in {data_dir / 's3.env'}); "
            f"workers: {', '.join(_WORKER_ROLES)}. "
            f"Data in {data_dir}. Ctrl-C stops everything.",
            file=sys.stderr,
            flush=True,
        )
        supervisor.watch()
    except RuntimeError as exc:  # LocalPostgresError, LocalS3Error, a child that won't start
        print(f"tierlog dev: {exc}", file=sys.stderr)
        return 1
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        supervisor.stop_all()
        if s3 is not None:
            s3.stop()
        if pg is not None:
            pg.stop()
        log.info("stopped")
    return 0
