"""CI's short chaos schedule: every fault kind once, under all producer kinds and concurrent
consumers, then the history checker. The seed is printed; replay it with
TIERLOG_CHAOS_SEED=<seed> (and TIERLOG_CHAOS_ROUNDS / _FAULTS / _EXCLUDE to vary the run)."""

from __future__ import annotations

import os
import random
from pathlib import Path

from tests.chaos.nemesis import select
from tests.chaos.runner import run

# Faults CI's schedule leaves out (TIERLOG_CHAOS_EXCLUDE overrides), each for a known bug:
# corrupt: a corrupt sealed segment is served and never re-fetched, so replicas stay
# different (issue 12, "Found" 4); take it out of here once CRCs are checked on reads.
KNOWN_BROKEN = "corrupt"


def test_short_chaos_schedule_keeps_every_guarantee(tmp_path: Path) -> None:
    seed = int(os.environ.get("TIERLOG_CHAOS_SEED") or random.randrange(2**32))
    faults = select(
        os.environ.get("TIERLOG_CHAOS_FAULTS"),
        os.environ.get("TIERLOG_CHAOS_EXCLUDE", KNOWN_BROKEN),
    )
    rounds = int(os.environ.get("TIERLOG_CHAOS_ROUNDS") or len(faults))
    outcome = run(tmp_path, seed, rounds, faults)
    print(outcome.report())
    assert not outcome.violations, f"replay with TIERLOG_CHAOS_SEED={seed}\n{outcome.report()}"
