"""Attacks on the Kafka listener's connections (issue 24 K5, K10, K11; issue 27 S3), each
beside a normal client whose produce and fetch keep succeeding while the broker keeps its
controller lease; and the in-flight budgets' accounting, exact after connections end in
every state. One broker with auth on for the whole file."""

from __future__ import annotations

import secrets
import shutil
import socket
import struct
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import NamedTuple

import httpx
import pytest
from confluent_kafka import Producer

from http_transport.trust import default_trust
from metadata.api_keys import parse_key
from tests.integration.brokers import BrokerProcess
from tests.integration.kafka_attacks import (
    NormalClient,
    closed_by_server,
    connect,
    gauges,
    kill,
    plain_login,
    sasl_conf,
    wait_for,
)
from tests.integration.kafka_wire import fetch_request, produce_request, read_frame, request
from tests.integration.ports import free_port
from tests.integration.secured import Secured, secure_broker, started

AUTH_TIMEOUT_MS = 3000
# A throttled source's attempt further off than this is refused unheard (5 s by default):
# the guessing test waits out the turns taken in flight, Kafka's and then HTTP's.
MAX_TURN_WAIT_MS = 2000
PREAUTH_CAP = 512 * 1024  # the default: Kafka's
MAIN = 'tierlog_kafka_inflight_request_bytes{budget="main"}'
PREAUTH = 'tierlog_kafka_inflight_request_bytes{budget="preauth"}'
OPEN_PREAUTH = 'tierlog_kafka_connections{state="preauth"}'
OPEN_AUTHED = 'tierlog_kafka_connections{state="authenticated"}'


class Env(NamedTuple):
    sec: Secured
    broker: BrokerProcess
    bootstrap: str

    @property
    def admin(self) -> dict[str, str]:
        return {"authorization": f"Bearer {self.sec.key('admin')}"}

    def gauges(self) -> dict[str, float]:
        return gauges(self.broker.url, self.admin)

    def normal(self) -> NormalClient:
        return NormalClient(
            self.bootstrap, "paid", self.sec.key("alice"), self.broker.url, self.sec.key("admin")
        ).start()

    def login_works(self) -> bool:
        """A fresh client authenticates and is answered (a new connection)."""
        p = Producer({"bootstrap.servers": self.bootstrap, **sasl_conf(self.sec.key("alice"))})
        try:
            return "paid" in p.list_topics("paid", timeout=20).topics
        finally:
            p.flush(1)


