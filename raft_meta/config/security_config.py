"""The security part of server.properties: listeners' protocols, TLS from PEM, SASL, JAAS.

Pure parsing (no files are read, no sockets): `parse_security(properties, ...)`
turns Kafka's keys into one `ListenerSecurity` per listener, and every problem
is a `ValueError` naming the key, what was received and what was expected
(`node_config` turns it into a ConfigError). The facts are in
docs/security.md; in short, as Kafka does:

- Every SSL/SASL key may be overridden per listener with
  `listener.name.<listener lowercased>.<key>`; the plain key is the fallback.
  On SASL_SSL listeners only the prefixed `ssl.client.auth` counts (KIP-684).
- JAAS configs are read only from `listener.name.<l>.<mechanism>.sasl.jaas.config`
  (an unprefixed `sasl.jaas.config` is ignored by brokers, so it is refused here
  with a pointer to the right key).
- Only PEM key/trust stores (`ssl.keystore.type` / `ssl.truststore.type` =
  PEM; unset is read as PEM, JKS/PKCS12 are refused), and the mechanisms
  PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 (no GSSAPI / OAUTHBEARER).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
CLIENT_AUTH = ("required", "requested", "none")
DEFAULT_MAX_RECEIVE_SIZE = 524288  # sasl.server.max.receive.size

# Keys accepted bare or with a `listener.name.<l>.` prefix.
LISTENER_KEYS = frozenset({
    "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.key", "ssl.keystore.certificate.chain",
    "ssl.keystore.password", "ssl.key.password", "ssl.truststore.type", "ssl.truststore.location",
    "ssl.truststore.certificates", "ssl.truststore.password", "ssl.client.auth", "ssl.enabled.protocols",
    "ssl.protocol", "ssl.cipher.suites", "ssl.endpoint.identification.algorithm", "ssl.principal.mapping.rules",
    "sasl.enabled.mechanisms", "sasl.server.max.receive.size", "connections.max.reauth.ms",
})
# Keys accepted only bare.
GLOBAL_KEYS = frozenset({
    "sasl.mechanism.inter.broker.protocol", "sasl.mechanism.controller.protocol", "security.inter.broker.protocol",
})
_PREFIXED = re.compile(r"^listener\.name\.([a-z0-9_]+)\.(.+)$")
_JAAS_SUFFIX = re.compile(r"^([a-z0-9-]+)\.(sasl\.jaas\.config|connections\.max\.reauth\.ms)$")


def is_security_key(key: str) -> bool:
    """True for the keys this module owns (bare or per listener)."""
    if key in LISTENER_KEYS or key in GLOBAL_KEYS or key == "sasl.jaas.config":
        return True
    match = _PREFIXED.match(key)
    if match is None:
        return False
    suffix = match.group(2)
    return suffix in LISTENER_KEYS or _JAAS_SUFFIX.match(suffix) is not None


# --- JAAS -------------------------------------------------------------------------------


@dataclass(frozen=True)
class JaasConfig:
    """One `LoginModule flag key="value" ... ;` entry."""

    login_module: str
    flag: str
    options: Mapping[str, str] = field(default_factory=dict)


_JAAS_TOKEN = re.compile(r'\s*(?:(?P<quoted>"(?:[^"\\]|\\.)*")|(?P<word>[^\s=;"]+)|(?P<punct>[=;]))')


def _strip_comments(text: str) -> str:
    out, i, quoted = [], 0, False
    while i < len(text):
        ch = text[i]
        if ch == '"' and (i == 0 or text[i - 1] != "\\"):
            quoted = not quoted
        if not quoted and text.startswith("//", i):
            end = text.find("\n", i)
            i = len(text) if end < 0 else end
            continue
        if not quoted and text.startswith("/*", i):
            end = text.find("*/", i + 2)
            if end < 0:
                raise ValueError("a JAAS config with an unterminated /* comment")
            i = end + 2
            continue
        out.append(ch)
        i += 1
    return "".join(out)


def parse_jaas(text: str) -> JaasConfig:
    """Kafka's JaasConfig grammar for one login module (`sasl.jaas.config`)."""
    body = _strip_comments(text).strip()
    tokens: list[tuple[str, str]] = []
    pos = 0
    while pos < len(body):
        match = _JAAS_TOKEN.match(body, pos)
        if match is None or match.end() == pos:
            if body[pos:].strip() == "":
                break
            raise ValueError(f"a JAAS config; cannot parse it at character {pos}")
        pos = match.end()
        if match.group("quoted") is not None:
            raw = match.group("quoted")[1:-1]
            tokens.append(("value", re.sub(r"\\(.)", r"\1", raw)))
        elif match.group("word") is not None:
            tokens.append(("word", match.group("word")))
        else:
            tokens.append(("punct", match.group("punct")))
    expected = 'a JAAS config: <LoginModule> required key="value" ... ;'
    if len(tokens) < 3 or tokens[0][0] != "word" or tokens[1][0] != "word" or tokens[-1] != ("punct", ";"):
        raise ValueError(expected)
    module, flag = tokens[0][1], tokens[1][1]
    if flag not in ("required", "requisite", "sufficient", "optional"):
        raise ValueError(f"a JAAS control flag (required, requisite, sufficient, optional), got {flag!r}")
    options: dict[str, str] = {}
    rest = tokens[2:-1]
    if len(rest) % 3:
        raise ValueError(expected)
    for i in range(0, len(rest), 3):
        key, eq, value = rest[i:i + 3]
        if key[0] != "word" or eq != ("punct", "=") or value[0] == "punct":
            raise ValueError(expected)
        options[key[1]] = value[1]
    return JaasConfig(module, flag, options)


PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_LOGIN_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"


# --- PEM ----------------------------------------------------------------------------------

_PEM_BLOCK = re.compile(r"-----BEGIN ([A-Z0-9 ]+)-----(.*?)-----END \1-----", re.DOTALL)


def normalise_pem(text: str) -> str:
    """Inline PEM as Java properties deliver it (one line, blanks where newlines were) back
    into PEM that OpenSSL reads: base64 without blanks, wrapped at 64, BEGIN/END restored."""
    blocks = []
    for kind, payload in _PEM_BLOCK.findall(text):
        data = "".join(payload.split())
        lines = [data[i:i + 64] for i in range(0, len(data), 64)]
        blocks.append("\n".join([f"-----BEGIN {kind}-----", *lines, f"-----END {kind}-----"]))
    if not blocks:
        raise ValueError("PEM text with -----BEGIN ...----- / -----END ...----- blocks")
    return "\n".join(blocks) + "\n"


# --- per-listener settings ---------------------------------------------------------------


@dataclass(frozen=True)
class SslSettings:
    keystore_location: str | None = None
    keystore_key: str | None = None  # inline PEM (normalised)
    keystore_chain: str | None = None  # inline PEM (normalised)
    key_password: str | None = field(default=None, repr=False)
    truststore_location: str | None = None
    truststore_certificates: str | None = None  # inline PEM (normalised)
    client_auth: str = "none"
    enabled_protocols: tuple[str, ...] = ("TLSv1.2", "TLSv1.3")
    cipher_suites: tuple[str, ...] = ()
    endpoint_identification: str = "https"
    principal_mapping_rules: str = "DEFAULT"

    @property
    def has_keystore(self) -> bool:
        return bool(self.keystore_location or self.keystore_key)


