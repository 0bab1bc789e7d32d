"""quixstreams with processing_guarantee="exactly-once" (issue 30): a stateful count per key
across a kill -9 of the application, and across a kill -9 of the broker coordinating its
transactions, on three broker processes. The counts read_committed reads are exact: each
key's are 1, 2, ... n, once each (no double counting).

quixstreams pins an older confluent-kafka than the project's, so it runs from a venv of its
own (tests/integration/quix_venv.py) as a child process (tests/integration/quix_count_app.py)."""

from __future__ import annotations

import json
import signal
import subprocess
import threading
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from confluent_kafka import Producer

from metadata.db import make_engine
from metadata.transactions import TxnRepo
from tests.integration import kafka_txn_wire as wire
from tests.integration import quix_venv, txn_apps
from tests.integration.cluster import Cluster, wait_for

APP = Path(__file__).with_name("quix_count_app.py")
KEYS = [f"k{i}" for i in range(6)]


@pytest.fixture(scope="module", name="quix_python")
def quix_python_fixture() -> Path:
    return quix_venv.quix_python()


@pytest.fixture(scope="module")
def cluster(
    db_factory: Callable[..., str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Cluster, TxnRepo]]:
    db = db_factory()
    c = Cluster(db, tmp_path_factory.mktemp("quix-cluster"), 3, kafka=True).start()
    engine = make_engine(db)
    try:
        yield c, TxnRepo(engine)
    finally:
        c.stop()
        engine.dispose()


class App:
    """The counting application as a child process, its output in a log file."""

    def __init__(self, python: Path, args: list[str], log: Path) -> None:
        self.python, self.args, self.log = python, args, log
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(
                [str(self.python), str(APP), *self.args], stdout=out, stderr=subprocess.STDOUT
            )

    def kill(self) -> None:
        assert self.proc is not None and self.proc.poll() is None, self.tail()
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(30)

    def tail(self) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-30:])


def _feed(
    bootstrap: str, topic: str, n: int, sent: Counter[str], pace: float | None = None
) -> None:
    """`n` records over the keys; `pace`: each flushed, then that many seconds' pause, so
    the application's transactions go on while the test does something else."""
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    for i in range(n):
        key = KEYS[i % len(KEYS)]
        p.produce(topic, key=key.encode(), value=b"word")
        sent[key] += 1
        if pace is not None:
            assert p.flush(60) == 0
            time.sleep(pace)  # a source's rate, not a wait for anything
    assert p.flush(60) == 0


def _counts(bootstrap: str, topic: str) -> dict[str, list[int]]:
    got: dict[str, list[int]] = defaultdict(list)
    for m in sorted(
        txn_apps.read_all(bootstrap, topic, "read_committed", 2), key=lambda m: m.offset()
    ):
        doc = json.loads(m.value())
        got[doc["key"]].append(doc["count"])
    return got


def _reached(bootstrap: str, topic: str, sent: Counter[str], app: App) -> bool | None:
    assert app.proc is not None and app.proc.poll() is None, app.tail()
    got = _counts(bootstrap, topic)
    return all(got.get(k, [0])[-1] >= n for k, n in sent.items()) or None


def _app_with_input(
    c: Cluster, quix_python: Path, tmp_path: Path, timeout_ms: int
) -> tuple[str, str, App, Counter[str]]:
    """The input and output topics, the counting application (not started yet; `timeout_ms`
    its transaction and session timeout) and the first 300 words fed to it."""
    words, counts = f"words-{uuid.uuid4().hex[:6]}", f"counts-{uuid.uuid4().hex[:6]}"
    for topic in (words, counts):
        c.create_topic(topic, 2, 3, min_insync_replicas=2)
    group, state = f"quix-{uuid.uuid4().hex[:6]}", str(tmp_path / "state")
    args = [c.bootstrap(), words, counts, group, state, str(timeout_ms)]
    app, sent = App(quix_python, args, tmp_path / "app.log"), Counter[str]()
    _feed(c.bootstrap(), words, 300, sent)
    return words, counts, app, sent


def _assert_counted_exactly_once(c: Cluster, counts: str, sent: Counter[str], app: App) -> None:
    """Every key's counts are exactly 1..n, n the words sent for it: none lost or doubled."""
    # Each check reads the whole output topic with a new consumer: once a second through the
    # seconds until a killed application's transaction times out, not back to back.
    wait_for(
        "every count", lambda: _reached(c.bootstrap(), counts, sent, app), timeout=240, every=1.0
    )
    got = _counts(c.bootstrap(), counts)
    assert {k: got[k] for k in sent} == {k: list(range(1, n + 1)) for k, n in sent.items()}