@pytest.fixture(scope="module")
def env(db_factory: Callable[..., str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    url = db_factory()
    sec = Secured(url)
    port = free_port()
    data = Path(tmp_path_factory.mktemp("kafka-conn")) / "data"
    args = [
        *("--kafka-listen", f"127.0.0.1:{port}"),
        *("--kafka-auth-timeout-ms", str(AUTH_TIMEOUT_MS)),
        *("--failed-auth-max-wait-ms", str(MAX_TURN_WAIT_MS)),
    ]
    for b in started(secure_broker(url, data, extra=args)):
        admin = sec.client(b.url, "admin")
        for topic in ("paid", "big", "idle"):
            assert admin.post("/topics", json={"name": topic}).status_code == 201
        sec.allow("alice", "topic", "paid", "write", "read", "describe")
        sec.allow("alice", "topic", "big", "write", "read", "describe")
        sec.allow("alice", "topic", "idle", "read", "describe")
        sec.allow("alice", "group", "unused", "read", "describe")  # the normal client's
        yield Env(sec, b, f"127.0.0.1:{port}")
    sec.close()


def _idle(env: Env) -> None:
    """Every connection gone and both budgets back to exactly zero."""
    zero = {MAIN: 0.0, PREAUTH: 0.0, OPEN_PREAUTH: 0.0, OPEN_AUTHED: 0.0}

    def check() -> bool:
        got = env.gauges()
        return {k: got.get(k) for k in zero} == zero

    wait_for(check, 30, f"connections and budgets at zero: {env.gauges()}")


def test_size_prefixes_before_authentication_reserve_nothing(env: Env) -> None:
    """K5: 4 sockets each send only a 64 MiB size prefix before authenticating. They are
    closed at once (over the pre-auth cap) and never touch the main budget; a fresh login
    and the running client are served throughout. Prefixes under the cap reserve from the
    pre-auth budget only, and are closed at the authentication deadline."""
    normal = env.normal()
    attack = [connect(env.bootstrap) for _ in range(4)]
    for s in attack:
        s.sendall(struct.pack(">i", 64 << 20))
    assert env.login_works()
    assert all(closed_by_server(s, 20) for s in attack), "a 64 MiB pre-auth prefix was held"
    under = [connect(env.bootstrap) for _ in range(4)]
    for s in under:
        s.sendall(struct.pack(">i", PREAUTH_CAP) + b"x" * 100)
    wait_for(lambda: env.gauges().get(PREAUTH) == 4 * PREAUTH_CAP, 20, "pre-auth reserved")
    assert env.gauges()[MAIN] < PREAUTH_CAP  # the normal client's frames only
    assert env.login_works()
    assert all(closed_by_server(s, 30) for s in under), "not closed at the auth deadline"
    assert normal.stop() == []
    _idle(env)


def test_idle_connections_must_authenticate_in_time(env: Env) -> None:
    """K11: 200 idle connections that never authenticate are closed at the deadline
    (--kafka-auth-timeout-ms), not held for connections.max.idle.ms; the running client's
    authenticated connections are not."""
    normal = env.normal()
    idle = [connect(env.bootstrap) for _ in range(200)]
    wait_for(lambda: env.gauges().get(OPEN_PREAUTH, 0) >= 200, 20, "200 pre-auth connections")
    assert env.login_works()
    assert all(closed_by_server(s, 30) for s in idle), "an idle pre-auth connection was held"
    assert normal.stop() == []
    _idle(env)


def _pipelined_fetches(env: Env, n: int, topic: str, max_wait_ms: int) -> bytes:
    return b"".join(fetch_request(topic, 0, max_wait_ms, correlation=10 + i) for i in range(n))


def _logged_in(env: Env) -> socket.socket:
    s = connect(env.bootstrap)
    key = env.sec.key("alice")
    parsed = parse_key(key)
    assert parsed is not None
    assert plain_login(s, parsed.key_id, key) == (0, "")
    return s


def test_budgets_return_to_zero_whatever_state_a_connection_ends_in(env: Env) -> None:
    """Connections opened, stalled and killed mid-prefix, mid-frame, before and after
    authentication, with pipelined requests read ahead, after a protocol error or a failed
    login with requests behind it, and while an answer is being written: once they are
    gone, both budgets and both connection counts are exactly zero."""
    big = b"v" * (512 << 10)
    p = Producer({"bootstrap.servers": env.bootstrap, **sasl_conf(env.sec.key("alice"))})
    for _ in range(24):
        p.produce("big", value=big, partition=0)
    assert p.flush(60) == 0
    del p
    _idle(env)
    key = env.sec.key("alice")
    parsed = parse_key(key)
    assert parsed is not None

    def mid_prefix() -> socket.socket:
        s = connect(env.bootstrap)
        s.sendall(b"\0\0")
        return s

    def mid_frame_preauth() -> socket.socket:
        s = connect(env.bootstrap)
        s.sendall(struct.pack(">i", 1000) + b"\0" * 10)
        return s

    def mid_frame_authed() -> socket.socket:
        s = _logged_in(env)
        s.sendall(struct.pack(">i", 8 << 20) + b"\0" * 1000)
        return s

    def pipelined() -> socket.socket:
        s = _logged_in(env)
        s.sendall(_pipelined_fetches(env, 40, "idle", 2000))
        return s

    def protocol_error_behind() -> socket.socket:
        s = _logged_in(env)
        s.sendall(_pipelined_fetches(env, 10, "idle", 500) + struct.pack(">i", 6) + b"\xff" * 6)
        return s

    def failed_login_behind() -> socket.socket:
        s = connect(env.bootstrap)
        s.sendall(request(17, 1, struct.pack(">h", 5) + b"PLAIN", correlation=1))
        read_frame(s)
        token = b"\0" + parsed.key_id.encode() + b"\0" + key[:-4].encode() + b"abcd"
        s.sendall(
            request(36, 0, struct.pack(">i", len(token)) + token, correlation=2)
            + request(3, 1, b"\xff\xff\xff\xff", correlation=3)
        )
        return s

    def answer_being_written() -> socket.socket:
        s = _logged_in(env)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.sendall(_pipelined_fetches(env, 8, "big", 0))
        return s

    def produce_read_ahead() -> socket.socket:
        s = _logged_in(env)
        s.sendall(b"".join(produce_request("paid", b"\0" * 61) for _ in range(5)))
        return s

    states = [
        mid_prefix,
        mid_frame_preauth,
        mid_frame_authed,
        pipelined,
        protocol_error_behind,
        failed_login_behind,
        answer_being_written,
        produce_read_ahead,
    ]
    for round_ in range(3):
        held = [make() for make in states for _ in range(3)]
        time.sleep(0.2 * round_)  # vary how far each got (not a wait for an outcome)
        for s in held:
            kill(s)
    _idle(env)


def _guess(env: Env, key_id: str, stop: threading.Event, verdicts: list[str]) -> None:
    while not stop.is_set():
        wrong = env.sec.key("alice")[:-8] + secrets.token_hex(4)  # a new guess each time
        try:
            with connect(env.bootstrap, timeout=30) as s:
                code, message = plain_login(s, key_id, wrong)
        except OSError as exc:
            verdicts.append(f"error {exc!r}")
            continue
        verdicts.append("throttled" if "too many failed" in message else str(code))


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat not installed (apt: kcat)")
def test_a_wrong_password_logs_one_line_per_failure(env: Env) -> None:
    """S3: kcat (SaslHandshake v0, the token bare) with a wrong password: each failed login
    is one audit line, and the connection's clean-up logs no traceback."""
    before = env.broker.log_path.read_text(errors="replace")
    key = env.sec.key("bob")
    parsed = parse_key(key)
    assert parsed is not None
    cmd = ["kcat", "-b", env.bootstrap, "-L", "-m", "3"]
    for k, v in sasl_conf(key, key[:-4] + "abcd").items():
        cmd += ["-X", f"{k}={v}"]
    assert subprocess.run(cmd, capture_output=True, timeout=60).returncode != 0
    log = env.broker.log_path.read_text(errors="replace")[len(before) :]
    assert "Task exception was never retrieved" not in log
    assert "Traceback" not in log
    failures = [line for line in log.splitlines() if "authentication failed" in line]
    assert failures and all(parsed.key_id in line for line in failures)


def test_guessing_is_throttled_and_audited(env: Env) -> None:
    """K10: 6 threads guess alice's key over SASL/PLAIN for a few seconds while she keeps
    logging in: past a few failures the guesses take turns (one a second per address and key
    id), those too far off (over MAX_TURN_WAIT_MS) are refused unheard, each failure is one
    log line and counts in the metric; alice's logins all succeed. HTTP keys are throttled
    the same way. (Each guess is a new wrong key: the same wrong key again is not a guess
    and does not count.)"""
    key = env.sec.key("alice")
    parsed = parse_key(key)
    assert parsed is not None
    assert env.login_works()  # alice authenticated before: her key skips the queue
    normal = env.normal()
    before = env.gauges().get('tierlog_auth_failures_total{mechanism="PLAIN",protocol="kafka"}', 0)
    log_before = len(env.broker.log_path.read_text(errors="replace"))
    stop, verdicts = threading.Event(), []
    guessers = [
        threading.Thread(target=_guess, args=(env, parsed.key_id, stop, verdicts), daemon=True)
        for _ in range(6)
    ]
    started_at = time.monotonic()
    for t in guessers:
        t.start()
    logins = [env.login_works() for _ in range(3)]
    wait_for(lambda: "throttled" in verdicts, 30, f"a guess refused unheard: {verdicts[-5:]}")
    stop.set()
    for t in guessers:
        t.join(60)
    elapsed = time.monotonic() - started_at
    assert logins == [True, True, True]
    heard = [v for v in verdicts if v == "58"]  # SASL_AUTHENTICATION_FAILED, a real verdict
    # 3 free failures, then one per second for the address (key id: the same turns), with
    # room for the turns reserved by attempts that were in flight when we stopped.
    assert len(heard) <= 3 + elapsed + 6, (len(heard), elapsed)
    assert all(v in ("58", "throttled") for v in verdicts), set(verdicts)
    log = env.broker.log_path.read_text(errors="replace")[log_before:]
    lines = [line for line in log.splitlines() if "authentication failed" in line]
    after = env.gauges()['tierlog_auth_failures_total{mechanism="PLAIN",protocol="kafka"}']
    assert len(lines) == after - before == len(heard)
    assert "Traceback" not in log

    def http_guess(_: int) -> httpx.Response:
        bad = {"authorization": "Bearer " + key[:-8] + secrets.token_hex(4)}
        return httpx.get(
            f"{env.broker.url}/topics", headers=bad, timeout=30, verify=default_trust()
        )

    with ThreadPoolExecutor(12) as pool:
        http = list(pool.map(http_guess, range(12)))
    assert {r.status_code for r in http} == {401, 429}, [r.status_code for r in http]
    refused = [r for r in http if r.status_code == 429]
    assert all(int(r.headers["Retry-After"]) >= 1 for r in refused)
    assert "too many failed authentication attempts" in refused[0].json()["message"]
    good = {"authorization": f"Bearer {key}"}
    assert httpx.get(f"{env.broker.url}/topics", headers=good, timeout=30).status_code == 200
    assert normal.stop() == []
