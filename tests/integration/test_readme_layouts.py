"""The documented multi-machine deployment, run as written (docs/design.md, principle 12).

The test reads docs/operations.md's "Several machines" section itself: the node's `server.properties`
block (node 1's, on 10.0.0.1), any block there that moves a directory (`metadata.log.dir`),
and the shell block's `raftka storage random-uuid`, `raftka storage format ...` and
`raftka server start ...` lines. For each layout it writes three nodes' properties from the
block, with only the machine-specific parts changed (each node's id, loopback addresses
and free ports for the hosts and ports, the directories under a temp dir, a random secret
for the `<...>` placeholder), formats and starts them with those commands, and then, under
an idempotent acks=all load (RF 3, min.insync.replicas 2), kills each node with SIGKILL and
restarts it, one at a time, then stops each with SIGTERM and starts it again. Every
acknowledged record must be read back at its offset (chaos/checker.py: no loss, no
duplicate, order kept) and every topic must still exist on every node.

Anything the section no longer holds, or holds in a shape this test does not understand,
fails it loudly: an edit of the page that breaks a documented layout fails the suite.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import trio

from raftka.chaos.checker import check
from raftka.chaos.history import HistoryWriter, Op, read_history
from raftka.chaos.metadata_probe import critical_lines, node_metadata
from raftka.chaos.workload import Recorder, Workload, WorkloadConfig, drain
from raftka.testing.local_cluster import LocalCluster, Node, _child_env

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "operations.md"  # where the multi-machine layouts are documented
SECTION = "## Several machines"
DIR_KEYS = ("log.dirs", "log.dir", "metadata.log.dir")
METADATA_LOG = "__cluster_metadata-0"
HOST_PORT = re.compile(r"(?P<host>[A-Za-z0-9][A-Za-z0-9.-]*):(?P<port>\d+)")
PLACEHOLDER = re.compile(r"<[^>]*>")
TOPIC = "readme-orders"
IDLE_TOPIC = "readme-idle"  # no load: it only has to survive the restarts
PARTITIONS = 3
ACKS_PER_STEP = 20  # acknowledged records wanted while each node is down, and after it is back
HOLD_S = 6.0  # the longest a node stays down (or the load waits after its restart) for those
START_S = 90.0


# --- reading the page --------------------------------------------------------------------

def readme_section(text: str, heading: str = SECTION) -> str:
    start = text.find(f"\n{heading}\n")
    assert start >= 0, f"{DOC.name} has no {heading!r} section; this test runs the layouts documented there"
    end = text.find("\n## ", start + len(heading) + 2)
    return text[start:end if end >= 0 else len(text)]


def fenced_blocks(section: str, language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```", section, re.S | re.M)


def parse_properties(block: str) -> dict[str, str]:
    out = {}
    for line in block.splitlines():
        line = line.strip()
        if line and not line.startswith(("#", "!")):
            key, sep, value = line.partition("=")
            assert sep, f"{DOC.name} properties line {line!r} has no '='"
            out[key.strip()] = value.strip()
    return out


@dataclass(frozen=True)
class Layout:
    name: str
    properties: dict[str, str]


def readme_layouts(text: str) -> list[Layout]:
    """The node block as written (the default layout), and the node block plus each block of
    the section that moves a directory (log.dirs, metadata.log.dir)."""
    blocks = [parse_properties(b) for b in fenced_blocks(readme_section(text), "properties")]
    nodes = [b for b in blocks if "node.id" in b]
    assert len(nodes) == 1, (f"expected one server.properties block with node.id in {SECTION!r}, "
                             f"found {len(nodes)}: {nodes}")
    (node,) = nodes
    for key in ("node.id", "controller.quorum.voters", "listeners", "log.dirs"):
        assert key in node, f"the page's server.properties block has no {key}: {node}"
    layouts = [Layout("as-written", node)]
    for block in blocks:
        moved = sorted(k for k in block if k in DIR_KEYS)
        if block is not node and moved:
            layouts.append(Layout("+" + ",".join(moved), {**node, **block}))
    return layouts


def readme_commands(text: str) -> dict[str, list[str]]:
    """{'random-uuid' | 'format' | 'start': the page's command line for it, split as a shell would}."""
    wanted = {"random-uuid": ["raftka", "storage", "random-uuid"], "format": ["raftka", "storage", "format"],
              "start": ["raftka", "server", "start"]}
    found: dict[str, list[str]] = {}
    for block in fenced_blocks(readme_section(text), "sh"):
        for line in block.splitlines():
            argv = shlex.split(line, comments=True)
            for name, head in wanted.items():
                if argv[:len(head)] == head and name not in found:
                    found[name] = argv
    missing = sorted(set(wanted) - set(found))
    assert not missing, f"{DOC.name}'s {SECTION!r} section has no command for {missing}; expected {wanted}"
    return found


# --- the page's properties, on this machine -----------------------------------------------

def parse_voters(value: str) -> dict[int, tuple[str, int]]:
    voters = {}
    for entry in value.split(","):
        node_id, _, address = entry.strip().partition("@")
        match = HOST_PORT.fullmatch(address)
        assert match, f"voter {entry!r}; expected id@host:port"
        voters[int(node_id)] = (match["host"], int(match["port"]))
    return voters


def localize(props: dict[str, str], node: Node, nodes: dict[int, Node], secret: str, root: Path) -> dict[str, str]:
    """Node `node`'s properties from the page's block (written for node `node.id` there):
    its id; each voter's host:port -> 127.0.0.1 and that node's ports; directories under
    root/node-<i>; the secret placeholder -> `secret`. Anything else machine-specific fails."""
    voters = parse_voters(props["controller.quorum.voters"])
    assert sorted(voters) == sorted(nodes), f"documented voters {sorted(voters)}; the test runs nodes {sorted(nodes)}"
    hosts = {host: i for i, (host, _) in voters.items()}
    assert len(hosts) == len(voters), f"documented voters share a host: {voters}; expected one machine each"
    written_for = int(props["node.id"])
    client_ports = sorted({int(m["port"]) for k, v in props.items() if k != "controller.quorum.voters"
                           for m in HOST_PORT.finditer(v)} - {voters[written_for][1]})
    assert len(client_ports) <= 1, f"the documented node listens on ports {client_ports} besides its quorum port; " \
                                   "this test maps one client port"

    def address(match: re.Match, owner: int) -> str:
        port = int(match["port"])
        local = nodes[owner]
        return f"{local.host}:{local.quorum_port if port == voters[written_for][1] else local.client_port}"

    out = {}
    for key, value in props.items():
        if key == "node.id":
            value = str(node.node_id)
        elif key == "controller.quorum.voters":
            value = ",".join(f"{i}@{nodes[i].host}:{nodes[i].quorum_port}" for i in sorted(voters))
        elif key in DIR_KEYS:
            value = ",".join(str(root / f"node-{node.node_id}" / p.strip().lstrip("/")) for p in value.split(","))
        elif key == "controller.quorum.secret" and PLACEHOLDER.fullmatch(value):
            value = secret
        else:
            for match in HOST_PORT.finditer(value):
                assert match["host"] in hosts, f"{key}={value}: host {match['host']!r} is no voter's " \
                                               f"({sorted(hosts)}); this test maps the voters' hosts only"
            # the block is node `written_for`'s: its own host is this node's
            value = HOST_PORT.sub(lambda m: address(m, node.node_id if hosts[m["host"]] == written_for
                                                    else hosts[m["host"]]), value)
        assert not PLACEHOLDER.search(value), f"{key}={value}: a placeholder this test cannot fill"
        out[key] = value
    return out


def substitute(argv: list[str], config: Path, cluster_id: str) -> list[str]:
    """A documented command for one node: `server.properties` is its file, `<id>` the cluster id."""
    out = []
    for token in argv[1:]:  # without the leading `raftka`
        if token == "server.properties":
            token = str(config)
        elif PLACEHOLDER.fullmatch(token) and "id" in token:
            token = cluster_id
        assert not PLACEHOLDER.search(token), f"{shlex.join(argv)}: placeholder {token!r} this test cannot fill"
        out.append(token)
    return out


def raftka(args: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "raftka", *args], capture_output=True, text=True,
                          env=_child_env("WARNING"), timeout=120)


