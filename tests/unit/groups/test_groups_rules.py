"""Group request parsing (bad input → the right Kafka error) and the pure reconciliation
rules of groups/reconcile.py."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from groups import reconcile, requests
from logformat.errors import ErrorCode, TierlogError
from metadata.types import ConsumerGroupMember, TopicMeta, TopicNamePartition

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def member(mid: str, target=None, assigned=None, owned=None, assignor=None, topics=("t",)):
    return ConsumerGroupMember(
        mid, 1, topics, assignor, 10_000, NOW, NOW, NOW, target or {}, assigned or {}, owned or {}
    )


def code_of(fn, *args) -> ErrorCode:
    with pytest.raises(TierlogError) as e:
        fn(*args)
    return e.value.code


# -- requests -----------------------------------------------------------------------------------


def test_join_defaults_and_validation() -> None:
    req = requests.join({"topics": ["b", "a", "a"]})
    assert req == requests.JoinRequest(("a", "b"), None, requests.DEFAULT_SESSION_MS)
    assert code_of(requests.join, {"topics": []}) is ErrorCode.INVALID_REQUEST
    assert code_of(requests.join, {"topics": "t"}) is ErrorCode.INVALID_REQUEST
    assert code_of(requests.join, {"topics": ["no spaces"]}) is ErrorCode.INVALID_TOPIC_EXCEPTION
    assert code_of(requests.join, {"topics": ["t"], "assignor": "x"}) is (
        ErrorCode.UNSUPPORTED_ASSIGNOR
    )
    for bad in (0, 10, "1000", True, 10**9):
        assert code_of(requests.join, {"topics": ["t"], "session_timeout_ms": bad}) is (
            ErrorCode.INVALID_REQUEST
        )


def test_heartbeat_parsing() -> None:
    req = requests.heartbeat({"member_epoch": 3, "owned": {"t": [1, 0]}, "topics": ["t"]})
    assert req.member_epoch == 3 and req.topics == ("t",)
    assert req.owned == {TopicNamePartition("t", 0), TopicNamePartition("t", 1)}
    assert requests.heartbeat({"member_epoch": 0}).owned == frozenset()
    for bad in (
        {},
        {"member_epoch": -1},
        {"member_epoch": 1, "owned": {"t": [-1]}},
        {"member_epoch": 1, "owned": {"t": 1}},
        {"member_epoch": 1, "owned": ["t"]},
        {"member_epoch": 1, "topics": []},
    ):
        assert code_of(requests.heartbeat, bad) is ErrorCode.INVALID_REQUEST, bad


def test_commit_parsing() -> None:
    req = requests.commit(
        {
            "member_id": "m",
            "member_epoch": 2,
            "offsets": [
                {"topic": "t", "partition": 1, "offset": 5},
                {"topic": "t", "partition": 0, "offset": 3, "metadata": "x"},
                {"topic": "t", "partition": 1, "offset": 6},
            ],
        }
    )
    assert req.member_id == "m" and req.member_epoch == 2
    assert [(o.partition, o.offset, o.metadata) for o in req.offsets] == [(0, 3, "x"), (1, 6, None)]
    # Kafka's "no member": member id "" (or absent) and epoch -1.
    simple = requests.commit({"member_id": "", "member_epoch": -1, "offsets": []})
    assert simple.member_id is None
    assert code_of(requests.commit, {"member_id": "m", "offsets": []}) is ErrorCode.INVALID_REQUEST
    assert code_of(requests.commit, {"member_epoch": 3, "offsets": []}) is ErrorCode.INVALID_REQUEST
    big = {"offsets": [{"topic": "t", "partition": 0, "offset": 1, "metadata": "x" * 5000}]}
    assert code_of(requests.commit, big) is ErrorCode.OFFSET_METADATA_TOO_LARGE
    nul = {"offsets": [{"topic": "t", "partition": 0, "offset": 1, "metadata": "a\x00"}]}
    assert code_of(requests.commit, nul) is ErrorCode.OFFSET_METADATA_TOO_LARGE
    assert code_of(requests.commit, {"member_id": "a\x00b", "member_epoch": 1, "offsets": []}) is (
        ErrorCode.UNKNOWN_MEMBER_ID
    )


def test_reset_parsing() -> None:
    assert requests.reset({"at": "earliest"}).at == "earliest"
    assert requests.reset({"at": 1234, "topics": ["t"]}).topics == ("t",)
    scoped = requests.reset({"at": "latest", "partitions": [{"topic": "t", "partition": 2}]})
    assert scoped.scope == (TopicNamePartition("t", 2),)
    explicit = requests.reset({"offsets": [{"topic": "t", "partition": 0, "offset": 9}]})
    assert explicit.at is None and explicit.offsets[0].offset == 9
    for bad in (
        {},
        {"at": "earliest", "offsets": []},
        {"at": "yesterday"},
        {"at": -1},
        {"at": True},
        {"at": "latest", "dry_run": "yes"},
        {"offsets": [{"topic": "t", "partition": 0, "offset": 1}], "topics": ["t"]},
    ):
        assert code_of(requests.reset, bad) is ErrorCode.INVALID_REQUEST, bad


def test_group_names() -> None:
    assert requests.group_name("my.group-1 with spaces") == "my.group-1 with spaces"
    for bad in ("", "x" * 256, "a\nb", "\x00"):
        assert code_of(requests.group_name, bad) is ErrorCode.INVALID_GROUP_ID


# -- reconciliation rules -----------------------------------------------------------------------


def test_grantable_holds_back_what_others_assigned_or_own() -> None:
    me = member("a", target={"t": [0, 1, 2, 3]})
    others = [
        member("b", assigned={"t": [0]}),  # told to own it, has not reported yet
        member("c", owned={"t": [1]}),  # still reports consuming it
        member("d", target={"t": [2]}),  # wants it, but holds nothing
    ]
    assert reconcile.grantable(me, others) == {"t": [2, 3]}


def test_credible_owned_ignores_partitions_never_given() -> None:
    m = member("a", assigned={"t": [0]}, owned={"t": [1]})
    reported = [TopicNamePartition("t", p) for p in (0, 1, 2)] + [TopicNamePartition("u", 0)]
    assert reconcile.credible_owned(reported, m) == {"t": [0, 1]}


def test_choose_assignor_is_a_vote_that_keeps_the_current_on_ties() -> None:
    ms = [member("a", assignor="range"), member("b", assignor="sticky"), member("c")]
    assert reconcile.choose_assignor(ms, "sticky") == "sticky"
    assert reconcile.choose_assignor(ms, "roundrobin") == "range"  # tie: first by name
    assert reconcile.choose_assignor([member("a")], "roundrobin") == "roundrobin"
    ms.append(member("d", assignor="range"))
    assert reconcile.choose_assignor(ms, "sticky") == "range"


def test_targets_and_state() -> None:
    topics = {"t": TopicMeta("id-t", 4), "u": TopicMeta("id-u", 1)}
    ms = [member("a"), member("b", topics=("t", "u"))]
    assert reconcile.subscribed_topics(ms, topics) == topics
    targets = reconcile.compute_targets(ms, topics, "range")
    assert targets == {"a": {"t": [0, 1]}, "b": {"t": [2, 3], "u": [0]}}
    assert reconcile.group_state([]) == "empty"
    settled = member("a", target={"t": [0]}, assigned={"t": [0]}, owned={"t": [0]})
    assert reconcile.group_state([settled]) == "stable"
    assert reconcile.group_state([settled._replace(owned={})]) == "reconciling"


def test_heartbeat_interval_is_a_third_of_the_session_within_bounds() -> None:
    assert reconcile.heartbeat_interval_ms(10_000) == 3333
    assert reconcile.heartbeat_interval_ms(60_000) == 5000
    assert reconcile.heartbeat_interval_ms(100) == 50
