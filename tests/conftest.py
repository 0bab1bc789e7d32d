"""Shared pytest fixtures.

Postgres (real, per docs/design.md §9). Every URL is a ``postgresql+psycopg://`` string usable by
``metadata.db.make_engine`` and by broker processes (``TIERLOG_DATABASE_URL``).

- ``database_url`` (session): the server's ``tierlog`` database. ``TIERLOG_DATABASE_URL`` if set
  (its user needs CREATEDB), else a private LocalPostgres(fast=True) in a temp dir for the
  whole run (as root, it runs as the ``postgres`` user).
- ``db_factory`` (session): ``db_factory(migrated=True) -> url`` makes a new database (cloned
  from a template migrated once per run: milliseconds); all are dropped at the end of the run.
  For module- or session-scoped fixtures that need their own database.
- ``fresh_db`` / ``db_url`` (function): a new migrated database only this test uses, dropped
  after the test.
- ``empty_db`` (function): a new database with no schema (migration tests).
- ``db_engine`` (function): a ``make_engine`` engine on ``fresh_db``, disposed after the test.
"""

from __future__ import annotations

import gc
import os
import shutil
import tempfile
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.engine import Engine, make_url

from metadata.db import make_engine, migrate


@pytest.fixture(scope="session")
def database_url() -> Iterator[str]:
    external = os.environ.get("TIERLOG_DATABASE_URL")
    if external:
        yield external
        return
    from tierlog.devstack.localpg import LocalPostgres

    # Not pytest's tmp_path: /tmp/pytest-of-root is mode 700, which the postgres user
    # (used when we run as root) cannot traverse.
    data_dir = Path(tempfile.mkdtemp(prefix="tierlog-test-pg-"))
    data_dir.chmod(0o755)  # mkdtemp makes it 700; LocalPostgres locks down its own subdir
    pg = LocalPostgres(data_dir / "pg", fast=True)
    try:
        yield pg.start()
    finally:
        pg.stop()
        shutil.rmtree(data_dir, ignore_errors=True)


class _Databases:
    """CREATE/DROP DATABASE on the test server (autocommit: they cannot run in a transaction)."""

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url
        self.admin = make_engine(base_url, isolation_level="AUTOCOMMIT")
        with self.admin.connect() as conn:
            version = int(conn.execute(text("SHOW server_version_num")).scalar_one())
        # PG15's default WAL_LOG strategy copies block by block through the WAL; for a small
        # template a plain file copy is ~2.5x faster.
        self._strategy = " STRATEGY FILE_COPY" if version >= 150000 else ""

    def create(self, prefix: str, template: str | None = None) -> str:
        name = f"{prefix}_{uuid.uuid4().hex[:12]}"
        clause = f' TEMPLATE "{template}"{self._strategy}' if template else ""
        with self.admin.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{name}"{clause}'))
        return name

    def drop(self, name: str) -> None:
        # FORCE: a test may leak connections (or a broker process may still hold some).
        with self.admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))

    def url(self, name: str) -> str:
        return make_url(self.base_url).set(database=name).render_as_string(hide_password=False)


@pytest.fixture(scope="session")
def _databases(database_url: str) -> Iterator[_Databases]:
    dbs = _Databases(database_url)
    yield dbs
    dbs.admin.dispose()


@pytest.fixture(scope="session")
def _migrated_template(_databases: _Databases) -> Iterator[str]:
    name = _databases.create("tierlog_template")
    engine = make_engine(_databases.url(name))
    migrate(engine)
    engine.dispose()  # a template must have no open connections while it is cloned
    yield name
    _databases.drop(name)


@pytest.fixture(scope="session")
def db_factory(_databases: _Databases, _migrated_template: str) -> Iterator[Callable[..., str]]:
    made: list[str] = []

    def make(migrated: bool = True) -> str:
        name = _databases.create(
            "t" if migrated else "t_empty", template=_migrated_template if migrated else None
        )
        made.append(name)
        return _databases.url(name)

    yield make
    for name in made:
        _databases.drop(name)


@pytest.fixture
def fresh_db(_databases: _Databases, _migrated_template: str) -> Iterator[str]:
    name = _databases.create("t", template=_migrated_template)
    yield _databases.url(name)
    _databases.drop(name)


@pytest.fixture
def db_url(fresh_db: str) -> str:
    """Alias of fresh_db."""
    return fresh_db


@pytest.fixture
def empty_db(_databases: _Databases) -> Iterator[str]:
    name = _databases.create("t_empty")
    yield _databases.url(name)
    _databases.drop(name)


