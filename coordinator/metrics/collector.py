"""The Prometheus view of the server, built at scrape time from its live state.

Names follow kafka-lag-exporter for lag (`kafka_consumergroup_group_*`,
`kafka_partition_latest_offset`), so its Grafana dashboards and alerts work unchanged;
the rest are ours, prefixed `kcoord_`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TYPE_CHECKING, Callable, Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from .lag import GROUP_STATUSES, PARTITION_STATUSES, LagMonitor, group_status
from .requests import RequestMetrics
from .stats import STATS, Histogram

if TYPE_CHECKING:  # (what the collector reads; imported only to type it)
    from ..broker.topics import Topics
    from ..groups.runtime import CoordinatorRuntime
    from ..share.manager import SharePartitionManager

HEARTBEAT, OFFSET_COMMIT, TXN_OFFSET_COMMIT = 12, 8, 28
LAG_LABELS = ["cluster_name", "group", "topic", "partition", "member_host", "consumer_id", "client_id"]


def _histogram(
    name: str,
    doc: str,
    hist: Histogram,
    labels: list[str] | None = None,
    values: list[str] | None = None,
    family: HistogramMetricFamily | None = None,
) -> HistogramMetricFamily:
    family = family or HistogramMetricFamily(name, doc, labels=labels)
    family.add_metric(values or [], hist.cumulative(), hist.total)
    return family


@dataclass(frozen=True)
class Observed:
    """What the collector reads at scrape time, given once the coordinator is loaded."""

    cluster_id: str
    groups: CoordinatorRuntime
    topics: Topics
    shares: SharePartitionManager | None
    connections: Callable[[], int]  # open client connections now
    ready_since: Callable[[], float]  # unix time the port started listening (0: not yet)


class ServerCollector(Collector):
    def __init__(self, observed: Observed, requests: RequestMetrics, lag: LagMonitor) -> None:
        self.observed = observed
        self.requests = requests
        self.lag = lag

    def collect(self) -> Iterator[Metric]:
        yield from self._lag()
        yield from self._groups()
        yield from self._share_groups()
        yield from self._topics()
        yield from self._requests()
        yield from self._server()

    def _lag(self) -> Iterator[Metric]:
        cluster = self.observed.cluster_id
        offset = GaugeMetricFamily("kafka_consumergroup_group_offset", "Committed offset", labels=LAG_LABELS)
        lag = GaugeMetricFamily(
            "kafka_consumergroup_group_lag", "Log end offset minus committed offset", labels=LAG_LABELS
        )
        lag_s = GaugeMetricFamily(
            "kafka_consumergroup_group_lag_seconds",
            "Age of the first record not yet committed (0 without lag)",
            labels=LAG_LABELS,
        )
        status = GaugeMetricFamily(
            "kcoord_partition_lag_status",
            "Burrow's verdict per partition (1 for the current one)",
            labels=["cluster_name", "group", "topic", "partition", "status"],
        )
        per_group: dict[str, list[Any]] = {}
        for row in self.lag.rows():
            values = [cluster, row.group, row.topic, str(row.partition), row.host, row.consumer_id, row.client_id]
            offset.add_metric(values, row.committed)
            lag.add_metric(values, row.lag)
            lag_s.add_metric(values, row.lag_seconds)
            for s in PARTITION_STATUSES:
                status.add_metric([cluster, row.group, row.topic, str(row.partition), s], 1 if s == row.status else 0)
            per_group.setdefault(row.group, []).append(row)
        yield from (offset, lag, lag_s, status)
        max_lag = GaugeMetricFamily(
            "kafka_consumergroup_group_max_lag", "Largest partition lag", labels=["cluster_name", "group"]
        )
        max_lag_s = GaugeMetricFamily(
            "kafka_consumergroup_group_max_lag_seconds",
            "Largest partition lag in seconds",
            labels=["cluster_name", "group"],
        )
        sum_lag = GaugeMetricFamily(
            "kafka_consumergroup_group_sum_lag", "Lag summed over partitions", labels=["cluster_name", "group"]
        )
        g_status = GaugeMetricFamily(
            "kcoord_group_lag_status",
            "Burrow's verdict per group (1 for the current one)",
            labels=["cluster_name", "group", "status"],
        )
        for group, rows in per_group.items():
            max_lag.add_metric([cluster, group], max(r.lag for r in rows))
            max_lag_s.add_metric([cluster, group], max(r.lag_seconds for r in rows))
            sum_lag.add_metric([cluster, group], sum(r.lag for r in rows))
            verdict = group_status([r.status for r in rows])
            for s in GROUP_STATUSES:
                g_status.add_metric([cluster, group, s], 1 if s == verdict else 0)
        yield from (max_lag, max_lag_s, sum_lag, g_status)

    def _groups(self) -> Iterator[Metric]:
        state = GaugeMetricFamily(
            "kcoord_group_state", "1 for the group's current state", labels=["group", "type", "state"]
        )
        members = GaugeMetricFamily("kcoord_group_members", "Members of the group", labels=["group"])
        generation = GaugeMetricFamily(
            "kcoord_group_generation", "Generation (classic) or group epoch", labels=["group"]
        )
        count = 0
        for group in self.observed.groups.all_groups():
            count += 1
            state.add_metric([group.group_id, group.group_type, group.state_name], 1)
            members.add_metric([group.group_id], len(getattr(group, "members", ())))
            generation.add_metric([group.group_id], getattr(group, "generation_id", getattr(group, "group_epoch", 0)))
        yield from (state, members, generation)
        yield GaugeMetricFamily("kcoord_groups", "Groups this coordinator holds", value=count)
        yield CounterMetricFamily(
            "kcoord_rebalances", "Rebalances completed (generations with members)", value=STATS.rebalances
        )
        yield _histogram(
            "kcoord_rebalance_duration_seconds",
            "From the start of a join phase to its new generation",
            STATS.rebalance_seconds,
        )
        yield CounterMetricFamily(
            "kcoord_expired_members", "Members removed when their session expired", value=STATS.expired_members
        )
        counts = self.requests.counts
        yield CounterMetricFamily(
            "kcoord_heartbeats", "Heartbeat requests", value=sum(n for (k, _), n in counts.items() if k == HEARTBEAT)
        )
        yield CounterMetricFamily(
            "kcoord_offset_commits",
            "OffsetCommit and TxnOffsetCommit requests",
            value=sum(n for (k, _), n in counts.items() if k in (OFFSET_COMMIT, TXN_OFFSET_COMMIT)),
        )

    def _share_groups(self) -> Iterator[Metric]:
        """KIP-932 share-partitions: start offset, lag (records not yet Acknowledged or
        Archived, as DescribeShareGroupOffsets v1 reports it) and records in flight (Acquired)."""
        shares = self.observed.shares
        if shares is None:
            return
        cluster = self.observed.cluster_id
        labels = ["cluster_name", "group", "topic", "partition"]
        start = GaugeMetricFamily("kcoord_share_partition_start_offset", "Share-partition start offset", labels=labels)
        lag = GaugeMetricFamily(
            "kcoord_share_group_lag",
            "Records from the share-partition start offset to the high watermark not yet acknowledged or archived",
            labels=labels,
        )
        in_flight = GaugeMetricFamily(
            "kcoord_share_group_in_flight", "Records acquired by a consumer, under an acquisition lock", labels=labels
        )
        sum_lag = GaugeMetricFamily(
            "kcoord_share_group_sum_lag",
            "Share-group lag summed over its share-partitions",
            labels=["cluster_name", "group"],
        )
        sums: dict[str, int] = {}
        names = self.observed.topics.by_id
        for key in shares.keys():
            group, topic_id, partition = key
            info = names.get(topic_id)
            offset = shares.start_of(key)
            if info is None or offset is None:
                continue
            values = [cluster, group, info.name, str(partition)]
            behind = shares.lag(key, offset)
            sp = shares.partitions.get(key)
            start.add_metric(values, offset)
            lag.add_metric(values, behind)
            in_flight.add_metric(values, sp.acquired if sp is not None else 0)
            sums[group] = sums.get(group, 0) + max(behind, 0)
        for group, total in sums.items():
            sum_lag.add_metric([cluster, group], total)
        yield from (start, lag, in_flight, sum_lag)
        for name, what, counts in (
            (
                "kcoord_share_group_dead_letters",
                "Records written to the share group's dead-letter topic (KIP-1191)",
                shares.dead_letters_written,
            ),
            (
                "kcoord_share_group_dead_letter_failures",
                "Dead-letter writes that failed (the records were archived regardless)",
                shares.dead_letter_failures,
            ),
        ):
            counter = CounterMetricFamily(name, what, labels=["cluster_name", "group"])
            for group, n in sorted(counts.items()):
                counter.add_metric([cluster, group], n)
            yield counter
        yield GaugeMetricFamily("kcoord_share_sessions", "Open share sessions (ShareFetch)", value=len(shares.sessions))

    def _topics(self) -> Iterator[Metric]:
        cluster = self.observed.cluster_id
        latest = GaugeMetricFamily(
            "kafka_partition_latest_offset", "Log end offset", labels=["cluster_name", "topic", "partition"]
        )
        earliest = GaugeMetricFamily(
            "kafka_partition_earliest_offset", "Log start offset", labels=["cluster_name", "topic", "partition"]
        )
        for info in list(self.observed.topics.topics.values()):
            if info.internal:
                continue
            for p, plog in enumerate(info.logs):
                latest.add_metric([cluster, info.name, str(p)], plog.log_end_offset)
                earliest.add_metric([cluster, info.name, str(p)], plog.log_start_offset)
        yield from (latest, earliest)
        yield _histogram(
            "kcoord_log_append_seconds", "Writing an append to the log's segment file", STATS.log_append_seconds
        )
        yield _histogram(
            "kcoord_log_sync_seconds", "A sync round: fsync of every log written since the last", STATS.log_sync_seconds
        )

    def _requests(self) -> Iterator[Metric]:
        r = self.requests
        total = CounterMetricFamily("kcoord_requests", "Requests answered", labels=["request", "api_key", "version"])
        for (key, version), n in sorted(r.counts.items()):
            total.add_metric([r.name(key), str(key), str(version)], n)
        errors = CounterMetricFamily(
            "kcoord_request_errors",
            "Answers whose top-level error code is not 0",
            labels=["request", "api_key", "error_code"],
        )
        for (key, code), n in sorted(r.errors.items()):
            errors.add_metric([r.name(key), str(key), str(code)], n)
        latency = HistogramMetricFamily(
            "kcoord_request_duration_seconds", "From reading a request to its answer", labels=["request", "api_key"]
        )
        for key, hist in sorted(r.latency.items()):
            _histogram("", "", hist, values=[r.name(key), str(key)], family=latency)
        yield from (total, errors, latency)

    def _server(self) -> Iterator[Metric]:
        yield GaugeMetricFamily("kcoord_connections", "Open client connections", value=self.observed.connections())
        yield GaugeMetricFamily(
            "kcoord_recovery_seconds", "Loading the data dir at startup", value=STATS.recovery_seconds
        )
        yield GaugeMetricFamily(
            "kcoord_up_since_seconds",
            "Unix time the server became ready",
            value=self.observed.ready_since(),
        )
