"""TopicAdmin (ingest/service/topic_admin.py), the one place both front-ends create, grow,
alter and delete topics, on a real Postgres: a change is in this broker's metadata when the
call returns (a client's next request sees it without waiting for NOTIFY); a Kafka
request's batch refreshes once, at its end; the refusals are the same for both protocols."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from cluster.authorizer import ANONYMOUS, AuthSettings
from ingest.broker import Broker
from ingest.broker_config import BrokerConfig
from ingest.broker_deps import BrokerDeps
from ingest.service.topic_admin import NO_TOPIC_ID, NewTopic, TopicAdmin
from logformat.errors import ErrorCode, TierlogError
from metadata.brokers import BrokerRepo
from metadata.db import make_engine


@pytest.fixture(scope="module")
def broker(
    db_factory: Callable[..., str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Broker]:
    url = db_factory()
    config = BrokerConfig(
        broker_id=1,
        host="127.0.0.1",
        port=80,
        advertised_url="http://broker-1",
        data_dir=Path(tmp_path_factory.mktemp("admin")),
        database_url=url,
        auth=AuthSettings(enabled=False),
    )
    engine = make_engine(url)
    BrokerRepo(engine).register(1, config.advertised_url, 60_000)  # replicas need a live broker
    b = Broker(config, BrokerDeps(engine, registry=CollectorRegistry()))
    yield b
    engine.dispose()


def _run(coro: object) -> object:
    return asyncio.run(coro)  # type: ignore[arg-type]


def test_a_change_is_in_this_brokers_metadata_when_the_call_returns(broker: Broker) -> None:
    admin = TopicAdmin(broker)
    _run(admin.create(ANONYMOUS, NewTopic("now", 2, 1, {})))
    view = broker.cache.topic("now")
    assert view is not None and len(view.partitions) == 2
    _run(admin.grow(ANONYMOUS, "now", 3))
    view = broker.cache.topic("now")
    assert view is not None and len(view.partitions) == 3
    _run(admin.alter_configs(ANONYMOUS, "now", {"retention.ms": "60000"}, []))
    view = broker.cache.topic("now")
    assert view is not None and view.info.configs.get("retention.ms") == "60000"
    _run(admin.delete(ANONYMOUS, "now"))
    assert broker.cache.topic("now") is None


def test_a_batch_refreshes_once_at_its_end(broker: Broker) -> None:
    seen: list[bool] = []

    async def request() -> None:
        async with TopicAdmin(broker).batch() as admin:
            for name in ("batch-a", "batch-b"):
                await admin.create(ANONYMOUS, NewTopic(name, 1, 1, {}))
                seen.append(broker.cache.topic(name) is not None)

    _run(request())
    assert seen == [False, False]  # not refreshed per topic ...
    assert broker.cache.topic("batch-a") is not None  # ... but once, when the request ends
    assert broker.cache.topic("batch-b") is not None


def _refused(call: object) -> ErrorCode:
    with pytest.raises(TierlogError) as caught:
        _run(call)
    return caught.value.code


def test_refusals_and_validate_only(broker: Broker) -> None:
    admin = TopicAdmin(broker)
    _run(admin.create(ANONYMOUS, NewTopic("there", 1, 1, {})))
    again = admin.create(ANONYMOUS, NewTopic("there", 1, 1, {}), validate_only=True)
    assert _refused(again) is ErrorCode.TOPIC_ALREADY_EXISTS
    manual = NewTopic("manual", 1, 1, {}, manual_assignment=True)
    assert _refused(admin.create(ANONYMOUS, manual)) is ErrorCode.INVALID_REQUEST
    assert _refused(admin.grow(ANONYMOUS, "there", 1, validate_only=True)) is (
        ErrorCode.INVALID_PARTITIONS
    )
    insync = admin.alter_configs(ANONYMOUS, "there", {"min.insync.replicas": "2"}, [], True)
    assert _refused(insync) is ErrorCode.INVALID_CONFIG
    checked = _run(admin.create(ANONYMOUS, NewTopic("dry", None, None, {}), validate_only=True))
    assert checked == (broker.config.default_partitions, 1, NO_TOPIC_ID)
    assert broker.cache.topic_or_refresh("dry") is None  # validated, not created
