"""`--command-config FILE`: the client security settings of this CLI invocation.

Like Kafka's tools, every command that talks to brokers accepts
`--command-config client.properties` (Kafka's or librdkafka's client keys,
client/security.py). The CLI is one command per process, so the parsed
settings live here for the command's code to pass to the SDK (`security()`).
"""

from __future__ import annotations

import click

from raftka.client.security import ClientSecurity, read_properties_file

_state: dict[str, object] = {"path": None, "security": None}


def load(path: str) -> ClientSecurity:
    try:
        security = ClientSecurity.from_properties(read_properties_file(path))
    except (OSError, ValueError) as exc:
        raise click.BadParameter(f"{path}: {exc}", param_hint="--command-config") from None
    _state.update(path=path, security=security)
    return security


def security() -> ClientSecurity | None:
    """The settings given with --command-config, or None (PLAINTEXT)."""
    return _state["security"]  # type: ignore[return-value]


def path() -> str | None:
    return _state["path"]  # type: ignore[return-value]


def _callback(ctx: click.Context, param: click.Parameter, value: str | None) -> None:
    if value:
        load(value)


option = click.option("--command-config", type=click.Path(exists=True, dir_okay=False), expose_value=False,
                      callback=_callback, is_eager=True,
                      help="Client properties (security.protocol, sasl.*, ssl.*), as Kafka's tools take.")

