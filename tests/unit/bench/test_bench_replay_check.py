"""bench/replay_check.py: a replay that returns what was produced passes, however it is cut
into answers; a gap, a repeat, a changed value or a tombstone turned empty fails, saying where."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from bench.replay_check import PassCheck, ProducedDigests, ReplayMismatch
from tests.integration.replay_data import records

END = 3_000


def _produced(step: int = 1_000) -> ProducedDigests:
    produced = ProducedDigests()
    for lo in range(0, END, step):
        produced.produced(records(lo, lo + step, 40).column("value"))
    return produced


def _answer(lo: int, hi: int) -> pa.Table:
    t = records(lo, hi, 40)
    return t.add_column(0, "offset", pa.array(range(lo, hi), pa.int64()))


def _replay(produced: ProducedDigests, answers: list[pa.Table]) -> None:
    check = PassCheck("test", 0, END, produced)
    offset = 0
    for table in answers:
        offset = check.answer(table, offset, offset + table.num_rows)
    check.finish()


def test_a_replay_cut_differently_from_the_produce_requests_passes() -> None:
    # Answers of 700 records (then whatever is left), produced 1,000 at a time; the last
    # answer also holds records past the end (the hot tail), which the pass leaves out.
    answers = [_answer(lo, min(lo + 700, END)) for lo in range(0, END - 700, 700)]
    answers.append(_answer(2_800, END + 50))
    check = PassCheck("test", 0, END, _produced())
    offset = 0
    for t in answers:
        offset = check.answer(t, offset, min(offset + t.num_rows, END + 50))
    check.finish()


@pytest.mark.parametrize(
    ("answers", "message"),
    [
        ([_answer(0, 1_000), _answer(1_001, END)], "offsets not dense in the answer at 1000"),
        ([_answer(0, 1_000), _answer(999, END)], "offset 999 where 1000 was due"),
        ([_answer(0, 2_000)], "the pass stopped at 2000"),
    ],
)
def test_gaps_repeats_and_short_passes_fail(answers: list[pa.Table], message: str) -> None:
    check = PassCheck("test", 0, END, _produced())
    with pytest.raises(ReplayMismatch, match=message):
        offset = 0
        for t in answers:
            offset = check.answer(t, offset, t.column("offset")[-1].as_py() + 1)
        check.finish()


def test_a_changed_value_or_tombstone_fails_the_checksum() -> None:
    produced = _produced()
    changed = _answer(1_000, 2_000)
    flipped = pc.if_else(
        pa.array([i == 5 for i in range(1_000)]), pa.scalar(b"x" * 40), changed.column("value")
    )
    changed = changed.set_column(2, "value", flipped)
    with pytest.raises(ReplayMismatch, match=r"values of offsets \[0, 3000\) differ"):
        _replay(produced, [_answer(0, 1_000), changed, _answer(2_000, END)])
    emptied = _answer(0, 1_000)  # offset 0 is a tombstone (null): an empty value is not
    emptied = emptied.set_column(2, "value", pc.fill_null(emptied.column("value"), b""))
    with pytest.raises(ReplayMismatch, match="differ from those produced"):
        _replay(produced, [emptied, _answer(1_000, END)])
