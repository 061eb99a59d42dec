"""The `raftka` command line: the click tree; each command's work is in its own module
of raftka/cli/, and the commands that talk to brokers share cli/runner.py's runner and
exit statuses (0 done, 1 the cluster said no, 2 bad arguments).
"""

from __future__ import annotations

import sys

import click

from raftka import __version__


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="raftka")
def main() -> None:
    """raftka — a Kafka-compatible streaming log with a built-in Raft metadata quorum.

    \b
    Quick start:
      raftka cluster up                 start a 3-node local cluster
      raftka log dump DIR/*.log         inspect segment files like kafka-dump-log
    """
    from raftka.cli.logging_setup import configure_logging

    configure_logging()


# --- storage ---------------------------------------------------------------
@main.group()
def storage() -> None:
    """Prepare a node's storage (cluster ids, meta.properties) and look after what it set aside."""


@storage.command(name="random-uuid")
def storage_random_uuid() -> None:
    """Print a new random cluster id."""
    from raftka.cli.storage import random_uuid

    sys.exit(random_uuid())


@storage.command(name="format")
@click.option("--config", "-c", "config_path", required=True, type=click.Path(exists=True, dir_okay=False), help="The node's server.properties.")
@click.option("--cluster-id", "-t", required=True, help="From `raftka storage random-uuid`; the same on every node.")
@click.option("--ignore-formatted", "-g", is_flag=True, help="Skip dirs already formatted with these ids.")
@click.option("--add-scram", "-S", "add_scram", multiple=True, metavar="'SCRAM-SHA-256=[name=N,password=P]'",
              help="A SCRAM user created with the cluster (Kafka's syntax; repeatable).")
def storage_format(config_path: str, cluster_id: str, ignore_formatted: bool, add_scram: tuple[str, ...]) -> None:
    """Write meta.properties into every log dir and the metadata dir."""
    from raftka.cli.storage import format_dirs

    sys.exit(format_dirs(config_path, cluster_id, ignore_formatted, add_scram))


@storage.command(name="strays")
@click.option("--config", "-c", "config_path", required=True, type=click.Path(exists=True, dir_okay=False),
              help="The node's server.properties (its log.dirs are scanned).")
@click.option("--delete", is_flag=True,
              help="Remove every stray listed, for good. Only while the node is stopped: the command "
                   "takes the node's directory locks and refuses if the node holds them.")
def storage_strays(config_path: str, delete: bool) -> None:
    """List (or remove) what the node set aside instead of deleting it.

    \b
    The broker never deletes data it cannot prove is garbage. It renames it aside
    and keeps it, with a warning in its log:
      <topic>-<p>.<hex>-stray   a partition directory the metadata does not give
                                this node (its topic was deleted while the node
                                was down, or re-created under a new id); event
                                log.stray_renamed
      <segment>.log.<hex>.stray a segment crash recovery could not fit in the
                                log, or the bytes it cut from one (a corrupt
                                batch); events log.recovery.*
    A stray is never served, opened or counted as a partition. Each line shows
    the path, its size, when it was set aside and why (when recorded). Copy out
    what you need (`raftka log dump` reads a renamed segment once it ends in
    .log), then remove the rest with --delete while the node is stopped.

    \b
    Exit status: 0 done (also when there is nothing to list), 1 on an error
    (bad config, the node is running and --delete was given).
    """
    from raftka.cli.storage import strays

    sys.exit(strays(config_path, delete))


# --- server / cluster / quorum --------------------------------------------
@main.group()
def server() -> None:
    """Run one raftka node (broker + metadata quorum voter)."""


@server.command(name="start")
@click.option("--config", "config_path", required=True, type=click.Path(exists=True, dir_okay=False),
              help="A Kafka-style server.properties file (node.id, listeners, controller.quorum.voters, log.dirs...).")
@click.option("--format", "format_first", is_flag=True,
              help="Format the storage first where it is not formatted yet (needs --cluster-id): "
                   "`raftka storage format --ignore-formatted` and `server start` in one process.")
@click.option("--cluster-id", "-t", default=None, help="With --format: the cluster id (the same on every node).")
def server_start(config_path: str, format_first: bool, cluster_id: str | None) -> None:
    """Start a node (broker + metadata quorum voter) from a server.properties file.

    \b
    The storage must be formatted first (raftka storage format), or pass
    --format --cluster-id ID. Prints "raftka node ready: ..." with the bound
    listeners once clients can connect. SIGTERM or Ctrl-C shuts down cleanly:
    leaderships move away first (controlled shutdown), then every log is
    flushed and checkpointed. With RAFTKA_EXIT_WITH_PARENT=PID in the
    environment (set by `cluster up` and the pytest plugin), the node also
    shuts down when process PID is no longer its parent.
    """
    from raftka.cli.server import start

    if format_first != (cluster_id is not None):
        raise click.UsageError("--format and --cluster-id go together")
    sys.exit(start(config_path, cluster_id))


@main.group()
def cluster() -> None:
    """Run a whole local cluster on this machine."""


@cluster.command(name="up")
@click.option("--nodes", default=3, show_default=True, type=click.IntRange(1, 9), help="Number of nodes.")
@click.option("--data-dir", default="cluster-data", show_default=True, type=click.Path(file_okay=False),
              help="Where each node's config, logs and metadata live; reused by the next `cluster up`.")
@click.option("--port-base", default=9092, show_default=True, type=int,
              help="Node i listens on port-base + 100*(i-1) (clients), +1 (quorum), +2 (controller RPC), +3 (metrics).")
@click.option("--log-level", default="INFO", show_default=True,
              type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"], case_sensitive=False),
              help="The nodes' log level.")
@click.option("--verbose", "-v", is_flag=True, help="Also stream the nodes' logs here, prefixed with [node-i].")
@click.option("--quiet", is_flag=True, hidden=True, help="The default now: the nodes' logs go to files only.")
@click.option("--secure", is_flag=True,
              help="Only SASL_SSL listeners: a private CA and node certificates, SCRAM users and a "
                   "DATA_DIR/client.properties; prints the client settings to use.")
@click.option("--separate-metadata-log-dir", is_flag=True,
              help="Put each node's metadata log in DATA_DIR/node-i/meta (metadata.log.dir) rather than in "
                   "its log dir DATA_DIR/node-i/data (Kafka's default layout).")
def cluster_up(nodes: int, data_dir: str, port_base: int, log_level: str, verbose: bool, quiet: bool,
               secure: bool, separate_metadata_log_dir: bool) -> None:
    """Start N local nodes (broker + quorum voter each) and keep them running until Ctrl-C.

    \b
    Formats storage on first use (cluster id and quorum secret are kept in
    DATA_DIR/cluster.properties), starts one `raftka server start` process per
    node, writes each node's log to DATA_DIR/node-i/server.log (--verbose also
    streams them here), keeps its partitions and its metadata log in
    DATA_DIR/node-i/data (Kafka's default layout), and prints the bootstrap
    servers once every broker is registered and unfenced. Topics default to
    replication factor min(3, N) and min.insync.replicas min(2, N). A data dir
    is locked while a cluster runs on it: a second `cluster up` there is
    refused and writes nothing. If `cluster up` itself is killed, its nodes
    shut down on their own.
    """
    from raftka.cli.cluster import up

    sys.exit(up(nodes, data_dir, port_base, log_level.upper(), verbose and not quiet, secure,
                separate_metadata_log_dir))


