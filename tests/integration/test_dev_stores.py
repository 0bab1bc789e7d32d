"""`tierlog dev` starts Postgres and its S3 endpoint side by side (dev.py's _start_stores):
whichever fails, the other is stopped, and the failure is what dev reports."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.ports import free_port
from tierlog.devstack.dev import _start_stores


def _processes_under(path: Path) -> list[str]:
    """Command lines of live processes that name `path` (a server's data dir)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue  # gone meanwhile
        if str(path) in argv:
            found.append(argv)
    return found


@pytest.fixture
def data_dir() -> Iterator[Path]:
    # Not tmp_path: /tmp/pytest-of-root is mode 700, which the postgres user (used when we
    # run as root) cannot traverse.
    path = Path(tempfile.mkdtemp(prefix="tierlog-dev-stores-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_a_failing_s3_stops_the_postgres_started_beside_it(data_dir: Path) -> None:
    env = {**os.environ, "TIERLOG_S3_ENDPOINT": f"http://127.0.0.1:{free_port()}"}
    env.pop("TIERLOG_DATABASE_URL", None)
    with pytest.raises(RuntimeError, match="cannot create bucket"):
        _start_stores(env, data_dir)
    assert (data_dir / "postgres").exists()  # it was started
    assert not (data_dir / "postgres" / "pgdata" / "postmaster.pid").exists()
    assert _processes_under(data_dir / "postgres") == []


def test_a_failing_postgres_stops_the_s3_started_beside_it(data_dir: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TIERLOG_")}
    (data_dir / "postgres").write_text("not a directory")  # Postgres cannot start here
    with pytest.raises(Exception):  # noqa: B017  (whatever LocalPostgres raises for it)
        _start_stores(env, data_dir)
    assert (data_dir / "s3" / "weed.log").exists()  # it was started
    assert _processes_under(data_dir / "s3") == []
