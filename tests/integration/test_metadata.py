"""Metadata repositories against a real Postgres: migrations, brokers, topics, versioning."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

import psycopg
import pytest
from sqlalchemy import inspect, text
from sqlalchemy.engine import Engine, make_url

from ingest.kafka.cluster_apis import _listed
from logformat.errors import ErrorCode, TierlogError
from metadata.brokers import BrokerRepo
from metadata.db import NOTIFY_CHANNEL, SCHEMA_HEAD, make_engine, migrate, schema_revision
from metadata.topics import MAX_PARTITIONS, TopicRepo
from tests.integration.schema_head import HEAD

ROOT = Path(__file__).resolve().parents[2]
TABLES = {"brokers", "controller", "topics", "partitions", "metadata_version", "alembic_version"}


def raises(
    code: ErrorCode, fn: Callable[..., object], *args: object, **kwargs: object
) -> TierlogError:
    with pytest.raises(TierlogError) as e:
        fn(*args, **kwargs)
    assert e.value.code is code, e.value
    return e.value


@pytest.fixture
def brokers(db_engine: Engine) -> BrokerRepo:
    return BrokerRepo(db_engine)


@pytest.fixture
def topics(db_engine: Engine, brokers: BrokerRepo) -> TopicRepo:
    for i in (1, 2, 3):
        brokers.register(i, f"http://127.0.0.1:{9000 + i}", 60_000)
    return TopicRepo(db_engine)


# -- migrations ---------------------------------------------------------------------------------


def test_migrate_is_idempotent(empty_db: str) -> None:
    engine = make_engine(empty_db)
    try:
        assert schema_revision(engine) is None
        migrate(engine)
        migrate(engine)
        assert schema_revision(engine) == HEAD
        assert set(inspect(engine).get_table_names()) >= TABLES
        with engine.connect() as conn:  # single-row tables seeded exactly once
            assert conn.execute(text("SELECT count(*) FROM controller")).scalar() == 1
            assert conn.execute(text("SELECT count(*) FROM metadata_version")).scalar() == 1
    finally:
        engine.dispose()


def test_migrate_from_several_processes_at_once(empty_db: str) -> None:
    code = (
        "import sys; from metadata.db import make_engine, migrate; "
        "e = make_engine(sys.argv[1]); migrate(e); e.dispose()"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code, empty_db],
            env=env,
            cwd=ROOT,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(4)
    ]
    for p in procs:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
    engine = make_engine(empty_db)
    try:
        assert schema_revision(engine) == HEAD
        with engine.connect() as conn:
            assert conn.execute(text("SELECT count(*) FROM metadata_version")).scalar() == 1
    finally:
        engine.dispose()


def test_schema_head_is_alembic_s_newest_revision() -> None:
    assert SCHEMA_HEAD == HEAD, "a migration was added: set metadata.db.SCHEMA_HEAD to it"


def test_a_schema_at_head_is_migrated_without_loading_alembic(db_engine: Engine) -> None:
    # Every broker and worker start migrates; at head that must not cost Alembic's import
    # and a parse of every migration script.
    code = (
        "import sys; from metadata.db import make_engine, migrate; "
        "e = make_engine(sys.argv[1]); migrate(e); e.dispose(); "
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'alembic'))"
    )
    url = db_engine.url.render_as_string(hide_password=False)
    out = subprocess.run(
        [sys.executable, "-c", code, url],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_migrate_refuses_an_unknown_newer_schema(db_engine: Engine) -> None:
    with db_engine.begin() as conn:
        conn.execute(text("UPDATE alembic_version SET version_num = '9999'"))
    with pytest.raises(RuntimeError, match="newer"):
        migrate(db_engine)


def test_make_engine_accepts_plain_postgres_urls(fresh_db: str) -> None:
    plain = make_url(fresh_db).set(drivername="postgresql").render_as_string(hide_password=False)
    engine = make_engine(plain)
    try:
        assert engine.url.drivername == "postgresql+psycopg"
        assert TopicRepo(engine).version() == 0
    finally:
        engine.dispose()
    with pytest.raises(ValueError):
        make_engine("sqlite:///x.db")


# -- brokers ------------------------------------------------------------------------------------


def test_register_heartbeat_and_lease_expiry(brokers: BrokerRepo) -> None:
    first = brokers.register(1, "http://a", 400)
    assert first.alive and first.incarnation == 1 and first.url == "http://a"
    brokers.register(2, "http://b", 60_000)
    assert brokers.live_ids() == [1, 2]
    assert brokers.heartbeat(1, 400)
    time.sleep(0.6)
    assert [(b.id, b.alive) for b in brokers.list()] == [(1, False), (2, True)]
    assert brokers.live_ids() == [2]
    # An expired broker must re-register (the controller may have moved its partitions).
    assert not brokers.heartbeat(1, 60_000)
    assert not brokers.heartbeat(99, 60_000)
    again = brokers.register(1, "http://a2", 60_000)
    assert again.alive and again.incarnation == 2 and again.url == "http://a2"
    assert brokers.live_ids() == [1, 2]


def test_deregister_ends_the_lease_now(brokers: BrokerRepo) -> None:
    brokers.register(7, "http://x", 60_000)
    brokers.deregister(7)
    info = brokers.get(7)
    assert info is not None and not info.alive
    assert brokers.live_ids() == []
    # The session ends with it: Kafka clients' Metadata stops listing it at once (a killed
    # broker, whose lease just lapses, stays listed for the session timeout).
    assert not _listed(info, datetime.now(UTC))
    brokers.deregister(8)  # unknown: nothing to do
    raises(ErrorCode.INVALID_REQUEST, brokers.register, -1, "http://x", 1000)
    raises(ErrorCode.INVALID_REQUEST, brokers.register, 1, "http://x", 0)


# -- topics -------------------------------------------------------------------------------------


def test_create_get_list_partitions(topics: TopicRepo) -> None:
    info = topics.create(
        "orders", 6, 3, {"retention.ms": 3_600_000, "cleanup.policy": "delete,compact"}
    )
    assert info.name == "orders" and info.partition_count == 6 and info.replication_factor == 3
    assert info.configs == {"cleanup.policy": "compact,delete", "retention.ms": "3600000"}
    assert topics.get("orders") == info
    assert topics.get("nope") is None
    topics.create("audit", 1, 1)
    assert [t.name for t in topics.list()] == ["audit", "orders"]
    parts = topics.partitions("orders")
    assert [p.partition for p in parts] == list(range(6))
    for p in parts:
        assert p.topic == "orders" and p.topic_id == info.id
        assert len(p.replicas) == 3 and set(p.replicas) == {1, 2, 3}
        assert p.leader == p.replicas[0] and p.isr == p.replicas
        assert p.leader_epoch == 0 and p.partition_epoch == 0
    assert [(p.topic, p.partition) for p in topics.all_partitions()] == (
        [("audit", 0)] + [("orders", i) for i in range(6)]
    )
    version, infos, all_parts = topics.snapshot()
    assert version == topics.version() and len(infos) == 2 and len(all_parts) == 7


def test_replica_placement_is_even_over_three_brokers(topics: TopicRepo) -> None:
    topics.create("even", 30, 3)
    parts = topics.partitions("even")
    assert Counter(p.leader for p in parts) == {1: 10, 2: 10, 3: 10}
    assert Counter(b for p in parts for b in p.replicas) == {1: 30, 2: 30, 3: 30}
    topics.create("even2", 6, 2)
    parts = topics.partitions("even2")
    assert Counter(p.leader for p in parts) == {1: 2, 2: 2, 3: 2}
    assert Counter(b for p in parts for b in p.replicas) == {1: 4, 2: 4, 3: 4}


def test_placement_uses_only_live_brokers(topics: TopicRepo, brokers: BrokerRepo) -> None:
    brokers.deregister(2)
    topics.create("two", 4, 2)
    assert {b for p in topics.partitions("two") for b in p.replicas} == {1, 3}
    err = raises(ErrorCode.INVALID_REPLICATION_FACTOR, topics.create, "three", 1, 3)
    assert "2 alive" in err.message
    assert topics.get("three") is None  # the failed create left nothing behind


def test_alter_configs(topics: TopicRepo) -> None:
    topics.create("t", 1, 3, {"retention.ms": 5000})
    info = topics.alter_configs(
        "t", {"segment.bytes": "4096", "min.insync.replicas": 2}, ["retention.ms"]
    )
    assert info.configs == {"min.insync.replicas": "2", "segment.bytes": "4096"}
    assert topics.get("t") == info
    raises(ErrorCode.INVALID_CONFIG, topics.alter_configs, "t", {"min.insync.replicas": 4})
    raises(ErrorCode.INVALID_CONFIG, topics.alter_configs, "t", {"segment.bytes": 10})
    raises(ErrorCode.INVALID_CONFIG, topics.alter_configs, "t", {"nope": 1})
    raises(ErrorCode.INVALID_CONFIG, topics.alter_configs, "t", {}, ["nope"])
    raises(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, topics.alter_configs, "u", {"segment.ms": 1})
    assert topics.get("t") == info  # failed alters changed nothing


def test_add_partitions(topics: TopicRepo) -> None:
    before = topics.create("grow", 3, 2)
    after = topics.add_partitions("grow", 9)
    assert after.partition_count == 9 and after.id == before.id
    parts = topics.partitions("grow")
    assert [p.partition for p in parts] == list(range(9))
    assert Counter(p.leader for p in parts) == {1: 3, 2: 3, 3: 3}
    assert all(len(set(p.replicas)) == 2 for p in parts)
    raises(ErrorCode.INVALID_PARTITIONS, topics.add_partitions, "grow", 9)
    raises(ErrorCode.INVALID_PARTITIONS, topics.add_partitions, "grow", 2)
    raises(ErrorCode.INVALID_PARTITIONS, topics.add_partitions, "grow", MAX_PARTITIONS + 1)
    raises(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, topics.add_partitions, "nope", 4)


def test_delete_cascades_and_recreate_gets_a_new_id(topics: TopicRepo) -> None:
    first = topics.create("gone", 4, 1)
    assert topics.delete("gone") == first
    assert topics.get("gone") is None and topics.all_partitions() == []
    raises(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, topics.delete, "gone")
    raises(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, topics.partitions, "gone")
    second = topics.create("gone", 2, 1)
    assert second.id != first.id


@pytest.mark.parametrize(
    ("args", "code"),
    [
        (("bad name", 1, 1), ErrorCode.INVALID_TOPIC_EXCEPTION),
        ((".", 1, 1), ErrorCode.INVALID_TOPIC_EXCEPTION),
        (("x" * 250, 1, 1), ErrorCode.INVALID_TOPIC_EXCEPTION),
        (("t", 0, 1), ErrorCode.INVALID_PARTITIONS),
        (("t", MAX_PARTITIONS + 1, 1), ErrorCode.INVALID_PARTITIONS),
        (("t", True, 1), ErrorCode.INVALID_PARTITIONS),
        (("t", 1, 0), ErrorCode.INVALID_REPLICATION_FACTOR),
        (("t", 1, 4), ErrorCode.INVALID_REPLICATION_FACTOR),
        (("t", 1, 2, {"min.insync.replicas": 3}), ErrorCode.INVALID_CONFIG),
        (("t", 1, 1, {"compression.type": "gzip"}), ErrorCode.INVALID_CONFIG),
        (("t", 1, 1, {"retention.ms": "forever"}), ErrorCode.INVALID_CONFIG),
        (("t", 1, 1, {"no.such": "1"}), ErrorCode.INVALID_CONFIG),
    ],
)
def test_create_errors(topics: TopicRepo, args: tuple[object, ...], code: ErrorCode) -> None:
    err = raises(code, topics.create, *args)
    assert err.http_status == 400
    assert topics.list() == []


def test_duplicate_create_is_409_even_when_racing(topics: TopicRepo) -> None:
    topics.create("dup", 1, 1)
    err = raises(ErrorCode.TOPIC_ALREADY_EXISTS, topics.create, "dup", 3, 1)
    assert err.http_status == 409

    def attempt(_: int) -> str:
        try:
            topics.create("race", 2, 1)
            return "created"
        except TierlogError as e:
            return e.code.value

    with ThreadPoolExecutor(8) as pool:
        outcomes = Counter(pool.map(attempt, range(8)))
    assert outcomes == {"created": 1, "TOPIC_ALREADY_EXISTS": 7}
    assert len(topics.partitions("race")) == 2


def test_unknown_topic_is_404(topics: TopicRepo) -> None:
    err = raises(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, topics.partitions, "nope")
    assert err.http_status == 404


# -- change tracking ----------------------------------------------------------------------------


def test_version_moves_on_every_change_and_only_then(
    topics: TopicRepo, brokers: BrokerRepo
) -> None:
    v = topics.version()
    assert v > 0  # the three registrations

    def bumped(fn: Callable[..., object], *args: object) -> bool:
        nonlocal v
        before, _ = v, fn(*args)
        v = topics.version()
        return v > before

    assert bumped(topics.create, "v", 4, 2)
    assert topics.version() == v  # one bump per transaction, however many rows it touched
    assert bumped(topics.alter_configs, "v", {"retention.ms": 1})
    assert not bumped(topics.alter_configs, "v", {"retention.ms": 1})  # same value: no change
    assert bumped(topics.add_partitions, "v", 6)
    assert not bumped(brokers.heartbeat, 1, 60_000)  # heartbeats are not metadata changes
    assert not bumped(topics.list)

    def duplicate() -> None:
        with pytest.raises(TierlogError):
            topics.create("v", 1, 1)

    assert not bumped(duplicate)  # a failed change rolls its bump back
    assert bumped(brokers.register, 4, "http://d", 60_000)
    assert bumped(brokers.deregister, 4)
    assert not bumped(brokers.deregister, 4)  # already gone
    assert bumped(topics.delete, "v")


def test_notify_fires_in_the_changing_transaction(topics: TopicRepo, fresh_db: str) -> None:
    dsn = make_url(fresh_db).set(drivername="postgresql").render_as_string(hide_password=False)
    with psycopg.connect(dsn, autocommit=True) as listener:
        listener.execute(f"LISTEN {NOTIFY_CHANNEL}")
        topics.create("n", 3, 1)
        got = list(listener.notifies(timeout=10, stop_after=1))
        assert [(n.channel, n.payload) for n in got] == [(NOTIFY_CHANNEL, str(topics.version()))]
        # a rolled-back change notifies nobody
        raises(ErrorCode.TOPIC_ALREADY_EXISTS, topics.create, "n", 1, 1)
        assert list(listener.notifies(timeout=0.3)) == []