def _cluster_control_command(op: str, summary: str):
    @cluster.command(name=op, help=summary)
    @click.option("--node", required=op != "status", type=int, default=None, help="The node id (1..N).")
    @click.option("--data-dir", default="cluster-data", show_default=True, type=click.Path(file_okay=False),
                  help="The data dir of the running `cluster up`.")
    def command(node: int | None, data_dir: str) -> None:
        from raftka.cli.cluster import control

        sys.exit(control(data_dir, op, node))

    return command


for _op, _summary in (
    ("kill", "Kill a node of the running `cluster up` with SIGKILL (a crash): watch the failover."),
    ("stop", "Stop a node of the running `cluster up` cleanly (SIGTERM: controlled shutdown)."),
    ("start", "Start a stopped or dead node of the running `cluster up`; returns once it serves."),
    ("restart", "Stop, then start, a node of the running `cluster up`."),
    ("status", "Show each node of the running `cluster up`: running (pid) or down (why)."),
):
    _cluster_control_command(_op, _summary)


@cluster.command(name="add-node")
@click.option("--data-dir", default="cluster-data", show_default=True, type=click.Path(file_okay=False),
              help="The data dir of the running `cluster up`.")
def cluster_add_node(data_dir: str) -> None:
    """Add a broker-only node to the running `cluster up`; returns once it serves.

    \b
    The new node gets the next id (4 after a 3-node cluster), process.roles=broker
    and the ports of that id (port-base + 100*(id-1), metrics +3). It follows the
    metadata quorum without voting, registers as a broker, and holds no partitions
    until some are moved onto it:
      raftka reassign generate --topics-to-move-json-file topics.json --broker-list 1,2,3,4
      raftka reassign execute --reassignment-json-file plan.json
    `cluster kill|stop|start|restart --node N` act on it, and Ctrl-C of `cluster up`
    stops it too. Retire it with `raftka brokers drain --node N`.
    """
    from raftka.cli.cluster import control

    sys.exit(control(data_dir, "add-node", None))


@main.group()
def quorum() -> None:
    """Inspect the Raft metadata quorum."""


@quorum.command(name="status")
@click.option("--bootstrap-server", "bootstrap", default=None,
              help="Ask a running cluster over the Kafka protocol (DescribeQuorum), like kafka-metadata-quorum "
                   "[default: 127.0.0.1:9092].")
