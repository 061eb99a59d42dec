"""Kafka's SCRAM argument syntax, as `kafka-storage format --add-scram` and `kafka-configs
--add-config` read it: `SCRAM-SHA-256=[name=alice,password=alice-secret]` (pure).

Keys: `name` (format only), `password`, or `saltedpassword` + `salt` (base64),
`iterations` (default 4096, 4096..16384). Values may be double-quoted.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field

from raftka.client.protocol.scram import (
    MECHANISMS,
    MIN_ITERATIONS,
    ScramCredential,
    ScramError,
    check_iterations,
    credential_from_salted_password,
    make_credential,
)


@dataclass(frozen=True)
class ScramArgument:
    mechanism: str
    name: str | None
    iterations: int
    password: str | None = field(default=None, repr=False)
    salt: bytes | None = None
    salted_password: bytes | None = field(default=None, repr=False)

    def credential(self) -> ScramCredential:
        if self.password is not None:
            return make_credential(self.mechanism, self.password, iterations=self.iterations)
        assert self.salt is not None and self.salted_password is not None
        return credential_from_salted_password(self.mechanism, self.salted_password, self.salt, self.iterations)


def _split_values(body: str) -> dict[str, str]:
    values: dict[str, str] = {}
    i = 0
    while i < len(body):
        eq = body.find("=", i)
        if eq < 0:
            raise ValueError(f"expected key=value inside [...], got {body[i:][:20]!r}")
        key = body[i:eq].strip().lower()
        i = eq + 1
        if i < len(body) and body[i] == '"':
            end = body.find('"', i + 1)
            if end < 0:
                raise ValueError(f"unterminated quoted value for {key!r}")
            value, i = body[i + 1:end], end + 1
        else:
            end = body.find(",", i)
            end = len(body) if end < 0 else end
            value, i = body[i:end], end
        if key in values:
            raise ValueError(f"{key!r} given twice")
        values[key] = value.strip() if not body[eq + 1:eq + 2] == '"' else value
        if i < len(body):
            if body[i] != ",":
                raise ValueError(f"expected ',' after the value of {key!r}")
            i += 1
    return values


def parse_scram_argument(text: str, *, need_name: bool) -> ScramArgument:
    """`SCRAM-SHA-256=[name=alice,password=alice-secret]`; ValueError names what is wrong
    (never the password)."""
    mechanism, sep, rest = text.strip().partition("=")
    mechanism = mechanism.strip().upper()
    if mechanism not in MECHANISMS:
        raise ValueError(f"unknown SCRAM mechanism {mechanism!r}; expected one of {sorted(MECHANISMS)}")
    rest = rest.strip()
    if not sep or not rest.startswith("[") or not rest.endswith("]"):
        raise ValueError(f"expected {mechanism}=[name=...,password=...]")
    values = _split_values(rest[1:-1])
    allowed = {"name", "password", "salt", "saltedpassword", "iterations"}
    unknown = sorted(set(values) - allowed)
    if unknown:
        raise ValueError(f"unknown SCRAM argument keys {unknown}; expected some of {sorted(allowed)}")
    name = values.get("name")
    if need_name and not name:
        raise ValueError("the SCRAM argument needs name=<user>")
    try:
        iterations = int(values.get("iterations", MIN_ITERATIONS))
        check_iterations(iterations)
    except (ValueError, ScramError) as exc:
        raise ValueError(f"iterations: {exc}") from None
    if "password" in values:
        if "saltedpassword" in values or "salt" in values:
            raise ValueError("give password, or saltedpassword and salt, not both")
        return ScramArgument(mechanism, name, iterations, password=values["password"])
    if "saltedpassword" in values and "salt" in values:
        try:
            salt = base64.b64decode(values["salt"], validate=True)
            salted = base64.b64decode(values["saltedpassword"], validate=True)
        except ValueError:
            raise ValueError("salt and saltedpassword must be base64") from None
        return ScramArgument(mechanism, name, iterations, salt=salt, salted_password=salted)
    raise ValueError("the SCRAM argument needs password=..., or saltedpassword=... and salt=...")