class ReadmeCluster(LocalCluster):
    """Three nodes configured and started exactly as the page's section says."""

    def __init__(self, directory: Path, layout: Layout, commands: dict[str, list[str]]) -> None:
        self.layout = layout
        self.commands = commands
        self.formatted = False
        super().__init__(directory, len(parse_voters(layout.properties["controller.quorum.voters"])))

    def node_properties(self, node: Node, voters: str, secret: str) -> dict[str, str]:
        return localize(self.layout.properties, node, self.nodes, secret, self.data_dir)

    def prepare(self) -> str:
        super().prepare()
        if not self.formatted:  # `raftka storage random-uuid` once, `storage format` on every node
            made = raftka(self.commands["random-uuid"][1:])
            assert made.returncode == 0, made.stderr
            self.cluster_id = made.stdout.strip()
            for node in self.nodes.values():
                done = raftka(substitute(self.commands["format"], node.config_path, self.cluster_id))
                assert done.returncode == 0, f"node {node.node_id}: {done.stdout}{done.stderr}"
            self.formatted = True
        return self.cluster_id

    def server_args(self, node: Node) -> list[str]:
        return substitute(self.commands["start"], node.config_path, self.cluster_id)

    def first_log_dir(self, node: Node) -> Path:
        return Path(localize(self.layout.properties, node, self.nodes, "", self.data_dir)["log.dirs"].split(",")[0])