@click.option("--config", "-c", "config_path", default=None, type=click.Path(exists=True, dir_okay=False),
              help="Or ask every voter directly, with a server.properties naming the voters and the secret.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@click.option("--timeout", default=3.0, show_default=True, help="Seconds to wait for each voter / the cluster.")
def quorum_status(bootstrap: str | None, config_path: str | None, as_json: bool, timeout: float) -> None:
    """Show the metadata quorum: leader id, leader epoch (Raft term), commit index, voters and their lag.

    \b
    Give at most one of --bootstrap-server (any broker; the active controller is
    asked; the default, 127.0.0.1:9092, as in every other command) or --config
    (each voter is asked over its raft port, with the secret).
    With --config, each voter also reports its metadata image: the offset of the
    last record applied (image_offset) and the SHA-256 digest of the image at
    image_digest_offset (the same as image_offset once the voter is quiet).
    """
    from raftka.cli.quorum import quorum_status as run
    from raftka.cli.quorum import quorum_status_via_broker

    if bootstrap is not None and config_path is not None:
        raise click.UsageError("give at most one of --bootstrap-server or --config")
    if config_path is None:
        bootstrap = _check_bootstrap(click.get_current_context(), None, bootstrap or "127.0.0.1:9092")
    if bootstrap is not None:
        sys.exit(quorum_status_via_broker(bootstrap, as_json, timeout))
    sys.exit(run(config_path, as_json, timeout))


# --- topics / produce / consume -------------------------------------------
@main.group()
def topics() -> None:
    """Create, list, describe, alter and delete topics."""


def _check_bootstrap(_ctx: click.Context, _param: click.Parameter, value: str | None) -> str | None:
    """A one-line usage error for an address that is not host:port (e.g. `9092`)."""
    from raftka.client.bootstrap import parse_bootstrap

    if value is not None:
        try:
            parse_bootstrap(value)
        except ValueError as exc:
            raise click.BadParameter(str(exc)) from None
    return value


_BOOTSTRAP_SERVER = click.option("--bootstrap-server", "bootstrap", default="127.0.0.1:9092", show_default=True, callback=_check_bootstrap, help="host:port[,host:port...] of any broker.")



def _command_config_option(command):
    from raftka.cli.options import option

    return option(command)


def _BOOTSTRAP(command):  # noqa: N802 - used as the decorator it replaces
    """--bootstrap-server, plus --command-config (client security, raftka/cli/options.py)."""
    from raftka.cli.options import option

    return option(_BOOTSTRAP_SERVER(command))


@topics.command(name="create")
@_BOOTSTRAP
@click.option("--topic", required=True, help="The topic to create.")
# At least 1, as kafka-topics.sh checks: -1 is the protocol's "broker default" (KIP-464), which
# omitting the option already asks for; accepted, it made `--partitions -1` a 1-partition topic.
@click.option("--partitions", type=click.IntRange(min=1), default=None, help="Partition count (default: the broker's num.partitions).")
@click.option("--replication-factor", type=click.IntRange(min=1), default=None, help="Replicas per partition (default: the broker's default.replication.factor).")
@click.option("--config", "configs", multiple=True, metavar="KEY=VALUE", help="A topic config override; repeatable.")
@click.option("--if-not-exists", is_flag=True, help="Succeed quietly if the topic exists.")
def topics_create(bootstrap: str, topic: str, partitions: int | None, replication_factor: int | None, configs: tuple[str, ...], if_not_exists: bool) -> None:
    """Create a topic."""
    from raftka.cli.topics import create

    sys.exit(create(bootstrap, topic, partitions, replication_factor, configs, if_not_exists))


@topics.command(name="list")
@_BOOTSTRAP
def topics_list(bootstrap: str) -> None:
    """List topics."""
    from raftka.cli.topics import list_topics

    sys.exit(list_topics(bootstrap))


@topics.command(name="describe")
@_BOOTSTRAP
@click.option("--topic", default=None, help="Only this topic (default: all).")
def topics_describe(bootstrap: str, topic: str | None) -> None:
    """Describe topics: partitions, leaders, replicas, ISR."""
    from raftka.cli.topics import describe

    sys.exit(describe(bootstrap, topic))


@topics.command(name="delete")
@_BOOTSTRAP
@click.option("--topic", required=True, help="The topic to delete.")
def topics_delete(bootstrap: str, topic: str) -> None:
    """Delete a topic."""
    from raftka.cli.topics import delete

    sys.exit(delete(bootstrap, topic))


@topics.command(name="alter")
@_BOOTSTRAP
@click.option("--topic", required=True, help="The topic to change.")
@click.option("--partitions", type=click.IntRange(min=1), default=None, help="The new (larger) partition count.")
def topics_alter(bootstrap: str, topic: str, partitions: int | None) -> None:
    """Add partitions to a topic."""
    from raftka.cli.topics import alter

    sys.exit(alter(bootstrap, topic, partitions))


@main.command(name="produce")
@_BOOTSTRAP
@click.option("--topic", required=True, help="The topic to write to.")
@click.option("--key-separator", default=None, help="Split each line into key and value at the first SEP.")
@click.option("--acks", type=click.Choice(["0", "1", "-1", "all"]), default="1", show_default=True)
@click.option("--compression", "compression", type=click.Choice(["none", "gzip", "snappy", "lz4", "zstd"]), default=None)
@click.option("--partition", type=int, default=None, help="Write every line to this partition.")
@click.option("--linger-ms", type=int, default=5, show_default=True)
@click.option("--property", "properties", multiple=True, metavar="KEY=VALUE",
              help="kafka-console-producer's: parse.key, key.separator, parse.headers, headers.delimiter, "
                   "headers.separator, headers.key.separator, null.marker, ignore.error.")
def produce_cmd(bootstrap: str, topic: str, key_separator: str | None, acks: str, compression: str | None, partition: int | None, linger_ms: int, properties: tuple[str, ...]) -> None:
    """Produce lines from stdin to a topic.

    \b
    One record per line. With --property parse.key=true a line is KEY<TAB>VALUE
    (key.separator changes the TAB); with parse.headers=true it starts with
    headers h1:v1,h2:v2<TAB>. Ctrl-C stops at once, after the records already
    read are delivered, and prints "Processed a total of N messages".
    """
    from raftka.cli.console import produce

    sys.exit(produce(bootstrap, topic, key_separator, acks, compression, partition, linger_ms,
                     properties=properties))


@main.command(name="consume")
@_BOOTSTRAP
@click.option("--topic", required=True, help="The topic to read.")
@click.option("--from-beginning", is_flag=True, help="Start at the earliest offset (default: only new records).")
@click.option("--max-messages", type=int, default=None, help="Exit after this many records.")
@click.option("--partition", type=int, default=None, help="Read only this partition.")
@click.option("--offset", default=None, help="With --partition: a number, 'earliest' or 'latest'.")
@click.option("--property", "properties", multiple=True, metavar="KEY=VALUE",
              help="kafka-console-consumer's: print.timestamp, print.partition, print.offset, print.delivery "
                   "(--share-group), print.headers, "
                   "print.key, print.value, key.separator, line.separator, headers.separator, null.literal.")
@click.option("--timeout-ms", type=int, default=None, help="Exit when no record arrives for this long.")
@click.option("--group", default=None, help="Consume as a member of this consumer group (committed offsets; "
                                            "--from-beginning applies when the group has none).")
@click.option("--from-timestamp", default=None, metavar="MS|ISO-8601",
              help="Start at the first record at or after this time (epoch ms or e.g. 2026-11-24T08:00:00Z).")
@click.option("--json", "as_json", is_flag=True,
              help="One JSON object per record (topic, partition, offset, timestamp, key, value, headers).")
@click.option("--isolation-level", default="read_uncommitted", show_default=True,
              type=click.Choice(["read_uncommitted", "read_committed"]),
              help="read_committed: only committed transactions' records, up to the last stable offset.")
@click.option("--group-protocol", default="classic", show_default=True, type=click.Choice(["classic", "consumer"]),
              help="With --group: Kafka's group.protocol; 'consumer' is the next-generation protocol, the "
                   "broker assigning the partitions.")
@click.option("--share-group", default=None,
              help="Consume as a member of this share group (Kafka's queues, like kafka-console-share-consumer): "
                   "each record printed is acknowledged, accepted unless --release or --reject.")
@click.option("--release", is_flag=True,
              help="With --share-group: release each record printed (it is delivered again).")
@click.option("--reject", is_flag=True,
              help="With --share-group: reject each record printed (it is never delivered again).")
def consume_cmd(bootstrap: str, topic: str, from_beginning: bool, max_messages: int | None, partition: int | None, offset: str | None, properties: tuple[str, ...], timeout_ms: int | None, group: str | None, from_timestamp: str | None, as_json: bool, isolation_level: str, group_protocol: str, share_group: str | None, release: bool, reject: bool) -> None:
    """Consume a topic to stdout.

    \b
    Ctrl-C stops at once (committing the group's offsets with --group) and
    prints "Processed a total of N messages".
    \b
    raftka consume --topic jobs --share-group workers --property print.delivery=true
    """
    from raftka.cli.console import consume

    if release and reject:
        click.echo("raftka consume: at most one of --reject and --release may be given", err=True)
        sys.exit(2)
    sys.exit(consume(bootstrap, topic, from_beginning, max_messages, partition, offset, properties, timeout_ms,
                     group=group, from_timestamp=from_timestamp, as_json=as_json,
                     isolation_level=isolation_level, group_protocol=group_protocol, share_group=share_group,
                     acknowledge="release" if release else "reject" if reject else "accept"))


def _reset_offsets_options(offsets: str, apply: str):
    """The scope, target and mode options both reset-offsets commands take (--shift-by aside)."""
    options = (
        click.option("--topic", "topics", multiple=True, metavar="TOPIC[:P,P...]",
                     help="A topic, or some of its partitions (topic:0,2); repeatable."),
        click.option("--all-topics", is_flag=True, help=f"Every topic the group has {offsets} for."),
        click.option("--to-earliest", is_flag=True, help="To each partition's earliest offset."),
        click.option("--to-latest", is_flag=True, help="To each partition's end (the high watermark)."),
        click.option("--to-datetime", metavar="ISO-8601", default=None,
                     help="To the first offset at or after this time, e.g. 2026-11-24T08:00:00.000 (UTC unless "
                          "it says), or epoch ms."),
        click.option("--to-offset", type=int, default=None, metavar="N", help="To offset N."),
        click.option("--dry-run", is_flag=True, help="Only print the new offsets (the default)."),
        click.option("--execute", is_flag=True, help=f"{apply} the new offsets."),
    )

    def decorate(command):
        for option in reversed(options):
            command = option(command)
        return command

    return decorate


RESET_OPTIONS = ("--to-earliest", "--to-latest", "--to-datetime", "--shift-by", "--to-offset")


def _reset_scenario(topics: tuple[str, ...], all_topics: bool, to_earliest: bool, to_latest: bool,
                    to_datetime: str | None, shift_by: int | None, to_offset: int | None, dry_run: bool,
                    execute: bool, offered: tuple[str, ...] = RESET_OPTIONS):
    """The one --to-* (of `offered`) a reset-offsets command was given, as a ResetScenario."""
    from raftka.cli.console import parse_start_timestamp
    from raftka.client.offset_reset import ResetScenario

    given = {"--to-earliest": to_earliest, "--to-latest": to_latest, "--to-datetime": to_datetime is not None,
             "--shift-by": shift_by is not None, "--to-offset": to_offset is not None}
    if sum(given.values()) != 1:
        raise click.UsageError("give exactly one of " + ", ".join(n for n in given if n in offered))
    if dry_run and execute:
        raise click.UsageError("give --dry-run or --execute, not both")
    if bool(topics) == all_topics:
        raise click.UsageError("give --topic (repeatable) or --all-topics")
    try:
        if to_datetime is not None:
            return ResetScenario("datetime", parse_start_timestamp(to_datetime))
        if shift_by is not None:
            return ResetScenario("shift", shift_by)
        if to_offset is not None:
            return ResetScenario("offset", to_offset)
        return ResetScenario("earliest" if to_earliest else "latest")
    except ValueError as exc:
        raise click.UsageError(str(exc).replace("--from-timestamp", "--to-datetime")) from None


# --- groups ------------------------------------------------------------------
@main.group()
def groups() -> None:
    """List, describe and delete consumer groups."""


@groups.command(name="list")
@_BOOTSTRAP
def groups_list(bootstrap: str) -> None:
    """List consumer groups."""
    from raftka.cli.groups import list_cmd

    sys.exit(list_cmd(bootstrap))


@groups.command(name="describe")
@_BOOTSTRAP
@click.option("--group", "group_id", required=True, help="The group to describe.")
def groups_describe(bootstrap: str, group_id: str) -> None:
    """Describe a group: members, assignment, committed offsets, lag.

    \b
    The first line: state, assignor, member count, coordinator, and for a
    consumer-protocol (KIP-848) group its epochs. Such a group also gets a
    table of its members: epoch, current and target assignment, subscription,
    and, while classic members are in it (an online migration), UPGRADED
    (true: the member speaks the consumer protocol)."""
    from raftka.cli.groups import describe_cmd

    sys.exit(describe_cmd(bootstrap, group_id))


@groups.command(name="delete")
@_BOOTSTRAP
@click.option("--group", "group_id", required=True, help="The (empty) group to delete.")
def groups_delete(bootstrap: str, group_id: str) -> None:
    """Delete consumer groups."""
    from raftka.cli.groups import delete_cmd

    sys.exit(delete_cmd(bootstrap, group_id))


@groups.command(name="reset-offsets")
@_BOOTSTRAP
@click.option("--group", "group_id", required=True, help="The (inactive) group whose offsets to reset.")
@click.option("--shift-by", type=int, default=None, metavar="N", help="Move the committed offsets by N (may be negative).")
@_reset_offsets_options("committed offsets", "Commit")
def groups_reset_offsets(bootstrap: str, group_id: str, topics: tuple[str, ...], all_topics: bool,
                         to_earliest: bool, to_latest: bool, to_datetime: str | None, shift_by: int | None,
                         to_offset: int | None, dry_run: bool, execute: bool) -> None:
    """Reset a consumer group's committed offsets, like kafka-consumer-groups --reset-offsets.

    \b
    The group must be inactive (no members). Offsets beyond a partition's
    range are clamped to its earliest or latest offset, as Kafka does. Prints
    GROUP TOPIC PARTITION NEW-OFFSET; nothing changes without --execute.
    """
    from raftka.cli.groups import reset_offsets_cmd

    scenario = _reset_scenario(topics, all_topics, to_earliest, to_latest, to_datetime, shift_by, to_offset,
                               dry_run, execute)
    sys.exit(reset_offsets_cmd(bootstrap, group_id, topics, all_topics, scenario, execute))


# --- share-groups --------------------------------------------------------------
@main.group(name="share-groups")
def share_groups() -> None:
    """List, describe, delete and reset share groups (Kafka's queues), like kafka-share-groups.

    \b
    The members of a share group take records from the same partitions
    together, each record acquired by one member at a time and acknowledged
    one by one (the SDK's ShareConsumer). A share group's offset in a
    partition is its start offset: every record before it is settled.
    """


@share_groups.command(name="list")
@_BOOTSTRAP
@click.option("--state", "with_state", is_flag=True, help="Show each group's state (Empty, Stable, Dead).")
def share_groups_list(bootstrap: str, with_state: bool) -> None:
    """List share groups."""
    from raftka.cli.share_groups import list_cmd

    sys.exit(list_cmd(bootstrap, with_state))


@share_groups.command(name="describe")
@_BOOTSTRAP
@click.option("--group", "group_id", required=True, help="The share group to describe.")
@click.option("--offsets", "what", flag_value="offsets", default=True,
              help="Each partition's START-OFFSET (records before it are settled) and LAG (the default).")
@click.option("--members", "what", flag_value="members", help="The members: client, host and assigned partitions.")
@click.option("--state", "what", flag_value="state", help="The coordinator, the state and the number of members.")
@click.option("--verbose", is_flag=True, help="Add the leader epochs (--offsets), member epochs (--members) or "
                                              "group and assignment epochs (--state).")
def share_groups_describe(bootstrap: str, group_id: str, what: str, verbose: bool) -> None:
    """Describe a share group, as kafka-share-groups --describe.

    \b
    Exits 1 when the group does not exist (GROUP_ID_NOT_FOUND).
    """
    from raftka.cli.share_groups import describe_cmd

    sys.exit(describe_cmd(bootstrap, group_id, what, verbose))


@share_groups.command(name="delete")
@_BOOTSTRAP
@click.option("--group", "group_id", required=True, help="The share group to delete (it must have no members).")
def share_groups_delete(bootstrap: str, group_id: str) -> None:
    """Delete a share group and its state."""
    from raftka.cli.share_groups import delete_cmd

    sys.exit(delete_cmd(bootstrap, group_id))


@share_groups.command(name="delete-offsets")
@_BOOTSTRAP
@click.option("--group", "group_id", required=True, help="The share group (it must have no members).")
@click.option("--topic", "topics", multiple=True, required=True, help="A topic whose state to forget; repeatable.")
def share_groups_delete_offsets(bootstrap: str, group_id: str, topics: tuple[str, ...]) -> None:
    """Forget a share group's offsets and record states for some topics."""
    from raftka.cli.share_groups import delete_offsets_cmd

    sys.exit(delete_offsets_cmd(bootstrap, group_id, topics))


@share_groups.command(name="reset-offsets")
@_BOOTSTRAP
@click.option("--group", "group_id", required=True, help="The (inactive) share group whose offsets to reset.")
@_reset_offsets_options("offsets", "Apply")
def share_groups_reset_offsets(bootstrap: str, group_id: str, topics: tuple[str, ...], all_topics: bool,
                               to_earliest: bool, to_latest: bool, to_datetime: str | None, to_offset: int | None,
                               dry_run: bool, execute: bool) -> None:
    """Reset a share group's start offsets, like kafka-share-groups --reset-offsets.

    \b
    The group must have no members. Offsets beyond a partition's range are
    clamped to its earliest or latest offset. Prints GROUP TOPIC PARTITION
    NEW-OFFSET; nothing changes without --execute (Kafka's tool insists on
    --dry-run or --execute; raftka's dry run is the default).
    """
    from raftka.cli.share_groups import reset_offsets_cmd

    scenario = _reset_scenario(topics, all_topics, to_earliest, to_latest, to_datetime, None, to_offset,
                               dry_run, execute, offered=tuple(o for o in RESET_OPTIONS if o != "--shift-by"))
    sys.exit(reset_offsets_cmd(bootstrap, group_id, topics, all_topics, scenario, execute))


# --- log -------------------------------------------------------------------
@main.group(name="log")
def log_group() -> None:
    """Inspect on-disk partition logs."""


@log_group.command(name="dump")
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False))
@click.option("--print-records", is_flag=True, help="Also print each record's key, value and headers.")
@click.option("--verify-index", is_flag=True, help="For .index/.timeindex files, check each entry against the .log file.")
def log_dump(paths: tuple[str, ...], print_records: bool, verify_index: bool) -> None:
    """Dump segment files (.log, .index, .timeindex, .txnindex) like kafka-dump-log.

    \b
    For each batch of a .log file: base/last offset, record count, size,
    position, CRC (and whether it is valid), codec, producer id/epoch/base
    sequence, timestamps. --print-records adds each record's offset, key,
    value and headers (UTF-8 when printable, else hex).
    """
    from raftka.cli.log_dump import dump_paths

    sys.exit(dump_paths(paths, print_records=print_records, verify_index=verify_index))


