"""Client-metrics subscriptions (KIP-714, config resource type 16): their three keys and the
checks Kafka 4.4's ClientMetricsConfigs.validate makes before the controller stores them.

A subscription is a named set of `metrics` (metric name prefixes, `*` for all), `interval.ms`
(the push interval, 100..3600000, default 300000) and `match` (client selectors
`<param>=<regex>`). Pushing telemetry is not served; the subscriptions are stored, described
and listed as Kafka does.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from raftka.client.protocol import ErrorCode

METRICS, INTERVAL_MS, MATCH = "metrics", "interval.ms", "match"
INTERVAL_MS_DEFAULT = 300_000
MIN_INTERVAL_MS, MAX_INTERVAL_MS = 100, 3_600_000
MATCH_PARAMS = frozenset({"client_instance_id", "client_id", "client_software_name", "client_software_version",
                          "client_source_address", "client_source_port"})
# key -> (Kafka's ConfigDef type, default as described)
CLIENT_METRICS_CONFIGS: dict[str, tuple[str, str]] = {
    METRICS: ("list", ""),
    INTERVAL_MS: ("int", str(INTERVAL_MS_DEFAULT)),
    MATCH: ("list", ""),
}
LIST_KEYS = frozenset(k for k, (kind, _) in CLIENT_METRICS_CONFIGS.items() if kind == "list")
DEFAULTS = {k: default for k, (_, default) in CLIENT_METRICS_CONFIGS.items()}


@dataclass(frozen=True)
class ClientMetricsConfigError(Exception):
    code: ErrorCode
    message: str

    def __str__(self) -> str:
        return self.message


def _items(value: str) -> list[str]:
    return [p.strip() for p in value.split(",")] if value.strip() else []


def _list(key: str, value: str) -> str:
    items = _items(value)
    if len(set(items)) != len(items):
        raise ClientMetricsConfigError(ErrorCode.INVALID_CONFIG, f"Configuration '{key}' values must not be duplicated.")
    return ",".join(items)


def _int(value: str) -> str:
    text = value.strip()
    if not re.fullmatch(r"[+-]?[0-9]{1,10}", text) or not -(2**31) <= int(text) < 2**31:
        raise ClientMetricsConfigError(ErrorCode.INVALID_CONFIG, f"Invalid value {value} for configuration "
                                                                 f"{INTERVAL_MS}: Not a number of type INT")
    return str(int(text))


def _check_match(value: str) -> None:
    """Each selector is `param=regex`, param one of MATCH_PARAMS, regex compilable (Kafka
    compiles Java regexes; Python's syntax differs at the edges)."""
    for pattern in _items(value):
        parts = pattern.split("=")
        ok = len(parts) == 2 and parts[0].strip() in MATCH_PARAMS
        if ok:
            try:
                re.compile(parts[1].strip())
            except re.error:
                ok = False
        if not ok:
            raise ClientMetricsConfigError(ErrorCode.INVALID_CONFIG, f"Illegal client matching pattern: {pattern}")


def validate(name: str, configs: Mapping[str, str]) -> dict[str, str]:
    """A subscription's configs after a change, normalised as Kafka stores them; raises
    ClientMetricsConfigError with Kafka's error code and message."""
    if not name:
        raise ClientMetricsConfigError(ErrorCode.INVALID_REQUEST, "Subscription name can't be empty")
    for key in configs:
        if key not in CLIENT_METRICS_CONFIGS:
            raise ClientMetricsConfigError(ErrorCode.INVALID_REQUEST, f"Unknown client metrics configuration: {key}")
    # Kafka parses every value first (ConfigDef.parse), then checks the interval's range,
    # then the match selectors.
    out = {key: _int(value) if key == INTERVAL_MS else _list(key, value) for key, value in configs.items()}
    if INTERVAL_MS in out and not MIN_INTERVAL_MS <= int(out[INTERVAL_MS]) <= MAX_INTERVAL_MS:
        raise ClientMetricsConfigError(ErrorCode.INVALID_REQUEST, f"Invalid value {out[INTERVAL_MS]} for {INTERVAL_MS}, "
                                                                  f"interval must be between 100 and 3600000 (1 hour)")
    if MATCH in out:
        _check_match(out[MATCH])
    return out
