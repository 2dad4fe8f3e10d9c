"""DescribeLogDirs (35), answered as Kafka's ReplicaManager.describeLogDirs: the broker's log
dirs, one here (the data dir), each with its size and free space and, per topic, the partitions
this broker holds a replica of, with their sizes on disk (`kafka-log-dirs`,
`kafka-reassign-partitions`). The data is stored once: with `--brokers N` every broker reports
the one data dir, and in it the partitions it is a replica of.

AlterReplicaLogDirs (34), as Kafka's ReplicaManager.alterReplicaLogDirs answers it on a broker
with one log dir: a replica is already in the only dir there is, so a move to it is done at
once (NONE); another path is LOG_DIR_NOT_FOUND, an unknown partition UNKNOWN_TOPIC_OR_PARTITION,
a partition this broker holds no replica of REPLICA_NOT_AVAILABLE.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

from kio.schema.errors import ErrorCode as E

from ..apis import Registry, RequestContext, errors_by_topic

ALTER_REPLICA_LOG_DIRS, DESCRIBE_LOG_DIRS = 34, 35


def alter_log_dirs_answer(ctx: RequestContext, by_topic: dict[str, dict[int, E]]) -> Any:
    """AlterReplicaLogDirs' answer: each partition's error, by topic."""
    topics = ((name, rows.items()) for name, rows in by_topic.items())
    return ctx.response(
        throttle_time=0,
        results=errors_by_topic(
            ctx, "AlterReplicaLogDirTopicResult", "AlterReplicaLogDirPartitionResult", topics, name="topic_name"
        ),
    )


class LogDirApis:
    def __init__(self, topics: Any, topology: Any, data_dir: Path) -> None:
        self.topics = topics  # coordinator.broker.topics.Topics
        self.topology = topology  # coordinator.topology.Topology
        self.log_dir = os.path.abspath(data_dir)  # (Kafka reports the absolute path)

    def register(self, registry: Registry) -> None:
        registry.add(ALTER_REPLICA_LOG_DIRS, range(0, 3), self.alter_replica_log_dirs)
        registry.add(DESCRIBE_LOG_DIRS, range(0, 6), self.describe_log_dirs)

    def alter_replica_log_dirs(self, ctx: RequestContext, req: Any) -> Any:
        node = ctx.connection.listener.node_id
        by_topic: dict[str, dict[int, E]] = {}  # (a partition named twice: its last dir's answer, as Kafka's map)
        for d in req.dirs:
            here = os.path.abspath(d.path) == self.log_dir
            for t in d.topics:
                info = self.topics.topics.get(t.name)
                rows = by_topic.setdefault(t.name, {})
                for p in t.partitions:
                    if not here:
                        rows[p] = E.log_dir_not_found
                    elif info is None or not 0 <= p < info.partitions:
                        rows[p] = E.unknown_topic_or_partition
                    elif node not in self.topology.state(t.name, p).replicas:
                        rows[p] = E.replica_not_available
                    else:
                        rows[p] = E.none
        return alter_log_dirs_answer(ctx, by_topic)

    def describe_log_dirs(self, ctx: RequestContext, req: Any) -> Any:
        node = ctx.connection.listener.node_id
        wanted: dict[str, set[int]] | None = None
        if req.topics is not None:  # (null: every partition)
            wanted = {}
            for t in req.topics:
                wanted.setdefault(t.topic, set()).update(t.partitions)
        topics = []
        for name in sorted(self.topics.topics):
            info = self.topics.topics[name]
            if wanted is not None and name not in wanted:
                continue
            rows = []
            for p, plog in enumerate(info.logs):
                if wanted is not None and p not in wanted[name]:
                    continue
                if node not in self.topology.state(name, p).replicas:
                    continue
                rows.append(
                    ctx.nested(
                        "DescribeLogDirsPartition",
                        partition_index=p,
                        partition_size=plog.size_bytes,
                        offset_lag=0,  # (a replica here is never behind: the data is stored once)
                        is_future_key=False,
                    )
                )
            if rows:  # (a topic without a partition here is left out, as Kafka)
                topics.append(ctx.nested("DescribeLogDirsTopic", name=name, partitions=tuple(rows)))
        try:
            usage = shutil.disk_usage(self.log_dir)
            error, total, usable = E.none, usage.total, usage.free
        except OSError:  # (the dir is gone: Kafka's offline log dir)
            error, total, usable, topics = E.kafka_storage_error, -1, -1, []
        result = ctx.nested(
            "DescribeLogDirsResult",
            error_code=error,
            log_dir=self.log_dir,
            topics=tuple(topics),
            total_bytes=total,
            usable_bytes=usable,
            is_cordoned=False,
        )
        return ctx.response(throttle_time=0, error_code=E.none, results=(result,))