# --- perf / chaos ------------------------------------------------------------
@main.group()
def perf() -> None:
    """Load generators modelled on kafka-producer/consumer-perf-test."""


@perf.command(name="produce")
@_BOOTSTRAP
@click.option("--topic", required=True, help="The topic to write to (it must exist).")
@click.option("--num-records", required=True, type=click.IntRange(0), help="Records to send (all producers together).")
@click.option("--record-size", default=1024, show_default=True, type=click.IntRange(0), help="Bytes per record value.")
@click.option("--throughput", default=-1.0, show_default=True, type=float, help="Records/s to aim at, all producers together; -1 = unthrottled.")
@click.option("--acks", type=click.Choice(["0", "1", "-1", "all"]), default="1", show_default=True)
@click.option("--batch-size", default=16384, show_default=True, type=click.IntRange(1), help="The producer's batch.size in bytes.")
@click.option("--linger-ms", default=5.0, show_default=True, type=click.FloatRange(0), help="The producer's linger.ms.")
@click.option("--compression", type=click.Choice(["none", "gzip", "snappy", "lz4", "zstd"]), default=None)
@click.option("--producers", default=1, show_default=True, type=click.IntRange(1, 64), help="Producer processes side by side.")
@click.option("--reporting-interval", default=5000, show_default=True, type=click.IntRange(1), help="Milliseconds between periodic lines.")
@click.option("--json", "as_json", is_flag=True, help="JSON Lines: one object per interval, then a \"type\": \"result\" object.")
@click.option("--worker", is_flag=True, hidden=True, help="Internal: one of --producers' processes.")
def perf_produce(bootstrap: str, topic: str, num_records: int, record_size: int, throughput: float,
                 acks: str, batch_size: int, linger_ms: float, compression: str | None, producers: int,
                 reporting_interval: int, as_json: bool, worker: bool) -> None:
    """Measure produce throughput and latency, like kafka-producer-perf-test.

    \b
    Prints a line every --reporting-interval (records/s, MB/s, avg and max
    latency), then a final line adding the 50th/95th/99th/99.9th percentile
    latencies (send -> acknowledgement). MB = 2^20 bytes, as Kafka's tools.
    """
    from raftka.cli.perf import produce, produce_config

    config = produce_config(bootstrap=bootstrap, topic=topic, num_records=num_records,
                            record_size=record_size, throughput=throughput, acks=acks,
                            batch_size=batch_size, linger_ms=linger_ms,
                            compression=None if compression == "none" else compression,
                            report_interval_s=reporting_interval / 1000)
    sys.exit(produce(config, producers=producers, as_json=as_json, worker=worker))


