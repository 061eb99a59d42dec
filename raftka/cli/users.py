"""`raftka users create|delete|list`: SCRAM users, like `kafka-configs --entity-type users`."""

from __future__ import annotations

from raftka.cli.runner import Refused, run_with_admin
from raftka.client.scram_admin import ScramUpsert, alter_users, describe_users


def _run(command: str, bootstrap: str, action) -> int:
    status, _ = run_with_admin(f"users {command}", bootstrap, action, timeout_ms=30000,
                               client_id="raftka-users")
    return status


def create(bootstrap: str, user: str, password: str, mechanisms: tuple[str, ...], iterations: int) -> int:
    async def action(admin) -> None:
        await alter_users(admin, [ScramUpsert(user, m, password, iterations) for m in mechanisms])
        print(f"Created SCRAM credentials for user {user!r}: {', '.join(mechanisms)} ({iterations} iterations)")

    return _run("create", bootstrap, action)


def delete(bootstrap: str, user: str, mechanisms: tuple[str, ...]) -> int:
    async def action(admin) -> None:
        [info] = await describe_users(admin, [user])
        present = [m for m, _ in info.mechanisms if m in mechanisms]
        if not present:
            raise Refused(f"user {user!r} has no credential for {list(mechanisms)}")
        await alter_users(admin, deletions=[(user, m) for m in present])
        print(f"Deleted SCRAM credentials of user {user!r}: {', '.join(present)}")

    return _run("delete", bootstrap, action)


def list_users(bootstrap: str) -> int:
    async def action(admin) -> None:
        for info in await describe_users(admin):
            mechanisms = ", ".join(f"{m} (iterations={i})" for m, i in info.mechanisms)
            print(f"{info.user}: {mechanisms}")

    return _run("list", bootstrap, action)
