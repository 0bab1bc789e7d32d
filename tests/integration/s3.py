"""A real HTTP S3 endpoint for tests: moto's server in its own process on 127.0.0.1 (docs/design.md
§9).

Use from a test module (not a conftest: others own those):

    from tests.integration.s3 import moto_s3_fixture, s3_bucket_fixture  # noqa: F401

(the fixtures are registered under the names below; importing them under other names keeps
ruff's F811 quiet where a test takes `s3_bucket` as an argument).

- ``moto_s3`` (session): a ``MotoServer`` (``.endpoint``), started once per run and stopped
  at its end. moto keeps everything in memory; buckets are per test, so tests don't share data.
- ``s3_bucket`` (function): an ``ObjectStoreConfig`` for a new, empty bucket on that server
  with a random prefix, credentials set (moto accepts any). ``new_bucket(moto_s3)`` makes one
  for a module-scoped fixture.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from coldstore.object_store import ObjectStore, ObjectStoreConfig
from tests.integration.ports import free_port

_START_TIMEOUT_S = 30.0
ROOT = Path(__file__).resolve().parents[2]


class MotoServer:
    """`python -m moto.server` as a subprocess bound to 127.0.0.1 on a free port."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen[bytes] | None = None
        self.port = 0
        self.endpoint = ""

    def start(self) -> MotoServer:
        # The free port can be taken between probe and bind: try a few.
        for _ in range(3):
            self.port = free_port()
            self.endpoint = f"http://127.0.0.1:{self.port}"
            self.proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "tests.integration.moto_runner",
                    "-H",
                    "127.0.0.1",
                    "-p",
                    str(self.port),
                ],
                cwd=ROOT,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                env={**os.environ, "MOTO_ALLOW_NONEXISTENT_REGION": "true"},
            )
            if self._wait_ready():
                return self
            self.stop()
        raise RuntimeError("moto server did not start")

    def _wait_ready(self) -> bool:
        assert self.proc is not None
        deadline = time.monotonic() + _START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return False
            try:
                with urllib.request.urlopen(f"{self.endpoint}/moto-api/", timeout=1):
                    return True
            except (urllib.error.URLError, OSError):
                time.sleep(0.05)
        return False

    def stop(self) -> None:
        if self.proc is None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc = None

    def __enter__(self) -> MotoServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


_shared: MotoServer | None = None


@pytest.fixture(scope="session", name="moto_s3")
def moto_s3_fixture() -> Iterator[MotoServer]:
    # Each test module that imports this fixture gets its own session-scoped FixtureDef;
    # the module global makes them share one server process.
    global _shared
    if _shared is None or _shared.proc is None or _shared.proc.poll() is not None:
        _shared = MotoServer().start()
    yield _shared
    _shared.stop()


def config_for(endpoint: str, bucket: str, prefix: str = "") -> ObjectStoreConfig:
    return ObjectStoreConfig(
        bucket=bucket,
        prefix=prefix,
        endpoint_url=endpoint,
        region="us-east-1",
        access_key_id="testing",
        secret_access_key="testing",
    )


def new_bucket(moto: MotoServer) -> ObjectStoreConfig:
    """A new, empty bucket on `moto` with a random prefix (for module-scoped fixtures)."""
    config = config_for(moto.endpoint, f"t-{uuid.uuid4().hex[:20]}", f"p{uuid.uuid4().hex[:6]}")
    ObjectStore(config).ensure_bucket()
    return config


@pytest.fixture(name="s3_bucket")
def s3_bucket_fixture(moto_s3: MotoServer) -> ObjectStoreConfig:
    return new_bucket(moto_s3)
