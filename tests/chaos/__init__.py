"""The chaos suite (Jepsen-style): a workload of producers and consumers, a nemesis of faults
from a printed random seed, and a checker of the recorded history against the final log.

    python -m tests.chaos --rounds 30 --seed 1234     # a longer run, or a replay
    TIERLOG_CHAOS_SEED=1234 pytest tests/chaos          # replay CI's short schedule
"""
