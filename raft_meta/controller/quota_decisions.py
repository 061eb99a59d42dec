"""Client quotas (KIP-13, KIP-55, KIP-546, KIP-612): entities, keys, and the pure decisions
over them.

An entity is a sorted tuple of `(entity type, name)` pairs; the types are "user",
"client-id" and "ip", and a name of None is that type's default entity (Kafka's
`<default>`). The image keeps `{entity: {key: value}}` (`MetadataImage.client_quotas`),
built from `ClientQuota` records.

- `alter_client_quotas(image, alterations)`: AlterClientQuotas on the controller, as Kafka's
  ClientQuotaControlManager does it: (records, a result per entry). An entry with any problem
  changes nothing and gets INVALID_REQUEST naming the problem:

  | problem | message |
  |---|---|
  | no components | Invalid empty client quota entity |
  | a type twice | Invalid client quota entity, duplicate entity entry user |
  | a type other than user / client-id / ip | Unhandled client quota entity type: group |
  | an empty name | Empty user not supported |
  | ip with user or client-id | Invalid quota entity combination, IP entity shouldnot be combined with User or ClientId |
  | ip name not an address | host is not a valid IP or resolvable host. |
  | a key twice | Ignoring duplicate entity ClientQuotaEntity(entries={user=a}) (Kafka's overwrite) |
  | a key the entity kind has not | Invalid configuration key bad_key |
  | NaN or infinite | Quota producer_byte_rate must be a finite number |
  | zero or negative | Quota producer_byte_rate must be greater than 0 |
  | over a Long / Integer key's range | Proposed value for connection_creation_rate is too large for an INT. |
  | a fractional value for a Long / Integer key | producer_byte_rate cannot be a fractional value. |
  | the same entity twice in a request | Ignoring duplicate entity ... |

  The messages are Kafka 4.4's, word for word (read from its ClientQuotaControlManager). Kafka
  also accepts a host name that resolves as an ip entity; raftka takes addresses only (the
  controller does no name lookups).

- `describe_client_quotas(image, components, strict)`: DescribeClientQuotas' filter, as
  Kafka's ClientQuotasImage.describe matches it (match types exact 0, default 1, any 2).
- `quota_for(quotas, user, client_id, key)`: the quota that applies to a connection, in
  Kafka's lookup order (KIP-55), and the metric tags its sensor is shared under;
  `ip_connection_rate(quotas, ip)` the same for an ip's connection_creation_rate (KIP-612).
"""

from __future__ import annotations

import ipaddress
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from raftka.raft_meta.metadata.records import ClientQuota

USER, CLIENT_ID, IP = "user", "client-id", "ip"
ENTITY_TYPES = (USER, CLIENT_ID, IP)

PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
CONTROLLER_MUTATION_RATE = "controller_mutation_rate"
CONNECTION_CREATION_RATE = "connection_creation_rate"

# key -> its ConfigDef type in Kafka's QuotaConfigs
USER_CLIENT_KEYS = {PRODUCER_BYTE_RATE: "Long", CONSUMER_BYTE_RATE: "Long",
                    REQUEST_PERCENTAGE: "Double", CONTROLLER_MUTATION_RATE: "Double"}
IP_KEYS = {CONNECTION_CREATION_RATE: "Integer"}

MATCH_EXACT, MATCH_DEFAULT, MATCH_ANY = 0, 1, 2

Entity = tuple[tuple[str, str | None], ...]
QuotaMap = Mapping[Entity, Mapping[str, float]]


def entity_of(components: Sequence[tuple[str, str | None]]) -> Entity:
    """The canonical (sorted) entity of validated components."""
    return tuple(sorted((str(t), n) for t, n in components))


def describe_entity(components: Sequence[tuple[str, str | None]]) -> str:
    """An entity as Kafka's ClientQuotaEntity prints it."""
    return "ClientQuotaEntity(entries={" + ", ".join(f"{t}={n}" for t, n in components) + "})"


