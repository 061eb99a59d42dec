"""Data-driven scenarios for raft_meta/controller/controller_decisions.py.

The files under testdata/controller_decisions/ follow tests/scenario.py. The harness keeps
one metadata image: each command asks a decision of it, prints the records (and warnings,
and per-topic or per-partition errors), commits them through `apply` as the quorum would
(a record `apply` refuses is printed as `rejected: ...`), then prints the partitions the
records touched: `<topic>-<n>: replicas=.. isr=.. leader=.. leader_epoch=.. partition_epoch=..`.

Commands (brokers by id; lists comma-separated; topic ids are `<name>-id`):

- `register id=1 [rack=r1] [incarnation=inc1] [alive=1]`: RegisterBroker (a new
  incarnation of a registered broker is a restart; `alive`: its old session is alive).
- `heartbeat id=1 [caught_up=1]`: a BrokerHeartbeat at the broker's current epoch.
- `brokers`: the registrations (live or fenced).
- `create topic=t [partitions=1] [rf=1] [start=0] [min_isr=2] [assign=1+2,2+3]`:
  CreateTopics (several topics: `topic=a,b`).
- `create_partitions topic=t total=3 [start=0]`.
- `fence id=2 [unclean=1]`, `shutdown id=2`: a session expiry, a controlled shutdown.
- `alter id=1 topic=t partition=0 isr=1,2 [leader_epoch=..] [partition_epoch=..]
  [broker_epoch=..]`: AlterPartition from the leader (epochs default to the image's).
- `preferred`: the periodic preferred-leader election;
  `elect type=preferred|unclean|<number> [partitions=t-0,t-1]`: ElectLeaders.
- `config topic=t key=value`: set a topic config; `unclean` for the cluster in `fence unclean=1`.
"""

from __future__ import annotations

from pathlib import Path

from raftka.raft_meta.controller import controller_decisions as cd
from raftka.raft_meta.controller.controller_errors import ControllerError
from raftka.raft_meta.metadata.apply import apply
from raftka.raft_meta.metadata.image import MetadataImage
from raftka.raft_meta.metadata.records import (
    Config,
    FenceBroker,
    Partition,
    PartitionChange,
    RegisterBroker,
    Topic,
    UnfenceBroker,
)
from tests.scenario import CommandHarness, scenario_tests

TESTDATA = Path(__file__).parent / "testdata" / "controller_decisions"
LISTENERS = (("PLAINTEXT", "127.0.0.1", 9092),)


def _ids(text: str) -> tuple[int, ...]:
    return tuple(int(b) for b in text.split(",")) if text and text != "-" else ()


def _fmt_ids(ids) -> str:
    return ",".join(map(str, ids)) or "-"


def _fmt_record(r) -> str:
    match r:
        case RegisterBroker():
            return f"RegisterBroker {r.broker_id} incarnation={r.incarnation_id}" + (f" rack={r.rack}" if r.rack else "")
        case FenceBroker() | UnfenceBroker():
            return f"{type(r).__name__} {r.broker_id} epoch={r.broker_epoch}"
        case Config():
            return f"Config {r.resource_type}:{r.resource_name} {r.name}={r.value}"
        case Topic():
            return f"Topic {r.name} id={r.topic_id}" + "".join(f" {k}={v}" for k, v in r.configs)
        case Partition():
            return (f"Partition {r.topic_id}/{r.partition} replicas={_fmt_ids(r.replicas)} isr={_fmt_ids(r.isr)} "
                    f"leader={r.leader}")
        case PartitionChange():
            fields = [f"{name}={_fmt_ids(v) if isinstance(v, tuple) else v}"
                      for name in ("leader", "isr", "replicas", "adding_replicas", "removing_replicas")
                      if (v := getattr(r, name)) is not None]
            return (f"PartitionChange {r.topic_id}/{r.partition} on epoch {r.partition_epoch}: " + " ".join(fields)
                    + (" unclean" if r.unclean else ""))
    return repr(r)


def _fmt_error(e: ControllerError | None) -> str:
    return "NONE" if e is None else f"{e.name}: {e.message}"


