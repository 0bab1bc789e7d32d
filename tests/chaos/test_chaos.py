"""CI's short chaos schedule: every fault kind once, and one more, under all producer kinds and
concurrent consumers, then the history checker. The seed is printed (in the run's summary);
replay it with TIERLOG_CHAOS_SEED=<seed> (TIERLOG_CHAOS_ROUNDS / _FAULTS / _EXCLUDE vary the
run), or run longer with
`python -m tests.chaos --rounds N --seed S`."""

from __future__ import annotations

import os
import random
from collections.abc import Callable
from pathlib import Path

from tests.chaos.nemesis import select
from tests.chaos.runner import run


def test_short_chaos_schedule_keeps_every_guarantee(
    tmp_path: Path, record_property: Callable[[str, object], None]
) -> None:
    seed = int(os.environ.get("TIERLOG_CHAOS_SEED") or random.randrange(2**32))
    record_property("chaos_seed", seed)  # tests/conftest.py prints it in the summary
    faults = select(
        os.environ.get("TIERLOG_CHAOS_FAULTS"),
        os.environ.get("TIERLOG_CHAOS_EXCLUDE"),  # default: nemesis.KNOWN_BROKEN
    )
    # Each fault once, and one more drawn at random.
    rounds = int(os.environ.get("TIERLOG_CHAOS_ROUNDS") or len(faults) + 1)
    outcome = run(tmp_path, seed, rounds, faults)
    print(outcome.report())
    assert not outcome.violations, f"replay with TIERLOG_CHAOS_SEED={seed}\n{outcome.report()}"