def entity_problem(components: Sequence[tuple[str, str | None]]) -> str | None:
    """Why these components are not a valid quota entity (Kafka's message), else None."""
    if not components:
        return "Invalid empty client quota entity"
    seen: dict[str, str | None] = {}
    for entity_type, name in components:
        if entity_type in seen:
            return f"Invalid client quota entity, duplicate entity entry {entity_type}"
        if entity_type not in ENTITY_TYPES:
            return f"Unhandled client quota entity type: {entity_type}"
        if name is not None and not name:
            return f"Empty {entity_type} not supported"
        seen[entity_type] = name
    if IP in seen:
        if len(seen) > 1:
            return "Invalid quota entity combination, IP entity shouldnot be combined with User or ClientId"
        address = seen[IP]
        if address is not None and not _is_ip(address):
            return f"{address} is not a valid IP or resolvable host."
    return None


def _is_ip(address: str) -> bool:
    try:
        ipaddress.ip_address(address)
    except ValueError:
        return False
    return True


def keys_for(entity: Entity) -> dict[str, str]:
    """The quota keys an (already valid) entity may carry, with their types."""
    return IP_KEYS if any(t == IP for t, _ in entity) else USER_CLIENT_KEYS


def value_problem(keys: Mapping[str, str], key: str, value: float) -> str | None:
    """Why `value` cannot be quota `key` (Kafka 4.4's message), else None."""
    kind = keys.get(key)
    if kind is None:
        return f"Invalid configuration key {key}"
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return f"Quota {key} must be a finite number"
    if value <= 0:
        return f"Quota {key} must be greater than 0"
    if kind == "Double":
        return None
    if value > _MAX[kind]:
        return f"Proposed value for {key} is too large for {_ARTICLE[kind]}."
    if abs(math.fmod(value, 1.0)) > 1e-6:
        return f"{key} cannot be a fractional value."
    return None


_MAX = {"Long": float(2**63 - 1), "Integer": float(2**31 - 1)}
_ARTICLE = {"Long": "a LONG", "Integer": "an INT"}


@dataclass(frozen=True)
class QuotaAlteration:
    """One entry of an AlterClientQuotas request: `ops` are (key, value or None to remove)."""

    components: tuple[tuple[str, str | None], ...]
    ops: tuple[tuple[str, float | None], ...]


@dataclass(frozen=True)
class QuotaResult:
    components: tuple[tuple[str, str | None], ...]
    error: str | None = None  # Kafka error name
    message: str | None = None


def _alteration_problem(alteration: QuotaAlteration, current: Mapping[str, float]) -> str | None:
    problem = entity_problem(alteration.components)
    if problem is not None:
        return problem
    keys = keys_for(entity_of(alteration.components))
    seen: set[str] = set()
    for key, value in alteration.ops:
        if key in seen:  # Kafka 4.4 records "Duplicate quota key ...", then answers this instead
            return f"Ignoring duplicate entity {describe_entity(alteration.components)}"
        seen.add(key)
        if value is not None:
            problem = value_problem(keys, key, value)
            if problem is not None:
                return problem
    return None


def alter_client_quotas(quotas: QuotaMap, alterations: Sequence[QuotaAlteration]
                        ) -> tuple[list[ClientQuota], list[QuotaResult]]:
    """(records to commit, one result per entry in request order). Records are only for
    changes: setting a key to its current value or removing an absent key writes nothing."""
    records: list[ClientQuota] = []
    results: list[QuotaResult] = []
    seen: set[Entity] = set()
    for alteration in alterations:
        problem = None
        entity: Entity = ()
        if entity_problem(alteration.components) is None:
            entity = entity_of(alteration.components)
            if entity in seen:
                problem = f"Ignoring duplicate entity {describe_entity(alteration.components)}"
            seen.add(entity)
        current = quotas.get(entity, {})
        problem = problem or _alteration_problem(alteration, current)
        if problem is not None:
            results.append(QuotaResult(alteration.components, "INVALID_REQUEST", problem))
            continue
        for key, value in alteration.ops:
            if value is None:
                if key in current:
                    records.append(ClientQuota(entity, key, None))
            elif current.get(key) != float(value):
                records.append(ClientQuota(entity, key, float(value)))
        results.append(QuotaResult(alteration.components))
    return records, results


