"""ISR validation rules of PartitionStateRepo, without a database."""

from __future__ import annotations

import pytest

from metadata.partition_state import _check_ids, _ordered_isr


def test_isr_is_stored_in_replica_order() -> None:
    assert _ordered_isr([3, 1, 2], [2, 3], "t-0") == [3, 2]
    assert _ordered_isr([3, 1, 2], [2, 2, 1, 3], "t-0") == [3, 1, 2]
    assert _ordered_isr([3, 1, 2], [], "t-0") == []


def test_isr_outside_the_replicas_is_a_bug() -> None:
    with pytest.raises(ValueError, match=r"t-0: .*non-replicas \[4\]"):
        _ordered_isr([3, 1, 2], [1, 4], "t-0")


@pytest.mark.parametrize("bad", ["12", [1, True], [1, 2.0], [None]])
def test_isr_members_are_broker_ids(bad: object) -> None:
    with pytest.raises(ValueError, match="broker ids"):
        _check_ids(bad)  # type: ignore[arg-type]
