"""The broker's erasure duty when nothing is open (every broker runs it every second): one
statement, the gauges' count, and no more; with requests open, the full pass."""

from __future__ import annotations

from typing import Any, cast

from prometheus_client import REGISTRY

from cluster.metadata_cache import MetadataCache
from ingest.cleaner.erasure_duty import ErasureDuty
from metadata.erasures import STATES, ErasureRepo


class _Repo:
    """Counts what the duty asks; `open_` requests whose topic is gone (none runnable)."""

    def __init__(self, open_: int = 0, done: int = 0) -> None:
        self.counts = {s: 0 for s in STATES} | {"pending": open_, "done": done}
        self.calls: list[str] = []

    def count_by_state(self) -> dict[str, int]:
        self.calls.append("count_by_state")
        return dict(self.counts)

    def fail_deleted_topics(self) -> int:
        self.calls.append("fail_deleted_topics")
        failed, self.counts["pending"] = self.counts["pending"], 0
        self.counts["failed"] += failed
        return failed

    def runnable(self) -> list[Any]:
        self.calls.append("runnable")
        return []


def _duty(repo: _Repo) -> ErasureDuty:
    return ErasureDuty(1, dict, cast(MetadataCache, None), cast(ErasureRepo, repo))


def _gauge(state: str) -> float | None:
    return REGISTRY.get_sample_value("tierlog_erasure_requests", {"state": state})


def test_nothing_open_is_one_statement_and_the_gauges() -> None:
    repo = _Repo(done=4)
    assert _duty(repo).run_once() == 0
    assert repo.calls == ["count_by_state"]
    assert _gauge("done") == 4 and _gauge("pending") == 0


def test_open_requests_of_deleted_topics_fail_and_the_gauges_show_it() -> None:
    repo = _Repo(open_=2, done=1)
    assert _duty(repo).run_once() == 0
    assert repo.calls == ["count_by_state", "fail_deleted_topics", "count_by_state"]
    assert _gauge("failed") == 2 and _gauge("pending") == 0


def test_open_requests_are_run() -> None:
    repo = _Repo(open_=1)
    repo.fail_deleted_topics = lambda: 0  # type: ignore[method-assign]  # the topic exists
    _duty(repo).run_once()
    assert repo.calls == ["count_by_state", "runnable"]