class DescribeError(Exception):
    """A DescribeClientQuotas filter Kafka refuses: `error` is the Kafka error name."""

    def __init__(self, error: str, message: str) -> None:
        super().__init__(message)
        self.error = error


def describe_client_quotas(quotas: QuotaMap, components: Sequence[tuple[str, int, str | None]],
                           strict: bool) -> list[tuple[Entity, dict[str, float]]]:
    """The entities matching the filter (`(entity type, match type, match)` components), with
    their quotas; raises DescribeError for a filter Kafka refuses."""
    exact: dict[str, str | None] = {}
    any_of: set[str] = set()
    for entity_type, match_type, match in components:
        if not entity_type:
            raise DescribeError("INVALID_REQUEST", "Invalid empty entity type.")
        if entity_type in exact or entity_type in any_of:
            raise DescribeError("INVALID_REQUEST",
                                f"Entity type {entity_type} cannot appear more than once in the filter.")
        if entity_type not in ENTITY_TYPES:
            raise DescribeError("UNSUPPORTED_VERSION", f"Unsupported entity type {entity_type}")
        if match_type == MATCH_EXACT:
            if match is None:
                raise DescribeError("INVALID_REQUEST",
                                    "Request specified MATCH_TYPE_EXACT, but set match string to null.")
            exact[entity_type] = match
        elif match_type == MATCH_DEFAULT:
            if match is not None:
                raise DescribeError("INVALID_REQUEST",
                                    "Request specified MATCH_TYPE_DEFAULT, but also specified a match string.")
            exact[entity_type] = None
        elif match_type == MATCH_ANY:
            if match is not None:
                raise DescribeError("INVALID_REQUEST",
                                    "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string.")
            any_of.add(entity_type)
        else:
            raise DescribeError("INVALID_REQUEST", f"Unknown match type {match_type}")
    named = set(exact) | any_of
    if IP in named and (USER in named or CLIENT_ID in named):
        raise DescribeError("INVALID_REQUEST", "Invalid entity filter component combination. IP filter "
                                               "component should not be used with user or clientId filter component.")
    if not named and strict:
        return []
    found = []
    for entity, values in quotas.items():
        parts = dict(entity)
        if any(t not in parts or parts[t] != name for t, name in exact.items()):
            continue
        if any(t not in parts for t in any_of):
            continue
        if strict and len(parts) != len(named):
            continue
        found.append((entity, dict(values)))
    return found


def _lookup_order(user: str, client_id: str) -> tuple[Entity, ...]:
    """KIP-55's order, most specific first."""
    return (
        ((CLIENT_ID, client_id), (USER, user)),
        ((CLIENT_ID, None), (USER, user)),
        ((USER, user),),
        ((CLIENT_ID, client_id), (USER, None)),
        ((CLIENT_ID, None), (USER, None)),
        ((USER, None),),
        ((CLIENT_ID, client_id),),
        ((CLIENT_ID, None),),
    )


def quota_for(quotas: QuotaMap, user: str, client_id: str, key: str
              ) -> tuple[float | None, tuple[str, str]]:
    """(the quota `key` for a connection of `user` and `client_id`, or None if unlimited;
    the (user, client-id) metric tags its sensor is shared under). As Kafka's
    DefaultQuotaCallback: the first entity in KIP-55's order that sets `key` applies, and its
    sensor is shared by every connection it applies to (a user-level quota: all the user's
    client ids; a client-id quota: every user of that client id)."""
    for entity in _lookup_order(user, client_id):
        value = quotas.get(entity, {}).get(key)
        if value is not None:
            parts = dict(entity)
            return value, (user if USER in parts else "", client_id if CLIENT_ID in parts else "")
    return None, ("", client_id)


def ip_connection_rate(quotas: QuotaMap, ip: str) -> float | None:
    """The `connection_creation_rate` of connections from `ip` (KIP-612): its own entity's,
    else the default ip's, else None (unlimited)."""
    for entity in (((IP, ip),), ((IP, None),)):
        value = quotas.get(entity, {}).get(CONNECTION_CREATION_RATE)
        if value is not None:
            return value
    return None
