"""SCRAM-SHA-256 / SCRAM-SHA-512 (RFC 5802, RFC 7677) as Kafka speaks it, sans-IO.

Both halves, as pure functions over messages (bytes in, bytes out):

    client                                   server
    client_first(name, nonce)  ──────────►   ScramServer.receive_client_first
                               ◄──────────   server-first  r=<cnonce+snonce>,s=<salt>,i=<iterations>
    ScramClient.client_final   ──────────►   ScramServer.receive_client_final
                               ◄──────────   server-final  v=<ServerSignature>
    ScramClient.verify_server_final

Kafka's rules (docs/security.md): no channel binding (gs2 header `n,,` or
`n,a=<authzid>,`), no SASLprep, iterations 4096..16384, names escaped
`,`→`=2C` and `=`→`=3D` (kafka-python 3.0 does not escape: a raw name is
accepted when it parses), extensions ignored except `tokenauth` (refused:
raftka has no delegation tokens). The server never sees nor stores the
password: per (user, mechanism) it keeps salt, StoredKey, ServerKey and the
iteration count (`ScramCredential`).

Every violation raises `ScramError` with a message that names what was wrong
(never a key or a proof).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from collections.abc import Callable
from dataclasses import dataclass

MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384

# Kafka's ScramMechanism ids (UserScramCredentialRecord.Mechanism, APIs 50/51).
MECHANISMS: dict[str, tuple[int, str]] = {
    "SCRAM-SHA-256": (1, "sha256"),
    "SCRAM-SHA-512": (2, "sha512"),
}
MECHANISM_NAMES: dict[int, str] = {mech_id: name for name, (mech_id, _) in MECHANISMS.items()}


class ScramError(ValueError):
    """A SCRAM message or credential that cannot be accepted."""


@dataclass(frozen=True)
class ScramCredential:
    """What the server stores for one (user, mechanism): never the password."""

    mechanism: str
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


def _hash_name(mechanism: str) -> str:
    try:
        return MECHANISMS[mechanism][1]
    except KeyError:
        raise ScramError(f"unknown SCRAM mechanism {mechanism!r}; expected one of {sorted(MECHANISMS)}") from None


def _hmac(hash_name: str, key: bytes, message: bytes) -> bytes:
    return hmac.new(key, message, hash_name).digest()


def check_iterations(iterations: int) -> None:
    if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
        raise ScramError(f"iterations {iterations} is outside {MIN_ITERATIONS}..{MAX_ITERATIONS}")


def salted_password(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    """Hi(password, salt, i) = PBKDF2-HMAC-H (RFC 5802 §2.2)."""
    return hashlib.pbkdf2_hmac(_hash_name(mechanism), password.encode("utf-8"), salt, iterations)


def credential_from_salted_password(mechanism: str, salted: bytes, salt: bytes, iterations: int) -> ScramCredential:
    """StoredKey and ServerKey from the salted password (what AlterUserScramCredentials carries)."""
    hash_name = _hash_name(mechanism)
    client_key = _hmac(hash_name, salted, b"Client Key")
    stored_key = hashlib.new(hash_name, client_key).digest()
    server_key = _hmac(hash_name, salted, b"Server Key")
    return ScramCredential(mechanism, bytes(salt), stored_key, server_key, iterations)


def make_credential(mechanism: str, password: str, *, iterations: int = MIN_ITERATIONS,
                    salt: bytes | None = None) -> ScramCredential:
    """A new credential with a random 32-byte salt (unless `salt` is given)."""
    check_iterations(iterations)
    salt = secrets.token_bytes(32) if salt is None else salt
    return credential_from_salted_password(mechanism, salted_password(mechanism, password, salt, iterations),
                                           salt, iterations)


def escape_name(name: str) -> str:
    return name.replace("=", "=3D").replace(",", "=2C")


def unescape_name(text: str) -> str:
    out, i = [], 0
    while i < len(text):
        if text[i] == "=":
            code = text[i + 1:i + 3]
            if code == "2C":
                out.append(",")
            elif code == "3D":
                out.append("=")
            else:
                raise ScramError(f"invalid escape {text[i:i + 3]!r} in a SCRAM user name; expected =2C or =3D")
            i += 3
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def _attributes(text: str, what: str) -> list[tuple[str, str]]:
    pairs = []
    for part in text.split(","):
        key, sep, value = part.partition("=")
        if not sep or not key.isalnum():  # one letter, or an extension name (tokenauth)
            raise ScramError(f"malformed {what}: attribute {part[:20]!r} is not <name>=<value>")
        pairs.append((key, value))
    return pairs


def _b64decode(value: str, what: str) -> bytes:
    try:
        return base64.b64decode(value, validate=True)
    except ValueError:
        raise ScramError(f"{what} is not valid base64") from None


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


@dataclass(frozen=True)
class ClientFirst:
    name: str
    authzid: str | None
    nonce: str
    bare: str  # client-first-message-bare: everything after the gs2 header
    extensions: tuple[tuple[str, str], ...] = ()


def parse_client_first(message: bytes) -> ClientFirst:
    try:
        text = message.decode("utf-8")
    except UnicodeDecodeError:
        raise ScramError("client-first message is not UTF-8") from None
    parts = text.split(",", 2)
    if len(parts) != 3:
        raise ScramError("malformed client-first message: expected gs2 header 'n,,' then n=<name>,r=<nonce>")
    flag, authz, bare = parts
    if flag != "n":
        raise ScramError(f"gs2 flag {flag[:8]!r} is not supported; expected 'n' (no channel binding)")
    authzid = None
    if authz:
        if not authz.startswith("a="):
            raise ScramError("malformed authzid in the gs2 header; expected a=<name>")
        authzid = unescape_name(authz[2:])
    attrs = _attributes(bare, "client-first message")
    if len(attrs) < 2 or attrs[0][0] != "n" or attrs[1][0] != "r":
        raise ScramError("malformed client-first message: expected n=<name>,r=<nonce>[,extensions]")
    raw_name = attrs[0][1]
    try:
        name = unescape_name(raw_name)
    except ScramError:
        name = raw_name  # kafka-python 3.0 does not escape names
    nonce = attrs[1][1]
    if not nonce:
        raise ScramError("the client nonce is empty")
    if not name:
        raise ScramError("the user name is empty")
    return ClientFirst(name, authzid, nonce, bare, tuple(attrs[2:]))


def client_first(name: str, nonce: str) -> bytes:
    return f"n,,n={escape_name(name)},r={nonce}".encode()


def server_nonce() -> str:
    """Kafka's server nonce shape: 130 random bits in base 36."""
    value = secrets.randbits(130)
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while value:
        value, rem = divmod(value, 36)
        out = digits[rem] + out
    return out or "0"