# --- the test --------------------------------------------------------------------------------

def test_the_readme_section_is_found_and_understood():
    """The parts the layouts test relies on are there (so its parametrization is not empty)."""
    text = DOC.read_text()
    layouts = readme_layouts(text)
    assert layouts[0].name == "as-written" and "metadata.log.dir" not in layouts[0].properties, \
        "the page's node block should show Kafka's default layout (no metadata.log.dir)"
    assert any("metadata.log.dir" in layout.properties for layout in layouts[1:]), [x.name for x in layouts]
    assert set(readme_commands(text)) == {"random-uuid", "format", "start"}
    with pytest.raises(AssertionError, match="no '## Several machines' section"):
        readme_layouts(text.replace(SECTION, "## Elsewhere"))


async def _acks_reach(count: list[int], target: int, hold: float) -> None:
    """Wait until `target` sends are acknowledged, or `hold` seconds (a stalled producer is
    another helper's finding: this test asserts no loss, not latency)."""
    with trio.move_on_after(hold):
        while count[0] < target:
            await trio.sleep(0.05)


async def _exercise(cluster: ReadmeCluster, rec: Recorder, acked: list[int], config: WorkloadConfig,
                    topics: dict[str, int]) -> tuple[bool, list[str]]:
    """The load, the kill -9 round, the clean-restart round; then drain. Returns (drained,
    what went wrong: topics missing, a node that did not come back). A failed step ends the
    rounds, and what can be read is still drained, so the checker names the lost records."""
    problems: list[str] = []
    workload = Workload(config, rec)
    async with trio.open_nursery() as nursery:
        await workload.run(nursery)
        await _acks_reach(acked, ACKS_PER_STEP, 30)
        try:
            for how in ("kill", "stop"):
                for node_id in sorted(cluster.nodes):
                    stop = cluster.kill if how == "kill" else cluster.stop_node
                    rec.record("nemesis", "info", how, {"phase": "start", "nodes": [node_id]})
                    await trio.to_thread.run_sync(stop, node_id)
                    await _acks_reach(acked, acked[0] + ACKS_PER_STEP, HOLD_S)
                    await trio.to_thread.run_sync(lambda n=node_id: cluster.start_node(n, wait=True, timeout=START_S))
                    rec.record("nemesis", "info", how, {"phase": "stop", "nodes": [node_id]})
                    await trio.to_thread.run_sync(cluster.wait_full_isr, topics, START_S)
                    problems += await _missing_topics(cluster, topics, f"after the {how} of node {node_id}")
                    await _acks_reach(acked, acked[0] + ACKS_PER_STEP, HOLD_S)
            workload.stop_producing.set()
            await trio.to_thread.run_sync(cluster.wait_full_isr, topics, START_S)
        except (TimeoutError, RuntimeError, trio.TooSlowError) as exc:
            problems.append(f"{type(exc).__name__}: {exc}")
        workload.stop_producing.set()
        await trio.sleep(2)  # the consumers read what was last written (the drain reads it all anyway)
        workload.stop_consuming.set()
    return await drain(config, rec, timeout=60), problems


