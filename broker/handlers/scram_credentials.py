"""DescribeUserScramCredentials (50) and AlterUserScramCredentials (51), Kafka's way.

Both are v0 only and flexible, and advertised: `kafka-configs --entity-type users`,
librdkafka's `alter_user_scram_credentials`, the SDK and `raftka users` call them. 51 carries the
*salted password* (the client salts and hashes); this broker derives StoredKey
and ServerKey and the controller decides (raft_meta/security/scram_decisions.py) and
commits UserScramCredential / RemoveUserScramCredential records. Passwords
never reach the broker, and nothing secret is ever returned.
"""

from __future__ import annotations

from collections import Counter

from raftka.broker import acl_checks
from raftka.broker.context import BrokerContext
from raftka.broker.errors import error_code_for
from raftka.client.protocol import ErrorCode, error_code_named, response_class
from raftka.client.protocol.api_keys import ApiKey
from raftka.client.protocol.scram import MECHANISM_NAMES, credential_from_salted_password
from raftka.raft_meta.controller.controller_errors import ControllerError
from raftka.raft_meta.security.acls import AclOperation
from raftka.raft_meta.security.scram_decisions import ScramUpsertion

DescribeResponse = response_class(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS)
AlterResponse = response_class(ApiKey.ALTER_USER_SCRAM_CREDENTIALS)


async def handle_describe(ctx: BrokerContext, header, request, conn=None):
    denied = acl_checks.cluster_error(ctx, conn, AclOperation.DESCRIBE)  # Kafka: DESCRIBE on the cluster
    if denied:
        return DescribeResponse(throttle_time_ms=0, error_code=denied,
                                error_message="not authorized to DESCRIBE the cluster", results=[])
    stored = ctx.image.scram_credentials
    by_user: dict[str, list[dict]] = {}
    for (name, mechanism), credential in sorted(stored.items()):
        by_user.setdefault(name, []).append({"mechanism": mechanism, "iterations": credential.iterations})
    wanted = [u.name for u in request.users] if request.users else None
    results = []
    if wanted is None:
        results = [{"user": name, "error_code": 0, "credential_infos": infos} for name, infos in by_user.items()]
    else:
        counts = Counter(wanted)
        for name in dict.fromkeys(wanted):
            if counts[name] > 1:
                results.append({"user": name, "error_code": ErrorCode.DUPLICATE_RESOURCE,
                                "error_message": f"Cannot describe SCRAM credentials for the same user twice in a "
                                                 f"single request: {name}", "credential_infos": []})
            elif name not in by_user:
                results.append({"user": name, "error_code": ErrorCode.RESOURCE_NOT_FOUND,
                                "error_message": f"Attempt to describe a user credential that does not exist: {name}",
                                "credential_infos": []})
            else:
                results.append({"user": name, "error_code": 0, "credential_infos": by_user[name]})
    return DescribeResponse(throttle_time_ms=0, error_code=0, results=results)


async def handle_alter(ctx: BrokerContext, header, request, conn=None):
    denied = acl_checks.cluster_error(ctx, conn, AclOperation.ALTER)  # Kafka: ALTER on the cluster
    if denied:
        names = dict.fromkeys([d.name for d in request.deletions] + [u.name for u in request.upsertions])
        return AlterResponse(throttle_time_ms=0, results=[
            {"user": name, "error_code": denied, "error_message": "not authorized to ALTER the cluster"}
            for name in names])
    deletions = [(d.name, d.mechanism) for d in request.deletions]
    upsertions = []
    early: dict[str, tuple[int, str]] = {}
    for u in request.upsertions:
        mechanism = MECHANISM_NAMES.get(u.mechanism)
        if mechanism is None:
            early.setdefault(u.name, (ErrorCode.UNSUPPORTED_SASL_MECHANISM, f"Unknown SCRAM mechanism {u.mechanism}"))
            continue
        salt, salted = bytes(u.salt), bytes(u.salted_password)
        if not salt or not salted:
            early.setdefault(u.name, (ErrorCode.UNACCEPTABLE_CREDENTIAL, "the salt and salted password must not "
                                                                          "be empty"))
            continue
        credential = credential_from_salted_password(mechanism, salted, salt, u.iterations)
        upsertions.append(ScramUpsertion(u.name, u.mechanism, u.iterations, salt, credential.stored_key,
                                         credential.server_key))
    upsertions = [u for u in upsertions if u.name not in early]
    deletions = [d for d in deletions if d[0] not in early]
    users = list(dict.fromkeys([d.name for d in request.deletions] + [u.name for u in request.upsertions]))
    outcome: dict[str, tuple[int, str | None]] = {name: early[name] for name in early}
    if deletions or upsertions:
        try:
            results = await ctx.controller.alter_scram_credentials(deletions, upsertions)
        except ControllerError as exc:
            code = error_code_for(exc)
            results = []
            for name in users:
                outcome.setdefault(name, (code, exc.message))
        for r in results:
            code = 0 if r.error is None else error_code_named(r.error)
            outcome.setdefault(r.user, (code, r.message))
    return AlterResponse(throttle_time_ms=0, results=[
        {"user": name, "error_code": outcome.get(name, (0, None))[0], "error_message": outcome.get(name, (0, None))[1]}
        for name in users])
