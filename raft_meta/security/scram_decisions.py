"""AlterUserScramCredentials on the controller: (image, request) -> records + a result per user.

Pure, in the style of controller_decisions.py. Kafka's rules (docs/security.md):
per user, every deletion and upsertion either all apply or none does; the
errors are Kafka's codes by name:

| problem | error | message |
|---|---|---|
| empty user name | UNACCEPTABLE_CREDENTIAL | Username must not be empty |
| mechanism other than 1 (SHA-256) / 2 (SHA-512) | UNSUPPORTED_SASL_MECHANISM | Unknown SCRAM mechanism |
| iterations < 4096 / > 16384 | UNACCEPTABLE_CREDENTIAL | Too few / Too many iterations |
| the same (user, mechanism) twice in one request | DUPLICATE_RESOURCE | ... |
| deleting a credential that does not exist | RESOURCE_NOT_FOUND | ... |
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from raftka.raft_meta.controller.controller_decisions import MAX_RECORDS_PER_USER_OP
from raftka.raft_meta.metadata.image import MetadataImage
from raftka.raft_meta.metadata.records import RemoveUserScramCredential, UserScramCredential

MECHANISM_IDS = (1, 2)
MIN_ITERATIONS, MAX_ITERATIONS = 4096, 16384


@dataclass(frozen=True)
class ScramUpsertion:
    name: str
    mechanism: int
    iterations: int
    salt: bytes
    stored_key: bytes
    server_key: bytes


@dataclass(frozen=True)
class ScramResult:
    user: str
    error: str | None = None  # Kafka error name
    message: str | None = None


def _problem(name: str, mechanism: int, iterations: int | None) -> tuple[str, str] | None:
    if not name:
        return "UNACCEPTABLE_CREDENTIAL", "Username must not be empty"
    if mechanism not in MECHANISM_IDS:
        return "UNSUPPORTED_SASL_MECHANISM", f"Unknown SCRAM mechanism {mechanism}"
    if iterations is not None and iterations < MIN_ITERATIONS:
        return "UNACCEPTABLE_CREDENTIAL", f"Too few iterations ({iterations} < {MIN_ITERATIONS})"
    if iterations is not None and iterations > MAX_ITERATIONS:
        return "UNACCEPTABLE_CREDENTIAL", f"Too many iterations ({iterations} > {MAX_ITERATIONS})"
    return None


def alter_scram_credentials(image: MetadataImage, deletions: list[tuple[str, int]],
                            upsertions: list[ScramUpsertion]) -> tuple[list, list[ScramResult]]:
    """(records to commit, one result per user in request order)."""
    users = list(dict.fromkeys([d[0] for d in deletions] + [u.name for u in upsertions]))
    if len(deletions) + len(upsertions) > MAX_RECORDS_PER_USER_OP:  # one entry, bounded as CreateTopics is
        message = (f"{len(deletions) + len(upsertions)} credential changes in one request; expected at most "
                   f"{MAX_RECORDS_PER_USER_OP}")
        return [], [ScramResult(user, "POLICY_VIOLATION", message) for user in users]
    pairs = Counter([(n, m) for n, m in deletions] + [(u.name, u.mechanism) for u in upsertions])
    errors: dict[str, tuple[str, str]] = {}
    for (name, mechanism), count in pairs.items():
        if count > 1:
            errors.setdefault(name, ("DUPLICATE_RESOURCE", f"a credential of user {name!r} for mechanism "
                                                           f"{mechanism} appears more than once in the request"))
    for name, mechanism in deletions:
        problem = _problem(name, mechanism, None)
        if problem is None and (name, mechanism) not in image.scram_credentials:
            problem = "RESOURCE_NOT_FOUND", f"attempt to delete a credential of user {name!r} that does not exist"
        if problem is not None:
            errors.setdefault(name, problem)
    for u in upsertions:
        problem = _problem(u.name, u.mechanism, u.iterations)
        if problem is not None:
            errors.setdefault(u.name, problem)
    records: list = []
    for name, mechanism in deletions:
        if name not in errors:
            records.append(RemoveUserScramCredential(name, mechanism))
    for u in upsertions:
        if u.name not in errors:
            records.append(UserScramCredential(u.name, u.mechanism, u.salt, u.stored_key, u.server_key, u.iterations))
    results = [ScramResult(user, *errors[user]) if user in errors else ScramResult(user) for user in users]
    return records, results
