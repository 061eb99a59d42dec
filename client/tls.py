"""TLS contexts from PEM, for the SDK (client side) and shared with the broker.

Kafka's PEM conventions (docs/security.md): a key store is one PEM file
holding the private key and the certificate chain, or the two as inline PEM
text; a trust store is a PEM file of CA certificates or the same inline.
Python's `load_cert_chain` reads files only, so inline PEM is written to a
private (0600) temporary file that is deleted once loaded.
"""

from __future__ import annotations

import os
import ssl
import tempfile

TLS_VERSIONS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}


def load_key_and_chain(context: ssl.SSLContext, *, location: str | None = None, certfile: str | None = None,
                       keyfile: str | None = None, inline_key: str | None = None,
                       inline_chain: str | None = None, password: str | None = None) -> None:
    """Load this side's certificate chain and key: one PEM file (`location`), a certificate
    file plus a key file, or inline PEM text."""
    if inline_key is not None and inline_chain is not None:
        fd, path = tempfile.mkstemp(prefix="raftka-key-", suffix=".pem")
        try:
            with os.fdopen(fd, "w", encoding="ascii") as f:  # mkstemp: mode 0600
                f.write(inline_key.rstrip("\n") + "\n" + inline_chain)
            context.load_cert_chain(path, password=password)
        finally:
            os.unlink(path)
    elif location is not None:
        context.load_cert_chain(location, password=password)
    elif certfile is not None:
        context.load_cert_chain(certfile, keyfile, password=password)


def load_trust(context: ssl.SSLContext, *, cafile: str | None = None, cadata: str | None = None) -> None:
    if cafile is not None:
        context.load_verify_locations(cafile=cafile)
    if cadata is not None:
        context.load_verify_locations(cadata=cadata)


def limit_versions(context: ssl.SSLContext, enabled: tuple[str, ...]) -> None:
    versions = sorted(TLS_VERSIONS[v] for v in enabled if v in TLS_VERSIONS)
    if versions:
        context.minimum_version, context.maximum_version = versions[0], versions[-1]


def client_context(*, cafile: str | None = None, cadata: str | None = None, certfile: str | None = None,
                   keyfile: str | None = None, key_password: str | None = None,
                   check_hostname: bool = True, location: str | None = None,
                   inline_key: str | None = None, inline_chain: str | None = None,
                   enabled_protocols: tuple[str, ...] = ("TLSv1.2", "TLSv1.3")) -> ssl.SSLContext:
    """A client context verifying the broker against the given CAs (the system's when none),
    with an optional client certificate (mTLS)."""
    context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH)
    if cafile or cadata:
        context.load_verify_locations(cafile=cafile, cadata=cadata)
    context.check_hostname = check_hostname
    limit_versions(context, enabled_protocols)
    load_key_and_chain(context, location=location, certfile=certfile, keyfile=keyfile, inline_key=inline_key,
                       inline_chain=inline_chain, password=key_password)
    return context


def drain_tls(stream, room: int) -> bytes:
    """The plaintext of TLS records already received, up to `room` bytes, without a trip
    through the scheduler per record. librdkafka writes one small TLS record per message
    buffer (~1 KiB), and trio's SSLStream.receive_some returns one record per call: reading
    them one await at a time cost 10x in produce throughput (bench/security_bench.py).

    Reads trio's SSLObject directly (a private attribute: when it is missing, nothing is
    drained and receive_some alone serves). Anything the read makes TLS owe the peer stays in
    the outgoing buffer, which SSLStream flushes on its next call."""
    ssl_object = getattr(stream, "_ssl_object", None)
    if ssl_object is None:
        return b""
    parts = []
    while room > 0:
        try:
            chunk = ssl_object.read(room)
        except (ssl.SSLWantReadError, ssl.SSLWantWriteError):
            break
        except ssl.SSLError as exc:
            raise ConnectionError(f"TLS error: {exc}") from exc
        if not chunk:
            break
        parts.append(chunk)
        room -= len(chunk)
    return b"".join(parts)