@pytest.fixture
def db_engine(fresh_db: str) -> Iterator[Engine]:
    engine = make_engine(fresh_db)
    yield engine
    engine.dispose()


# Every JVM the tests start (the suite's SparkSession, examples/spark_query.py, bench.spark_scan's
# smoke, test_spark_delta.py's child, and the launcher JVM spark-submit runs before each) lives
# for seconds to minutes on small data: the C1 compiler alone and the serial collector cut the
# CPU of test_spark_source*.py by ~20% (the C2 compiler's work never pays off there). Nor
# does verifying the bytecode of every class loaded from Spark's and Delta's jars (the JDK's
# own are not verified either): off, a JVM's start and first queries take ~10% less CPU. The
# `java` launcher reads JDK_JAVA_OPTIONS; one set by the caller is kept.
JVM_TEST_OPTIONS = (
    "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
    " -XX:+UnlockDiagnosticVMOptions -XX:-BytecodeVerificationRemote"
)


def pytest_configure(config: pytest.Config) -> None:
    from tests.jvm_archive import jvm_options

    os.environ.setdefault("JDK_JAVA_OPTIONS", JVM_TEST_OPTIONS + jvm_options())
    # What tierlog/startup.py sets in every tierlog process, for the other Python processes
    # the tests start (benchmarks, Spark's Python workers, scripts): none does linear algebra,
    # and numpy's OpenBLAS threads cost each ~0.1 CPU-s of spinning at import.
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


def pytest_collection_finish(session: pytest.Session) -> None:
    """What collection made (every test module, the libraries they import, the items) lives
    to the end of the run, yet each full collection of the cyclic GC scanned it all again:
    frozen, it is left out (tests/unit on one worker: GC 3.9 -> 2.9 s of its 28 s of CPU).
    Garbage is still found as soon as before: only objects alive now are frozen.

    A full collection then runs after 100 of the middle one's, not 10: what the tests keep
    alive after collection made each full pass ~95 ms, ~45 of them a worker. A whole run at
    -n 4: the workers' GC 26.6 -> 12.5 s, its CPU 706-725 -> 692.8 CPU-s. Cyclic garbage that
    outlives two younger passes waits longer, in memory."""
    gc.collect()
    gc.freeze()
    young, middle, _ = gc.get_threshold()
    gc.set_threshold(young, middle, 100)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """The chaos suite's random seeds, in every run's output (pass or fail, with xdist too:
    reports carry their user properties from the workers), so any run can be replayed."""
    for reports in terminalreporter.stats.values():
        for report in reports:
            for name, value in getattr(report, "user_properties", ()):
                if getattr(report, "when", "") != "call":
                    continue
                if name == "chaos_seed":
                    terminalreporter.write_line(
                        f"{report.nodeid}: chaos seed {value} ({report.outcome}; replay with "
                        f"TIERLOG_CHAOS_SEED={value})"
                    )


