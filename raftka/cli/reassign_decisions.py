"""The decisions of `raftka reassign` and `raftka brokers drain|rebalance`, with no I/O:
kafka-reassign-partitions' JSON files, proposals, throttle lists and verify wording, and the
drain and rebalance plans. Their shells, which ask the cluster and start the moves, are
`reassign.py` and `brokers.py`; a bad file or option is a `UsageError` (exit 2).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence

from raftka.cli.runner import UsageError
from raftka.raft_meta.controller.controller_decisions import place_replicas
from raftka.raft_meta.metadata.image import BrokerRegistration

Assignment = dict[tuple[str, int], tuple[int, ...]]



def _load(text: str, what: str) -> dict:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"{what} is not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise UsageError(f"{what} must be a JSON object, got {type(data).__name__}")
    version = data.get("version", 1)
    if version != 1:
        raise UsageError(f"{what} version {version!r} is not supported; expected 1")
    return data


def parse_topics_to_move(text: str) -> list[str]:
    """`{"version": 1, "topics": [{"topic": name}, ...]}` -> the names, in order, once each."""
    data = _load(text, "the topics-to-move file")
    topics = data.get("topics")
    if not isinstance(topics, list) or not topics:
        raise UsageError('the topics-to-move file needs a non-empty "topics" list')
    names = []
    for entry in topics:
        if not isinstance(entry, dict) or not isinstance(entry.get("topic"), str):
            raise UsageError(f'each topic entry needs a "topic" string, got {entry!r}')
        names.append(entry["topic"])
    return list(dict.fromkeys(names))


def parse_reassignment(text: str) -> Assignment:
    """`{"version": 1, "partitions": [{"topic", "partition", "replicas", "log_dirs"?}]}`."""
    data = _load(text, "the reassignment file")
    partitions = data.get("partitions")
    if not isinstance(partitions, list) or not partitions:
        raise UsageError('the reassignment file needs a non-empty "partitions" list')
    plan: Assignment = {}
    for entry in partitions:
        if not isinstance(entry, dict):
            raise UsageError(f"each partition entry must be an object, got {entry!r}")
        topic, partition, replicas = entry.get("topic"), entry.get("partition"), entry.get("replicas")
        if not isinstance(topic, str) or not isinstance(partition, int) or isinstance(partition, bool):
            raise UsageError(f'each partition entry needs a "topic" string and a "partition" integer: {entry!r}')
        if (not isinstance(replicas, list) or not replicas
                or not all(isinstance(r, int) and not isinstance(r, bool) for r in replicas)):
            raise UsageError(f"{topic}-{partition}: \"replicas\" must be a non-empty list of broker ids")
        if len(set(replicas)) != len(replicas):
            raise UsageError(f"{topic}-{partition}: replicas {replicas} name a broker more than once")
        log_dirs = entry.get("log_dirs")
        if log_dirs is not None and (not isinstance(log_dirs, list) or len(log_dirs) != len(replicas)
                                     or any(d != "any" for d in log_dirs)):
            raise UsageError(f"{topic}-{partition}: log_dirs {log_dirs!r}; raftka accepts only \"any\", one per "
                             "replica (a node has one log directory)")
        if (topic, partition) in plan:
            raise UsageError(f"{topic}-{partition} is listed more than once")
        plan[(topic, partition)] = tuple(replicas)
    return plan


def parse_broker_list(text: str) -> list[int]:
    try:
        brokers = [int(b) for b in text.split(",") if b.strip()]
    except ValueError:
        raise UsageError(f"--broker-list {text!r}; expected comma-separated broker ids like 1,2,3") from None
    if not brokers or len(set(brokers)) != len(brokers):
        raise UsageError(f"--broker-list {text!r} must name distinct brokers")
    return brokers


def format_assignment(assignment: Mapping[tuple[str, int], Sequence[int]]) -> str:
    """Kafka's JSON, one line, partitions sorted."""
    return json.dumps({"version": 1, "partitions": [
        {"topic": t, "partition": p, "replicas": list(r), "log_dirs": ["any"] * len(r)}
        for (t, p), r in sorted(assignment.items())]}, separators=(",", ":"))


def propose(current: Assignment, racks: Mapping[int, str | None], broker_list: Sequence[int],
            disable_rack_aware: bool = False) -> Assignment:
    """Each topic's partitions spread over `broker_list` with its current replication factor,
    by the placement new topics get (leaders rotating, racks alternating)."""
    unknown = [b for b in broker_list if b not in racks]
    if unknown:
        raise UsageError(f"--broker-list names brokers {unknown} that are not in the cluster "
                         f"(brokers: {sorted(racks)})")
    brokers = [BrokerRegistration(b, "", 0, (), None if disable_rack_aware else racks[b]) for b in broker_list]
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(current):
        by_topic.setdefault(topic, []).append(partition)
    proposed: Assignment = {}
    for i, (topic, partitions) in enumerate(sorted(by_topic.items())):
        rf = len(current[(topic, partitions[0])])
        if rf > len(brokers):
            raise UsageError(f"topic {topic!r} has replication factor {rf}, more than the {len(brokers)} "
                             "brokers of --broker-list")
        placed = place_replicas(brokers, max(partitions) + 1, rf, start=i)
        proposed.update({(topic, p): placed[p] for p in partitions})
    return proposed


