"""A small metadata workload: topics created and deleted while the nemesis works.

One process ("meta") creates a topic with a fresh name (`chaos-meta-<n>`, never reused)
every `interval` seconds and, every other step on average (seeded), deletes one whose
creation was acknowledged. Each is an invoke then ok / info op (f "create-topic" or
"delete-topic", value the name); any error is `info` (the controller may have committed
the record anyway). The checker holds the acknowledged ones to the nodes' final metadata
(chaos/checker.py, lost-topic-change).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import trio

from raftka.chaos.workload import Recorder
from raftka.client.admin import AsyncAdmin, NewTopic
from raftka.client.errors import KafkaError

META = "meta"
PREFIX = "chaos-meta-"


@dataclass(frozen=True)
class MetadataWorkloadConfig:
    bootstrap: str
    seed: int = 0
    interval: float = 2.0
    replication_factor: int = 3
    timeout: float = 10.0


class MetadataWorkload:
    def __init__(self, config: MetadataWorkloadConfig, recorder: Recorder) -> None:
        self.config = config
        self.rec = recorder
        self._rng = random.Random(config.seed * 7919 + 1)
        self.created: list[str] = []  # acknowledged, not yet deleted
        self.stop = trio.Event()
        self.finished = trio.Event()  # set once the last change has its outcome

    async def run(self) -> None:
        n = 0
        try:
            while not self.stop.is_set():
                n += 1
                await self._change("create-topic", f"{PREFIX}{n}")
                if self.created and self._rng.random() < 0.5:
                    name = self.created.pop(self._rng.randrange(len(self.created)))
                    await self._change("delete-topic", name)
                with trio.move_on_after(self.config.interval):
                    await self.stop.wait()
        finally:
            self.finished.set()

    async def _change(self, f: str, name: str) -> None:
        c = self.config
        self.rec.record(META, "invoke", f, name)
        try:
            with trio.fail_after(c.timeout):
                async with AsyncAdmin(c.bootstrap, request_timeout_ms=int(c.timeout * 1000)) as admin:
                    if f == "create-topic":
                        await admin.create_topics([NewTopic(name, 1, c.replication_factor)])
                    else:
                        await admin.delete_topics([name])
        except (KafkaError, OSError, trio.TooSlowError) as exc:
            self.rec.record(META, "info", f, name, error=f"{type(exc).__name__}: {exc}")
            return
        self.rec.record(META, "ok", f, name)
        if f == "create-topic":
            self.created.append(name)
