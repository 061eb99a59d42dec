"""The broker's TLS: server contexts per listener and the principal of a client certificate.

A listener of protocol SSL or SASL_SSL wraps each accepted socket in
`trio.SSLStream` (broker/net/network.py) with the context built here from its
PEM settings (raft_meta/config/security_config.py). `ssl.client.auth`: required =
CERT_REQUIRED (no certificate, no handshake), requested = CERT_OPTIONAL,
none = CERT_NONE. On SSL listeners a verified client certificate makes the
principal `User:` + `ssl.principal.mapping.rules` applied to its subject DN
(RFC 2253 as Java prints it); without one the principal stays
`User:ANONYMOUS`. On SASL_SSL listeners SASL decides the principal.
"""

from __future__ import annotations

import os
import ssl

import structlog
import trio
from cryptography import x509

from raftka.broker.net.sasl_state import SaslAuthenticator
from raftka.client.security import ClientSecurity
from raftka.client.tls import limit_versions, load_key_and_chain, load_trust
from raftka.raft_meta.config.security_config import ListenerSecurity, SslSettings
from raftka.raft_meta.security.principal_mapping import map_principal, parse_rules

log = structlog.get_logger("broker.tls")

_VERIFY = {"required": ssl.CERT_REQUIRED, "requested": ssl.CERT_OPTIONAL, "none": ssl.CERT_NONE}


def server_context(settings: SslSettings) -> ssl.SSLContext:
    """The server context of one listener; OSError/ssl.SSLError when a file cannot be used."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    limit_versions(context, settings.enabled_protocols)
    if settings.cipher_suites:
        context.set_ciphers(":".join(settings.cipher_suites))
    load_key_and_chain(context, location=settings.keystore_location, inline_key=settings.keystore_key,
                       inline_chain=settings.keystore_chain, password=settings.key_password)
    load_trust(context, cafile=settings.truststore_location, cadata=settings.truststore_certificates)
    context.verify_mode = _VERIFY[settings.client_auth]
    return context


def certificate_dn(der: bytes) -> str:
    """The subject DN of a DER certificate, as Java's X500Principal.getName() prints it."""
    return x509.load_der_x509_certificate(der).subject.rfc4514_string()


RELOAD_CHECK_S = 30.0


def _stamps(settings: SslSettings) -> tuple:
    """(path, mtime, size) of the key and trust store files (inline PEM never changes)."""
    out = []
    for path in (settings.keystore_location, settings.truststore_location):
        if path:
            try:
                st = os.stat(path)
                out.append((path, st.st_mtime_ns, st.st_size))
            except OSError:
                out.append((path, None, None))
    return tuple(out)


class ListenerTransport:
    """What a listener does to each connection before requests: TLS, then who the peer is.

    Certificates are reloaded without a restart: `watch()` looks at the key and trust store
    files every RELOAD_CHECK_S (in a worker thread) and, when one changed, builds a new
    context for the connections that follow (open ones keep theirs). A file that cannot be
    loaded is logged and the old context stays."""

    def __init__(self, security: ListenerSecurity, scram_lookup=None) -> None:
        self.security = security
        self.scram_lookup = scram_lookup or (lambda name, mechanism: None)
        self.ssl_context = server_context(security.ssl) if security.ssl is not None else None
        self.rules = parse_rules(security.ssl.principal_mapping_rules) if security.ssl is not None else ()
        self._stamps = _stamps(security.ssl) if security.ssl is not None else ()

    async def reload_if_changed(self) -> bool:
        """Rebuild the TLS context if a store file changed; True if it was replaced."""
        settings = self.security.ssl
        if settings is None:
            return False
        stamps = await trio.to_thread.run_sync(_stamps, settings)
        if stamps == self._stamps:
            return False
        try:
            context = await trio.to_thread.run_sync(server_context, settings)
        except (OSError, ssl.SSLError) as exc:  # half-written, say: tried again at the next check
            log.warning("tls.reload_failed", listener=self.security.name, error=str(exc))
            return False
        self._stamps = stamps
        self.ssl_context = context
        log.info("tls.reloaded", listener=self.security.name)
        return True

    async def watch(self, interval: float = RELOAD_CHECK_S) -> None:
        while True:
            await trio.sleep(interval)
            await self.reload_if_changed()

    @property
    def sasl(self) -> bool:
        return self.security.uses_sasl

    def new_authenticator(self) -> SaslAuthenticator:
        return SaslAuthenticator(self.security, self.scram_lookup)

    def certificate_principal(self, der: bytes | None) -> str:
        """The principal of an SSL-listener client: `User:<mapped DN>` or `User:ANONYMOUS`.
        Raises NoMatchingRule (a ValueError) when no mapping rule matches."""
        if der is None or self.security.protocol != "SSL":
            return "User:ANONYMOUS"
        return "User:" + map_principal(self.rules, certificate_dn(der))


def inter_broker_security(config) -> ClientSecurity | None:
    """How this broker connects to the others (replica fetches): the inter-broker listener's
    protocol, `sasl.mechanism.inter.broker.protocol` with the username/password of that
    listener's JAAS entry, its trust store, its key store as client certificate (mTLS), and
    `ssl.endpoint.identification.algorithm` (https = verify the host name; "" = do not)."""
    listener = config.security.listener(config.inter_broker_listener_name)
    if listener.protocol == "PLAINTEXT":
        return None
    username = password = None
    mechanism = None
    if listener.uses_sasl:
        mechanism = config.security.inter_broker_mechanism
        options = listener.jaas[mechanism].options
        username, password = options.get("username"), options.get("password")
    ssl_settings = listener.ssl
    return ClientSecurity(
        security_protocol=listener.protocol,
        sasl_mechanism=mechanism,
        sasl_username=username,
        sasl_password=password,
        ssl_cafile=ssl_settings.truststore_location if ssl_settings else None,
        ssl_cadata=ssl_settings.truststore_certificates if ssl_settings else None,
        ssl_certfile=ssl_settings.keystore_location if ssl_settings and listener.protocol == "SSL" else None,
        ssl_key_password=ssl_settings.key_password if ssl_settings else None,
        ssl_check_hostname=bool(ssl_settings and ssl_settings.endpoint_identification.lower() == "https"),
    )
