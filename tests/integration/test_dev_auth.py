"""`tierlog dev --auth`: the nodes require API keys and ACLs, the banner prints an admin key,
dev.env holds what the user's shell needs, and docs/access-control.md's walkthrough (the
README's Security section links it), run as written, works against it. The tests share one
dev instance, which also holds the ports that a second dev finds taken; the last test ends it
(a child that keeps failing)."""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.integration.cluster import wait_for
from tests.integration.console_login import signed_in
from tests.integration.dev_process import DevInstance, child_pid, dev_argv, dev_env, dev_root
from tierlog.devstack.dev import KAFKA_PORT_SHIFT, console_port
from tierlog.devstack.supervisor import RESTART_DELAY_ENV

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def dev() -> Iterator[DevInstance]:
    root = dev_root()
    # The README's paths are relative (.tierlog/dev.env): the scripts run in `root`.
    # A child that dies is restarted after 0.1, 0.2, 0.4 s (not 1, 2, 4): the last test
    # waits through all three.
    restart = {RESTART_DELAY_ENV: "100"}
    instance = DevInstance(root, "--auth", data_dir=".tierlog", env=restart)
    try:
        instance.start()
        yield instance
    finally:
        if instance.running():
            instance.ctrl_c()
        shutil.rmtree(root, ignore_errors=True)


def _readme_security_script(port: int) -> str:
    """The first shell block of docs/access-control.md, on dev's port."""
    section = (ROOT / "docs" / "access-control.md").read_text()
    block = re.search(r"```sh\n(.*?)```", section, re.S)
    assert block is not None
    return block.group(1).replace("localhost:8080", f"127.0.0.1:{port}")


def _shell_env() -> dict[str, str]:
    """A user's shell: the venv's `tierlog` on PATH, no TIERLOG_* of the test run."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TIERLOG_")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return env


def test_banner_prints_the_admin_key_and_dev_env(dev: DevInstance) -> None:
    variables = dev.env_file()
    key = variables["TIERLOG_API_KEY"]
    banner = dev.log.read_text()
    assert f"admin key (User:admin, a super user): {key}" in banner
    assert f". {dev.data_dir / 'dev.env'};" in banner
    kafka = f"127.0.0.1:{dev.port + KAFKA_PORT_SHIFT}"  # 9092 for dev's default 8080
    assert f"Kafka clients: {kafka};" in banner and variables["TIERLOG_KAFKA_BOOTSTRAP"] == kafka
    assert variables["TIERLOG_URL"] == dev.base
    registry = f"{dev.base}/schema-registry"
    assert variables["TIERLOG_SCHEMA_REGISTRY_URL"] == registry
    assert f"Schema Registry at {registry} " in banner
    assert variables["TIERLOG_DATABASE_URL"].startswith("postgresql")
    assert {"TIERLOG_S3_ENDPOINT", "TIERLOG_S3_BUCKET", "TIERLOG_FETCH_URL"} <= set(variables)
    assert (dev.data_dir / "dev.env").stat().st_mode & 0o077 == 0  # it holds secrets
    # Keys are required: none, or a made-up one, is refused; the admin's works.
    body = {"name": "banner-check", "partitions": 1}
    assert httpx.post(f"{dev.base}/topics", json=body).status_code == 401
    made_up = {"authorization": "Bearer tlk_0123456789ab_" + "x" * 43}
    assert httpx.post(f"{dev.base}/topics", json=body, headers=made_up).status_code == 401
    admin = {"authorization": f"Bearer {key}"}
    assert httpx.post(f"{dev.base}/topics", json=body, headers=admin).status_code == 201
    fetch = httpx.get(f"{variables['TIERLOG_FETCH_URL']}/topics/banner-check")
    assert fetch.status_code == 401  # the fetch node requires keys too
    # The web console, named in the banner, asks for a key; with the admin's it lists topics.
    console = variables["TIERLOG_CONSOLE_URL"]
    assert console == f"http://127.0.0.1:{dev.port - 10}" and f"web console at {console}" in banner
    r = httpx.get(f"{console}/topics")
    assert r.status_code == 303 and r.headers["location"] == "/login?next=/topics"
    with signed_in(console, key) as session:
        r = session.get("/topics")
    assert r.status_code == 200 and "banner-check" in r.text


def test_readme_security_section_runs_as_written(dev: DevInstance) -> None:
    # The script as written, then its $KEY for the checks below.
    script = _readme_security_script(dev.port) + 'echo "app key $KEY" >&2\n'
    out = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=dev.root,
        env=_shell_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert '{"offsets":[{"partition":' in out.stdout, out.stdout
    assert out.stdout.endswith("}paid\n"), out.stdout  # curl's answer, then the consumer's
    assert "User:orders-app\tallow\twrite\ttopic:prefixed:orders-" in out.stdout
    assert "revoked 1 key(s)" in out.stderr
    # The app's key is refused once revoked (within the nodes' auth cache).
    key = re.search(r"^app key (\S+)$", out.stderr, re.M)
    assert key is not None, out.stderr
    app = {"authorization": f"Bearer {key.group(1)}"}
    records = f"{dev.base}/topics/orders-eu/partitions/0/records"

    def refused() -> bool:
        return httpx.get(records, params={"offset": 0}, headers=app).status_code == 401

    wait_for("the revoked key is refused", refused, timeout=15)


def test_a_second_dev_on_taken_ports_fails_at_once_naming_the_port(dev: DevInstance) -> None:
    other = dev.root / "other-data"
    out = subprocess.run(
        dev_argv(other, dev.port),
        env=dev_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 1
    assert out.stderr.splitlines() == [
        f"tierlog dev: port {dev.port} (broker-1) is already in use on 127.0.0.1, by another "
        "tierlog dev or server: stop it, or give --port"
    ]
    assert not (other / "postgres").exists()  # it started nothing


def test_dev_gives_up_on_a_child_that_keeps_failing(dev: DevInstance) -> None:
    """Last in the module: it ends the dev instance. The web console is killed and its port
    taken, so each restart fails at once; dev says so and stops everything. (The console:
    any server child would do, and its restarts are the cheapest, ~0.6 CPU-s each.)"""
    assert dev.proc is not None
    port = console_port(dev.port)
    os.kill(child_pid(dev.proc.pid, "console"), signal.SIGKILL)
    with socket.socket() as squatter:
        squatter.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        wait_for("the console's port is free", lambda: _bind(squatter, port), timeout=10)
        squatter.listen()
        assert dev.proc.wait(120) == 1
    log = dev.log.read_text()
    gave_up = (
        r"^tierlog dev: console exited 3 times in a row before it was ready or within 10s of "
        r"starting \(last exit code "
        rf"\d+; port {port} is in use by another process\); giving up$"
    )
    assert re.search(gave_up, log, re.M), log[-3000:]
    with pytest.raises(httpx.TransportError):  # the brokers were stopped too
        httpx.get(f"{dev.base}/readyz", timeout=2)


def _bind(sock: socket.socket, port: int) -> bool:
    try:
        sock.bind(("127.0.0.1", port))
    except OSError:
        return False
    return True
