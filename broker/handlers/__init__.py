"""One module per Kafka API (or family); each handler fits `Handler`, and kafka_apis.HANDLERS maps
each ApiKey to one."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from raftka.broker.context import BrokerContext
    from raftka.broker.net.network import ConnectionInfo
    from raftka.client.protocol import Message, RequestHeader


class Handler(Protocol):
    """`async def handle(ctx, header, request, conn=None)`: one API's answer to one request.

    `ctx` is the running node (broker/context.py); `header` the request's header; `request` its
    decoded body (a message of the API's request class); `conn` the connection it came on, None
    for an in-process call (then the caller is `User:ANONYMOUS`, broker/acl_checks.py). Returns
    the response message, which KafkaApis encodes (a Produce with acks=all may answer later).
    """

    async def __call__(self, ctx: BrokerContext, header: RequestHeader, request: Message,
                       conn: ConnectionInfo | None = None) -> Any: ...