@perf.command(name="consume")
@_BOOTSTRAP
@click.option("--topic", required=True, help="The topic to read (every partition, from the beginning).")
@click.option("--num-records", "--messages", "num_records", required=True, type=click.IntRange(0), help="Stop after this many records.")
@click.option("--timeout", "timeout_ms", default=10000, show_default=True, type=click.IntRange(1), help="Stop when no record arrives for this many ms.")
@click.option("--fetch-max-bytes", default=50 * 1024 * 1024, show_default=True, type=click.IntRange(1))
@click.option("--reporting-interval", default=5000, show_default=True, type=click.IntRange(1), help="Milliseconds between periodic lines.")
@click.option("--json", "as_json", is_flag=True, help="JSON Lines: one object per interval, then a \"type\": \"result\" object.")
def perf_consume(bootstrap: str, topic: str, num_records: int, timeout_ms: int, fetch_max_bytes: int,
                 reporting_interval: int, as_json: bool) -> None:
    """Measure consume throughput, like kafka-consumer-perf-test.

    \b
    Exit status 1 when fewer than --num-records arrived before --timeout of quiet.
    """
    from raftka.cli.options import security
    from raftka.cli.perf import consume
    from raftka.testing.perf import ConsumePerfConfig

    config = ConsumePerfConfig(bootstrap=bootstrap, topic=topic, num_records=num_records, security=security(),
                               timeout_ms=timeout_ms, fetch_max_bytes=fetch_max_bytes,
                               report_interval_s=reporting_interval / 1000)
    sys.exit(consume(config, as_json=as_json))


@main.group()
def chaos() -> None:
    """Jepsen-style fault injection with a checker of the committed-message guarantees."""


@chaos.command(name="run")
@click.option("--nodes", default=5, show_default=True, type=click.IntRange(1, 9), help="Nodes in the cluster the harness starts.")
@click.option("--time-limit", default=60.0, show_default=True, type=float, help="Seconds of workload under faults.")
@click.option("--nemesis", default="kill,pause,partition", show_default=True,
              help="Comma list: kill (SIGKILL a node, start it again), pause (SIGSTOP, SIGCONT), partition, "
                   "restart (a clean stop, SIGTERM: controlled shutdown, then start again), "
                   "leader-kill, controller-kill, isolate-leader-then-kill, "
                   "corrupt (stop a node, flip a bit in or truncate a closed segment, restart it), "
                   "quorum (kill, pause or isolate the metadata quorum's Raft leader), none.")
