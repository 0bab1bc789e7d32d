"""docker-compose.yml and infra/Dockerfile, checked without a Docker engine.

`docker-compose config` (Debian's docker-compose 1.29, which scripts/test installs when it
runs as root) validates the file against the Compose schema, resolves the YAML merge keys and
${VAR:-default} interpolation, and needs no engine. The resolved config is then checked for
what the cluster needs: services, healthchecks, start order, volumes, env-based configuration,
and that every tierlog role it runs is a command of this build.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "docker-compose.yml"
BROKERS = ("broker-1", "broker-2", "broker-3")
TIERLOG_SERVICES = (*BROKERS, "tiering", "s3-init")


# The stack has no default admin key: `up` refuses to start until the user sets one.
TEST_ADMIN_KEY = "tlk_0123456789ab_" + "k" * 40


def _compose_config(**env: str) -> dict[str, Any]:
    exe = shutil.which("docker-compose")
    if exe is None:
        pytest.skip(
            "docker-compose is not installed (scripts/test installs Debian's package when run "
            "as root: apt-get install docker-compose); the compose file was not validated"
        )
    out = subprocess.run(
        [exe, "-f", str(COMPOSE), "config"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        env={**os.environ, "TIERLOG_BOOTSTRAP_ADMIN_KEY": TEST_ADMIN_KEY, **env},
    )
    assert out.returncode == 0, f"docker-compose config failed:\n{out.stderr}"
    doc = yaml.safe_load(out.stdout)
    assert isinstance(doc, dict)
    return doc


@pytest.fixture(scope="module")
def config() -> dict[str, Any]:
    return _compose_config()


def test_services_volumes_and_healthchecks(config: dict[str, Any]) -> None:
    services = config["services"]
    assert set(services) >= {"minio", "s3-init", "postgres", *BROKERS, "tiering"}
    assert set(config["volumes"]) >= {
        "minio-data",
        "postgres-data",
        *(f"{b}-data" for b in BROKERS),
    }
    assert services["postgres"]["image"].startswith("postgres:15")
    assert "pg_isready" in services["postgres"]["healthcheck"]["test"]
    assert services["minio"]["image"].startswith("minio/minio:RELEASE.")
    assert services["minio"]["healthcheck"]["test"][1:] == ["mc", "ready", "local"]
    for name in BROKERS:
        test = " ".join(services[name]["healthcheck"]["test"])
        assert "/readyz" in test, name
    assert "/healthz" in " ".join(services["tiering"]["healthcheck"]["test"])
    # Named volumes hold the state that must survive `docker compose down` / `up`.
    mounts = {name: [v.split(":")[0] for v in s.get("volumes", [])] for name, s in services.items()}
    assert mounts["minio"] == ["minio-data"]
    assert mounts["postgres"] == ["postgres-data"]
    for name in BROKERS:
        assert mounts[name] == [f"{name}-data"]


def test_brokers_have_distinct_ids_urls_and_ports(config: dict[str, Any]) -> None:
    services = config["services"]
    ids, urls, published = set(), set(), []
    for name in BROKERS:
        s = services[name]
        env = s["environment"]
        assert s["command"] == ["broker"]
        ids.add(env["TIERLOG_BROKER_ID"])
        urls.add(env["TIERLOG_ADVERTISED_URL"])
        assert env["TIERLOG_ADVERTISED_URL"] == f"http://{name}:8080"  # the compose network
        assert env["TIERLOG_LISTEN"] == "0.0.0.0:8080"
        published.extend(s["ports"])
        assert s["depends_on"]["postgres"]["condition"] == "service_healthy"
    assert ids == {"1", "2", "3"} and len(urls) == 3
    # Published on loopback by default (plain HTTP unless TLS files are given), HTTP and Kafka.
    assert published == [
        port
        for i in range(3)
        for port in (f"127.0.0.1:{8080 + i}:8080/tcp", f"127.0.0.1:{9092 + i}:9092/tcp")
    ]


def test_brokers_advertise_their_published_kafka_ports(config: dict[str, Any]) -> None:
    """Kafka clients on the host bootstrap from 127.0.0.1:9092-9094 and are sent to each
    broker's published port (registered by the broker, not derived from its compose URL)."""
    for i, name in enumerate(BROKERS):
        env = config["services"][name]["environment"]
        assert env["TIERLOG_KAFKA_LISTEN"] == "0.0.0.0:9092"
        assert env["TIERLOG_KAFKA_ADVERTISED"] == f"127.0.0.1:{9092 + i}"


def test_tierlog_services_configured_from_env(config: dict[str, Any]) -> None:
    services = config["services"]
    for name in TIERLOG_SERVICES:
        s = services[name]
        env = s["environment"]
        assert s["image"] == services["broker-1"]["image"]
        assert s["build"]["dockerfile"] == "infra/Dockerfile"
        assert env["TIERLOG_DATABASE_URL"].startswith("postgresql+psycopg://tierlog:")
        assert env["TIERLOG_DATABASE_URL"].endswith("@postgres:5432/tierlog")
        assert env["TIERLOG_S3_ENDPOINT"] == "http://minio:9000"
        assert env["TIERLOG_S3_BUCKET"] == "tierlog"
        for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION"):
            assert env[key], (name, key)
    # The same credentials on both sides of the S3 connection.
    minio_env = services["minio"]["environment"]
    assert minio_env["MINIO_ROOT_USER"] == services["tiering"]["environment"]["AWS_ACCESS_KEY_ID"]
    assert (
        minio_env["MINIO_ROOT_PASSWORD"]
        == services["tiering"]["environment"]["AWS_SECRET_ACCESS_KEY"]
    )
    tiering_deps = services["tiering"]["depends_on"]
    assert tiering_deps["s3-init"]["condition"] == "service_completed_successfully"
    assert services["s3-init"]["depends_on"]["minio"]["condition"] == "service_healthy"


