"""A private PostgreSQL server on 127.0.0.1 for `tierlog dev` and the test suite.

Layout of ``data_dir`` (created on first use, reused afterwards so data survives restarts):

- ``pgdata/``           the cluster (initdb'd once)
- ``postgres.log``      the server's stdout/stderr, appended across runs
- ``superuser.password`` the generated password of the ``tierlog`` superuser (mode 0600)
- ``.s.PGSQL.<port>``   the Unix socket (only when the path fits the 107-byte socket limit)
- ``localpg.lock``      flock held by the owning process while the server runs

Auth: a random password (scram-sha-256) rather than ``trust``, because 127.0.0.1 is reachable
by every local user; it costs nothing since the URL carries it. A ``fast`` (throwaway test)
cluster, made so, checks it with md5: SCRAM's 4,096 PBKDF2 rounds (fixed in PostgreSQL 15) cost
~3 ms of CPU per new connection, and a test run opens thousands.

Postgres refuses to run as root. When we are root, initdb and postgres run as the
``postgres`` user (subprocess ``user=``, so the pid we hold is the postmaster itself, and
signals reach it directly, unlike through ``runuser``). That user must be able to traverse
every parent of ``data_dir``: /tmp/... and /var/... work; /root/... does not unless you
``chmod o+x /root`` — prefer a location outside /root.
"""

from __future__ import annotations

import contextlib
import glob
import hashlib
import os
import pwd
import secrets
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import psycopg

from tierlog.devstack.local_server import (
    LocalServer,
    Readiness,
    free_port,
    log_tail,
    stop_process,
    wait_ready,
)

SUPERUSER = "tierlog"
DATABASE = "tierlog"
_RUN_AS = "postgres"  # the OS user the server runs as when we are root
_SOCKET_PATH_MAX = 107  # sun_path limit on Linux, minus the NUL


class LocalPostgresError(RuntimeError):
    """The local server could not be set up or started; the message says why."""


def find_bindir() -> Path:
    """PostgreSQL's server binaries: `pg_config --bindir`, else the newest /usr/lib/postgresql."""
    candidates: list[Path] = []
    if env := os.environ.get("TIERLOG_PG_BINDIR"):
        candidates.append(Path(env))
    if pg_config := shutil.which("pg_config"):
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            out = subprocess.run(
                [pg_config, "--bindir"], capture_output=True, text=True, timeout=10, check=True
            ).stdout.strip()
            candidates.append(Path(out))

    def version(p: str) -> int:
        name = Path(p).parent.name
        return int(name) if name.isdigit() else 0

    candidates += [
        Path(p) for p in sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=version, reverse=True)
    ]
    # pg_config may come from libpq-dev without a server, so require the binaries themselves.
    for c in candidates:
        if (c / "initdb").is_file() and (c / "postgres").is_file():
            return c
    raise LocalPostgresError(
        "PostgreSQL server binaries (initdb, postgres) not found: looked in "
        f"{[str(c) for c in candidates] or 'pg_config --bindir and /usr/lib/postgresql/*/bin'}; "
        "install the postgresql server package or set TIERLOG_PG_BINDIR"
    )