@click.option("--nemesis-interval", default=10.0, show_default=True, type=float, help="Seconds each fault lasts (and half of it healthy between faults).")
@click.option("--rate", default=50.0, show_default=True, type=float, help="Sends per second, all producers together.")
@click.option("--topics", default=1, show_default=True, type=int, help="Topics (1 for now).")
@click.option("--partitions", default=3, show_default=True, type=int, help="Partitions of the topic.")
@click.option("--replication-factor", default=3, show_default=True, type=int)
@click.option("--min-insync", default=2, show_default=True, type=int, help="The topic's min.insync.replicas.")
@click.option("--acks", default="all", show_default=True, type=click.Choice(["all", "1", "0"]))
@click.option("--idempotence/--no-idempotence", default=False, show_default=True, help="Idempotent producers (duplicates become forbidden).")
@click.option("--seed", default=None, type=int, help="Seed of the fault schedule and the workload (random if unset; printed).")
@click.option("--out", default="chaos-runs", show_default=True, type=click.Path(file_okay=False), help="Reports go to OUT/<timestamp>/.")
@click.option("--against", default=None, metavar="BOOTSTRAP", help="Drive an already running cluster (no faults: --nemesis none).")
@_command_config_option
@click.option("--partition-mode", default="cut", show_default=True, type=click.Choice(["cut", "blackhole"]),
              help="cut: links are closed; blackhole: links stall until the heal.")
@click.option("--unclean", is_flag=True, help="Start nodes with unclean.leader.election.enable=true (to see the harness fail).")
@click.option("--consumer-mode", default="assign", show_default=True, type=click.Choice(["assign", "group"]),
              help="assign: consumers assign every partition; group: they share it as one consumer group.")
@click.option("--segment-bytes", default=16384, show_default=True, type=click.IntRange(1024),
              help="The chaos topic's segment.bytes (small, so closed segments exist for --nemesis corrupt).")
@click.option("--workload", default="queue", show_default=True, type=click.Choice(["queue", "txn"]),
              help="queue: single sends; txn: transactions committed and aborted across partitions, "
                   "read_committed readers and consume-transform-produce pipelines (exactly once); "
                   "add --nemesis txn-coordinator-kill to kill the transaction coordinator's node.")
def chaos_run(**options) -> None:
    """Run a queue workload under faults, then heal, drain and check the history.

    \b
    Starts --nodes raftka processes behind fault-injecting proxies, sends unique
    values with acks=all and reads them back while the nemesis kills, pauses and
    partitions nodes; writes history.jsonl, results.json, plots and node logs to
    OUT/<timestamp>/ and prints a summary. Exit status 0 when the history is
    valid, 1 when the checker found a forbidden anomaly.
    """
    from raftka.cli.chaos import run

    sys.exit(run(**options))


# --- acls ----------------------------------------------------------------------
@main.group()
def acls() -> None:
    """Add, list and remove ACLs (like kafka-acls.sh; needs authorizer.class.name on the brokers)."""


def _acl_options(func):
    for decorator in reversed((
        _BOOTSTRAP,
        click.option("--allow-principal", "allow_principals", multiple=True, metavar="Type:name",
                     help="Principal the ACL allows (repeatable), e.g. User:alice or User:*."),
        click.option("--deny-principal", "deny_principals", multiple=True, metavar="Type:name",
                     help="Principal the ACL denies (repeatable)."),
        click.option("--allow-host", "allow_hosts", multiple=True, help="Host of the allow ACLs (default *)."),
        click.option("--deny-host", "deny_hosts", multiple=True, help="Host of the deny ACLs (default *)."),
        click.option("--operation", "operations", multiple=True,
                     help="Read, Write, Create, Delete, Alter, Describe, ClusterAction, DescribeConfigs, "
                          "AlterConfigs, IdempotentWrite, All (repeatable; default All)."),
        click.option("--topic", "topics", multiple=True, help="Topic resource (repeatable; * = all)."),
        click.option("--group", "groups", multiple=True, help="Consumer group resource (repeatable; * = all)."),
        click.option("--cluster", is_flag=True, help="The cluster resource."),
        click.option("--transactional-id", "transactional_ids", multiple=True, help="Transactional id resource."),
        click.option("--resource-pattern-type", default="literal", show_default=True,
                     help="literal or prefixed (add); also any or match (list, remove)."),
        click.option("--producer", is_flag=True, help="Write, Describe, Create on the topics."),
        click.option("--consumer", is_flag=True, help="Read, Describe on the topics, Read on the groups."),
        click.option("--force", is_flag=True, help="Accepted for kafka-acls scripts (raftka never prompts)."),
    )):
        func = decorator(func)
    return func


def _acl_options_from(kwargs: dict, principals: tuple[str, ...] = ()):
    from raftka.cli.acls import AclOptions

    kwargs.pop("force", None)
    return AclOptions(principals=principals, **kwargs)


@acls.command(name="add")
@_acl_options
def acls_add(bootstrap: str, **kwargs) -> None:
    """Add ACLs (kafka-acls --add)."""
    from raftka.cli.acls import add_cmd

    sys.exit(add_cmd(bootstrap, _acl_options_from(kwargs)))


@acls.command(name="list")
@_acl_options
@click.option("--principal", "principals", multiple=True, help="Only the ACLs of this principal (repeatable).")
def acls_list(bootstrap: str, principals: tuple[str, ...], **kwargs) -> None:
    """List ACLs (kafka-acls --list), all of them without a resource option."""
    from raftka.cli.acls import list_cmd

    sys.exit(list_cmd(bootstrap, _acl_options_from(kwargs, principals)))


@acls.command(name="remove")
@_acl_options
def acls_remove(bootstrap: str, **kwargs) -> None:
    """Remove ACLs (kafka-acls --remove); without principals, every ACL of the resources."""
    from raftka.cli.acls import remove_cmd

    sys.exit(remove_cmd(bootstrap, _acl_options_from(kwargs)))
# --- configs ------------------------------------------------------------------
@main.group()
def configs() -> None:
    """Describe and alter topic, broker and group configs and client quotas (like kafka-configs)."""


_ENTITY_TYPE = click.option("--entity-type", required=True,
                            type=click.Choice(["topics", "brokers", "groups", "users", "clients", "ips"]),
                            help="What to configure (users, clients, ips: client quotas).")
_ENTITY_NAME = click.option("--entity-name", default=None,
                            help="The topic name, the broker id, the group id, or the user / client id / ip.")
_ENTITY_DEFAULT = click.option("--entity-default", is_flag=True,
                               help="The cluster-wide default every broker inherits, or the default user / "
                                    "client id / ip of a quota.")
_QUOTA_CLIENT = click.option("--client", default=None, help="Users only: the client id part of a quota entity.")
_QUOTA_CLIENT_DEFAULTS = click.option("--client-defaults", "client_defaults", is_flag=True,
                                      help="Users only: the default client id part of a quota entity.")


