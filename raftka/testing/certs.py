"""A private CA and node/client certificates in PEM, for `raftka cluster up --secure` and tests.

Uses `cryptography` (already a dependency). Keys are EC P-256, written PKCS#8
(Kafka's PEM key stores require it) with owner-only permissions. A node's key
store file holds the key and its certificate chain (Kafka's
`ssl.keystore.type=PEM` + `ssl.keystore.location` layout); SANs cover every
host name and IP the node is reached at (librdkafka verifies host names).
"""

from __future__ import annotations

import datetime
import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

VALID_DAYS = 825


@dataclass
class Issued:
    cert: x509.Certificate
    key: ec.EllipticCurvePrivateKey

    def cert_pem(self) -> bytes:
        return self.cert.public_bytes(serialization.Encoding.PEM)

    def key_pem(self) -> bytes:
        return self.key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                      serialization.NoEncryption())


def _name(common_name: str, organisation: str | None = None, unit: str | None = None) -> x509.Name:
    # Most significant first (O, OU, CN): the DN then reads CN=...,OU=...,O=... (RFC 2253 order).
    parts = []
    if organisation:
        parts.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, organisation))
    if unit:
        parts.append(x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, unit))
    parts.append(x509.NameAttribute(NameOID.COMMON_NAME, common_name))
    return x509.Name(parts)


def make_ca(common_name: str = "raftka local CA") -> Issued:
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    name = _name(common_name, "raftka")
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=VALID_DAYS))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                         content_commitment=False, key_encipherment=False, data_encipherment=False,
                                         key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
            .sign(key, hashes.SHA256()))
    return Issued(cert, key)


def issue(ca: Issued, common_name: str, *, hosts: tuple[str, ...] = (), unit: str | None = None,
          organisation: str | None = "raftka") -> Issued:
    """A leaf certificate for a server and client (both usages), with SANs for `hosts`."""
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    sans: list[x509.GeneralName] = []
    for host in hosts:
        try:
            sans.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            sans.append(x509.DNSName(host))
    builder = (x509.CertificateBuilder().subject_name(_name(common_name, organisation, unit))
               .issuer_name(ca.cert.subject).public_key(key.public_key())
               .serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(minutes=5))
               .not_valid_after(now + datetime.timedelta(days=VALID_DAYS))
               .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
               .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH,
                                                     ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False))
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    return Issued(builder.sign(ca.key, hashes.SHA256()), key)


def _write(path: Path, data: bytes, private: bool) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600 if private else 0o644)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


def write_ca(ca: Issued, directory: Path) -> Path:
    """`ca.pem` (the trust store everyone uses) and `ca-key.pem` (owner-only); the CA cert path."""
    _write(directory / "ca-key.pem", ca.key_pem(), private=True)
    _write(directory / "ca.pem", ca.cert_pem(), private=False)
    return directory / "ca.pem"


def write_keystore(issued: Issued, ca: Issued, path: Path) -> Path:
    """One PEM file: PKCS#8 key, then the certificate and the CA (Kafka's PEM key store)."""
    _write(path, issued.key_pem() + issued.cert_pem() + ca.cert_pem(), private=True)
    return path


def write_cert_and_key(issued: Issued, directory: Path, stem: str) -> tuple[Path, Path]:
    """`<stem>.pem` (certificate) and `<stem>-key.pem` (key): what librdkafka / kafka-python take."""
    cert, key = directory / f"{stem}.pem", directory / f"{stem}-key.pem"
    _write(cert, issued.cert_pem(), private=False)
    _write(key, issued.key_pem(), private=True)
    return cert, key