class Harness(CommandHarness):
    def __init__(self) -> None:
        self.image = MetadataImage()

    def _commit(self, records) -> list[str]:
        lines = []
        for record in records:
            lines.append(_fmt_record(record))
            self.image, delta = apply(self.image, record, self.image.offset + 1)
            if not delta.accepted:
                lines.append(f"  rejected: {delta.reason}")
        return lines

    def _partition_lines(self, records) -> list[str]:
        keys = sorted({(r.topic_id, r.partition) for r in records if isinstance(r, (Partition, PartitionChange))})
        lines = []
        for topic_id, index in keys:
            p = self.image.partition(topic_id, index)
            if p is None:
                continue
            lines.append(f"{self.image.topics[topic_id].name}-{index}: replicas={_fmt_ids(p.replicas)} "
                         f"isr={_fmt_ids(p.isr)} leader={p.leader} leader_epoch={p.leader_epoch} "
                         f"partition_epoch={p.partition_epoch}")
        return lines

    def _decided(self, decide, errors_of=None) -> str:
        try:
            result = decide()
        except ControllerError as exc:
            return f"error {_fmt_error(exc)}"
        decision, errors = result if isinstance(result, tuple) else (result, {})
        lines = self._commit(decision.records) or ["no records"]
        lines += [f"warning {event} {fields}" for event, fields in decision.warnings]
        lines += [f"{name}: {_fmt_error(e)}" for name, e in (errors_of or (lambda e: e.items()))(errors)]
        return "\n".join(lines + self._partition_lines(decision.records))

    def _epoch(self, broker_id: int) -> int:
        return self.image.brokers[broker_id].epoch

    def cmd_register(self, kv) -> str:
        b = int(kv["id"])
        return self._decided(lambda: cd.register_broker(
            self.image, b, kv.get("incarnation", f"inc{b}"), LISTENERS, kv.get("rack"), kv.get("alive") == "1"))

    def cmd_heartbeat(self, kv) -> str:
        b = int(kv["id"])
        return self._decided(lambda: cd.broker_heartbeat(self.image, b, self._epoch(b), kv.get("caught_up", "1") == "1",
                                                         False))

    def cmd_brokers(self, kv) -> str:
        return "\n".join(f"broker {b.broker_id}: epoch={b.epoch} {'fenced' if b.fenced else 'live'}"
                         + (f" rack={b.rack}" if b.rack else "") for _, b in sorted(self.image.brokers.items()))

    def cmd_create(self, kv) -> str:
        configs = {"min.insync.replicas": kv["min_isr"]} if "min_isr" in kv else {}
        assign = ({i: _ids(r.replace("+", ",")) for i, r in enumerate(kv["assign"].split(","))}
                  if "assign" in kv else None)
        topics = [cd.NewTopic(name, None if assign else int(kv.get("partitions", 1)),
                              None if assign else int(kv.get("rf", 1)), configs, assign)
                  for name in kv["topic"].split(",")]
        return self._decided(lambda: cd.create_topics(self.image, topics, lambda i: f"{topics[i].name}-id",
                                                      start=int(kv.get("start", 0))))

    def cmd_create_partitions(self, kv) -> str:
        return self._decided(lambda: cd.create_partitions_batch(self.image, [(kv["topic"], int(kv["total"]))],
                                                                int(kv.get("start", 0))))

    def cmd_fence(self, kv) -> str:
        return self._decided(lambda: cd.fence_broker(self.image, int(kv["id"]), kv.get("unclean") == "1"))

    def cmd_shutdown(self, kv) -> str:
        b = int(kv["id"])
        return self._decided(lambda: cd.controlled_shutdown(self.image, b, self._epoch(b), True))

    def cmd_alter(self, kv) -> str:
        b, topic_id, index = int(kv["id"]), f"{kv['topic']}-id", int(kv.get("partition", 0))
        part = self.image.partition(topic_id, index)
        assert part is not None
        return self._decided(lambda: cd.alter_partition(
            self.image, b, int(kv.get("broker_epoch", self._epoch(b))), topic_id, index,
            int(kv.get("leader_epoch", part.leader_epoch)),
            int(kv.get("partition_epoch", part.partition_epoch)), _ids(kv["isr"])))

    def cmd_preferred(self, kv) -> str:
        return self._decided(lambda: cd.preferred_leader_elections(self.image))

    def cmd_elect(self, kv) -> str:
        names = {"preferred": cd.PREFERRED_ELECTION, "unclean": cd.UNCLEAN_ELECTION}
        kind = names[kv["type"]] if kv["type"] in names else int(kv["type"])
        wanted = None
        if "partitions" in kv:
            wanted = [(tp.rpartition("-")[0], int(tp.rpartition("-")[2])) for tp in kv["partitions"].split(",")]
        return self._decided(lambda: cd.elect_leaders(self.image, kind, wanted),
                             lambda errors: ((f"{t}-{p}", e) for (t, p), e in errors.items()))

    def cmd_config(self, kv) -> str:
        (key, value), = ((k, v) for k, v in kv.items() if k != "topic")
        return "\n".join(self._commit([Config("topic", kv["topic"], key, value)]))


test_there_are_scenarios, test_scenario = scenario_tests(TESTDATA, Harness, minimum=4)