@configs.command(name="describe")
@_BOOTSTRAP
@_ENTITY_TYPE
@_ENTITY_NAME
@_ENTITY_DEFAULT
@click.option("--all", "show_all", is_flag=True, help="Every config with its source, not only the dynamic ones.")
@_QUOTA_CLIENT
@_QUOTA_CLIENT_DEFAULTS
def configs_describe(bootstrap: str, entity_type: str, entity_name: str | None, entity_default: bool,
                     show_all: bool, client: str | None, client_defaults: bool) -> None:
    """Show a topic's, a broker's or a group's dynamic configs (--all: every config and its source), or
    client quotas (users, clients, ips; without a name: every entity of that type)."""
    from raftka.cli.configs import describe
    from raftka.cli.quotas import QUOTA_ENTITY_TYPES, describe_quotas

    if entity_type in QUOTA_ENTITY_TYPES:
        sys.exit(describe_quotas(bootstrap, entity_type, entity_name, entity_default, client, client_defaults))
    sys.exit(describe(bootstrap, entity_type, entity_name, entity_default, show_all))


@configs.command(name="alter")
@_BOOTSTRAP
@_ENTITY_TYPE
@_ENTITY_NAME
@_ENTITY_DEFAULT
@click.option("--add-config", "add", default=None, metavar="K=V[,K=[V1,V2]]",
              help="Configs to set; a list value goes in square brackets.")
@click.option("--delete-config", "delete", multiple=True, metavar="K[,K]", help="Configs to remove; repeatable.")
@_QUOTA_CLIENT
@_QUOTA_CLIENT_DEFAULTS
def configs_alter(bootstrap: str, entity_type: str, entity_name: str | None, entity_default: bool,
                  add: str | None, delete: tuple[str, ...], client: str | None, client_defaults: bool) -> None:
    """Set or remove dynamic configs of a topic, a broker or the brokers' default, a group
    (e.g. a share group's share.auto.offset.reset), or the client quotas of a user, client id
    or ip.

    \b
    raftka configs alter --entity-type topics --entity-name orders --add-config retention.ms=60000
    raftka configs alter --entity-type brokers --entity-default --add-config log.retention.ms=86400000
    raftka configs alter --entity-type groups --entity-name jobs --add-config share.auto.offset.reset=earliest
    raftka configs alter --entity-type users --entity-name alice --add-config producer_byte_rate=1048576
    """
    from raftka.cli.configs import alter, parse_add_config, parse_delete_config
    from raftka.cli.quotas import QUOTA_ENTITY_TYPES, alter_quotas

    if entity_type in QUOTA_ENTITY_TYPES:
        try:
            to_set = parse_add_config(add or "")
        except ValueError as exc:
            click.echo(f"raftka configs alter: {exc}", err=True)
            sys.exit(2)
        sys.exit(alter_quotas(bootstrap, entity_type, entity_name, entity_default, client, client_defaults,
                              to_set, parse_delete_config(delete)))
    sys.exit(alter(bootstrap, entity_type, entity_name, entity_default, add, delete))
# --- metadata ------------------------------------------------------------------
@main.group()
def metadata() -> None:
    """Inspect the metadata log (the Raft quorum's records and image)."""


@metadata.command(name="dump")
@click.option("--config", "-c", "config_path", default=None, type=click.Path(exists=True, dir_okay=False),
              help="The node's server.properties (its metadata.log.dir is read).")
@click.option("--metadata-dir", default=None, type=click.Path(exists=True, file_okay=False),
              help="Or the metadata.log.dir itself (or its __cluster_metadata-0).")
@click.option("--records/--no-records", "with_records", default=True, show_default=True,
              help="List every committed record after the snapshot (else only their count).")
def metadata_dump(config_path: str | None, metadata_dir: str | None, with_records: bool) -> None:
    """Print a node's metadata log as JSON, like kafka-metadata-shell or
    kafka-dump-log --cluster-metadata-decoder.

    \b
    Reads the node's files (raft.dump, raft.journal, raft.journal.meta)
    read-only and without the directory lock, so it works on a stopped or a
    running node. Prints the commit index, the snapshot offset, each committed
    record after the snapshot (offset, Raft term, decoded fields), the entries
    not yet known to be committed, and the image built from them with its
    offset and digest (the digest `raftka quorum status --json` reports).
    Exit status 1 when the files cannot be read.
    """
    from raftka.cli.metadata import metadata_dump as run

    if (config_path is None) == (metadata_dir is None):
        raise click.UsageError("give exactly one of --config or --metadata-dir")
    sys.exit(run(config_path, metadata_dir, with_records))
# --- users (SCRAM credentials, like kafka-configs --entity-type users) -------------------
@main.group()
def users() -> None:
    """Manage SCRAM users (AlterUserScramCredentials / DescribeUserScramCredentials)."""


@users.command(name="create")
@_BOOTSTRAP
@click.option("--user", "user", required=True, help="The user name.")
@click.option("--password", default=None, help="The password (prompted for when not given).")
@click.option("--mechanism", "mechanisms", multiple=True, default=("SCRAM-SHA-256", "SCRAM-SHA-512"),
              show_default=True, type=click.Choice(["SCRAM-SHA-256", "SCRAM-SHA-512"]), help="Repeatable.")
@click.option("--iterations", default=4096, show_default=True, type=click.IntRange(4096, 16384))
def users_create(bootstrap: str, user: str, password: str | None, mechanisms: tuple[str, ...],
                 iterations: int) -> None:
    """Create (or replace) a user's SCRAM credentials; the password never leaves this process."""
    from raftka.cli.users import create

    if password is None:
        password = click.prompt("Password", hide_input=True, confirmation_prompt=True)
    sys.exit(create(bootstrap, user, password, mechanisms, iterations))


@users.command(name="delete")
@_BOOTSTRAP
@click.option("--user", "user", required=True)
@click.option("--mechanism", "mechanisms", multiple=True, default=("SCRAM-SHA-256", "SCRAM-SHA-512"),
              show_default=True, type=click.Choice(["SCRAM-SHA-256", "SCRAM-SHA-512"]))
def users_delete(bootstrap: str, user: str, mechanisms: tuple[str, ...]) -> None:
    """Delete a user's SCRAM credentials (the ones that exist among --mechanism)."""
    from raftka.cli.users import delete

    sys.exit(delete(bootstrap, user, mechanisms))


@users.command(name="list")
@_BOOTSTRAP
def users_list(bootstrap: str) -> None:
    """Every SCRAM user with its mechanisms and iteration counts (never a secret)."""
    from raftka.cli.users import list_users

    sys.exit(list_users(bootstrap))


# --- reassign ------------------------------------------------------------------
@main.group()
def reassign() -> None:
    """Move partition replicas between brokers (like kafka-reassign-partitions.sh).

    \b
    raftka reassign generate --topics-to-move-json-file topics.json --broker-list 1,2,4 > plan.txt
    raftka reassign execute --reassignment-json-file plan.json
    raftka reassign verify --reassignment-json-file plan.json
    raftka reassign cancel --reassignment-json-file plan.json
    """


_PLAN_FILE = click.option("--reassignment-json-file", "plan_file", required=True, metavar="FILE",
                          help='{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2]}]}')


@reassign.command(name="generate")
@_BOOTSTRAP
@click.option("--topics-to-move-json-file", "topics_file", required=True, metavar="FILE",
              help='{"version":1,"topics":[{"topic":"t"}]}')
