"""ScramAdmin (ingest/service/scram_admin.py), AlterUserScramCredentials' rules, on a real
Postgres: a credential set from a salted password logs in with that password (scramp plays
the client), each user's alterations are refused or applied on their own with Kafka's
errors, and a refused one stores nothing."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Iterator

import pytest
from scramp import ScramClient, ScramMechanism
from sqlalchemy.engine import Engine

from ingest.service.scram_admin import ScramAdmin, ScramDeletion, ScramUpsert
from logformat.errors import ErrorCode, TierlogError
from metadata.api_keys import parse_key
from metadata.db import make_engine
from metadata.scram import ScramRepo
from metadata.security import SecurityRepo

SHA256, SHA512 = "SCRAM-SHA-256", "SCRAM-SHA-512"
DIGESTS = {SHA256: "sha256", SHA512: "sha512"}


@pytest.fixture(scope="module")
def engine(db_factory: Callable[..., str]) -> Iterator[Engine]:
    e = make_engine(db_factory())
    yield e
    e.dispose()


def _user(engine: Engine, name: str) -> str:
    _, key = SecurityRepo(engine).create_key(name)
    parsed = parse_key(key)
    assert parsed is not None
    return parsed.key_id


def _upsert(user: str, password: str, mechanism: str = SHA512, n: int = 8192) -> ScramUpsert:
    """What a client sends: its own salt and Hi(password, salt, n)."""
    salt = os.urandom(16)
    salted = hashlib.pbkdf2_hmac(DIGESTS[mechanism], password.encode(), salt, n)  # RFC 5802 Hi
    return ScramUpsert(user, mechanism, n, salt, salted)


def _logs_in(repo: ScramRepo, user: str, password: str, mechanism: str = SHA512) -> bool:
    def auth(username: str) -> tuple[bytes, bytes, bytes, int]:
        found = repo.find(username, mechanism)
        assert found is not None
        return found.salt, found.stored_key, found.server_key, found.iterations

    server = ScramMechanism(mechanism).make_server(auth)
    client = ScramClient([mechanism], user, password)
    server.set_client_first(client.get_client_first())
    client.set_server_first(server.get_server_first())
    try:
        server.set_client_final(client.get_client_final())
    except Exception:
        return False
    return True


def _codes(got: dict[str, TierlogError | None]) -> dict[str, ErrorCode | None]:
    return {u: None if e is None else e.code for u, e in got.items()}


def test_a_credential_set_from_a_salted_password_logs_in(engine: Engine) -> None:
    repo, admin = ScramRepo(engine), ScramAdmin(ScramRepo(engine))
    user = _user(engine, "ann")
    assert admin.alter([], [_upsert(user, "chosen")]) == {user: None}
    assert repo.described()[user] == [(SHA512, 8192)]
    assert _logs_in(repo, user, "chosen")
    assert not _logs_in(repo, user, "another")
    assert admin.alter([], [_upsert(user, "changed")]) == {user: None}  # an upsert
    assert _logs_in(repo, user, "changed") and not _logs_in(repo, user, "chosen")
    assert admin.alter([ScramDeletion(user, SHA512)], []) == {user: None}
    assert repo.find(user, SHA512) is None


def test_refusals_are_kafkas_and_per_user(engine: Engine) -> None:
    repo, admin = ScramRepo(engine), ScramAdmin(ScramRepo(engine))
    ok, twice, low, high, odd = (_user(engine, n) for n in ("bo", "cy", "di", "ed", "fay"))
    got = admin.alter(
        [ScramDeletion(twice, SHA256), ScramDeletion("nobody", SHA256)],
        [
            _upsert(ok, "pw"),
            _upsert(twice, "pw", SHA256),
            _upsert(low, "pw", n=4095),
            _upsert(high, "pw", n=16385),
            ScramUpsert(odd, "SCRAM-MD5", 8192, b"salt", b"salted"),
            _upsert("not-a-key", "pw"),
            _upsert("", "pw"),
        ],
    )
    assert _codes(got) == {
        twice: ErrorCode.DUPLICATE_RESOURCE,
        "nobody": ErrorCode.RESOURCE_NOT_FOUND,  # nothing to delete
        ok: None,
        low: ErrorCode.UNACCEPTABLE_CREDENTIAL,
        high: ErrorCode.UNACCEPTABLE_CREDENTIAL,
        odd: ErrorCode.UNSUPPORTED_SASL_MECHANISM,
        "not-a-key": ErrorCode.RESOURCE_NOT_FOUND,  # a SCRAM user is an API key
        "": ErrorCode.UNACCEPTABLE_CREDENTIAL,
    }
    assert ok in repo.described()
    assert not repo.described().keys() & {twice, low, high, odd}  # the refused stored nothing
