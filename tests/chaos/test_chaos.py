"""CI's short chaos schedule: every fault kind once, two at a time (overlapping faults, which
keeps the run about as long as when there were half as many kinds; both broker restarts in
one step; corrupt and s3, short and claiming no broker, as a third on two of the steps), under
all producer kinds (HTTP and Kafka) and concurrent consumers (brokers, the fetch node, Kafka),
then the history checker. The seed is printed (in the run's summary);
replay it with TIERLOG_CHAOS_SEED=<seed> (TIERLOG_CHAOS_ROUNDS / _FAULTS / _EXCLUDE vary the
run), or run longer with
`python -m tests.chaos --rounds N --seed S`."""

from __future__ import annotations

import os
import random
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.chaos.nemesis import ci_steps, select
from tests.chaos.runner import run


# Past the suite's 300 s default only on a loaded machine (brokers then take 20-30 s to start):
# the run ends by itself, bounded by its steps' own timeouts.
@pytest.mark.timeout(900)
def test_short_chaos_schedule_keeps_every_guarantee(
    tmp_path: Path, record_property: Callable[[str, object], None]
) -> None:
    seed = int(os.environ.get("TIERLOG_CHAOS_SEED") or random.randrange(2**32))
    record_property("chaos_seed", seed)  # tests/conftest.py prints it in the summary
    faults = select(
        os.environ.get("TIERLOG_CHAOS_FAULTS"),
        os.environ.get("TIERLOG_CHAOS_EXCLUDE"),  # default: nemesis.KNOWN_BROKEN
    )
    # Each fault once, two at a time (the two broker restarts in one step), the short ones
    # that claim no broker (nemesis.RIDERS) as a third on some of those steps.
    steps = int(os.environ.get("TIERLOG_CHAOS_ROUNDS") or ci_steps(faults))
    outcome = run(tmp_path, seed, steps, faults, overlap=1.0)
    print(outcome.report())
    assert not outcome.violations, f"replay with TIERLOG_CHAOS_SEED={seed}\n{outcome.report()}"