@click.option("--broker-list", required=True, help="Brokers to spread the topics over, e.g. 1,2,4.")
@click.option("--disable-rack-aware", is_flag=True, help="Ignore broker.rack when placing replicas.")
def reassign_generate(bootstrap: str, topics_file: str, broker_list: str, disable_rack_aware: bool) -> None:
    """Print the current assignment and a proposed one; changes nothing."""
    from raftka.cli.reassign import generate_cmd

    sys.exit(generate_cmd(bootstrap, topics_file, broker_list, disable_rack_aware))


@reassign.command(name="execute")
@_BOOTSTRAP
@_PLAN_FILE
@click.option("--throttle", type=int, default=-1, metavar="BYTES/S",
              help="Limit the moves' replication to BYTES/S on the brokers involved (leader and follower "
                   "throttles, removed by verify once done).")
def reassign_execute(bootstrap: str, plan_file: str, throttle: int) -> None:
    """Start the reassignments of a plan; prints the current assignment for a rollback."""
    from raftka.cli.reassign import execute_cmd

    sys.exit(execute_cmd(bootstrap, plan_file, throttle))


@reassign.command(name="verify")
@_BOOTSTRAP
@_PLAN_FILE
@click.option("--preserve-throttles", is_flag=True, help="Keep the replication throttles when all moves are done.")
def reassign_verify(bootstrap: str, plan_file: str, preserve_throttles: bool) -> None:
    """Report each partition of a plan; exit 0 only when all are complete (then clear the throttles)."""
    from raftka.cli.reassign import verify_cmd

    sys.exit(verify_cmd(bootstrap, plan_file, preserve_throttles))


@reassign.command(name="cancel")
@_BOOTSTRAP
@_PLAN_FILE
@click.option("--preserve-throttles", is_flag=True, help="Keep the replication throttles.")
def reassign_cancel(bootstrap: str, plan_file: str, preserve_throttles: bool) -> None:
    """Cancel the reassignments of a plan still in progress (their replicas go back; throttles cleared)."""
    from raftka.cli.reassign import cancel_cmd

    sys.exit(cancel_cmd(bootstrap, plan_file, preserve_throttles))


# --- brokers -------------------------------------------------------------------
@main.group()
def brokers() -> None:
    """Retire brokers: move their replicas away, then unregister them."""


@brokers.command(name="drain")
@_BOOTSTRAP
@click.option("--node", type=int, required=True, help="The broker id to move every replica off.")
@click.option("--wait/--no-wait", default=True, show_default=True, help="Follow the moves until they finish.")
@click.option("--timeout", "timeout_s", type=float, default=600.0, show_default=True,
              help="Seconds to follow the moves (--wait).")
def brokers_drain(bootstrap: str, node: int, wait: bool, timeout_s: float) -> None:
    """Reassign every replica of broker NODE to the least loaded other live brokers."""
    from raftka.cli.brokers import drain_cmd

    sys.exit(drain_cmd(bootstrap, node, wait, timeout_s))


@brokers.command(name="rebalance")
@_BOOTSTRAP
@click.option("--wait/--no-wait", default=True, show_default=True, help="Follow the moves until they finish.")
@click.option("--timeout", "timeout_s", type=float, default=600.0, show_default=True,
              help="Seconds to follow the moves (--wait).")
def brokers_rebalance(bootstrap: str, wait: bool, timeout_s: float) -> None:
    """Even out the replicas per live broker with the fewest moves (e.g. onto a broker just added).

    A replica moves from the most to the least loaded broker, keeping its place in the
    replica list, until no two live brokers differ by more than one replica. Prints a
    rollback file first, like `raftka reassign execute`.
    """
    from raftka.cli.brokers import rebalance_cmd

    sys.exit(rebalance_cmd(bootstrap, wait, timeout_s))


@brokers.command(name="unregister")
@_BOOTSTRAP
@click.option("--id", "--node", "broker_id", type=int, required=True, help="The broker id to unregister.")
def brokers_unregister(bootstrap: str, broker_id: int) -> None:
    """Remove a broker's registration (kafka-cluster unregister): stop it first, drain it before.

    A broker still running registers again at its next heartbeat, as in Kafka.
    """
    from raftka.cli.brokers import unregister_cmd

    sys.exit(unregister_cmd(bootstrap, broker_id))



# --- transactions ----------------------------------------------------------------
@main.group()
def transactions() -> None:
    """List, describe and abort transactions (like kafka-transactions.sh)."""


@transactions.command(name="list")
@_BOOTSTRAP
@click.option("--state", "states", multiple=True, metavar="STATE",
              help="Only transactions in this state (Empty, Ongoing, PrepareCommit, PrepareAbort, "
                   "CompleteCommit, CompleteAbort); repeatable.")
@click.option("--producer-id", "producer_ids", multiple=True, type=int, help="Only this producer id; repeatable.")
def transactions_list(bootstrap: str, states: tuple[str, ...], producer_ids: tuple[int, ...]) -> None:
    """List the transactional ids every coordinator knows, with their state."""
    from raftka.cli.transactions import list_cmd

    sys.exit(list_cmd(bootstrap, states, producer_ids))


@transactions.command(name="describe")
@_BOOTSTRAP
@click.option("--transactional-id", required=True, help="The transactional id to describe.")
def transactions_describe(bootstrap: str, transactional_id: str) -> None:
    """Describe one transactional id: coordinator, producer id and epoch, state, partitions."""
    import time

    from raftka.cli.transactions import describe_cmd

    sys.exit(describe_cmd(bootstrap, transactional_id, int(time.time() * 1000)))


@transactions.command(name="describe-producers")
@_BOOTSTRAP
@click.option("--topic", required=True)
@click.option("--partition", required=True, type=int)
def transactions_describe_producers(bootstrap: str, topic: str, partition: int) -> None:
    """The active producers of a partition and the offset where each one's open transaction starts."""
    from raftka.cli.transactions import describe_producers_cmd

    sys.exit(describe_producers_cmd(bootstrap, topic, partition))


@transactions.command(name="abort")
@_BOOTSTRAP
@click.option("--topic", required=True, help="The partition's topic.")
@click.option("--partition", required=True, type=int, help="The partition holding the hanging transaction.")
@click.option("--start-offset", required=True, type=int,
              help="The offset where the transaction to abort starts (see describe-producers).")
def transactions_abort(bootstrap: str, topic: str, partition: int, start_offset: int) -> None:
    """Abort a hanging transaction on one partition (KIP-664).

    \b
    Finds the producer whose open transaction starts at --start-offset
    (DescribeProducers) and writes an ABORT marker for it on the partition's
    leader (WriteTxnMarkers), so the last stable offset can move past it.
    Use it only for a transaction its coordinator no longer knows.
    """
    from raftka.cli.transactions import abort_cmd

    sys.exit(abort_cmd(bootstrap, topic, partition, start_offset))


if __name__ == "__main__":
    main()
