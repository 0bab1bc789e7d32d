"""`tierlog dev`: Postgres, an S3 endpoint, N brokers, a fetch node, the tiering and
compaction workers, and the web console on one machine.

Each broker and worker runs as its own process, as in production; the supervisor
(supervisor.py) starts them, restarts one that dies, and stops everything on Ctrl-C in order:
brokers, workers, S3, Postgres. All state lives under --data-dir, so a second `tierlog dev`
finds its topics and records again (the S3 endpoint is SeaweedFS, which keeps objects on disk:
see tierlog/devstack/local_s3.py). TIERLOG_DATABASE_URL / TIERLOG_S3_ENDPOINT, when set,
replace the embedded servers. The variables the user's tools need go to data_dir/dev.env
(dev_env.py). With --auth the nodes require API keys and ACLs, as outside dev, and User:admin
(a super user) gets a key that the banner prints.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import NamedTuple

from tierlog import logs
from tierlog.devstack.banner import (
    DEV_TOPIC_DEFAULTS,
    DevUrls,
    banner_lines,
    describe_defaults,
    render,
)
from tierlog.devstack.dev_env import ADMIN, admin_key, env_file, own_environment, write_env_file
from tierlog.devstack.local_s3 import LocalS3
from tierlog.devstack.local_server import port_free
from tierlog.devstack.localpg import LocalPostgres
from tierlog.devstack.supervisor import Child, Supervisor, restart_delay_s

log = logging.getLogger("tierlog.devstack.dev")

# Worker roles started beside the brokers; each default worker id is unique.
_WORKER_ROLES = ("tiering", "compaction")


class _NodeArgs(NamedTuple):
    log_level: str
    auth: bool
    topic_defaults: tuple[tuple[str, str], ...]  # --topic-default NAME=VALUE of each broker


def _role_argv(role: str, log_level: str, *extra: str) -> list[str]:
    return [sys.executable, "-m", "tierlog", role, "--log-level", log_level, *extra]


def _security_argv(auth: bool) -> list[str]:
    # Open on loopback by default (the banner says so); --auth as outside dev.
    return ["--auth", "apikey", "--super-users", ADMIN] if auth else ["--insecure"]


def fetch_port(port: int, brokers: int) -> int:
    """The fetch node's port: 8090 beside brokers on 8080.., past them in bigger clusters."""
    return port + max(10, brokers)


def console_port(port: int) -> int:
    """The web console's port: 8070 below brokers on 8080.."""
    return port - 10


def _console_child(
    broker_url: str, port: int, env: dict[str, str], shown: dict[str, str], log_level: str
) -> Child:
    argv = _role_argv("console", log_level, "--broker", broker_url, "--listen", f"127.0.0.1:{port}")
    # With --auth the console's metric sampler lists the brokers with the admin's key (in
    # its environment, not its argv); users sign in with their own.
    key = {"TIERLOG_API_KEY": shown["TIERLOG_API_KEY"]} if "TIERLOG_API_KEY" in shown else {}
    return Child("console", argv, {**env, **key}, port)


# Kafka's port beside HTTP's: 9092 for the broker on 8080, 9093 for 8081, and so on. Every
# broker keeps this one distance, which is how each derives the others' Kafka addresses
# (ingest/kafka/context.py).
KAFKA_PORT_SHIFT = 9092 - 8080


def _taken_port(ports: dict[str, int]) -> str | None:
    """Why dev cannot start, when one of its nodes' ports is taken (another `tierlog dev`)."""
    for name, port in ports.items():
        if not port_free(port):
            return (
                f"port {port} ({name}) is already in use on 127.0.0.1, by another tierlog dev "
                "or server: stop it, or give --port"
            )
    return None


def _start_s3(env: dict[str, str], data_dir: Path) -> tuple[LocalS3 | None, dict[str, str]]:
    """The S3 variables for children and tools: TIERLOG_S3_ENDPOINT's, or a local
    SeaweedFS's; creates the bucket."""
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
        s3_env.setdefault("TIERLOG_S3_ENDPOINT", config.endpoint_url or "")
    except BaseException:
        if s3 is not None:
            s3.stop()
        raise
    if s3 is not None:
        log.info("s3 started", extra={"endpoint": s3.endpoint, "data_dir": str(s3.data_dir)})
    return s3, s3_env


def _start_postgres(env: dict[str, str], data_dir: Path) -> tuple[LocalPostgres | None, str]:
    """TIERLOG_DATABASE_URL's database, or a local Postgres's."""
    database_url = env.get("TIERLOG_DATABASE_URL")
    if database_url:
        return None, database_url
    pg = LocalPostgres(data_dir / "postgres")
    database_url = pg.start()
    log.info("postgres started", extra={"data_dir": str(data_dir / "postgres")})
    return pg, database_url


def _broker(i: int, brokers: int, port: int, data_dir: Path, args: _NodeArgs) -> list[str]:
    log_level, auth, topic_defaults = args
    return _role_argv(
        "broker",
        log_level,
        *("--broker-id", str(i), "--listen", f"127.0.0.1:{port + i - 1}"),
        *("--kafka-listen", f"127.0.0.1:{port + i - 1 + KAFKA_PORT_SHIFT}"),
        *("--data-dir", str(data_dir / f"broker-{i}")),
        *("--default-replication-factor", str(min(3, brokers))),
        *_security_argv(auth),
        *(arg for name, value in topic_defaults for arg in ("--topic-default", f"{name}={value}")),
    )


