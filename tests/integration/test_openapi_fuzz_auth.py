"""The OpenAPI property run of test_openapi_fuzz.py with auth on: whatever the credential
(a super user's key, a key with narrow ACLs, none, garbage), no request gets a 5xx."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis.checks import not_a_server_error

from tests.integration.brokers import BrokerProcess
from tests.integration.secured import Secured, secure_broker, started


@pytest.fixture(scope="module")
def fuzz_env(
    db_factory: Callable[..., str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[BrokerProcess, Secured]]:
    url = db_factory()
    sec = Secured(url)
    for b in started(secure_broker(url, Path(tmp_path_factory.mktemp("fuzz-auth")) / "data")):
        admin = sec.client(b.url, "admin")
        for name in ("events", "a"):
            assert admin.post("/topics", json={"name": name, "partitions": 2}).status_code == 201
        sec.allow("narrow", "topic", "e", "read", "write", prefixed=True)
        sec.deny("narrow", "topic", "events", "write")
        sec.allow("narrow", "group", "*", "read")
        yield b, sec
    sec.close()


def test_no_server_errors_with_auth_on(fuzz_env: tuple[BrokerProcess, Secured]) -> None:
    broker, sec = fuzz_env
    credentials = [
        {"authorization": f"Bearer {sec.key('admin')}"},
        {"authorization": f"Bearer {sec.key('narrow')}"},
        {},
        {"authorization": "Bearer tlk_0123456789ab_" + "z" * 43},
        {"authorization": "Basic Zm9vOmJhcg=="},
    ]
    schema = schemathesis.openapi.from_url(f"{broker.url}/openapi.json")
    operations = [result.ok() for result in schema.get_all_operations()]
    failures: list[str] = []
    statuses: set[int] = set()
    for operation in operations:

        @given(case=operation.as_strategy(), headers=st.sampled_from(credentials))
        @settings(
            max_examples=5,
            deadline=None,
            database=None,
            derandomize=True,  # the same examples every run: CI time and outcome repeat
            suppress_health_check=list(HealthCheck),
        )
        def run(case: schemathesis.Case, headers: dict[str, str]) -> None:
            response = case.call(headers=headers)
            statuses.add(response.status_code)
            case.validate_response(response, checks=[not_a_server_error])

        try:
            run()
        except Exception as exc:
            failures.append(f"{operation.label}: {exc}")
    assert not failures, "\n\n".join(failures)
    assert {401, 403} <= statuses  # the credentials really varied
