"""The SDK's security settings: TLS and SASL (PLAIN, SCRAM-SHA-256/512) to the brokers.

`ClientSecurity` holds what a connection needs; build it directly, or from a
Kafka client properties file (`from_properties`, the `--command-config` of
Kafka's tools) which takes Java client keys (`security.protocol`,
`sasl.mechanism`, `sasl.jaas.config`, `ssl.truststore.location` with
`ssl.truststore.type=PEM`, `ssl.keystore.location`, `ssl.key.password`,
`ssl.endpoint.identification.algorithm`) and librdkafka's
(`sasl.username`, `sasl.password`, `ssl.ca.location`,
`ssl.certificate.location`, `ssl.key.location`). Unknown keys are refused
with their name (a typo must not silently disable security).
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field

from raftka.client.protocol.scram import MECHANISMS as SCRAM_MECHANISMS
from raftka.client.tls import client_context

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


@dataclass(frozen=True)
class ClientSecurity:
    security_protocol: str = "PLAINTEXT"
    sasl_mechanism: str | None = None
    sasl_username: str | None = None
    sasl_password: str | None = field(default=None, repr=False)
    ssl_cafile: str | None = None
    ssl_cadata: str | None = None
    ssl_certfile: str | None = None  # PEM: certificate chain (or chain + key)
    ssl_keyfile: str | None = None
    ssl_key_password: str | None = field(default=None, repr=False)
    ssl_check_hostname: bool = True

    def __post_init__(self) -> None:
        protocol = self.security_protocol.upper()
        object.__setattr__(self, "security_protocol", protocol)
        if protocol not in PROTOCOLS:
            raise ValueError(f"security_protocol {self.security_protocol!r} is not one of {PROTOCOLS}")
        if protocol.startswith("SASL"):
            mechanism = (self.sasl_mechanism or "").upper()
            if mechanism not in MECHANISMS:
                raise ValueError(f"sasl_mechanism {self.sasl_mechanism!r} is not one of {MECHANISMS} "
                                 f"(security_protocol {protocol} needs one)")
            object.__setattr__(self, "sasl_mechanism", mechanism)
            if not self.sasl_username or self.sasl_password is None:
                raise ValueError(f"security_protocol {protocol} needs sasl_username and sasl_password")

    @property
    def uses_ssl(self) -> bool:
        return self.security_protocol in ("SSL", "SASL_SSL")

    @property
    def uses_sasl(self) -> bool:
        return self.security_protocol in ("SASL_PLAINTEXT", "SASL_SSL")

    @property
    def is_scram(self) -> bool:
        return self.sasl_mechanism in SCRAM_MECHANISMS

    def ssl_context(self) -> ssl.SSLContext | None:
        if not self.uses_ssl:
            return None
        return client_context(cafile=self.ssl_cafile, cadata=self.ssl_cadata, certfile=self.ssl_certfile,
                              keyfile=self.ssl_keyfile, key_password=self.ssl_key_password,
                              check_hostname=self.ssl_check_hostname)

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> ClientSecurity:
        """From Kafka (Java) or librdkafka client properties; ValueError names a bad key."""
        values: dict[str, object] = {}
        for key, raw in props.items():
            value = raw.strip()
            if key == "security.protocol":
                values["security_protocol"] = value
            elif key in ("sasl.mechanism", "sasl.mechanisms"):
                values["sasl_mechanism"] = value
            elif key in ("sasl.username", "sasl.password"):
                values["sasl_" + key.split(".")[1]] = value
            elif key == "sasl.jaas.config":
                from raftka.client.jaas import parse_jaas_options  # pure

                options = parse_jaas_options(value)
                values.setdefault("sasl_username", options.get("username"))
                values.setdefault("sasl_password", options.get("password"))
            elif key in ("ssl.truststore.location", "ssl.ca.location"):
                values["ssl_cafile"] = value
            elif key == "ssl.truststore.certificates":
                values["ssl_cadata"] = value
            elif key in ("ssl.keystore.location", "ssl.certificate.location"):
                values["ssl_certfile"] = value
            elif key == "ssl.key.location":
                values["ssl_keyfile"] = value
            elif key == "ssl.key.password":
                values["ssl_key_password"] = value
            elif key == "ssl.endpoint.identification.algorithm":
                values["ssl_check_hostname"] = value.lower() in ("https",)
            elif key in ("ssl.truststore.type", "ssl.keystore.type"):
                if value.upper() != "PEM":
                    raise ValueError(f"client property {key!r}: got {value!r}, expected PEM")
            else:
                raise ValueError(f"unknown client security property {key!r}; expected security.protocol, "
                                 "sasl.*, ssl.* keys of Kafka's or librdkafka's clients")
        return cls(**values)  # type: ignore[arg-type]


def read_properties_file(path: str) -> dict[str, str]:
    """Java-properties text (`key=value`, `#` comments, `\\` continuations)."""
    result: dict[str, str] = {}
    pending = ""
    with open(path, encoding="utf-8") as f:
        for line in f:
            stripped = line.strip()
            if not pending and (not stripped or stripped[0] in "#!"):
                continue
            if stripped.endswith("\\") and not stripped.endswith("\\\\"):
                pending += stripped[:-1]
                continue
            logical, pending = pending + stripped, ""
            cuts = [i for i in (logical.find("="), logical.find(":")) if i >= 0]
            if not cuts:
                raise ValueError(f"{path}: expected key=value lines")
            cut = min(cuts)
            result[logical[:cut].strip()] = logical[cut + 1:].strip()
    return result


PLAINTEXT = ClientSecurity()
