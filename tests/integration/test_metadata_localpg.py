"""tierlog.devstack.localpg: the private Postgres that `tierlog dev` and the tests run."""

from __future__ import annotations

import glob
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from sqlalchemy.engine import make_url

from tests.chaos.world import PausablePostgres
from tierlog.devstack import localpg
from tierlog.devstack.localpg import LocalPostgres, LocalPostgresError

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def pg_dir() -> Iterator[Path]:
    # Not tmp_path: as root, the postgres user cannot traverse /tmp/pytest-of-root (mode 700).
    base = Path(tempfile.mkdtemp(prefix="tierlog-localpg-"))
    base.chmod(0o755)
    yield base / "pg"
    shutil.rmtree(base, ignore_errors=True)


def dsn(url: str) -> str:
    return url.replace("postgresql+psycopg://", "postgresql://")


def test_data_survives_restart_and_settings_apply(pg_dir: Path) -> None:
    with LocalPostgres(pg_dir) as pg, psycopg.connect(dsn(pg.url), autocommit=True) as conn:
        conn.execute("CREATE TABLE kept (x int)")
        conn.execute("INSERT INTO kept VALUES (42)")
        assert conn.execute("SHOW listen_addresses").fetchone() == ("127.0.0.1",)
        assert conn.execute("SHOW fsync").fetchone() == ("on",)
        assert _password_kind(conn) == "SCRAM-SHA-256"  # loopback is every local user's
    assert (pg_dir / "postgres.log").stat().st_size > 0
    port = localpg.free_port()
    with LocalPostgres(pg_dir, port, fast=True) as pg:
        assert pg.url.endswith(f"@127.0.0.1:{port}/tierlog")
        with psycopg.connect(dsn(pg.url)) as conn:
            assert conn.execute("SELECT x FROM kept").fetchone() == (42,)
            assert conn.execute("SHOW fsync").fetchone() == ("off",)
            assert conn.execute("SHOW synchronous_commit").fetchone() == ("on",)
            assert _password_kind(conn) == "SCRAM-SHA-256"  # made so: fast keeps it


def _password_kind(conn: psycopg.Connection[tuple[object, ...]]) -> str:
    """How the superuser's password is stored, and so checked: SCRAM-SHA-256 or md5."""
    row = conn.execute("SELECT rolpassword FROM pg_authid WHERE rolname = current_user")
    stored = str(row.fetchone()[0])  # type: ignore[index]
    return "md5" if stored.startswith("md5") else stored.split("$", 1)[0]


def test_a_fast_cluster_checks_its_password_with_md5_not_scram(pg_dir: Path) -> None:
    """Throwaway test clusters: SCRAM's PBKDF2 cost ~3 ms of CPU per new connection, and
    the suite opens thousands; the password is still required, and a wrong one refused."""
    with LocalPostgres(pg_dir, fast=True) as pg:
        with psycopg.connect(dsn(pg.url)) as conn:
            assert _password_kind(conn) == "md5"
        assert "host  all all 127.0.0.1/32 md5" in (pg.pgdata / "pg_hba.conf").read_text()
        assert not (pg_dir / "superuser.md5").exists()  # initdb's copy of the hash is gone
        wrong = make_url(pg.url).set(password="wrong").render_as_string(hide_password=False)
        with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
            psycopg.connect(dsn(wrong)).close()


def test_a_fast_postgres_killed_keeps_every_commit_it_acknowledged(pg_dir: Path) -> None:
    """The chaos suite kills Postgres with -9 and restarts it. With synchronous_commit off,
    commits still in its WAL buffers (up to ~0.6 s of them) died with it: rows that
    brokers and workers had been told were written were gone (a registered segment lost,
    its successors tiered first: tiering of that partition stopped for good in the
    30-minute soak, seed 2911). Fast mode skips fsync only: a commit reaches the OS before
    it returns, which a process crash does not undo."""
    pg = PausablePostgres(pg_dir, fast=True)
    pg.start()
    try:
        with psycopg.connect(dsn(pg.url), autocommit=True) as conn:
            conn.execute("CREATE TABLE acked (x int)")
            for i in range(300):
                conn.execute("INSERT INTO acked VALUES (%s)", (i,))
            pg.requested_port = pg.port
            pg.signal_all(signal.SIGKILL)  # right after the last commit returned
        pg.stop(timeout=5)
        pg.start()
        with psycopg.connect(dsn(pg.url)) as conn:
            assert conn.execute("SELECT count(*) FROM acked").fetchone() == (300,)
    finally:
        pg.stop()


