"""Broker, controller and quorum metrics, named as the Prometheus JMX exporter renders Kafka's MBeans.

What this module owns: the hot-path counters (plain dict increments, no locks), the
request-time reservoirs, and `families(snapshot)`, the pure function that turns a
`Snapshot` of the node's state into Prometheus metric families. The HTTP endpoint and the
snapshot taken from the live node are in `broker/metrics_http.py`.

Naming. Kafka's dashboards read what the JMX exporter makes of the MBeans with the rules
Strimzi and Confluent ship (`lowercaseOutputName: true`):

    kafka.server<type=BrokerTopicMetrics, name=MessagesInPerSec, topic=T><>Count
        -> kafka_server_brokertopicmetrics_messagesin_total{topic="T"}
    kafka.server<type=ReplicaManager, name=UnderReplicatedPartitions><>Value
        -> kafka_server_replicamanager_underreplicatedpartitions
    kafka.network<type=RequestMetrics, name=TotalTimeMs, request=Produce><>99thPercentile
        -> kafka_network_requestmetrics_totaltimems{request="Produce",quantile="0.99"}

A `...PerSec` meter becomes a counter (`_total`); Prometheus computes the rate. A metric
Kafka reports both per topic and for the whole broker is one family here: the sample
without a `topic` label is the broker's total, as the exporter renders the two MBeans.
Consumer lag uses kafka_exporter's names (`kafka_consumergroup_lag`), which Kafka
dashboards pair with the broker's. raftka's own metrics start with `raftka_`.
docs/metrics.md lists every metric.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.samples import Sample

# Yammer's histograms (Kafka's request times) keep an exponentially decaying reservoir of
# 1028 samples; a sliding window of the last 1028 is the same size and simpler.
RESERVOIR_SIZE = 1028
# The percentiles a Yammer histogram exposes, as the exporter labels them.
QUANTILES = (0.5, 0.75, 0.95, 0.98, 0.99, 0.999)
# An event-loop stall longer than this is counted in raftka_eventloop_stalls_total.
STALL_THRESHOLD_S = 0.1


def request_name(api_key_name: str) -> str:
    """Kafka's request name for an ApiKey enum name: PRODUCE -> Produce, API_VERSIONS -> ApiVersions."""
    return "".join(part.capitalize() for part in api_key_name.split("_"))


@dataclass
class RequestTimes:
    """Per request name: how many were answered, and the last RESERVOIR_SIZE total times (ms)."""

    count: int = 0
    times_ms: deque = field(default_factory=lambda: deque(maxlen=RESERVOIR_SIZE))

    def record(self, ms: float) -> None:
        self.count += 1
        self.times_ms.append(ms)

    def quantiles(self) -> list[tuple[float, float]]:
        """(quantile, value) as Yammer computes them over the reservoir; empty: all 0."""
        ordered = sorted(self.times_ms)
        if not ordered:
            return [(q, 0.0) for q in QUANTILES]
        out = []
        for q in QUANTILES:
            # Yammer's Snapshot.getValue: the value at position q * (n + 1), interpolated.
            pos = q * (len(ordered) + 1)
            if pos < 1:
                value = ordered[0]
            elif pos >= len(ordered):
                value = ordered[-1]
            else:
                lower = ordered[int(pos) - 1]
                upper = ordered[int(pos)]
                value = lower + (pos - int(pos)) * (upper - lower)
            out.append((q, float(value)))
        return out


