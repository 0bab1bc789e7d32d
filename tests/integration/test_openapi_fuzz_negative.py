"""Negative OpenAPI fuzzing (issue 13 item 6): requests that break the documented schema,
sent to a broker and to a fetch node, with auth off and on. Every answer must be a 4xx the
document lists, with the documented content type and body schema, and invalid data must be
rejected (schemathesis' negative_data_rejection), never a 5xx."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.checks import (
    content_type_conformance,
    negative_data_rejection,
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)
from schemathesis.core.control import SkipTest

from tests.integration.brokers import BrokerProcess
from tests.integration.fetch_nodes import FetchNodeProcess
from tests.integration.secured import Secured, secure_broker, started

CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
    negative_data_rejection,
]
EXAMPLES = 6  # per operation: bounded, so a run takes seconds
# Operations where "invalid" input schemathesis makes is valid on the wire, so accepting it is
# right: an array of names in the query is repeated `topic=` parameters, and a boolean or a
# number there is sent as text, which is a valid topic name.
ACCEPTS_ANY_TEXT = {"GET /groups/{group}/offsets"}


def fuzz(url: str, credentials: list[dict[str, str]]) -> set[int]:
    """One bounded negative run per operation of `url`'s served document; the statuses seen."""
    schema = schemathesis.openapi.from_url(f"{url}/openapi.json")
    # Negative cases only, as schemathesis' own runner is told with `--mode negative`: an
    # operation that cannot be made invalid (only free-text path parameters, or none) then ends
    # at its first draw, not after hypothesis gave up on ~460 rejected ones (~0.6 CPU-s for each
    # of 8 operations, a run). The same requests go out either way (all four runs compared).
    schema.config.generation.update(modes=[GenerationMode.NEGATIVE])
    operations = [result.ok() for result in schema.get_all_operations()]
    failures: list[str] = []
    statuses: set[int] = set()
    for operation in operations:

        @given(
            case=operation.as_strategy(generation_mode=GenerationMode.NEGATIVE),
            headers=st.sampled_from(credentials),
        )
        @settings(
            max_examples=EXAMPLES,
            deadline=None,
            database=None,
            derandomize=True,  # the same examples every run: CI is deterministic
            suppress_health_check=list(HealthCheck),
        )
        def run(case: schemathesis.Case, headers: dict[str, str]) -> None:
            response = case.call(headers=headers)
            statuses.add(response.status_code)
            lenient = case.operation.label in ACCEPTS_ANY_TEXT
            checks = [c for c in CHECKS if not (lenient and c is negative_data_rejection)]
            case.validate_response(response, checks=checks)

        try:
            run()
        except (Unsatisfiable, SkipTest):
            continue  # nothing of this operation can be made invalid (no parameters, no body)
        except Exception as exc:  # collect every operation's failure, then report them all
            failures.append(f"{operation.label}: {exc}")
    assert not failures, "\n\n".join(failures)
    return statuses


@pytest.fixture(scope="module")
def open_nodes(
    db_factory: Callable[..., str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[BrokerProcess, FetchNodeProcess]]:
    url = db_factory()
    root = Path(tmp_path_factory.mktemp("fuzz-negative"))
    broker = BrokerProcess(url, root / "data").start()
    node: FetchNodeProcess | None = None
    try:
        for name in ("events", "a"):
            broker.create_topic(name, partitions=2)
        broker.produce("events", [{"value": i} for i in range(10)])
        node = FetchNodeProcess(url, root / "fetch.log", {}).start()
        yield broker, node
    finally:
        if node is not None:
            node.stop()
        broker.stop()


def test_negative_fuzz_broker_auth_off(open_nodes: tuple[BrokerProcess, FetchNodeProcess]) -> None:
    statuses = fuzz(open_nodes[0].url, [{}])
    assert any(400 <= s < 500 for s in statuses), statuses


def test_negative_fuzz_fetch_node_auth_off(
    open_nodes: tuple[BrokerProcess, FetchNodeProcess],
) -> None:
    statuses = fuzz(open_nodes[1].url, [{}])
    assert any(400 <= s < 500 for s in statuses), statuses


@pytest.fixture(scope="module")
def secured_nodes(
    db_factory: Callable[..., str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[BrokerProcess, FetchNodeProcess, Secured]]:
    url = db_factory()
    sec = Secured(url)
    root = Path(tmp_path_factory.mktemp("fuzz-negative-auth"))
    # The fuzzer's wrong keys are failed logins: on the broker they are free, since waiting for
    # their turns (cluster/auth_throttle.py) took this file ~20 s; the fetch node refuses one
    # whose turn has not come at once (429, not a wait), so throttled answers are still fuzzed
    # there. Throttling itself is tested in tests/unit/cluster/test_auth_throttle.py and
    # test_kafka_conn_limits.py.
    free = ["--failed-auth-free", "1000"]
    for broker in started(secure_broker(url, root / "data", extra=free)):
        admin = sec.client(broker.url, "admin")
        for name in ("events", "a"):
            assert admin.post("/topics", json={"name": name, "partitions": 2}).status_code == 201
        refuse = ["--failed-auth-max-wait-ms", "0"]
        node = FetchNodeProcess(url, root / "fetch.log", {}, refuse, secure=True).start()
        try:
            yield broker, node, sec
        finally:
            node.stop()
    sec.close()


def _keys(sec: Secured) -> list[dict[str, str]]:
    """A super user (so invalid input, not missing rights, is what gets refused), and no key."""
    return [{"authorization": f"Bearer {sec.key('admin')}"}, {}]


def test_negative_fuzz_broker_auth_on(
    secured_nodes: tuple[BrokerProcess, FetchNodeProcess, Secured],
) -> None:
    broker, _, sec = secured_nodes
    statuses = fuzz(broker.url, _keys(sec))
    assert 401 in statuses and any(s in statuses for s in (400, 404, 413, 415)), statuses


def test_negative_fuzz_fetch_node_auth_on(
    secured_nodes: tuple[BrokerProcess, FetchNodeProcess, Secured],
) -> None:
    _, node, sec = secured_nodes
    statuses = fuzz(node.url, _keys(sec))
    assert 401 in statuses, statuses


def test_fetch_node_passes_on_a_topic_path_with_control_characters(
    open_nodes: tuple[BrokerProcess, FetchNodeProcess],
) -> None:
    """The fuzzer once found a 500 here: the node forwarded the decoded path, and a control
    character in it is not valid in a URL. It now forwards the path as the client sent it."""
    with httpx.Client(base_url=open_nodes[1].url, timeout=10) as client:
        r = client.get("/topics/%C3%BE%0F%C3%BC")
    assert r.status_code == 404, r.text
    assert r.json()["error_code"] == "UNKNOWN_TOPIC_OR_PARTITION"
