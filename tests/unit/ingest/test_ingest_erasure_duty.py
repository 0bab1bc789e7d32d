"""The broker's erasure duty when nothing is open (every broker runs it every second): one
statement, the open requests' count, and no more; the whole count (every finished request
in the audit trail, a table scan) only when the open counts moved or once a minute; with
requests open, the full pass."""

from __future__ import annotations

from typing import Any, cast

from prometheus_client import REGISTRY

from cluster.metadata_cache import MetadataCache
from ingest.cleaner.erasure_duty import WHOLE_COUNT_EVERY_S, ErasureDuty
from metadata.erasures import OPEN_STATES, STATES, ErasureRepo


class _Repo:
    """Counts what the duty asks; `open_` requests whose topic is gone (none runnable)."""

    def __init__(self, open_: int = 0, done: int = 0) -> None:
        self.counts = {s: 0 for s in STATES} | {"pending": open_, "done": done}
        self.calls: list[str] = []

    def count_open(self) -> dict[str, int]:
        self.calls.append("count_open")
        return {s: self.counts[s] for s in OPEN_STATES}

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


class _Clock:
    def __init__(self) -> None:
        self.s = 1_000.0

    def __call__(self) -> float:
        return self.s


def _duty(repo: _Repo, clock: _Clock | None = None) -> ErasureDuty:
    cache, erasures = cast(MetadataCache, None), cast(ErasureRepo, repo)
    return ErasureDuty(1, dict, cache, erasures, clock or _Clock())


def _gauge(state: str) -> float | None:
    return REGISTRY.get_sample_value("tierlog_erasure_requests", {"state": state})


def test_nothing_open_is_one_statement_and_the_gauges() -> None:
    repo, clock = _Repo(done=4), _Clock()
    duty = _duty(repo, clock)
    assert duty.run_once() == 0
    assert repo.calls == ["count_open", "count_by_state"]  # the first pass counts everything
    assert _gauge("done") == 4 and _gauge("pending") == 0
    repo.calls.clear()
    clock.s += WHOLE_COUNT_EVERY_S - 1
    assert duty.run_once() == 0
    assert repo.calls == ["count_open"]  # not the scan of every finished request
    assert _gauge("done") == 4
    clock.s += 1
    repo.counts["done"] = 5  # finished and started between two passes: only a recount sees it
    duty.run_once()
    assert repo.calls == ["count_open", "count_open", "count_by_state"]
    assert _gauge("done") == 5


def test_a_request_ending_elsewhere_shows_in_the_finished_gauges_at_once() -> None:
    repo = _Repo(open_=1, done=2)
    repo.fail_deleted_topics = lambda: 0  # type: ignore[method-assign]  # the topic exists
    duty = _duty(repo)
    duty.run_once()
    assert _gauge("pending") == 1 and _gauge("done") == 2
    repo.counts["pending"], repo.counts["done"] = 0, 3  # another broker finished it
    repo.calls.clear()
    assert duty.run_once() == 0
    assert repo.calls == ["count_open", "count_by_state"]
    assert _gauge("pending") == 0 and _gauge("done") == 3


def test_open_requests_of_deleted_topics_fail_and_the_gauges_show_it() -> None:
    repo = _Repo(open_=2, done=1)
    assert _duty(repo).run_once() == 0
    assert repo.calls == [
        "count_open",
        "count_by_state",
        "fail_deleted_topics",
        "count_open",
        "count_by_state",
    ]
    assert _gauge("failed") == 2 and _gauge("pending") == 0


def test_open_requests_are_run() -> None:
    repo = _Repo(open_=1)
    repo.fail_deleted_topics = lambda: 0  # type: ignore[method-assign]  # the topic exists
    _duty(repo).run_once()
    assert repo.calls == ["count_open", "count_by_state", "runnable"]