def _alive(pid: int) -> bool:
    """True while pid runs; a zombie (exited, not yet reaped by its parent) counts as dead."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _write_private(path: Path, text: str) -> Path:
    """`text` and a newline in a new file only its owner can read."""
    with os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as f:
        f.write(text + "\n")
    return path


class LocalPostgres(LocalServer):
    """Start/stop a private server over ``data_dir``; ``start()`` returns its SQLAlchemy URL."""

    def __init__(
        self, data_dir: Path, port: int | None = None, *, fast: bool = False, timeout: float = 60.0
    ) -> None:
        self.data_dir = Path(data_dir).absolute()
        self.pgdata = self.data_dir / "pgdata"
        self.log_path = self.data_dir / "postgres.log"
        self.requested_port = port
        self.port: int | None = None
        self.fast = fast
        self.timeout = timeout
        self._proc: subprocess.Popen[bytes] | None = None
        self._as_root = os.geteuid() == 0
        self._password = ""

    # -- public -------------------------------------------------------------------------------

    @property
    def url(self) -> str:
        if self.port is None:
            raise LocalPostgresError("the server is not running")
        return f"postgresql+psycopg://{SUPERUSER}:{self._password}@127.0.0.1:{self.port}/{DATABASE}"

    def start(self) -> str:
        if self._proc is not None:
            return self.url
        bindir = find_bindir()
        self._prepare_dir()
        busy = LocalPostgresError(
            f"{self.data_dir} is in use by another LocalPostgres (another `tierlog dev`?)"
        )
        self._lock(self.data_dir / "localpg.lock", 0o600, busy)
        try:
            self._initdb_if_needed(bindir)
            try:
                self._password = (self.data_dir / "superuser.password").read_text().strip()
            except FileNotFoundError:
                raise LocalPostgresError(
                    f"{self.data_dir}/superuser.password is missing, so the existing cluster "
                    "cannot be logged into; restore it or delete the data dir to start afresh"
                ) from None
            self._clear_stale_postmaster()
            for attempt in range(3):
                self.port = self.requested_port or free_port()
                try:
                    self._launch(bindir)
                    break
                except LocalPostgresError as e:
                    # A picked port can be taken between probe and bind: pick another one.
                    if self.requested_port is None and "already in use" in str(e) and attempt < 2:
                        continue
                    raise
            self._ensure_database()
        except BaseException:
            self.stop()
            raise
        return self.url

    def stop(self, timeout: float = 30.0) -> None:
        """Stop the server and release the data dir."""
        self._shutdown(timeout)
        self._unlock()

    def _shutdown(self, timeout: float = 30.0) -> None:
        """Fast shutdown (SIGINT: disconnect clients, checkpoint), escalating if it hangs."""
        proc, self._proc = self._proc, None
        stop_process(proc, ((signal.SIGINT, timeout), (signal.SIGQUIT, 5.0), (signal.SIGKILL, 5.0)))
        self.port = None

    def log_tail(self, lines: int = 30, since: int = 0) -> str:
        return log_tail(self.log_path, lines, since)

    # -- steps --------------------------------------------------------------------------------

    def _owner(self) -> pwd.struct_passwd | None:
        if not self._as_root:
            return None
        try:
            return pwd.getpwnam(_RUN_AS)
        except KeyError:
            raise LocalPostgresError(
                f"running as root, but there is no {_RUN_AS!r} user to run PostgreSQL as "
                "(Postgres refuses to run as root); create one or run as a normal user"
            ) from None

    def _prepare_dir(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        owner = self._owner()
        if owner is None:
            return
        os.chown(self.data_dir, owner.pw_uid, owner.pw_gid)
        os.chmod(self.data_dir, 0o700)
        # Path resolution needs search permission on every ancestor; test it as that user.
        probe = subprocess.run(
            ["test", "-x", str(self.data_dir)],
            user=owner.pw_uid,
            group=owner.pw_gid,
            extra_groups=[],
            check=False,
        )
        if probe.returncode != 0:
            raise LocalPostgresError(
                f"the {_RUN_AS!r} user cannot reach {self.data_dir}: a parent directory is not "
                "traversable (e.g. /root is mode 700). Put the data dir elsewhere (/tmp, /var/lib,"
                " a project dir outside /root) or `chmod o+x` the parents"
            )

    def _as_owner(self) -> dict[str, Any]:
        """subprocess keywords that run a command as the server's OS user (when we are root)."""
        owner = self._owner()
        if owner is None:
            return {}
        return {"user": owner.pw_uid, "group": owner.pw_gid, "extra_groups": []}

    def _run(self, args: list[str]) -> None:
        res = subprocess.run(
            args,
            capture_output=True,
            text=True,
            check=False,
            env=self._env(),
            cwd=self.data_dir,
            **self._as_owner(),
        )
        if res.returncode != 0:
            raise LocalPostgresError(
                f"{Path(args[0]).name} failed ({res.returncode}):\n{res.stdout}{res.stderr}"
            )

    def _env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
        env["LC_ALL"] = "C"
        owner = self._owner()
        if owner is not None:
            env.update(HOME=owner.pw_dir, USER=owner.pw_name, LOGNAME=owner.pw_name)
        return env

    def _initdb_if_needed(self, bindir: Path) -> None:
        if (self.pgdata / "PG_VERSION").is_file():
            return
        # A half-done initdb (killed run) leaves a dir initdb refuses to reuse: start over.
        shutil.rmtree(self.pgdata, ignore_errors=True)
        pwfile = self.data_dir / "superuser.password"
        if not pwfile.is_file():
            _write_private(pwfile, secrets.token_urlsafe(24))
        method = "md5" if self.fast else "scram-sha-256"
        secret = pwfile
        if self.fast:  # initdb stores a password given as its md5 hash as it is
            password = pwfile.read_text().strip()
            digest = hashlib.md5((password + SUPERUSER).encode(), usedforsecurity=False)
            secret = _write_private(self.data_dir / "superuser.md5", f"md5{digest.hexdigest()}")
        if (owner := self._owner()) is not None:
            os.chown(pwfile, owner.pw_uid, owner.pw_gid)
            os.chown(secret, owner.pw_uid, owner.pw_gid)
        args = [str(bindir / "initdb"), "-D", str(self.pgdata), "-U", SUPERUSER]
        args += ["--pwfile", str(secret), f"--auth={method}", "--encoding=UTF8", "--locale=C"]
        if self.fast:
            args.append("--no-sync")
        try:
            self._run(args)
        finally:
            if secret != pwfile:
                secret.unlink()
        # Only loopback TCP and the private socket; no replication, no other hosts.
        (self.pgdata / "pg_hba.conf").write_text(
            "# written by tierlog.devstack.localpg\n"
            f"local all all {method}\n"
            f"host  all all 127.0.0.1/32 {method}\n"
        )

    def _clear_stale_postmaster(self) -> None:
        """Handle a postmaster.pid left by a killed run: stop an orphan, drop a stale file."""
        pidfile = self.pgdata / "postmaster.pid"
        try:
            pid = int(pidfile.read_text().splitlines()[0])
        except (OSError, ValueError, IndexError):
            return
        try:
            # The postmaster chdirs into its data dir: that identifies it even if pids recycle.
            ours = os.readlink(f"/proc/{pid}/cwd") == str(self.pgdata.resolve())
        except OSError:
            ours = False
        if ours:
            # An orphan of ours (we hold the flock, so no live LocalPostgres owns it): stop it,
            # so this run's port and settings take effect.
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGINT)
            deadline = time.monotonic() + 30
            while _alive(pid) and time.monotonic() < deadline:
                time.sleep(0.05)
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
                time.sleep(0.5)
        with contextlib.suppress(FileNotFoundError):
            pidfile.unlink()

    def _settings(self) -> dict[str, str]:
        sock = str(self.data_dir)
        assert self.port is not None
        if len(f"{sock}/.s.PGSQL.{self.port}") > _SOCKET_PATH_MAX:
            sock = ""  # TCP only: a too-long socket path would stop the server from starting
        s = {
            "listen_addresses": "127.0.0.1",
            "port": str(self.port),
            "unix_socket_directories": sock,
            "max_connections": "300",  # several brokers + tests, each with a small pool
            "timezone": "UTC",
            "log_timezone": "UTC",
        }
        if self.fast:
            # Throwaway test data: no fsync (an OS crash may lose it). synchronous_commit
            # stays on: a commit reaches the OS before it returns, so a kill -9 of Postgres
            # (the chaos suite's) loses nothing acknowledged, as in production.
            s.update(fsync="off", full_page_writes="off")
        return s

    def _launch(self, bindir: Path) -> None:
        log_start = self.log_path.stat().st_size if self.log_path.exists() else 0
        args = [str(bindir / "postgres"), "-D", str(self.pgdata)]
        for k, v in self._settings().items():
            args += ["-c", f"{k}={v}"]
        deadline = time.monotonic() + self.timeout
        while True:
            with open(self.log_path, "ab") as log:
                # Own session: a Ctrl-C aimed at `tierlog dev` must not kill the database
                # before the brokers have deregistered; stop() shuts it down in order.
                proc = subprocess.Popen(
                    args,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=log,
                    env=self._env(),
                    cwd=self.data_dir,
                    start_new_session=True,
                    **self._as_owner(),
                )
            self._proc = proc
            err = self._wait_ready(proc, deadline, log_start)
            if err is None:
                return
            tail = self.log_tail(since=log_start)
            # Backends orphaned by a killed postmaster keep its shared memory a little longer.
            if "shared memory block is still in use" in tail and time.monotonic() < deadline:
                self._proc = None
                time.sleep(0.5)
                continue
            port = self.port
            self._shutdown()
            raise LocalPostgresError(
                f"PostgreSQL on 127.0.0.1:{port} ({self.pgdata}) {err}; "
                f"last lines of {self.log_path}:\n{tail}"
            )

    def _wait_ready(
        self, proc: subprocess.Popen[bytes], deadline: float, log_start: int
    ) -> str | None:
        """None when a real login works; else why not (exited / timed out)."""

        def logs_in() -> bool:
            try:
                with self._connect(dbname="postgres", connect_timeout=2):
                    return True
            except psycopg.OperationalError:
                return False

        outcome = wait_ready(proc, logs_in, deadline, 0.05)
        if outcome is Readiness.READY:
            return None
        if outcome is Readiness.TIMED_OUT:
            return f"not ready after {self.timeout:.0f}s"
        if "Address already in use" in self.log_tail(since=log_start):
            return "could not listen: port already in use"
        return f"exited with status {proc.returncode}"

    def _connect(self, **kw: Any) -> psycopg.Connection[Any]:
        """A connection as the superuser over loopback TCP."""
        return psycopg.connect(
            host="127.0.0.1", port=self.port, user=SUPERUSER, password=self._password, **kw
        )

    def _ensure_database(self) -> None:
        with self._connect(dbname="postgres", autocommit=True) as conn:
            if (
                conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (DATABASE,)).fetchone()
                is None
            ):
                with contextlib.suppress(psycopg.errors.DuplicateDatabase):
                    conn.execute(f'CREATE DATABASE "{DATABASE}"')