async def _missing_topics(cluster: ReadmeCluster, topics: dict[str, int], when: str) -> list[str]:
    """Each node's own Metadata answer names every topic with all its partitions."""
    out = []
    for node in cluster.nodes.values():
        with trio.fail_after(30):
            while True:
                try:
                    seen = await node_metadata(node, port=node.client_port)
                    break
                except* Exception:  # noqa: B036 - the node may still be loading
                    await trio.sleep(0.2)
        for topic, partitions in topics.items():
            if len(seen.get(topic, {})) != partitions:
                out.append(f"{when}: node {node.node_id} lists {topic} with partitions "
                           f"{sorted(seen.get(topic, {}))}, expected {partitions}")
    return out


@pytest.mark.timeout(600)
@pytest.mark.parametrize("layout", readme_layouts(DOC.read_text()), ids=lambda x: x.name)
def test_readme_layout_survives_kill_and_clean_restarts_of_every_node(tmp_path: Path, layout: Layout) -> None:
    commands = readme_commands(DOC.read_text())
    cluster = ReadmeCluster(tmp_path / "cluster", layout, commands)
    writer = HistoryWriter(tmp_path / "history.jsonl")
    acked = [0]

    def on_op(o: Op) -> None:
        if o.f == "send" and o.type == "ok":
            acked[0] += 1

    rec = Recorder(writer, on_op)
    topics = {TOPIC: PARTITIONS, IDLE_TOPIC: 1}
    config = WorkloadConfig(cluster.bootstrap_servers, TOPIC, PARTITIONS, rate=50.0, idempotence=True, seed=27)
    try:
        cluster.start()
        cluster.wait_ready(START_S)
        cluster.create_topic(TOPIC, PARTITIONS, 3, {"min.insync.replicas": "2"})
        cluster.create_topic(IDLE_TOPIC, 1, 3, {"min.insync.replicas": "2"})
        drained, problems = trio.run(_exercise, cluster, rec, acked, config, topics)
    finally:
        cluster.stop()
        writer.close()
    result = check(read_history(tmp_path / "history.jsonl"), idempotent=True)
    summary = result.to_json()
    assert result.valid, (summary, problems)
    assert drained, (summary, problems)
    assert not problems, problems
    assert result.stats["acknowledged"] >= ACKS_PER_STEP * 2, summary  # the load ran
    critical = [line for node in cluster.nodes.values() for line in critical_lines(node.log_path)]
    assert not critical, critical[:5]
    if "metadata.log.dir" not in layout.properties:  # Kafka's default: the metadata log in the first log dir
        for node in cluster.nodes.values():
            assert (cluster.first_log_dir(node) / METADATA_LOG / "raft.journal").exists(), node.node_id
