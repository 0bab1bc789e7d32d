"""Real broker processes on free loopback ports, for integration tests."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx

from http_transport.trust import default_trust
from tests.integration.ports import free_port
from tests.integration.zygote import ForkedProcess, start_tierlog
from tierlog.devstack.parent_watch import child_env

# Readiness is polled, so a long deadline costs nothing when a start-up is quick; on the
# shared machine under load a broker's start-up has taken over 60 s (a restart in
# test_groups failed at the old 60 s with the broker still importing).
READY_TIMEOUT_S = 180.0

# Kept-alive connections are dropped well before the server's idle timeout (5 s, httpx's
# default too): a request sent on one just as the server closes it fails with a reset, and
# a loaded machine or a broker waking from SIGSTOP (its overdue timers fire first) makes
# that race real.
TEST_CLIENT_LIMITS = httpx.Limits(keepalive_expiry=2.0)


class BrokerProcess:
    """`python -m tierlog broker` as a child process; its log goes to data_dir/../broker-N.log."""

    def __init__(
        self,
        database_url: str,
        data_dir: Path,
        broker_id: int = 1,
        extra_args: list[str] | None = None,
        secure: bool = False,
        env: dict[str, str] | None = None,
    ) -> None:
        """`secure`: API keys and ACLs on (the production default); else `--insecure`, so
        tests about other things need no keys. `env`: extra environment (e.g. S3 settings)."""
        self.database_url = database_url
        self.env = env or {}
        self.data_dir = data_dir
        self.broker_id = broker_id
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.extra_args = [*(extra_args or []), *(() if secure else ("--insecure",))]
        self.log_path = data_dir.parent / f"broker-{broker_id}.log"
        self.proc: subprocess.Popen[bytes] | ForkedProcess | None = None
        self.paused = False
        self.http = httpx.Client(
            verify=default_trust(), base_url=self.url, timeout=30, limits=TEST_CLIENT_LIMITS
        )

    def start(self, wait: bool = True) -> BrokerProcess:
        # The broker goes if this test process dies (a killed pytest leaves no brokers behind).
        env = child_env(dict(os.environ, **self.env, TIERLOG_DATABASE_URL=self.database_url))
        argv = [
            "broker",
            "--broker-id",
            str(self.broker_id),
            "--listen",
            f"127.0.0.1:{self.port}",
            "--data-dir",
            str(self.data_dir),
            *self.extra_args,
        ]
        self.proc = start_tierlog(argv, env, self.log_path)
        if wait:
            self.wait_ready()
        return self

    def wait_ready(self, timeout: float = READY_TIMEOUT_S) -> None:
        deadline = time.monotonic() + timeout
        # One client for the polls, closed when they end (no connection left open, as before):
        # httpx.get made a new one per poll, ~18 ms of CPU each (its TLS context), ten polls a
        # second while a broker starts.
        with httpx.Client(verify=default_trust(), base_url=self.url, timeout=1) as probe:
            while time.monotonic() < deadline:
                if self.proc is not None and self.proc.poll() is not None:
                    raise RuntimeError(
                        f"broker exited with {self.proc.returncode}:\n{self.log_tail()}"
                    )
                try:
                    r = probe.get("/readyz")
                except httpx.HTTPError:
                    pass
                else:
                    if r.status_code == 200:
                        # Not another test's broker on our port (tests/integration/ports.py).
                        assert r.json()["broker_id"] == self.broker_id, r.text
                        return
                time.sleep(0.1)
        raise RuntimeError(f"broker not ready within {timeout}s:\n{self.log_tail()}")

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def kill(self, sig: int = signal.SIGKILL) -> None:
        if self.proc is not None and self.proc.poll() is None:
            if sig in (signal.SIGSTOP, signal.SIGCONT):
                self.proc.send_signal(sig)
                self.paused = sig == signal.SIGSTOP
                return
            if self.paused:
                self.proc.send_signal(signal.SIGCONT)
                self.paused = False
            self.proc.send_signal(sig)
            self.wait_exit(sig)

    def wait_exit(self, sig: int = signal.SIGTERM) -> None:
        """Wait for the process to exit after `sig` was sent (30 s, then its stacks and a
        SIGKILL: a hang on shutdown is a bug)."""
        if self.proc is not None:
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                # A hang on shutdown is a bug: dump the stacks into the log, then say so.
                self.proc.send_signal(signal.SIGUSR1)
                time.sleep(1)
                self.proc.kill()
                self.proc.wait()
                raise RuntimeError(
                    f"broker {self.broker_id} did not exit on signal {sig}:\n{self.log_tail(120)}"
                ) from None

    def stop(self) -> None:
        self.kill(signal.SIGTERM)

    def begin_stop(self) -> None:
        """SIGTERM without waiting: stop several brokers at once, then `wait_exit` each."""
        if self.proc is not None and self.proc.poll() is None:
            if self.paused:
                self.proc.send_signal(signal.SIGCONT)
                self.paused = False
            self.proc.send_signal(signal.SIGTERM)

    def restart(self) -> None:
        self.stop()
        self.start()

    # -- conveniences -----------------------------------------------------------------------

    def create_topic(self, name: str, partitions: int = 1, **configs: Any) -> dict[str, Any]:
        r = self.http.post(
            "/topics",
            json={
                "name": name,
                "partitions": partitions,
                "configs": {k.replace("_", "."): v for k, v in configs.items()},
            },
        )
        assert r.status_code == 201, r.text
        return dict(r.json())

    def produce(
        self, topic: str, records: list[dict[str, Any]], acks: str = "all"
    ) -> list[dict[str, int]]:
        r = self.http.post(
            f"/topics/{topic}/records", params={"acks": acks}, json={"records": records}
        )
        assert r.status_code == 200, r.text
        return list(r.json()["offsets"])

    def fetch(
        self, topic: str, partition: int = 0, offset: int = 0, **params: Any
    ) -> dict[str, Any]:
        r = self.http.get(
            f"/topics/{topic}/partitions/{partition}/records", params={"offset": offset, **params}
        )
        assert r.status_code == 200, r.text
        return dict(r.json())

    def fetch_all(
        self, topic: str, partition: int = 0, offset: int = 0, **params: Any
    ) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        while True:
            doc = self.fetch(topic, partition, offset, max_records=10_000, **params)
            out.extend(doc["records"])
            # An empty page that still moves on crossed a compacted gap: keep going.
            if doc["next_offset"] >= doc["high_watermark"] or doc["next_offset"] <= offset:
                return out
            offset = doc["next_offset"]
