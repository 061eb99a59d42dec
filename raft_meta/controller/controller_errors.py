"""Errors a controller decision returns to the requester, with Kafka's error codes.

The codes are the protocol's `ErrorCode` (client/protocol/errors.py, the one table every
layer imports); this module only carries one of them with a message.
"""

from __future__ import annotations

from raftka.client.protocol import ErrorCode, error_code_named


class ControllerError(Exception):
    """A request the controller refuses: `code` is Kafka's error code, `name` its Kafka name."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        if not isinstance(code, ErrorCode):
            raise TypeError(f"ControllerError code: got {code!r}, expected an ErrorCode member")
        super().__init__(f"{code.name}: {message}")
        self.name = code.name
        self.code = int(code)
        self.message = message

    @classmethod
    def named(cls, name: str, message: str) -> ControllerError:
        """The error a peer sent by Kafka name (the control RPC's wire form); an unknown name
        is UNKNOWN_SERVER_ERROR."""
        return cls(error_code_named(name), message)