SCHEMA_REGISTRY_PATH = "/schema-registry"  # registry/mount.py's BASE_PATH


def _kafka_addresses(broker_urls: list[str]) -> list[str]:
    return [f"127.0.0.1:{int(u.rsplit(':', 1)[1]) + KAFKA_PORT_SHIFT}" for u in broker_urls]


def _start_stores(
    env: dict[str, str], data_dir: Path
) -> tuple[LocalPostgres | None, str, LocalS3 | None, dict[str, str]]:
    """Postgres and the S3 endpoint, side by side: each takes about a second to start, and
    neither needs the other. Whichever fails, the other is stopped once it is up."""
    with ThreadPoolExecutor(1, thread_name_prefix="s3-start") as pool:
        s3_started = pool.submit(_start_s3, env, data_dir)
        try:
            pg, database_url = _start_postgres(env, data_dir)
        except BaseException:
            with contextlib.suppress(Exception):  # its own failure: ours is raised
                s3, _ = s3_started.result()
                if s3 is not None:
                    s3.stop()
            raise
        try:
            s3, s3_env = s3_started.result()
        except BaseException:
            if pg is not None:
                pg.stop()
            raise
    return pg, database_url, s3, s3_env


def run_dev(
    data_dir: Path,
    brokers: int,
    port: int,
    log_level: str = "INFO",
    auth: bool = False,
    kafka_defaults: bool = False,
) -> int:
    broker_ports = {f"broker-{i}": port + i - 1 for i in range(1, brokers + 1)}
    kafka_ports = {f"{name} kafka": p + KAFKA_PORT_SHIFT for name, p in broker_ports.items()}
    taken = _taken_port(
        {
            **broker_ports,
            **kafka_ports,
            "fetch": fetch_port(port, brokers),
            "console": console_port(port),
        }
    )
    if taken:  # before Postgres and S3 start: fail at once, in one line
        print(f"tierlog dev: {taken}", file=sys.stderr)
        return 1
    try:
        first_delay_s = restart_delay_s(os.environ)
    except ValueError as exc:
        print(f"tierlog dev: {exc}", file=sys.stderr)
        return 1
    logs.setup("dev", log_level, fmt=os.environ.get("TIERLOG_LOG_FORMAT", "") or "auto")
    data_dir.mkdir(parents=True, exist_ok=True)
    pg: LocalPostgres | None = None
    s3: LocalS3 | None = None
    supervisor = Supervisor(first_delay_s)
    signal.signal(signal.SIGINT, supervisor.on_signal)
    signal.signal(signal.SIGTERM, supervisor.on_signal)
    env = own_environment(os.environ, env_file(data_dir))
    try:
        pg, env["TIERLOG_DATABASE_URL"], s3, s3_env = _start_stores(env, data_dir)
        env.update(s3_env)
        broker_urls = [f"http://127.0.0.1:{p}" for p in broker_ports.values()]
        fetch_url = f"http://127.0.0.1:{fetch_port(port, brokers)}"
        console_url = f"http://127.0.0.1:{console_port(port)}"
        shown = {
            "TIERLOG_DATABASE_URL": env["TIERLOG_DATABASE_URL"],
            **s3_env,
            "TIERLOG_URL": broker_urls[0],  # the client commands' default node
            "TIERLOG_BROKER_URLS": ",".join(broker_urls),
            "TIERLOG_KAFKA_BOOTSTRAP": ",".join(_kafka_addresses(broker_urls)),
            # Confluent's Schema Registry API, served by every broker (registry/)
            "TIERLOG_SCHEMA_REGISTRY_URL": f"{broker_urls[0]}{SCHEMA_REGISTRY_PATH}",
            "TIERLOG_FETCH_URL": fetch_url,
            "TIERLOG_CONSOLE_URL": console_url,
        }
        if auth:
            shown["TIERLOG_API_KEY"] = admin_key(data_dir, env["TIERLOG_DATABASE_URL"])
        write_env_file(env_file(data_dir), shown)
        topic_defaults = () if kafka_defaults else DEV_TOPIC_DEFAULTS
        node_args = _NodeArgs(log_level, auth, topic_defaults)
        supervisor.start_ready(
            [
                (
                    Child(name, _broker(i, brokers, port, data_dir, node_args), env, p),
                    f"http://127.0.0.1:{p}",
                )
                for i, (name, p) in enumerate(broker_ports.items(), 1)
            ]
        )
        fetch_argv = _role_argv(
            "fetch", log_level, "--listen", fetch_url.removeprefix("http://"), *_security_argv(auth)
        )
        fetch = Child("fetch", fetch_argv, env, fetch_port(port, brokers))
        # The brokers are up (the schema migrated): the rest start together, each on its own.
        supervisor.start(fetch)
        for role in _WORKER_ROLES:
            supervisor.start(Child(role, _role_argv(role, log_level), env))
        console = _console_child(broker_urls[0], console_port(port), env, shown, log_level)
        supervisor.start_ready([(console, console_url)])
        fetch.wait_ready(fetch_url)
        urls = DevUrls(broker_urls, _kafka_addresses(broker_urls), fetch_url, console_url)
        defaults = describe_defaults(topic_defaults) or None
        lines = banner_lines(shown, urls, _WORKER_ROLES, defaults, env_file(data_dir))
        print(render(lines), file=sys.stderr, flush=True)
        supervisor.watch()
    except RuntimeError as exc:  # LocalPostgresError, LocalS3Error, a child that won't start
        # or that keeps failing (supervisor.GaveUp)
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
