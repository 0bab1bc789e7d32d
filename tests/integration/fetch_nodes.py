"""`tierlog fetch` as a child process, and the S3 environment broker/fetch processes need."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import httpx

from coldstore.object_store import ObjectStoreConfig
from http_transport.trust import default_trust
from tests.integration.brokers import READY_TIMEOUT_S, TEST_CLIENT_LIMITS
from tests.integration.ports import free_port
from tests.integration.zygote import ForkedProcess, start_tierlog
from tierlog.devstack.parent_watch import child_env


def s3_env(config: ObjectStoreConfig) -> dict[str, str]:
    """TIERLOG_S3_* / AWS_* for a process that should reach `config`'s bucket."""
    return {
        "TIERLOG_S3_ENDPOINT": config.endpoint_url or "",
        "TIERLOG_S3_BUCKET": config.bucket,
        "TIERLOG_S3_PREFIX": config.prefix,
        "AWS_ACCESS_KEY_ID": config.access_key_id or "testing",
        "AWS_SECRET_ACCESS_KEY": config.secret_access_key or "testing",
        "AWS_REGION": config.region,
    }


class FetchNodeProcess:
    def __init__(
        self,
        database_url: str,
        log_path: Path,
        env: dict[str, str],
        extra_args: list[str] | None = None,
        secure: bool = False,
    ) -> None:
        self.extra_args = [*(extra_args or []), *(() if secure else ("--insecure",))]
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = log_path
        self.env = {**os.environ, **env, "TIERLOG_DATABASE_URL": database_url}
        self.proc: subprocess.Popen[bytes] | ForkedProcess | None = None
        self.http = httpx.Client(
            verify=default_trust(), base_url=self.url, timeout=60, limits=TEST_CLIENT_LIMITS
        )

    def start(self) -> FetchNodeProcess:
        self.launch()
        return self.wait_ready()

    def launch(self) -> None:
        """Start the process without waiting: a test can start other processes meanwhile."""
        argv = ["fetch", "--listen", f"127.0.0.1:{self.port}", *self.extra_args]
        self.proc = start_tierlog(argv, child_env(self.env), self.log_path)

    def wait_ready(self) -> FetchNodeProcess:
        assert self.proc is not None, "launch() first"
        deadline = time.monotonic() + READY_TIMEOUT_S
        # One client for the polls, closed when they end (httpx.get made one per poll: ~18 ms
        # of CPU each, its TLS context).
        with httpx.Client(verify=default_trust(), base_url=self.url, timeout=1) as probe:
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    raise RuntimeError(f"fetch node exited:\n{self.log_tail()}")
                try:
                    if probe.get("/readyz").status_code == 200:
                        return self
                except httpx.HTTPError:
                    pass
                time.sleep(0.1)
        raise RuntimeError(f"fetch node not ready:\n{self.log_tail()}")

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def stop(self) -> None:
        self.http.close()
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
