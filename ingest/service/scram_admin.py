"""Kafka's AlterUserScramCredentials: upsert and delete SCRAM credentials in the store the
SASL/SCRAM login and DescribeUserScramCredentials read (metadata/scram.py). A SCRAM user is
an API key's id; the login's principal is the key's. Each user's alterations succeed or
fail together, with Kafka's checks (its ScramControlManager): a user altered twice in one
request is DUPLICATE_RESOURCE, an unknown mechanism UNSUPPORTED_SASL_MECHANISM, iterations
outside [4096, 16384] or an empty name, salt or password UNACCEPTABLE_CREDENTIAL, and the
deletion of a credential that does not exist RESOURCE_NOT_FOUND."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import NamedTuple

from logformat.errors import ErrorCode, TierlogError
from metadata.scram import MECHANISMS, ScramRepo

MIN_ITERATIONS, MAX_ITERATIONS = 4096, 16384  # Kafka's ScramMechanism bounds


class ScramUpsert(NamedTuple):
    user: str
    mechanism: str  # SCRAM-SHA-256 or SCRAM-SHA-512; anything else is refused
    iterations: int
    salt: bytes
    salted_password: bytes  # Hi(password, salt, iterations), computed by the client


class ScramDeletion(NamedTuple):
    user: str
    mechanism: str


def _refusal(
    user: str, duplicated: bool, ups: Sequence[ScramUpsert], dels: Sequence[ScramDeletion]
) -> TierlogError | None:
    """Why a user's alterations are refused before any is applied (None: they are not)."""
    if duplicated:
        why = f"user {user!r} is altered more than once in one request"
        return TierlogError(ErrorCode.DUPLICATE_RESOURCE, why)
    if not user:
        return TierlogError(ErrorCode.UNACCEPTABLE_CREDENTIAL, "the user name is empty")
    for m in [u.mechanism for u in ups] + [d.mechanism for d in dels]:
        if m not in MECHANISMS:
            why = f"unknown SCRAM mechanism {m!r} (known: {', '.join(MECHANISMS)})"
            return TierlogError(ErrorCode.UNSUPPORTED_SASL_MECHANISM, why)
    for u in ups:
        if not MIN_ITERATIONS <= u.iterations <= MAX_ITERATIONS:
            why = f"iterations must be in [{MIN_ITERATIONS}, {MAX_ITERATIONS}], not {u.iterations}"
            return TierlogError(ErrorCode.UNACCEPTABLE_CREDENTIAL, why)
        if not u.salt or not u.salted_password:
            why = f"the credential of {user!r} has an empty salt or salted password"
            return TierlogError(ErrorCode.UNACCEPTABLE_CREDENTIAL, why)
    return None


class ScramAdmin:
    """Alterations of SCRAM credentials (built once, in Services; blocks on Postgres)."""

    def __init__(self, repo: ScramRepo) -> None:
        self._repo = repo

    def alter(
        self, deletions: Sequence[ScramDeletion], upsertions: Sequence[ScramUpsert]
    ) -> dict[str, TierlogError | None]:
        """Each user named, in the request's order: None when its alterations applied."""
        names = [d.user for d in deletions] + [u.user for u in upsertions]
        # Kafka: one alteration per user and mechanism; the same pair twice is a duplicate.
        pairs = Counter([(d.user, d.mechanism) for d in deletions])
        pairs.update((u.user, u.mechanism) for u in upsertions)
        out: dict[str, TierlogError | None] = {}
        for user in dict.fromkeys(names):
            ups = [u for u in upsertions if u.user == user]
            dels = [d for d in deletions if d.user == user]
            duplicated = any(n > 1 for (u, _), n in pairs.items() if u == user)
            out[user] = _refusal(user, duplicated, ups, dels) or self._apply(user, ups, dels)
        return out

    def _apply(
        self, user: str, ups: Sequence[ScramUpsert], dels: Sequence[ScramDeletion]
    ) -> TierlogError | None:
        for d in dels:
            if not self._repo.delete(user, d.mechanism):
                why = f"user {user!r} has no {d.mechanism} credential to delete"
                return TierlogError(ErrorCode.RESOURCE_NOT_FOUND, why)
        for u in ups:
            if not self._repo.set_salted(
                user, u.mechanism, u.salt, u.salted_password, u.iterations
            ):
                why = f"no API key has the id {user!r} (a SCRAM user is an API key's id)"
                return TierlogError(ErrorCode.RESOURCE_NOT_FOUND, why)
        return None