class ScramServer:
    """One server-side SCRAM exchange: client-first, then client-final. Single use."""

    def __init__(self, mechanism: str, lookup: Callable[[str], ScramCredential | None]) -> None:
        """`lookup(name) -> ScramCredential | None` finds the stored credential."""
        _hash_name(mechanism)
        self.mechanism = mechanism
        self._lookup = lookup
        self._first: ClientFirst | None = None
        self._server_first = ""
        self._nonce = ""
        self._credential: ScramCredential | None = None
        self.name: str | None = None  # set once authenticated

    def receive_client_first(self, message: bytes, *, snonce: str | None = None) -> bytes:
        if self._first is not None:
            raise ScramError("client-first message received twice")
        first = parse_client_first(message)
        for key, value in first.extensions:
            if key == "tokenauth" and value.lower() == "true":
                raise ScramError("delegation tokens are not supported")
        if first.authzid is not None and first.authzid != first.name:
            raise ScramError("the authorization id differs from the user name")
        credential = self._lookup(first.name)
        if credential is None:
            raise ScramError(f"unknown user for {self.mechanism}")
        if credential.iterations < MIN_ITERATIONS:
            raise ScramError(f"the stored iteration count {credential.iterations} is below {MIN_ITERATIONS}")
        self._first, self._credential = first, credential
        self._nonce = first.nonce + (snonce or server_nonce())
        self._server_first = f"r={self._nonce},s={_b64(credential.salt)},i={credential.iterations}"
        return self._server_first.encode()

    def receive_client_final(self, message: bytes) -> bytes:
        """Checks the proof; returns server-final (v=ServerSignature). Sets `name`."""
        if self._first is None or self._credential is None:
            raise ScramError("client-final message before client-first")
        if self.name is not None:
            raise ScramError("client-final message received twice")
        try:
            text = message.decode("utf-8")
        except UnicodeDecodeError:
            raise ScramError("client-final message is not UTF-8") from None
        without_proof, sep, proof_attr = text.rpartition(",p=")
        if not sep:
            raise ScramError("malformed client-final message: expected ...,p=<proof>")
        attrs = dict(_attributes(without_proof, "client-final message"))
        if "c" not in attrs or "r" not in attrs:
            raise ScramError("malformed client-final message: expected c=<binding>,r=<nonce>")
        binding = _b64decode(attrs["c"], "channel binding")
        expected_gs2 = b"n,," if self._first.authzid is None else f"n,a={escape_name(self._first.authzid)},".encode()
        if binding != expected_gs2:
            raise ScramError("the channel binding does not match the gs2 header")
        if attrs["r"] != self._nonce:
            raise ScramError("the nonce does not match the server-first nonce")
        proof = _b64decode(proof_attr, "client proof")
        hash_name = _hash_name(self.mechanism)
        auth_message = f"{self._first.bare},{self._server_first},{without_proof}".encode()
        client_signature = _hmac(hash_name, self._credential.stored_key, auth_message)
        if len(proof) != len(client_signature):
            raise ScramError("the client proof has the wrong length")
        client_key = bytes(a ^ b for a, b in zip(proof, client_signature, strict=True))
        if not hmac.compare_digest(hashlib.new(hash_name, client_key).digest(), self._credential.stored_key):
            raise ScramError("invalid credentials")
        self.name = self._first.name
        server_signature = _hmac(hash_name, self._credential.server_key, auth_message)
        return f"v={_b64(server_signature)}".encode()