def test_auth_is_on_with_a_bootstrap_admin(config: dict[str, Any]) -> None:
    services = config["services"]
    for name in (*BROKERS, "fetch"):
        env = services[name]["environment"]
        assert "TIERLOG_INSECURE" not in env and env.get("TIERLOG_AUTH", "apikey") == "apikey"
        assert "--insecure" not in services[name]["command"]
        assert env["TIERLOG_SUPER_USERS"] == "User:admin"
    init = services["auth-init"]
    assert init["command"][:3] == ["users", "create", "admin"]
    key = init["environment"]["TIERLOG_BOOTSTRAP_ADMIN_KEY"]
    from metadata.api_keys import parse_key

    assert key == TEST_ADMIN_KEY and parse_key(key) is not None
    assert services["spark"]["environment"]["TIERLOG_API_KEY"] == key


def test_the_console_is_a_client_of_broker_1(config: dict[str, Any]) -> None:
    console = config["services"]["console"]
    assert console["image"] == config["services"]["broker-1"]["image"]
    assert console["command"] == [
        *("console", "--broker", "http://broker-1:8080", "--listen", "0.0.0.0:8070")
    ]
    assert console["ports"] == ["127.0.0.1:8070:8070/tcp"]
    assert console["depends_on"]["broker-1"]["condition"] == "service_healthy"
    assert "/healthz" in " ".join(console["healthcheck"]["test"])
    # An API client: no database or S3 secrets; the sampler's key is the bootstrap admin's.
    env = console["environment"]
    assert not {"TIERLOG_DATABASE_URL", "AWS_SECRET_ACCESS_KEY"} & set(env)
    assert env["TIERLOG_API_KEY"] == TEST_ADMIN_KEY
    assert env["TIERLOG_SCHEMA_REGISTRY_URL"] == "http://broker-1:8080/schema-registry"


def test_environment_overrides_are_interpolated() -> None:
    config = _compose_config(
        POSTGRES_PASSWORD="pw1",
        MINIO_ROOT_PASSWORD="s3pw",
        TIERLOG_PUBLISH_IP="0.0.0.0",
        TIERLOG_KAFKA_HOST="kafka.example.com",
    )
    services = config["services"]
    assert services["postgres"]["environment"]["POSTGRES_PASSWORD"] == "pw1"
    env = services["broker-2"]["environment"]
    assert env["TIERLOG_DATABASE_URL"] == "postgresql+psycopg://tierlog:pw1@postgres:5432/tierlog"
    assert env["AWS_SECRET_ACCESS_KEY"] == "s3pw"
    assert services["broker-2"]["ports"] == ["0.0.0.0:8081:8080/tcp", "0.0.0.0:9093:9092/tcp"]
    assert env["TIERLOG_KAFKA_ADVERTISED"] == "kafka.example.com:9093"


def test_every_role_compose_runs_is_a_tierlog_command() -> None:
    # Parsed straight from the file (no docker-compose needed): entrypoint `tierlog` + command.
    doc = yaml.safe_load(COMPOSE.read_text())
    roles = {
        s["command"][0]
        for s in doc["services"].values()
        if "entrypoint" not in s and s.get("image", "").startswith("${TIERLOG_IMAGE")
    }
    assert roles == {"broker", "tiering", "compaction", "fetch", "users", "console"}
    for role in roles:
        out = subprocess.run(
            [sys.executable, "-m", "tierlog", role, "--help"],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=ROOT,
        )
        assert out.returncode == 0, (role, out.stderr)
        if role == "tiering":
            assert "--listen" in out.stdout  # the healthcheck's /healthz needs it


def test_dockerfile_installs_the_project() -> None:
    dockerfile = (ROOT / "infra" / "Dockerfile").read_text()
    assert dockerfile.startswith("#") and "\nFROM python:3.11-slim\n" in dockerfile
    assert 'ENTRYPOINT ["tierlog"]' in dockerfile
    # The build context must keep every package pyproject installs.
    ignored = {
        line.strip().rstrip("/")
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    }
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    include = pyproject["tool"]["setuptools"]["packages"]["find"]["include"]
    packages = [p.rstrip("*") for p in include]
    assert not ignored & {*packages, "pyproject.toml", "README.md"}


def test_there_is_no_default_admin_key() -> None:
    exe = shutil.which("docker-compose")
    if exe is None:
        pytest.skip("docker-compose is not installed; the compose file was not validated")
    env = {k: v for k, v in os.environ.items() if k != "TIERLOG_BOOTSTRAP_ADMIN_KEY"}
    out = subprocess.run(
        [exe, "-f", str(COMPOSE), "config"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        env=env,
    )
    assert out.returncode != 0
    assert "set TIERLOG_BOOTSTRAP_ADMIN_KEY" in out.stderr