@pytest.mark.timeout(900)  # the first run installs quixstreams into .venv-quix
def test_exactly_once_count_across_kill_9_of_the_app(
    cluster: tuple[Cluster, TxnRepo], quix_python: Path, tmp_path: Path
) -> None:
    """Killed mid-stream, its open transaction (output and changelog records, input
    offsets) is aborted when its transaction times out (6 s, Kafka's least session timeout
    by default, for the killed group member too); the restarted application recovers its
    state from the changelog (read_committed to the partition's end: past markers) and
    counts on from the last committed input offsets."""
    c, _ = cluster
    words, counts, app, sent = _app_with_input(c, quix_python, tmp_path, 6_000)
    app.start()
    try:
        wait_for(
            "the first counts", lambda: bool(_counts(c.bootstrap(), counts)) or None, timeout=120
        )
        app.kill()  # mid-stream
        _feed(c.bootstrap(), words, 300, sent)
        app.start()
        _assert_counted_exactly_once(c, counts, sent, app)
    finally:
        if app.proc is not None and app.proc.poll() is None:
            app.kill()


def _coordinator(c: Cluster, tid: str, brokers: list[int]) -> int | None:
    """The broker of `brokers` every one of them names for `tid` (None while they disagree
    or name another: a dead broker they have not noticed yet)."""
    named = {wire.txn_coordinator(f"127.0.0.1:{c.kafka_ports[i]}", tid) for i in brokers}
    return named.pop() if len(named) == 1 and named <= set(brokers) else None


def _ongoing(repo: TxnRepo, tid: str) -> bool:
    row = repo.get(tid)
    return row is not None and row.state == "Ongoing" and bool(row.partitions)


def _newest_tid(repo: TxnRepo, since: datetime) -> str | None:
    """The transactional id the application started (quixstreams picks a random one)."""
    rows = [r for r in repo.list() if r.updated_at >= since]
    return max(rows, key=lambda r: r.updated_at).transactional_id if rows else None


@pytest.mark.timeout(900)
def test_exactly_once_count_across_kill_9_of_the_coordinator(
    cluster: tuple[Cluster, TxnRepo], quix_python: Path, tmp_path: Path
) -> None:
    """Every broker names the same transaction coordinator for the application's
    transactional id. Killed mid-stream, the survivors name one of themselves; the
    application's transaction under way moves there (its state is in Postgres) or times
    out and is aborted, and it counts on; the killed broker restarts. No count is lost or
    doubled, and the application never stops. It stopped three ways before: librdkafka asks
    FindCoordinator again every second or so, and answered by whichever broker it asked, its
    coordinator moved at random; an AddPartitionsToTxn answered from a stale memory failed
    its transaction fatally; and with the killed broker dropped from Metadata at once,
    librdkafka never looked up again the group coordinator it had cached there, so
    send_offsets_to_transaction (no timeout, from quixstreams) waited for good."""
    c, repo = cluster
    # 10 s: its transactions go on through the coordinator's failover, and one timed out
    # would fence the application (not what this test is about).
    words, counts, app, sent = _app_with_input(c, quix_python, tmp_path, 10_000)
    started = datetime.now(UTC)
    app.start()
    try:
        wait_for(
            "the first counts", lambda: bool(_counts(c.bootstrap(), counts)) or None, timeout=120
        )
        tid = wait_for("the app's transactional id", lambda: _newest_tid(repo, started))
        victim = c.brokers[wait_for("one coordinator", lambda: _coordinator(c, tid, [1, 2, 3]))]
        survivors = [i for i in c.brokers if i != victim.broker_id]
        feeding = threading.Thread(
            target=_feed, args=(c.bootstrap(), words, 300, sent, 0.02), daemon=True
        )
        feeding.start()  # about 15 s of input, a record every 0.02 s
        wait_for("a transaction under way", lambda: _ongoing(repo, tid))
        victim.kill(signal.SIGKILL)
        wait_for("a surviving coordinator", lambda: _coordinator(c, tid, survivors))
        feeding.join(120)
        assert not feeding.is_alive()
        victim.start()
        _assert_counted_exactly_once(c, counts, sent, app)
    finally:
        if app.proc is not None and app.proc.poll() is None:
            app.kill()