def verify_lines(plan: Assignment, current: Mapping[tuple[str, int], Sequence[int]],
                 ongoing: Mapping[tuple[str, int], object]) -> tuple[list[str], bool]:
    """Kafka's verify wording per partition; True if every partition is complete."""
    lines, done = [], True
    for (topic, partition), target in sorted(plan.items()):
        name = f"{topic}-{partition}"
        now = tuple(current.get((topic, partition), ()))
        if (topic, partition) in ongoing:
            lines.append(f"Reassignment of partition {name} is still in progress.")
            done = False
        elif now == tuple(target):
            lines.append(f"Reassignment of partition {name} is completed.")
        else:
            lines.append(f"There is no active reassignment of partition {name}, but replica set is "
                         f"{list(now)} rather than {list(target)}.")
            done = False
    return lines, done


def throttle_configs(plan: Assignment, current: Mapping[tuple[str, int], Sequence[int]],
                     ) -> tuple[dict[str, tuple[str, str]], list[int]]:
    """kafka-reassign-partitions' throttles for a plan: per topic, (leader list, follower list)
    and the brokers involved. Each partition's sources are its current replicas (on the leader
    list), its destinations the new replicas that are not sources (on the follower list)."""
    leaders: dict[str, set[str]] = {}
    followers: dict[str, set[str]] = {}
    brokers: set[int] = set()
    for (topic, partition), target in plan.items():
        sources = set(current.get((topic, partition), ()))
        destinations = set(target) - sources
        leaders.setdefault(topic, set()).update(f"{partition}:{b}" for b in sources)
        followers.setdefault(topic, set()).update(f"{partition}:{b}" for b in destinations)
        brokers |= sources | destinations

    def joined(items: set[str]) -> str:  # Kafka's TreeSet order: as strings
        return ",".join(sorted(items))

    return {t: (joined(leaders[t]), joined(followers[t])) for t in sorted(leaders)}, sorted(brokers)


def plan_drain(current: Mapping[tuple[str, int], Sequence[int]], live: Sequence[int],
               node: int) -> tuple[Assignment, dict[tuple[str, int], str]]:
    """(new replica lists for the partitions with a replica on `node`, why each other one cannot move)."""
    load = Counter({b: 0 for b in live if b != node})
    for replicas in current.values():
        load.update(r for r in replicas if r in load)
    plan: Assignment = {}
    stuck: dict[tuple[str, int], str] = {}
    for key, replicas in sorted(current.items()):
        if node not in replicas:
            continue
        candidates = sorted((n, b) for b, n in load.items() if b not in replicas)
        if not candidates:
            stuck[key] = (f"replication factor {len(replicas)} needs another live broker besides "
                          f"{sorted(set(replicas) - {node})} and none is left (live: {sorted(live)})")
            continue
        replacement = candidates[0][1]
        load[replacement] += 1
        plan[key] = tuple(replacement if r == node else r for r in replicas)
    return plan, stuck


def plan_rebalance(current: Mapping[tuple[str, int], Sequence[int]], live: Sequence[int]) -> Assignment:
    """New replica lists that even out the replicas per live broker, one replica at a time from
    the most loaded to the least loaded (ties: lowest id), preferring partitions already moving
    then the first by name; replicas on brokers that are not live stay (drain those)."""
    load = Counter({b: 0 for b in live})
    for replicas in current.values():
        load.update(r for r in replicas if r in load)
    lists = {key: list(replicas) for key, replicas in current.items()}
    moved: set[tuple[str, int]] = set()
    while True:
        donors = sorted(load, key=lambda b: (-load[b], b))
        receivers = sorted(load, key=lambda b: (load[b], b))
        move = next(((donor, receiver, key)
                     for donor in donors for receiver in receivers if load[donor] - load[receiver] >= 2
                     for key in sorted(lists, key=lambda k: (k not in moved, k))
                     if donor in lists[key] and receiver not in lists[key]), None)
        if move is None:  # every move would leave the spread as wide (each one narrows it: it ends)
            return {key: tuple(lists[key]) for key in sorted(moved)}
        donor, receiver, key = move
        lists[key][lists[key].index(donor)] = receiver
        load[donor] -= 1
        load[receiver] += 1
        moved.add(key)