class BrokerMetrics:
    """The counters the request path and the replica manager increment (dict adds only)."""

    def __init__(self) -> None:
        self.messages_in: dict[str, int] = {}
        self.bytes_in: dict[str, int] = {}
        self.bytes_out: dict[str, int] = {}
        self.failed_produce: dict[str, int] = {}
        self.failed_fetch: dict[str, int] = {}
        self.replication_bytes_out = 0
        self.replication_bytes_in = 0
        self.isr_shrinks = 0
        self.isr_expands = 0
        self.requests: dict[tuple[str, int], int] = {}  # (request name, version) -> count
        self.request_times: dict[str, RequestTimes] = {}
        self.loop_lag_s = 0.0  # the latest measurement
        self.loop_lag_max: deque = deque(maxlen=60)  # (second, worst lag in it)
        self.loop_stalls = 0
        self.loop_stall_seconds = 0.0

    # --- the request path ---------------------------------------------------------------

    def produced(self, topic: str, messages: int, nbytes: int) -> None:
        self.messages_in[topic] = self.messages_in.get(topic, 0) + messages
        self.bytes_in[topic] = self.bytes_in.get(topic, 0) + nbytes

    def produce_failed(self, topic: str) -> None:
        self.failed_produce[topic] = self.failed_produce.get(topic, 0) + 1

    def fetched(self, topic: str, nbytes: int, *, follower: bool) -> None:
        if follower:
            self.replication_bytes_out += nbytes
        else:
            self.bytes_out[topic] = self.bytes_out.get(topic, 0) + nbytes

    def fetch_failed(self, topic: str) -> None:
        self.failed_fetch[topic] = self.failed_fetch.get(topic, 0) + 1

    def request_done(self, name: str, version: int, seconds: float) -> None:
        key = (name, version)
        self.requests[key] = self.requests.get(key, 0) + 1
        times = self.request_times.get(name)
        if times is None:
            times = self.request_times[name] = RequestTimes()
        times.record(seconds * 1000.0)

    # --- the loop monitor ---------------------------------------------------------------

    def loop_lag(self, lag_s: float, now_s: float) -> None:
        """One event-loop lag measurement (how late a timer woke up)."""
        self.loop_lag_s = lag_s
        second = int(now_s)
        if self.loop_lag_max and self.loop_lag_max[-1][0] == second:
            if lag_s > self.loop_lag_max[-1][1]:
                self.loop_lag_max[-1] = (second, lag_s)
        else:
            self.loop_lag_max.append((second, lag_s))
        if lag_s >= STALL_THRESHOLD_S:
            self.loop_stalls += 1
            self.loop_stall_seconds += lag_s


@dataclass(frozen=True)
class PartitionStat:
    topic: str
    partition: int
    is_leader: bool
    replicas: int
    isr: int
    min_isr: int
    size_bytes: int
    log_start_offset: int
    log_end_offset: int
    segments: int


@dataclass(frozen=True)
class QuorumStat:
    role: str  # leader / follower / candidate / observer (a broker-only node)
    term: int
    commit_index: int
    applied_offset: int
    leader_id: int  # -1 unknown
    observers: int = 0  # on the Raft leader: broker-only nodes it sends the log to


@dataclass(frozen=True)
class GroupOffset:
    group: str
    topic: str
    partition: int
    committed: int
    end_offset: int | None  # the partition's high watermark when known


@dataclass(frozen=True)
class Snapshot:
    """The node's state at one scrape, read on the event loop (see metrics_http.take_snapshot)."""

    node_id: int
    partitions: list[PartitionStat]
    active_controller: bool
    offline_partitions: int  # counted by the active controller only (Kafka's rule)
    global_partitions: int
    global_topics: int
    fenced_brokers: int
    active_brokers: int
    quorum: QuorumStat | None
    groups: list[GroupOffset]
    groups_by_state: dict[str, int]
    open_connections: int
    # KIP-73 replication quotas (broker/replication/replication_quota.py): bytes/s of the throttled partitions.
    leader_replication_byte_rate: float = 0.0
    follower_replication_byte_rate: float = 0.0
    # Client quotas (broker/client_quotas.py): Kafka's type ("Produce", "Fetch", "Request",
    # "ControllerMutation") -> (user, client-id, rate, throttle-time ms) per sensor.
    client_quotas: dict[str, list[tuple[str, str, float, float]]] = field(default_factory=dict)
    # controller_mutation_rate's token buckets: (user, client-id, tokens left) per sensor.
    mutation_tokens: list[tuple[str, str, float]] = field(default_factory=list)


