"""Console sessions (console/sessions.py) and the sign-in's same-origin rule for `next`
(console/auth.py), deterministic: a fake clock, no processes."""

from __future__ import annotations

import pytest

from console.auth import same_origin_path
from console.rights import Rights
from console.sessions import SessionStore


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_session_maps_an_opaque_id_to_the_key_until_it_ends() -> None:
    store = SessionStore(ttl_s=100, idle_s=50, clock=Clock())
    sid = store.create("tlk_abc_secret")
    assert "tlk_abc_secret" not in sid and len(sid) >= 40
    assert store.api_key(sid) == "tlk_abc_secret"
    assert store.end(sid) and store.api_key(sid) is None
    assert not store.end(sid) and store.api_key(None) is None and store.api_key("") is None


def test_sessions_expire_when_idle_and_at_their_lifetime() -> None:
    clock = Clock()
    store = SessionStore(ttl_s=100, idle_s=50, clock=clock)
    idle, busy = store.create("k1"), store.create("k2")
    for _ in range(3):  # used every 30 s: the idle limit never strikes...
        clock.now += 30
        assert store.api_key(busy) == "k2"
    assert store.api_key(idle) is None  # ...but it did for the unused one
    clock.now += 30  # 120 s after sign-in: past the lifetime, however busy
    assert store.api_key(busy) is None and len(store) == 0


def test_the_table_is_bounded_oldest_first() -> None:
    store = SessionStore(max_sessions=3, clock=Clock())
    ids = [store.create(f"k{i}") for i in range(5)]
    assert len(store) == 3
    assert [store.api_key(i) for i in ids] == [None, None, "k2", "k3", "k4"]
    with pytest.raises(ValueError):
        SessionStore(ttl_s=0)


@pytest.mark.parametrize(
    "target",
    [
        "//evil.example",
        "/\\evil.example",
        "/\\/evil.example",
        "/\t/evil.example",
        "/\n/evil.example",
        "/\r\nSet-Cookie: a=b",
        "/ /x",
        "/\x7f/x",
        "https:evil.example",
        "https://evil.example",
        "javascript:alert(1)",
        "evil.example",
        "",
    ],
)
def test_next_outside_this_site_is_home(target: str) -> None:
    assert same_origin_path(target) == "/"


@pytest.mark.parametrize(
    ("target", "sent"),
    [
        ("/", "/"),
        ("/topics", "/topics"),
        ("/topics/a%2Fb?tab=configs&x=1", "/topics/a%2Fb?tab=configs&x=1"),
        ("/groups/caf\u00e9", "/groups/caf%C3%A9"),  # plain ASCII goes out
        ('/x"<script>', "/x%22%3Cscript%3E"),
    ],
)
def test_paths_of_this_site_are_kept(target: str, sent: str) -> None:
    assert same_origin_path(target) == sent


def test_rights_decide_series_by_group_and_cluster() -> None:
    viewer = Rights(cluster=False, groups=frozenset({"billing", "a:b"}))
    assert viewer.may_see("group:billing:records") and viewer.may_see("group:a:b:age_s")
    assert not viewer.may_see("group:other:records") and not viewer.may_see("under_replicated")
    assert Rights(cluster=True, groups=frozenset()).may_see("produce_records_per_s")