def test_wrong_password_is_refused(pg_dir: Path) -> None:
    with LocalPostgres(pg_dir, fast=True) as pg:
        bad = make_url(dsn(pg.url)).set(password="wrong").render_as_string(hide_password=False)
        with pytest.raises(psycopg.OperationalError):
            psycopg.connect(bad, connect_timeout=5)


def test_second_owner_of_a_data_dir_is_refused(pg_dir: Path) -> None:
    with LocalPostgres(pg_dir, fast=True), pytest.raises(LocalPostgresError, match="in use"):
        LocalPostgres(pg_dir, fast=True).start()


def test_recovers_after_the_owner_was_killed(pg_dir: Path) -> None:
    """SIGKILL the owning process: its postmaster survives as an orphan; a new start copes."""
    script = textwrap.dedent(f"""
        import sys, time
        from pathlib import Path
        from tierlog.devstack.localpg import LocalPostgres
        pg = LocalPostgres(Path({str(pg_dir)!r}))
        print(pg.start(), flush=True)
        time.sleep(600)
    """)
    owner = subprocess.Popen(
        [sys.executable, "-c", script],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        cwd=ROOT,
    )
    try:
        assert owner.stdout is not None
        url = owner.stdout.readline().strip()
        with psycopg.connect(dsn(url), autocommit=True) as conn:
            conn.execute("CREATE TABLE t AS SELECT 7 AS x")
    finally:
        owner.kill()
        owner.wait()
    with LocalPostgres(pg_dir, fast=True) as pg, psycopg.connect(dsn(pg.url)) as conn:
        assert conn.execute("SELECT x FROM t").fetchone() == (7,)


def test_stale_pid_file_of_a_killed_postmaster(pg_dir: Path) -> None:
    pg = LocalPostgres(pg_dir)
    pg.start()
    proc = pg._proc
    assert proc is not None
    os.kill(proc.pid, signal.SIGKILL)  # crash: postmaster.pid stays behind
    proc.wait()
    pg.stop()
    assert (pg_dir / "pgdata" / "postmaster.pid").exists()
    with LocalPostgres(pg_dir, fast=True) as again, psycopg.connect(dsn(again.url)) as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)


def test_port_in_use_fails_with_the_server_log(pg_dir: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with pytest.raises(LocalPostgresError) as e:
            LocalPostgres(pg_dir, port, fast=True, timeout=20).start()
    assert "already in use" in str(e.value) and "postgres.log" in str(e.value)
    # The failed attempt released the data dir.
    with LocalPostgres(pg_dir, fast=True) as pg:
        assert pg.port is not None and pg.port != port


def test_missing_binaries_are_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shutil, "which", lambda _: None)
    monkeypatch.setattr(glob, "glob", lambda _: [])
    monkeypatch.delenv("TIERLOG_PG_BINDIR", raising=False)
    with pytest.raises(LocalPostgresError, match="binaries"):
        localpg.find_bindir()


@pytest.mark.skipif(os.geteuid() != 0, reason="only root hands the server to another user")
def test_untraversable_parent_is_explained() -> None:
    base = Path(tempfile.mkdtemp(prefix="tierlog-localpg-private-"))  # mode 700, root's
    try:
        with pytest.raises(LocalPostgresError, match="cannot reach"):
            LocalPostgres(base / "pg").start()
    finally:
        shutil.rmtree(base, ignore_errors=True)
