"""One connection's SASL authentication on a SASL_PLAINTEXT / SASL_SSL listener (pure).

Kafka's server-side states (docs/security.md), per connection:

    HANDSHAKE ── ApiVersions (once) ──► HANDSHAKE
        │ SaslHandshake(mechanism enabled)        SaslHandshake(not enabled) ─► 33, close
        ▼
    AUTHENTICATE ── SaslAuthenticate(token) ──► AUTHENTICATE   (SCRAM: 2 round trips)
        │ exchange complete                      bad token/credentials ─► 58 + message, close
        ▼
    done: `principal` = User:<name>; every API is served (SaslHandshake/SaslAuthenticate → 34)

Anything else before authentication (any other API, a second ApiVersions)
closes the connection without a reply, as Kafka does. The caller
(broker/kafka_apis.py) owns the wire; this class only decides.
"""

from __future__ import annotations

import hmac
from collections.abc import Callable

from raftka.client.protocol import ApiKey, ErrorCode
from raftka.client.protocol.scram import MECHANISMS as SCRAM_MECHANISMS
from raftka.client.protocol.scram import ScramCredential, ScramError, ScramServer
from raftka.raft_meta.config.security_config import ListenerSecurity

HANDSHAKE, AUTHENTICATE, DONE, FAILED = "HANDSHAKE", "AUTHENTICATE", "DONE", "FAILED"

PLAIN_FAILED = "Authentication failed: Invalid username or password"

ScramLookup = Callable[[str, str], "ScramCredential | None"]  # (user, mechanism) -> credential


class PreAuthViolation(Exception):
    """A request that Kafka answers by closing the connection without a reply."""


class SaslAuthenticator:
    def __init__(self, listener: ListenerSecurity, scram_lookup: ScramLookup) -> None:
        self.listener = listener
        self.state = HANDSHAKE
        self._lookup = scram_lookup
        self._api_versions_seen = 0
        self.mechanism: str | None = None
        self._scram: ScramServer | None = None
        self._scram_first_seen = False
        self.principal: str | None = None

    def admit(self, api_key: int) -> None:
        """Raise PreAuthViolation unless `api_key` may be served in the current state."""
        if self.state == FAILED:
            raise PreAuthViolation("the connection failed SASL authentication")
        # Once, plus one retry after an UNSUPPORTED_VERSION (v0-layout) answer.
        if api_key == ApiKey.API_VERSIONS and self.state == HANDSHAKE and self._api_versions_seen < 2:
            self._api_versions_seen += 1
            return
        if api_key == ApiKey.SASL_HANDSHAKE and self.state == HANDSHAKE:
            return
        if api_key == ApiKey.SASL_AUTHENTICATE and self.state == AUTHENTICATE:
            return
        name = ApiKey(api_key).name if api_key in ApiKey._value2member_map_ else f"api key {api_key}"
        raise PreAuthViolation(f"{name} before SASL authentication completed (state {self.state})")

    def handshake(self, mechanism: str) -> tuple[int, list[str]]:
        """(error code, enabled mechanisms). A refused mechanism fails the connection."""
        enabled = list(self.listener.sasl_mechanisms)
        if mechanism not in enabled:
            self.state = FAILED
            return ErrorCode.UNSUPPORTED_SASL_MECHANISM, enabled
        self.mechanism = mechanism
        if mechanism in SCRAM_MECHANISMS:
            self._scram = ScramServer(mechanism, lambda name: self._lookup(name, mechanism))
        self.state = AUTHENTICATE
        return 0, enabled

    def authenticate(self, token: bytes) -> tuple[int, str | None, bytes]:
        """(error code, error message, server token). On success `principal` is set and the
        state is DONE; on failure FAILED (the caller replies, then closes)."""
        try:
            if self.mechanism == "PLAIN":
                name = self._plain(bytes(token))
                reply = b""
            else:
                assert self._scram is not None
                if not self._scram_first_seen:
                    self._scram_first_seen = True
                    return 0, None, self._scram.receive_client_first(bytes(token))
                reply = self._scram.receive_client_final(bytes(token))
                name = self._scram.name
        except ScramError:
            self.state = FAILED
            return (ErrorCode.SASL_AUTHENTICATION_FAILED,
                    "Authentication failed during authentication due to invalid credentials with SASL "
                    f"mechanism {self.mechanism}", b"")
        except _PlainRefused as exc:
            self.state = FAILED
            return ErrorCode.SASL_AUTHENTICATION_FAILED, str(exc), b""
        self.state = DONE
        self.principal = f"User:{name}"
        return 0, None, reply

    def _plain(self, token: bytes) -> str:
        parts = token.split(b"\0")
        if len(parts) != 3:
            raise _PlainRefused(PLAIN_FAILED)
        try:
            authzid, name, password = (p.decode("utf-8") for p in parts)
        except UnicodeDecodeError:
            raise _PlainRefused(PLAIN_FAILED) from None
        if not name:
            raise _PlainRefused("Authentication failed: username not specified")
        if authzid and authzid != name:
            raise _PlainRefused("Authentication failed: Client requested an authorization id that is "
                                "different from username")
        expected = self.listener.plain_users().get(name)
        # compare_digest over equal-length-independent bytes: unknown users cost the same.
        ok = hmac.compare_digest((expected or "\0unknown").encode(), password.encode())
        if expected is None or not ok:
            raise _PlainRefused(PLAIN_FAILED)
        return name


class _PlainRefused(Exception):
    pass


def scram_lookup_from_image(image_getter) -> ScramLookup:
    """A lookup over the metadata image's SCRAM credentials (UserScramCredential records)."""

    def lookup(name: str, mechanism: str) -> ScramCredential | None:
        mech_id = SCRAM_MECHANISMS[mechanism][0]
        stored = image_getter().scram_credentials.get((name, mech_id))
        if stored is None:
            return None
        return ScramCredential(mechanism, stored.salt, stored.stored_key, stored.server_key, stored.iterations)

    return lookup