@dataclass(frozen=True)
class ListenerSecurity:
    name: str
    protocol: str
    ssl: SslSettings | None = None
    sasl_mechanisms: tuple[str, ...] = ()
    jaas: Mapping[str, JaasConfig] = field(default_factory=dict, repr=False)  # mechanism -> JAAS
    max_receive_size: int = DEFAULT_MAX_RECEIVE_SIZE
    reauth_ms: int = 0

    @property
    def uses_ssl(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def uses_sasl(self) -> bool:
        return self.protocol in ("SASL_PLAINTEXT", "SASL_SSL")

    def plain_users(self) -> dict[str, str]:
        """PLAIN logins: the `user_<name>="<password>"` options of the PLAIN JAAS entry."""
        jaas = self.jaas.get("PLAIN")
        if jaas is None:
            return {}
        return {k[len("user_"):]: v for k, v in jaas.options.items() if k.startswith("user_")}


@dataclass(frozen=True)
class SecuritySettings:
    listeners: Mapping[str, ListenerSecurity] = field(default_factory=dict)
    inter_broker_mechanism: str = "GSSAPI"

    def listener(self, name: str) -> ListenerSecurity:
        return self.listeners.get(name) or ListenerSecurity(name, "PLAINTEXT")


def _lookup(props: Mapping[str, str], listener: str, key: str) -> tuple[str, str | None]:
    """(the key that supplied the value, the value): the per-listener key, else the bare one."""
    prefixed = f"listener.name.{listener.lower()}.{key}"
    if prefixed in props:
        return prefixed, props[prefixed]
    return key, props.get(key)


def _list(raw: str | None) -> tuple[str, ...]:
    return tuple(p.strip() for p in (raw or "").split(",") if p.strip())


def _ssl_settings(props: Mapping[str, str], listener: str, protocol: str) -> SslSettings:
    def get(key: str) -> tuple[str, str | None]:
        return _lookup(props, listener, key)

    for kind in ("keystore", "truststore"):
        key, value = get(f"ssl.{kind}.type")
        if value is not None and value.strip().upper() != "PEM":
            raise ValueError(f"config key {key!r}: got {value!r}, expected PEM (raftka reads PEM files only)")
        key, value = get(f"ssl.{kind}.password")
        if value:
            raise ValueError(f"config key {key!r}: a password is not used with PEM stores; "
                             "expected ssl.key.password for an encrypted key")
    location_key, location = get("ssl.keystore.location")
    key_key, inline_key = get("ssl.keystore.key")
    chain_key, inline_chain = get("ssl.keystore.certificate.chain")
    if (inline_key is None) != (inline_chain is None):
        raise ValueError(f"config keys {key_key!r} and {chain_key!r}: got only one; expected both or neither")
    if inline_key is not None and location is not None:
        raise ValueError(f"config keys {location_key!r} and {key_key!r}: expected one or the other, not both")
    trust_key, trust_location = get("ssl.truststore.location")
    certs_key, trust_certs = get("ssl.truststore.certificates")
    if trust_location is not None and trust_certs is not None:
        raise ValueError(f"config keys {trust_key!r} and {certs_key!r}: expected one or the other, not both")
    if protocol == "SASL_SSL":
        # KIP-684: only the listener-prefixed ssl.client.auth counts on SASL_SSL listeners.
        auth_key = f"listener.name.{listener.lower()}.ssl.client.auth"
        client_auth = props.get(auth_key, "none")
    else:
        auth_key, client_auth = get("ssl.client.auth")
        client_auth = client_auth or "none"
    client_auth = client_auth.strip().lower()
    if client_auth not in CLIENT_AUTH:
        raise ValueError(f"config key {auth_key!r}: got {client_auth!r}, expected one of {list(CLIENT_AUTH)}")
    protocols_key, protocols = get("ssl.enabled.protocols")
    enabled = _list(protocols) or ("TLSv1.2", "TLSv1.3")
    for proto in enabled:
        if proto not in ("TLSv1.2", "TLSv1.3"):
            raise ValueError(f"config key {protocols_key!r}: got {proto!r}, expected TLSv1.2 and/or TLSv1.3")
    rules_key, rules = get("ssl.principal.mapping.rules")
    if rules is not None:
        from raftka.raft_meta.security.principal_mapping import parse_rules  # pure, same layer
        parse_rules(rules)  # ValueError names the rule
    endpoint = get("ssl.endpoint.identification.algorithm")[1]
    return SslSettings(
        keystore_location=location,
        keystore_key=normalise_pem(inline_key) if inline_key else None,
        keystore_chain=normalise_pem(inline_chain) if inline_chain else None,
        key_password=get("ssl.key.password")[1],
        truststore_location=trust_location,
        truststore_certificates=normalise_pem(trust_certs) if trust_certs else None,
        client_auth=client_auth,
        enabled_protocols=enabled,
        cipher_suites=_list(get("ssl.cipher.suites")[1]),
        endpoint_identification="https" if endpoint is None else endpoint.strip(),
        principal_mapping_rules=rules or "DEFAULT",
    )


def _int_value(key: str, raw: str, minimum: int) -> int:
    try:
        value = int(raw.strip())
    except ValueError:
        raise ValueError(f"config key {key!r}: got {raw!r}, expected an integer") from None
    if value < minimum:
        raise ValueError(f"config key {key!r}: got {value}, expected an integer >= {minimum}")
    return value


def parse_protocol_map(raw: str) -> tuple[tuple[str, str], ...]:
    """`listener.security.protocol.map`: NAME:PROTOCOL pairs (case-insensitive)."""
    pairs = []
    for item in _list(raw):
        name, sep, protocol = item.partition(":")
        protocol = protocol.strip().upper()
        if not sep or not name.strip() or protocol not in PROTOCOLS:
            raise ValueError(f"NAME:PROTOCOL pairs with PROTOCOL one of {', '.join(PROTOCOLS)}")
        pairs.append((name.strip().upper(), protocol))
    return tuple(pairs)


def default_protocol(listener: str) -> str:
    """Kafka's default map: a listener named like a protocol uses it; others (CONTROLLER) PLAINTEXT."""
    return listener if listener in PROTOCOLS else "PLAINTEXT"


def parse_security(props: Mapping[str, str], protocol_map: Mapping[str, str],
                   broker_listeners: tuple[str, ...], inter_broker_listener: str) -> SecuritySettings:
    """Every broker listener's security; ValueError names the key at fault."""
    if "sasl.jaas.config" in props:
        raise ValueError("config key 'sasl.jaas.config': brokers ignore the unprefixed key (as Kafka does); "
                         "expected listener.name.<listener>.<mechanism>.sasl.jaas.config, e.g. "
                         "listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config")
    for key in props:
        match = _PREFIXED.match(key)
        if match and match.group(1).upper() not in protocol_map:
            raise ValueError(f"config key {key!r}: no listener named {match.group(1).upper()!r}; "
                             f"expected one of {sorted(protocol_map)}")
    listeners: dict[str, ListenerSecurity] = {}
    for name in broker_listeners:
        protocol = protocol_map.get(name, default_protocol(name))
        ssl = _ssl_settings(props, name, protocol) if protocol in ("SSL", "SASL_SSL") else None
        if ssl is not None and not ssl.has_keystore:
            raise ValueError(f"listener {name} ({protocol}): no key and certificate; expected "
                             f"ssl.keystore.location (PEM: key + chain) or ssl.keystore.key + "
                             f"ssl.keystore.certificate.chain (optionally as listener.name.{name.lower()}.<key>)")
        if ssl is not None and ssl.client_auth != "none" and not (ssl.truststore_location or ssl.truststore_certificates):
            raise ValueError(f"listener {name}: ssl.client.auth={ssl.client_auth} needs the CAs to trust; "
                             "expected ssl.truststore.location (PEM) or ssl.truststore.certificates")
        mechanisms: tuple[str, ...] = ()
        jaas: dict[str, JaasConfig] = {}
        reauth_ms = 0
        max_receive = DEFAULT_MAX_RECEIVE_SIZE
        if protocol in ("SASL_PLAINTEXT", "SASL_SSL"):
            mech_key, raw = _lookup(props, name, "sasl.enabled.mechanisms")
            mechanisms = tuple(m.upper() for m in _list(raw))
            if not mechanisms:
                raise ValueError(f"listener {name} ({protocol}): config key 'sasl.enabled.mechanisms' is unset "
                                 f"(Kafka's default GSSAPI is not supported); expected some of {list(MECHANISMS)}")
            for mech in mechanisms:
                if mech not in MECHANISMS:
                    raise ValueError(f"config key {mech_key!r}: got {mech!r}, expected some of {list(MECHANISMS)}")
                jaas_key = f"listener.name.{name.lower()}.{mech.lower()}.sasl.jaas.config"
                if jaas_key in props:
                    try:
                        jaas[mech] = parse_jaas(props[jaas_key])
                    except ValueError as exc:
                        raise ValueError(f"config key {jaas_key!r}: expected {exc}") from None
                elif mech == "PLAIN":
                    raise ValueError(f"listener {name}: PLAIN is enabled but {jaas_key!r} is unset; expected "
                                     f'{PLAIN_LOGIN_MODULE} required username="..." password="..." '
                                     'user_<name>="<password>" ... ;')
            size_key, size = _lookup(props, name, "sasl.server.max.receive.size")
            if size is not None:
                max_receive = _int_value(size_key, size, 1)
            reauth_key, reauth = _lookup(props, name, "connections.max.reauth.ms")
            if reauth is not None:
                reauth_ms = _int_value(reauth_key, reauth, 0)
                if reauth_ms:
                    raise ValueError(f"config key {reauth_key!r}: got {reauth_ms}; re-authentication (KIP-368) is "
                                     "not supported, expected 0")
        listeners[name] = ListenerSecurity(name, protocol, ssl, mechanisms, jaas, max_receive, reauth_ms)

    mechanism = (props.get("sasl.mechanism.inter.broker.protocol") or "GSSAPI").strip().upper()
    inter = listeners.get(inter_broker_listener)
    if inter is not None and inter.uses_sasl:
        if mechanism not in inter.sasl_mechanisms:
            raise ValueError(f"config key 'sasl.mechanism.inter.broker.protocol': got {mechanism!r}, expected one "
                             f"of the inter-broker listener {inter_broker_listener}'s sasl.enabled.mechanisms "
                             f"{list(inter.sasl_mechanisms)}")
        entry = inter.jaas.get(mechanism)
        if entry is None or "username" not in entry.options or "password" not in entry.options:
            raise ValueError(f"config key 'listener.name.{inter_broker_listener.lower()}.{mechanism.lower()}."
                             "sasl.jaas.config': expected the broker's own username=\"...\" password=\"...\" "
                             "(brokers authenticate to each other with them)")
    return SecuritySettings(listeners, mechanism)
