"""A background duty (Kafka's RLMTask): one job run on a period, cancellable, logging with
its context (role, partition), that tells an outage from a bug (failures/classify.py):

- a retriable failure (Postgres or S3 away, not the leader any more, a full disk) is logged
  in one line and the duty backs off, doubling its wait up to `max_backoff_s`;
- any other failure is a bug: logged with its traceback and counted in
  tierlog_duty_failures_total{kind="bug"}; the duty keeps its period.

`Duties` starts and stops duties by key, so a role change (leadership gained or lost) starts
or stops a partition's duties rather than a timer polling every partition.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable, Hashable, Mapping
from typing import NamedTuple

from prometheus_client import Counter

from failures.classify import family, is_retriable

log = logging.getLogger("tierlog.duty")

DUTY_FAILURES = Counter(
    "tierlog_duty_failures_total",
    "Background duty turns that failed: kind=outage (retriable, backed off) or bug",
    ["duty", "kind"],
)

Sleep = Callable[[float], Awaitable[None]]


class Backoff(NamedTuple):
    """Kafka's ExponentialBackoff: the period times 2^failures, capped, with jitter. The cap
    is low: the wait after a dependency comes back is at most this."""

    max_s: float = 5.0
    multiplier: float = 2.0
    jitter: float = 0.2

    def delay(self, period_s: float, failures: int, rng: random.Random) -> float:
        if failures == 0:
            return period_s
        base = max(period_s, min(self.max_s, period_s * self.multiplier**failures))
        return base * (1 + rng.uniform(-self.jitter, self.jitter)) if self.jitter else base


DEFAULT_BACKOFF = Backoff()


class FailurePolicy:
    """How one recurring job reacts to its failures, for asyncio duties and worker threads
    alike: an outage grows the wait (and logs one line), a bug is logged with its traceback
    and counted, and the next success resets the wait."""

    def __init__(
        self,
        name: str,
        period_s: float,
        *,
        context: Mapping[str, object] | None = None,
        backoff: Backoff = DEFAULT_BACKOFF,
        rng: random.Random | None = None,
    ) -> None:
        self.name = name
        self.period_s = period_s
        self.context = {"duty": name, **(context or {})}
        self.backoff = backoff
        self._rng = rng or random.Random()
        self.outages = 0  # retriable failures in a row (what the backoff grows with)
        self.bugs = 0  # non-retriable failures, in all

    def next_delay(self) -> float:
        return self.backoff.delay(self.period_s, self.outages, self._rng)

    def succeeded(self) -> None:
        if self.outages:
            log.info("background duty recovered", extra={**self.context, "after": self.outages})
        self.outages = 0

    def failed(self, exc: BaseException) -> None:
        if is_retriable(exc):
            self.outages += 1
            DUTY_FAILURES.labels(self.name, "outage").inc()
            log.warning(
                "background duty failed, backing off",
                extra={
                    **self.context,
                    "family": family(exc).value,
                    "error": f"{type(exc).__name__}: {exc}",
                    "retry_in_s": round(self.next_delay(), 3),
                },
            )
            return
        self.bugs += 1
        self.outages = 0
        DUTY_FAILURES.labels(self.name, "bug").inc()
        log.error("background duty failed", exc_info=exc, extra=self.context)


class Duty:
    """A job run every `period_s` on the event loop, under a FailurePolicy. `stopped` is
    watched too (a cancel racing a completed wait can be swallowed on 3.11)."""

    def __init__(
        self,
        name: str,
        turn: Callable[[], Awaitable[object]],
        period_s: float,
        *,
        context: Mapping[str, object] | None = None,
        backoff: Backoff = DEFAULT_BACKOFF,
        sleep: Sleep = asyncio.sleep,
        rng: random.Random | None = None,
        stopped: Callable[[], bool] = lambda: False,
    ) -> None:
        self.name = name
        self._turn = turn
        self.policy = FailurePolicy(name, period_s, context=context, backoff=backoff, rng=rng)
        self._sleep = sleep
        self._stopped = stopped
        self._task: asyncio.Task[None] | None = None
        self._woken: asyncio.Task[bool] | None = None
        self._stopping = False

    async def run_once(self) -> bool:
        """One turn; True when it succeeded. Failures go to the policy, never up
        (cancellation does)."""
        try:
            await self._turn()
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the policy decides: an outage or a bug
            self.policy.failed(exc)
            return False
        self.policy.succeeded()
        return True

    def _done(self) -> bool:
        return self._stopping or self._stopped()

    async def run(self) -> None:
        """Until stopped: wait (the period, or the backoff after an outage), then a turn."""
        while not self._done():
            await self._sleep(self.policy.next_delay())
            if not self._done():
                await self.run_once()

    def start(self) -> asyncio.Task[None]:
        self._stopping = False
        self._task = asyncio.create_task(self.run(), name=self.name)
        return self._task

    def wake(self) -> None:
        """A turn now, besides the periodic ones (an event the duty must not wait a period
        for). Wakes while a woken turn is still under way add nothing: that turn is already
        late enough to see what they were about."""
        if self._done() or (self._woken is not None and not self._woken.done()):
            return
        self._woken = asyncio.get_running_loop().create_task(
            self.run_once(), name=f"{self.name}-woken"
        )

    async def stop(self, timeout_s: float = 5.0) -> None:
        self._stopping = True
        tasks = [t for t in (self._task, self._woken) if t is not None]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=timeout_s)
        self._task = self._woken = None


class Duties:
    """Duties by key (e.g. (topic, partition, "retention")): started when a role begins,
    stopped when it ends."""

    def __init__(self) -> None:
        self._running: dict[Hashable, Duty] = {}

    def start(self, key: Hashable, duty: Duty) -> None:
        if key not in self._running:
            self._running[key] = duty
            duty.start()

    async def stop(self, key: Hashable) -> None:
        duty = self._running.pop(key, None)
        if duty is not None:
            await duty.stop()

    async def stop_all(self) -> None:
        for key in list(self._running):
            await self.stop(key)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._running

    def __len__(self) -> int:
        return len(self._running)
