"""The nemesis's pure parts: fault selection, the schedule, and a corruption only the CRC sees."""

from __future__ import annotations

import math
import random
from pathlib import Path

import pytest

from logformat.frame import CorruptFrameError, decode_header, encode_frame, verify_crc
from logformat.records import build_batch
from tests.chaos.nemesis import (
    FAULTS,
    KNOWN_BROKEN,
    POSTGRES_WIDE,
    RESTARTS,
    RIDERS,
    Nemesis,
    ci_steps,
    corrupt_frame,
    select,
)


def test_select_includes_and_excludes_by_name() -> None:
    everything = list(FAULTS)
    assert select(None, "") == everything
    assert select(None, None) == [f for f in everything if f not in KNOWN_BROKEN.split(",")]
    assert select("kill,corrupt", None) == ["kill", "corrupt"]  # named: no default exclusion
    assert "corrupt" not in select(None, "corrupt")
    with pytest.raises(ValueError, match="unknown faults"):
        select("kill,flood", None)
    with pytest.raises(ValueError, match="no faults left"):
        select("kill", "kill")


def _with_rng(seed: int) -> Nemesis:
    n = Nemesis.__new__(Nemesis)  # the schedule needs only the generator, not a cluster
    n.rng = random.Random(seed)
    return n


def test_the_schedule_runs_every_fault_before_any_repeats_and_replays() -> None:
    faults = ["kill", "s3", "pause-leader"]
    plan = _with_rng(5).schedule(7, faults)
    assert len(plan) == 7
    assert sorted(plan[:3]) == sorted(plan[3:6]) == sorted(faults)
    assert plan == _with_rng(5).schedule(7, faults)  # the same seed, the same schedule


def test_corrupt_frame_leaves_headers_intact_and_fails_the_crc(tmp_path: Path) -> None:
    frames = [
        bytes(
            encode_frame(
                build_batch(
                    [b"k"] * 3,
                    [f"value-{i}-{j}".encode() for j in range(3)],
                    [None] * 3,
                    [0] * 3,
                    0,
                ),
                base_offset=3 * i,
            )
        )
        for i in range(4)
    ]
    segment = tmp_path / "00000000000000000000.log"
    segment.write_bytes(b"".join(frames))
    at = corrupt_frame(segment, random.Random(1))
    data = segment.read_bytes()
    assert len(data) == sum(map(len, frames)) and data != b"".join(frames)
    bad = 0
    pos = 0
    while pos < len(data):
        header = decode_header(data, pos)  # every header still parses
        try:
            verify_crc(data, pos, header)
        except CorruptFrameError:
            bad += 1
            assert pos < at < pos + header.size
        pos += header.size
    assert bad == 1


def test_overlapping_steps_cover_every_fault_and_never_pair_two_postgres_faults() -> None:
    faults = list(FAULTS)
    steps = ci_steps(faults)
    assert steps == math.ceil((len(faults) - len(RIDERS)) / 2)
    for seed in range(20):  # every kind in CI's steps: pairs, riders as a third
        plan = _with_rng(seed).overlapping(steps, faults, 1.0)
        assert sorted(name for step in plan for name in step) == sorted(faults), plan
    plan = _with_rng(7).overlapping(steps + 1, faults, 1.0)
    assert all(1 <= len(step) <= 3 for step in plan)
    for step in plan:
        assert len(set(step)) == len(step), step
        assert len(set(step) & POSTGRES_WIDE) <= 1, step
        assert len(set(step) - RIDERS) <= 2, step  # a third is always a rider
    assert plan == _with_rng(7).overlapping(steps + 1, faults, 1.0)  # replays
    singles = _with_rng(7).overlapping(len(faults), faults, 0.0)
    assert all(len(step) == 1 for step in singles)
    assert sorted(s[0] for s in singles) == sorted(faults)


def test_broker_restarts_share_a_step() -> None:
    """kill and kill-idle-leader restart a broker each, the slowest part of a step: paired,
    they restart in parallel (CI's schedule then has one slow step, not two)."""
    faults = list(FAULTS)
    for seed in range(20):
        plan = _with_rng(seed).overlapping(ci_steps(faults), faults, 1.0)
        assert sorted(RESTARTS) in [sorted(set(step) - RIDERS) for step in plan], plan