class ScramClient:
    """One client-side SCRAM exchange (the SDK's)."""

    def __init__(self, mechanism: str, name: str, password: str, *, nonce: str | None = None) -> None:
        _hash_name(mechanism)
        self.mechanism = mechanism
        self._password = password
        self._nonce = nonce or secrets.token_urlsafe(24)
        self._bare = f"n={escape_name(name)},r={self._nonce}"
        self._server_signature: bytes | None = None

    def client_first(self) -> bytes:
        return f"n,,{self._bare}".encode()

    def client_final(self, server_first: bytes) -> bytes:
        text = server_first.decode("utf-8", "replace")
        attrs = dict(_attributes(text, "server-first message"))
        if "e" in attrs:
            raise ScramError(f"the server refused: {attrs['e']}")
        try:
            nonce, salt, iterations = attrs["r"], _b64decode(attrs["s"], "salt"), int(attrs["i"])
        except (KeyError, ValueError):
            raise ScramError("malformed server-first message: expected r=,s=,i=") from None
        if not nonce.startswith(self._nonce) or len(nonce) == len(self._nonce):
            raise ScramError("the server nonce does not extend the client nonce")
        check_iterations(iterations)
        hash_name = _hash_name(self.mechanism)
        salted = salted_password(self.mechanism, self._password, salt, iterations)
        client_key = _hmac(hash_name, salted, b"Client Key")
        stored_key = hashlib.new(hash_name, client_key).digest()
        without_proof = f"c=biws,r={nonce}"
        auth_message = f"{self._bare},{text},{without_proof}".encode()
        signature = _hmac(hash_name, stored_key, auth_message)
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        self._server_signature = _hmac(hash_name, _hmac(hash_name, salted, b"Server Key"), auth_message)
        return f"{without_proof},p={_b64(proof)}".encode()

    def verify_server_final(self, server_final: bytes) -> None:
        text = server_final.decode("utf-8", "replace")
        attrs = dict(_attributes(text, "server-final message"))
        if "e" in attrs:
            raise ScramError(f"the server refused: {attrs['e']}")
        if self._server_signature is None or "v" not in attrs:
            raise ScramError("malformed server-final message: expected v=<signature>")
        if not hmac.compare_digest(_b64decode(attrs["v"], "server signature"), self._server_signature):
            raise ScramError("the server signature does not verify: not the server holding this credential")
