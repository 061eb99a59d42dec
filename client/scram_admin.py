"""SCRAM users through the Admin API: AlterUserScramCredentials (51) and
DescribeUserScramCredentials (50), as Kafka's Admin.alterUserScramCredentials does it.

The password never leaves this process: a random salt is drawn here, the salted
password (PBKDF2) is sent, and the broker derives and stores only StoredKey and
ServerKey. Use with a started AsyncAdmin (`await alter_users(admin, ...)`), or the
blocking helpers on a blocking Admin.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field

from raftka.client.errors import error_for_code
from raftka.client.protocol import ApiKey
from raftka.client.protocol.scram import (
    MECHANISM_NAMES,
    MECHANISMS,
    MIN_ITERATIONS,
    salted_password,
)


@dataclass(frozen=True)
class ScramUpsert:
    user: str
    mechanism: str
    password: str = field(repr=False)
    iterations: int = MIN_ITERATIONS


@dataclass(frozen=True)
class UserCredentialInfo:
    user: str
    mechanisms: tuple[tuple[str, int], ...]  # (mechanism, iterations)


def _mechanism_id(name: str) -> int:
    try:
        return MECHANISMS[name.upper()][0]
    except KeyError:
        raise ValueError(f"unknown SCRAM mechanism {name!r}; expected one of {sorted(MECHANISMS)}") from None


async def alter_users(admin, upserts: list[ScramUpsert] = (), deletions: list[tuple[str, str]] = ()) -> None:
    """Create/replace and delete SCRAM credentials; raises the first user's error (a KafkaError
    naming the user)."""
    body = {
        "deletions": [{"name": user, "mechanism": _mechanism_id(mech)} for user, mech in deletions],
        "upsertions": [],
    }
    for u in upserts:
        salt = secrets.token_bytes(32)
        body["upsertions"].append({
            "name": u.user, "mechanism": _mechanism_id(u.mechanism), "iterations": u.iterations, "salt": salt,
            "salted_password": salted_password(u.mechanism.upper(), u.password, salt, u.iterations)})
    conn = await admin.cluster.any_connection()
    response = await conn.request(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, body, version=0)
    for result in response.results:
        if result.error_code:
            raise error_for_code(result.error_code, f"user {result.user!r}: {result.error_message}")


async def describe_users(admin, users: list[str] | None = None) -> list[UserCredentialInfo]:
    """Every SCRAM user (or the named ones) with their mechanisms and iteration counts."""
    body = {"users": None if users is None else [{"name": u} for u in users]}
    conn = await admin.cluster.any_connection()
    response = await conn.request(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, body, version=0)
    if response.error_code:
        raise error_for_code(response.error_code, response.error_message or "")
    out = []
    for result in response.results:
        if result.error_code:
            raise error_for_code(result.error_code, f"user {result.user!r}: {result.error_message}")
        out.append(UserCredentialInfo(result.user, tuple(
            (MECHANISM_NAMES.get(c.mechanism, str(c.mechanism)), c.iterations) for c in result.credential_infos)))
    return out