# -- scheduling over xdist workers (scripts/test: -n 4 --dist loadfile --no-loadscope-reorder) --
# Each test file is one unit of work for a worker (its module fixtures share brokers and data),
# except that files sharing a costly per-process resource form one unit: one Spark JVM.
_SHARED_UNITS = {
    "test_spark_source.py": "spark",
    "test_spark_source_archive.py": "spark",
    "test_spark_streaming.py": "spark",
    "test_erasure_cluster.py": "spark",  # its Spark check shares the one JVM
    # Its own unit started a second JVM on another worker (~10 CPU-s, half its file's CPU).
    "test_typed_lake.py": "spark",
}
# Files whose tests split into several units by their parameter (the rest of such a file's tests
# make one more unit): the benchmark smoke was the suite's longest file (14 benchmarks, each
# starting its own Postgres, S3 endpoint and servers: 13 min on one worker at load ~40), so its
# halves run on two workers, and the lane's benchmarks with spark_scan (test_bench_smoke.py's
# `background`) on a third. Halves balanced by one -n 3 run at load 35-60 (--durations, s):
# typed_lake 119, tiering 100, cost 78, produce 63, compaction 41 | replay 120, search 65,
# client_closed_loop 60, kafka_protocol 59, erase 33, schemas 30; the lane: replication 125,
# pipeline 188, rolling_restart 137, one after the other.
_SPLIT_UNITS = {
    "test_bench_smoke.py": {
        **dict.fromkeys(("typed_lake", "tiering", "cost", "produce", "compaction"), "a"),
        **dict.fromkeys(
            ("replay", "search", "client_closed_loop", "kafka_protocol", "erase", "schemas"), "b"
        ),
    },
}
# The slowest units first, so no worker is left alone with a long file at the end while the
# others idle. By each unit's whole-run cost (setup + call + teardown, --durations, s) in one
# -n 3 run at load 30-40 (2026-11-29, interrupted after 38 files): the benchmark smoke's three
# units lead (536 in all, the most CPU), then the Spark JVM unit (spark_streaming 181 +
# erasure_cluster 167 + spark_source_archive 156 + spark_source 30, its JVM start included),
# dev 346 (its first test starts a second JVM, examples/spark_query.py), client_bulk 338
# (bench.client's smoke), dependency_timeouts 306, replay 220, openapi_fuzz 220, replication
# 214, client 193, typed_lake 191, openapi_fuzz_negative 184, tiering_broker 162, quix 152,
# compaction 138, dev_auth 137, chaos 136 (failed at that load; 79 on CI), tiering_crash 132,
# groups 128, tiering_faults 125, quotas 120, cold_fetch 116, corruption 101, and on down.
# Files without a recent figure keep their earlier place; the rest follow in collection order.
# Re-ranked by CI's last run (quiet, -n 3; slowest calls, s): chaos 71.6 (its one test) goes
# ahead of compaction and dev_auth (24 in all there), which follows tiering_faults (25.5 for
# its errors-18pct case alone).
_SLOWEST_FIRST = (
    "test_bench_smoke.py",
    "test_spark_source_archive.py",  # the Spark unit's files, in their earlier order
    "test_spark_source.py",
    "test_spark_streaming.py",
    "test_erasure_cluster.py",
    "test_dev.py",
    "test_client_bulk.py",
    "test_dependency_timeouts.py",
    "test_replay.py",
    "test_openapi_fuzz.py",
    "test_replication.py",
    "test_client.py",
    "test_typed_lake.py",
    "test_openapi_fuzz_negative.py",
    "test_tiering_broker.py",
    "test_kafka_quix.py",  # ~2.5 min of cluster and app (scripts/test makes its venv ahead)
    "test_chaos.py",
    "test_compaction.py",
    "test_tiering_crash.py",
    "test_groups.py",
    "test_tiering_faults.py",
    "test_dev_auth.py",
    "test_quotas.py",
    "test_cold_fetch.py",
    "test_corruption.py",
    "test_kafka_transactions.py",
    "test_compaction_keys.py",
    "test_console_messages.py",
    "test_kafka_consumer_protocol.py",
    "test_kafka_txn_failover.py",
    "test_cli_consume.py",
    "test_cli_polish.py",
    "test_kafka_client_assignors.py",
    "test_durability.py",
    "test_kafka_acl_admin.py",
    "test_console_security.py",
    "test_console_topics.py",
    "test_kafka_group_admin.py",
    "test_auth_forwarding.py",
    "test_auth.py",
    "test_client_groups.py",
)


@pytest.hookimpl(wrapper=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> Iterator[None]:
    yield
    # After pytest's own reordering; a stable sort keeps each file's tests in their order.
    rank = {name: i for i, name in enumerate(_SLOWEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """--dist loadfile, with _SHARED_UNITS' files in one unit and _SPLIT_UNITS' files in
    several. (xdist_group marks with --dist loadgroup would say the same, but xdist 3.8 names
    groups through Item._nodeid, which pytest 9 no longer reads.)"""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class SharedUnitScheduling(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return _unit_of(nodeid)

    return SharedUnitScheduling(config, log)


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """Tells each xdist worker whether _SPLIT_UNITS' files are split (workers see --dist as
    "no"): test_bench_smoke.py then starts its background only where its tests run."""
    node.workerinput["tierlog_split_units"] = node.config.getvalue("dist") == "loadfile"


def split_units(config: pytest.Config) -> bool:
    """True in an xdist worker of a run whose _SPLIT_UNITS' files are split over workers."""
    return bool(getattr(config, "workerinput", {}).get("tierlog_split_units", False))


def _unit_of(nodeid: str) -> str:
    """The unit of xdist work a test belongs to: its file, a shared unit, or a split file's part."""
    path, _, rest = nodeid.partition("::")
    name = path.rsplit("/", 1)[-1]
    if name in _SPLIT_UNITS:
        param = rest.partition("[")[2].rstrip("]")
        return f"{path}::{_SPLIT_UNITS[name].get(param, 'rest')}"
    return _SHARED_UNITS.get(name, path)