def _counter(name: str, doc: str, total: int | float, by_topic: dict[str, int] | None = None) -> Metric:
    """A counter whose unlabelled sample is the broker total and the others are per topic."""
    family = CounterMetricFamily(name, doc)
    family.samples.append(Sample(name + "_total", {}, float(total), None, None))
    for topic, value in sorted((by_topic or {}).items()):
        family.samples.append(Sample(name + "_total", {"topic": topic}, float(value), None, None))
    return family


def _gauge(name: str, doc: str, value: float, labels: dict[str, str] | None = None) -> Metric:
    family = GaugeMetricFamily(name, doc, labels=list(labels or {}))
    family.add_metric(list((labels or {}).values()), float(value))
    return family


# A client quota type's rate metric (Kafka's name) and what it measures; byte-rate otherwise.
_QUOTA_RATES = {"Request": ("request-time", "Percent of one handler thread's time"),
                "ControllerMutation": ("mutation-rate", "Partition mutations/s")}


def families(metrics: BrokerMetrics, snap: Snapshot) -> list[Metric]:
    """Every metric family for one scrape (pure: reads `metrics` and `snap` only)."""
    out: list[Metric] = []
    btm = "kafka_server_brokertopicmetrics_"
    out.append(_counter(btm + "messagesin", "Records appended by this broker as leader (MessagesInPerSec).",
                        sum(metrics.messages_in.values()), metrics.messages_in))
    out.append(_counter(btm + "bytesin", "Bytes of record batches produced to this broker (BytesInPerSec).",
                        sum(metrics.bytes_in.values()), metrics.bytes_in))
    out.append(_counter(btm + "bytesout", "Record bytes sent to consumers (BytesOutPerSec).",
                        sum(metrics.bytes_out.values()), metrics.bytes_out))
    out.append(_counter(btm + "replicationbytesout", "Record bytes sent to followers (ReplicationBytesOutPerSec).",
                        metrics.replication_bytes_out))
    out.append(_counter(btm + "replicationbytesin", "Record bytes fetched from leaders (ReplicationBytesInPerSec).",
                        metrics.replication_bytes_in))
    out.append(_counter(btm + "failedproducerequests", "Produce partitions answered with an error.",
                        sum(metrics.failed_produce.values()), metrics.failed_produce))
    out.append(_counter(btm + "failedfetchrequests", "Fetch partitions answered with an error.",
                        sum(metrics.failed_fetch.values()), metrics.failed_fetch))

    rm = "kafka_server_replicamanager_"
    leaders = [p for p in snap.partitions if p.is_leader]
    out.append(_gauge(rm + "partitioncount", "Partitions hosted by this broker.", len(snap.partitions)))
    out.append(_gauge(rm + "leadercount", "Partitions this broker leads.", len(leaders)))
    out.append(_gauge(rm + "underreplicatedpartitions", "Led partitions whose ISR is smaller than the replica set.",
                      sum(1 for p in leaders if p.isr < p.replicas)))
    out.append(_gauge(rm + "underminisrpartitioncount", "Led partitions whose ISR is below min.insync.replicas.",
                      sum(1 for p in leaders if p.isr < p.min_isr)))
    out.append(_gauge(rm + "atminisrpartitioncount", "Led partitions whose ISR is exactly min.insync.replicas.",
                      sum(1 for p in leaders if p.isr == p.min_isr)))
    out.append(_counter(rm + "isrshrinks", "ISR shrinks this broker asked the controller for (IsrShrinksPerSec).",
                        metrics.isr_shrinks))
    out.append(_counter(rm + "isrexpands", "ISR expansions this broker asked the controller for (IsrExpandsPerSec).",
                        metrics.isr_expands))

    kc = "kafka_controller_kafkacontroller_"
    out.append(_gauge(kc + "activecontrollercount", "1 on the active controller, else 0.",
                      1 if snap.active_controller else 0))
    controller_only = snap.active_controller
    out.append(_gauge(kc + "offlinepartitionscount", "Partitions without a live leader (active controller only).",
                      snap.offline_partitions if controller_only else 0))
    out.append(_gauge(kc + "globalpartitioncount", "Partitions in the cluster (active controller only).",
                      snap.global_partitions if controller_only else 0))
    out.append(_gauge(kc + "globaltopiccount", "Topics in the cluster (active controller only).",
                      snap.global_topics if controller_only else 0))
    out.append(_gauge(kc + "fencedbrokercount", "Registered brokers that are fenced (active controller only).",
                      snap.fenced_brokers if controller_only else 0))
    out.append(_gauge(kc + "activebrokercount", "Registered brokers that are not fenced (active controller only).",
                      snap.active_brokers if controller_only else 0))

    size = GaugeMetricFamily("kafka_log_log_size", "Bytes of a hosted partition's log.",
                             labels=["topic", "partition"])
    start = GaugeMetricFamily("kafka_log_log_logstartoffset", "A hosted partition's log start offset.",
                              labels=["topic", "partition"])
    end = GaugeMetricFamily("kafka_log_log_logendoffset", "A hosted partition's log end offset.",
                            labels=["topic", "partition"])
    segments = GaugeMetricFamily("kafka_log_log_numlogsegments", "Segments of a hosted partition's log.",
                                 labels=["topic", "partition"])
    urp = GaugeMetricFamily("kafka_cluster_partition_underreplicated",
                            "1 when this broker leads the partition and its ISR is short.",
                            labels=["topic", "partition"])
    for p in sorted(snap.partitions, key=lambda p: (p.topic, p.partition)):
        labels = [p.topic, str(p.partition)]
        size.add_metric(labels, p.size_bytes)
        start.add_metric(labels, p.log_start_offset)
        end.add_metric(labels, p.log_end_offset)
        segments.add_metric(labels, p.segments)
        if p.is_leader:
            urp.add_metric(labels, 1 if p.isr < p.replicas else 0)
    out += [size, start, end, segments, urp]

    rqm = "kafka_network_requestmetrics_"
    requests = CounterMetricFamily(rqm + "requests", "Requests answered, by request name and version.",
                                   labels=["request", "version"])
    for (name, version), count in sorted(metrics.requests.items()):
        requests.add_metric([name, str(version)], count)
    total_time = GaugeMetricFamily(rqm + "totaltimems",
                                   "Request total time in ms (receive to response ready), percentiles.",
                                   labels=["request", "quantile"])
    time_count = GaugeMetricFamily(rqm + "totaltimems_count", "Requests timed, by request name.",
                                   labels=["request"])
    for name, times in sorted(metrics.request_times.items()):
        for q, value in times.quantiles():
            total_time.add_metric([name, _quantile_label(q)], value)
        time_count.add_metric([name], times.count)
    out += [requests, total_time, time_count]
    out.append(_gauge("kafka_server_socketservermetrics_connection_count", "Open client connections.",
                      snap.open_connections))
    out.append(_gauge("kafka_server_leaderreplication_byte_rate",
                      "Bytes/s served to followers of throttled partitions (LeaderReplication byte-rate).",
                      snap.leader_replication_byte_rate))
    out.append(_gauge("kafka_server_followerreplication_byte_rate",
                      "Bytes/s fetched for throttled partitions (FollowerReplication byte-rate).",
                      snap.follower_replication_byte_rate))
    for kind, sensors in sorted(snap.client_quotas.items()):
        prefix = f"kafka_server_{kind.lower()}_"
        metric, what = _QUOTA_RATES.get(kind, ("byte-rate", "Bytes/s"))
        rate = GaugeMetricFamily(prefix + metric.replace("-", "_"), f"{what} of a client quota's sensor "
                                 f"({kind} {metric}).", labels=["user", "client_id"])
        throttle = GaugeMetricFamily(prefix + "throttle_time", f"Mean throttle time (ms) of a client quota's "
                                     f"throttled responses over the quota windows ({kind} throttle-time).",
                                     labels=["user", "client_id"])
        for user, client_id, byte_rate, throttle_ms in sensors:
            rate.add_metric([user, client_id], byte_rate)
            throttle.add_metric([user, client_id], throttle_ms)
        out += [rate, throttle]
    if snap.mutation_tokens:
        tokens = GaugeMetricFamily("kafka_server_controllermutation_tokens", "Tokens left in a controller "
                                   "mutation quota's bucket (ControllerMutation tokens).", labels=["user", "client_id"])
        for user, client_id, left in snap.mutation_tokens:
            tokens.add_metric([user, client_id], left)
        out.append(tokens)

    lag = GaugeMetricFamily("kafka_consumergroup_lag", "High watermark minus the committed offset.",
                            labels=["consumergroup", "topic", "partition"])
    current = GaugeMetricFamily("kafka_consumergroup_current_offset", "The group's committed offset.",
                                labels=["consumergroup", "topic", "partition"])
    for g in sorted(snap.groups, key=lambda g: (g.group, g.topic, g.partition)):
        labels = [g.group, g.topic, str(g.partition)]
        current.add_metric(labels, g.committed)
        if g.end_offset is not None:
            lag.add_metric(labels, max(0, g.end_offset - g.committed))
    states = GaugeMetricFamily("kafka_coordinator_group_groupmetadatamanager_numgroups",
                               "Groups this broker coordinates, by state.", labels=["state"])
    for state, count in sorted(snap.groups_by_state.items()):
        states.add_metric([state], count)
    out += [lag, current, states]

    if snap.quorum is not None:
        q = snap.quorum
        role = GaugeMetricFamily("raftka_quorum_role", "1 for this node's current Raft role (observer: a broker-only node).", labels=["role"])
        for name in ("leader", "follower", "candidate", "observer"):
            role.add_metric([name], 1 if q.role == name else 0)
        out.append(role)
        out.append(_gauge("raftka_quorum_term", "The voter's current Raft term.", q.term))
        out.append(_gauge("raftka_quorum_commit_index", "The highest metadata offset known committed.",
                          q.commit_index))
        out.append(_gauge("raftka_quorum_applied_offset", "The highest metadata offset applied to the image.",
                          q.applied_offset))
        out.append(_gauge("raftka_quorum_commit_lag", "Committed metadata records not yet applied here.",
                          max(0, q.commit_index - q.applied_offset)))
        out.append(_gauge("raftka_quorum_leader_id", "The Raft leader's node id (-1 unknown).", q.leader_id))
        out.append(_gauge("raftka_quorum_observers", "Broker-only nodes the Raft leader sends the metadata log to "
                                                     "(0 on other nodes).", q.observers))

    worst = max((lag_s for _, lag_s in metrics.loop_lag_max), default=0.0)
    out.append(_gauge("raftka_eventloop_lag_seconds", "How late the last 0.1 s timer woke (event-loop lag).",
                      metrics.loop_lag_s))
    out.append(_gauge("raftka_eventloop_lag_max_seconds", "The worst event-loop lag of the last 60 seconds.", worst))
    out.append(_counter("raftka_eventloop_stalls", f"Event-loop lags of {STALL_THRESHOLD_S} s or more.",
                        metrics.loop_stalls))
    out.append(_counter("raftka_eventloop_stall_seconds", "Seconds lost in those stalls.",
                        metrics.loop_stall_seconds))
    return out


def _quantile_label(q: float) -> str:
    """The exporter's rendering of `NNthPercentile`: 50 -> 0.50, 99 -> 0.99, 999 -> 0.999."""
    return {0.5: "0.50", 0.75: "0.75", 0.95: "0.95", 0.98: "0.98", 0.99: "0.99", 0.999: "0.999"}[q]


def render(fams: list[Metric]) -> bytes:
    """The text exposition format of `fams` (what Prometheus scrapes)."""
    from prometheus_client.exposition import generate_latest

    class _Fixed:
        def collect(self):
            return fams

    return generate_latest(_Fixed())  # type: ignore[arg-type]
