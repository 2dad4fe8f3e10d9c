"""The differential suite: a real Apache Kafka 4.4 node as the oracle. The same scenarios run
against Kafka and against this server (in this process), their answers are compared field by
field after masking what must differ (tests/support/kafka_differences.py), and every
difference is either listed there with its reason (docs/kafka-differences.md) or fails the
test. One Kafka node for the whole module, which is why the suite is one module: pytest-xdist
runs a module in one worker (--dist loadfile), and tests/conftest.py schedules this one first.

Needs Java 17 and `make oracle` (Kafka's jars from Maven); skipped, saying why, without them."""

from __future__ import annotations

import dataclasses
import json
import logging
import re
import struct
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace
from typing import Any, TypeVar

import pytest

from protocol.consumer_protocol import write_assignment
from protocol.record_batch import (
    ATTRIBUTES_OFFSET,
    CONTROL_MASK,
    CRC_OFFSET,
    GZIP,
    ZSTD,
    Record,
    build_batch,
    build_batch_from,
    crc32c,
)
from tests.support import kafka_oracle, streams_assignor_cases
from tests.support.kafka_differences import Observations, plain
from tests.support.oracle_wire import NAMES, Conn, api_ranges, common_versions
from tests.support.process import InProcessServer

T = TypeVar("T")
UNAVAILABLE = kafka_oracle.unavailable()
pytestmark = [pytest.mark.slow, pytest.mark.skipif(UNAVAILABLE is not None, reason=UNAVAILABLE or "")]


@pytest.fixture(scope="module")
def oracle(tmp_path_factory):
    """Kafka 4.4, the tool launcher and this server, started side by side."""
    base = tmp_path_factory.mktemp("oracle")
    nodes: list[kafka_oracle.KafkaNode] = []
    errors: list[BaseException] = []

    def start() -> None:
        try:
            nodes.append(kafka_oracle.start_node(base))
        except BaseException as e:  # (re-raised in the test's thread below)
            errors.append(e)

    started = threading.Thread(target=start, name="kafka-start", daemon=True)
    started.start()
    tools = ours = None
    try:
        tools = kafka_oracle.Tools(base / "tools.log")
        ours = InProcessServer(base / "ours", ["--group-initial-rebalance-delay-ms", "0"])
        ours.start()
        started.join()
        if errors:
            raise errors[0]
        kafka = nodes[0]
        kafka_ranges, kafka_versions = api_ranges(kafka.port)
        our_ranges, our_versions = api_ranges(ours.port)
        yield SimpleNamespace(
            kafka=kafka,
            ours=ours,
            tools=tools,
            ranges=(kafka_ranges, our_ranges),
            api_versions=(kafka_versions, our_versions),
        )
    finally:
        started.join()
        if tools is not None:
            tools.close()
        if ours is not None:
            ours.close()
        for node in nodes:
            node.close()


def warm_up(port: int) -> None:
    """Find a group and a transaction coordinator until both are ready: Kafka creates
    __consumer_offsets and __transaction_state at their first use and answers
    COORDINATOR_NOT_AVAILABLE / COORDINATOR_LOAD_IN_PROGRESS meanwhile, which would make every
    later answer depend on how far it got (test_tools_before_first_use looks before this)."""
    conn = Conn(port)
    try:
        for key_type in (0, 1):
            for _ in range(300):
                body = conn.call(10, 4, {"key_type": key_type, "coordinator_keys": ["oracle-warm-up"]})
                if body.coordinators[0].error_code == 0:
                    break
                time.sleep(0.1)
            else:
                raise AssertionError(f"no coordinator of key type {key_type} on port {port}")
        # InitProducerId answers COORDINATOR_LOAD_IN_PROGRESS until the transaction log is loaded.
        for _ in range(300):
            body = conn.call(
                22,
                5,
                {
                    "transactional_id": "oracle-warm-up",
                    "transaction_timeout": 60000,
                    "producer_id": -1,
                    "producer_epoch": -1,
                },
            )
            if body.error_code == 0:
                break
            time.sleep(0.1)
    finally:
        conn.close()


@pytest.fixture(scope="module")
def warm(oracle):
    """The oracle once both brokers' group and transaction coordinators are ready."""
    for server in both(oracle):
        warm_up(server.port)
    return oracle


def wait_for_partitions(port: int, topic: str, count: int) -> None:
    """Kafka's CreateTopics and CreatePartitions answer once its controller committed them; its
    broker serves the topic a moment later. Tools run next would see it half made."""
    conn = Conn(port)
    try:
        for _ in range(300):
            body = conn.call(3, 12, {"topics": [{"name": topic}], "allow_auto_topic_creation": False})
            if body.topics[0].error_code == 0 and len(body.topics[0].partitions) == count:
                return
            time.sleep(0.05)
        raise AssertionError(f"{topic} never had {count} partitions on port {port}")
    finally:
        conn.close()


def both(oracle) -> list[Any]:
    return [oracle.kafka, oracle.ours]


def on_both(scenario: Callable[[Any], T], pair: list[Any]) -> list[T]:
    """`scenario` run for Kafka's side and for ours at the same time, its results in that
    order. A scenario mostly waits on its broker (a client's poll, heartbeats until an
    assignment, a round trip per record): the two brokers' waits then overlap instead of
    adding up. Each side's connection is used by its own thread only."""
    with ThreadPoolExecutor(2, thread_name_prefix="oracle-side") as pool:
        futures = [pool.submit(scenario, x) for x in pair]
        return [f.result() for f in futures]


# ---------------------------------------------------------------------------------------------
# Tools: output text, with what must differ masked

# Kafka's ids as tools print them: 16 bytes in base64 without padding (topic and cluster ids
# url-safe, librdkafka's KIP-848 member ids standard).
TOPIC_ID = re.compile(r"(?<![A-Za-z0-9_+/-])[A-Za-z0-9_+/-]{22}(?![A-Za-z0-9_+/-])")


def tool_text(text: str, server) -> str:
    data = getattr(server, "log_dir", None) or server.data_dir
    text = text.replace(str(data), "<data>")
    text = text.replace(server.bootstrap, "<bootstrap>")
    text = re.sub(r"127\.0\.0\.1:\d+", "<host:port>", text)
    text = re.sub(r"(localhost|127\.0\.0\.1)", "<host>", text)
    text = re.sub(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", "<uuid>", text)
    text = TOPIC_ID.sub("<id>", text)
    return re.sub(r"\bEpoch: \d+", "Epoch: <n>", text)


def run_tool(oracle, obs: Observations, key: str, main: str, *args: str, lines: bool = False) -> None:
    """One tool invocation against both brokers; outputs compared as text (or as sets of lines
    where the tool's order is not defined)."""
    results = []
    for server in both(oracle):
        if any("{bootstrap}" in a for a in args):
            r = oracle.tools.run(main, *(a.replace("{bootstrap}", server.bootstrap) for a in args))
        else:
            r = oracle.tools.run(main, "--bootstrap-server", server.bootstrap, *args)
        out, err = tool_text(r.out, server), tool_text(r.err, server)
        results.append(
            {
                "exit": r.code,
                "out": sorted(out.splitlines()) if lines else out.splitlines(),
                "err": err.splitlines()[:3],
            }
        )
    obs.compare(key, *results)


TOOLS = "org.apache.kafka.tools."
TOPICS = TOOLS + "TopicCommand"
FEATURES = TOOLS + "FeatureCommand"


def test_tools_before_first_use(oracle):
    """What a fresh broker lists before any group or transaction used it."""
    obs = Observations()
    run_tool(oracle, obs, "tools/kafka-topics/list-fresh", TOPICS, "--list", lines=True)
    run_tool(oracle, obs, "tools/kafka-features/describe", FEATURES, "describe")
    obs.check()


# ---------------------------------------------------------------------------------------------
# Wire: ApiVersions, then every API both serve at every version both serve


def test_api_versions_ranges_and_features(warm):
    obs = Observations()
    kafka, ours = warm.ranges
    for key in sorted(set(kafka) | set(ours)):
        name = NAMES.get(key, str(key))
        obs.compare(
            f"wire/ApiVersions/range/{name}",
            list(kafka[key]) if key in kafka else "not served",
            list(ours[key]) if key in ours else "not served",
        )
    k, o = (plain(b) for b in warm.api_versions)
    for field in ("supported_features", "finalized_features", "finalized_features_epoch", "zk_migration_ready"):
        obs.compare("wire/ApiVersions/features", k.get(field), o.get(field), field)
    obs.check()


# Values for the requests of the sweep below where a zero body would not be answered at all.
EMPTY_OVERRIDES: dict[int, dict[str, Any]] = {
    0: {"acks": -1, "timeout": 1000},  # Produce with acks=0 gets no response
    1: {"max_wait": 0, "max_bytes": 1 << 20, "replica_id": -1},  # Fetch: no long poll
    78: {"max_wait": 0},  # ShareFetch
}
# APIs the sweep leaves out, with why.
SWEEP_SKIPS: dict[int, str] = {}
# Versions the sweep leaves out, with why.
SWEEP_VERSION_SKIPS = {
    (24, 4): "AddPartitionsToTxn v4+ is the brokers' batched verification: Kafka holds an empty one unanswered",
    (24, 5): "as v4",
}


def test_every_api_answers_an_empty_request_as_kafka(warm):
    """A request of every API both serve, at every version both serve, with every field at its
    default or zero: mostly an error path (empty group ids, no topics), answered as Kafka does."""
    obs = Observations()
    kafka_ranges, our_ranges = warm.ranges
    conns = [Conn(warm.kafka.port), Conn(warm.ours.port)]
    try:
        for api in sorted(set(kafka_ranges) & set(our_ranges)):
            if api in SWEEP_SKIPS or api == 18:
                continue
            for v in common_versions(kafka_ranges, our_ranges, api):
                if (api, v) in SWEEP_VERSION_SKIPS:
                    continue
                answers = [plain(c.call(api, v, EMPTY_OVERRIDES.get(api, {}))) for c in conns]
                obs.compare(f"wire/{NAMES[api]}/empty-request", *answers, f"v{v}")
    finally:
        for c in conns:
            c.close()
    obs.check()


# ---------------------------------------------------------------------------------------------
# Wire: error paths and first steps, each at every version both serve

TOPIC, COMPACTED, SMALL = "oracle-t", "oracle-compacted", "oracle-small"
MISSING_ID = uuid.UUID("0b4f1b53-63f2-4c5e-9f1e-3c3c9a1b2d7e")  # no topic has it on either broker


def now_ms() -> int:
    return int(time.time() * 1000)


class Side:
    """One broker of a comparison: its connection and the ids it gave the suite's topics."""

    def __init__(self, server) -> None:
        self.server = server
        self.conn = Conn(server.port)
        self.topic_ids: dict[str, uuid.UUID] = {}

    def call(self, api: int, version: int, values: dict[str, Any]) -> Any:
        return self.conn.call(api, version, values)

    def learn_topic_ids(self) -> None:
        body = self.call(3, 12, {"topics": None, "allow_auto_topic_creation": False})
        self.topic_ids = {t.name: t.topic_id for t in body.topics}

    def tid(self, name: str) -> uuid.UUID:
        return self.topic_ids.get(name, MISSING_ID)


@pytest.fixture(scope="module")
def sides(warm):
    """Both brokers with the suite's topics: a plain one of three partitions, a compacted one
    and one whose records may be at most 1000 bytes."""
    pair = [Side(warm.kafka), Side(warm.ours)]
    for side in pair:
        answer = side.call(
            19,
            7,
            {
                "timeout": 30000,
                "topics": [
                    {"name": TOPIC, "num_partitions": 3, "replication_factor": 1},
                    {
                        "name": COMPACTED,
                        "num_partitions": 1,
                        "replication_factor": 1,
                        "configs": [{"name": "cleanup.policy", "value": "compact"}],
                    },
                    {
                        "name": SMALL,
                        "num_partitions": 1,
                        "replication_factor": 1,
                        "configs": [{"name": "max.message.bytes", "value": "1000"}],
                    },
                ],
            },
        )
        assert [t.error_code for t in answer.topics] == [0, 0, 0], answer
        for topic, count in ((TOPIC, 3), (COMPACTED, 1), (SMALL, 1)):
            wait_for_partitions(side.server.port, topic, count)
        side.learn_topic_ids()
    yield pair
    for side in pair:
        side.conn.close()


def compare_at_every_version(obs: Observations, sides, key: str, api: int, values, ranges, versions=None) -> None:
    """`values(side, version)` -> the request's values, sent to both brokers at every version
    both serve (or those of `versions` among them)."""
    kafka_ranges, our_ranges = ranges
    for v in common_versions(kafka_ranges, our_ranges, api):
        if versions is not None and v not in versions:
            continue
        answers = [plain(side.call(api, v, values(side, v))) for side in sides]
        obs.compare(key, *answers, f"v{v}")


def batch(records, ts: int | None = None) -> bytes:
    return build_batch(records, timestamp_ms=now_ms() if ts is None else ts)


def produce_values(topic: str, records: bytes, partition: int = 0, acks: int = -1):
    def values(side: Side, v: int) -> dict[str, Any]:
        return {
            "acks": acks,
            "timeout": 5000,
            "topic_data": [
                {
                    "name": topic,
                    "topic_id": side.tid(topic),
                    "partition_data": [{"index": partition, "records": records}],
                }
            ],
        }

    return values


def control_bit_set(records: bytes) -> bytes:
    """The batch marked a control batch (its CRC made again), as only a transaction coordinator may write."""
    buf = bytearray(records)
    attributes = int.from_bytes(buf[ATTRIBUTES_OFFSET : ATTRIBUTES_OFFSET + 2], "big") | CONTROL_MASK
    buf[ATTRIBUTES_OFFSET : ATTRIBUTES_OFFSET + 2] = attributes.to_bytes(2, "big")
    buf[CRC_OFFSET : CRC_OFFSET + 4] = crc32c(memoryview(buf)[ATTRIBUTES_OFFSET:]).to_bytes(4, "big")
    return bytes(buf)


def corrupted(records: bytes) -> bytes:
    """The batch with its last byte changed: its CRC no longer matches."""
    return records[:-1] + bytes([records[-1] ^ 0xFF])


def idempotent_values(topic: str, setup: list[tuple[int, int, int]], last: tuple[int, int, int], **flags: Any):
    """A fresh idempotent producer (InitProducerId without a transactional id) that sends
    batches of (epoch offset, base sequence, count) `setup`, each answered NONE, then `last`
    (with `flags` for build_batch), the batch compared."""

    def idempotent_batch(pid: int, epoch: int, batch_spec: tuple[int, int, int], **more: Any) -> bytes:
        bump, sequence, count = batch_spec
        records = [(b"k%d" % i, b"v") for i in range(count)]
        return build_batch(
            records, timestamp_ms=now_ms(), producer_id=pid, producer_epoch=epoch + bump, base_sequence=sequence, **more
        )

    def values(side: Side, v: int) -> dict[str, Any]:
        init = side.call(
            22, 5, {"transactional_id": None, "transaction_timeout": 60000, "producer_id": -1, "producer_epoch": -1}
        )
        assert init.error_code == 0, init
        for spec in setup:
            answer = side.call(
                0, 9, produce_values(topic, idempotent_batch(init.producer_id, init.producer_epoch, spec))(side, 9)
            )
            assert answer.responses[0].partition_responses[0].error_code == 0, answer
        return produce_values(topic, idempotent_batch(init.producer_id, init.producer_epoch, last, **flags))(side, v)

    return values


def test_produce_error_paths(warm, sides):
    obs = Observations()
    hour = 3_600_000
    late = now_ms() + 2 * hour
    cases = {
        "unknown-topic": produce_values("oracle-no-such-topic", batch([(b"k", b"v")])),
        "unknown-partition": produce_values(TOPIC, batch([(b"k", b"v")]), partition=99),
        "timestamp-2h-ahead": produce_values(TOPIC, batch([(b"k", b"v")], late)),
        # the second record of a batch late: its record error names it
        "timestamp-2h-ahead-second-record": produce_values(
            TOPIC,
            build_batch_from(
                [Record(0, now_ms(), b"k", b"v", []), Record(1, late, b"k", b"v", [])], base_offset=0, relative=True
            ),
        ),
        "keyless-on-compacted": produce_values(COMPACTED, batch([(None, b"v")])),
        "keyless-second-record-on-compacted": produce_values(
            COMPACTED, batch([(b"k", b"v"), (None, b"v"), (None, b"v")])
        ),
        "oversized-batch": produce_values(SMALL, batch([(b"k", b"x" * 2000)])),
        "oversized-batch-of-small-records": produce_values(SMALL, batch([(b"k", b"x" * 100)] * 20)),
        "accepted": produce_values(TOPIC, batch([(b"k", b"v"), (b"k2", b"v2")]), partition=1),
        "invalid-acks": produce_values(TOPIC, batch([(b"k", b"v")]), acks=2),
        "corrupt-batch": produce_values(TOPIC, corrupted(batch([(b"k", b"v")]))),
        "internal-topic": produce_values("__consumer_offsets", batch([(b"k", b"v")])),
        "transactional-batch-without-transactional-id": idempotent_values(TOPIC, [], (0, 0, 1), transactional=True),
        "idempotent-out-of-order-sequence": idempotent_values(TOPIC, [(0, 0, 2)], (0, 5, 1)),
        "idempotent-first-sequence-not-zero": idempotent_values(TOPIC, [], (0, 3, 1)),
        "idempotent-duplicate": idempotent_values(TOPIC, [(0, 0, 2)], (0, 0, 2)),
        "idempotent-old-epoch": idempotent_values(TOPIC, [(0, 0, 1), (1, 0, 1)], (0, 1, 1)),
        "idempotent-new-epoch-sequence-not-zero": idempotent_values(TOPIC, [(0, 0, 1)], (1, 4, 1)),
        "producer-id-without-sequence": produce_values(
            TOPIC, build_batch([(b"k", b"v")], timestamp_ms=now_ms(), producer_id=4242, producer_epoch=0)
        ),
        "no-batch": produce_values(TOPIC, b""),
        "truncated-batch": produce_values(TOPIC, batch([(b"k", b"v")])[:-3]),
        "unknown-magic": produce_values(TOPIC, batch([(b"k", b"v")])[:16] + b"\x07" + batch([(b"k", b"v")])[17:]),
        "two-batches": produce_values(TOPIC, batch([(b"k", b"v")]) + batch([(b"k", b"v")])),
        "control-batch": produce_values(TOPIC, control_bit_set(batch([(b"k", b"v")]))),
        "inconsistent-offset-range": produce_values(
            TOPIC,
            build_batch_from(
                [Record(0, now_ms(), b"k", b"v", []), Record(1, now_ms(), b"k", b"v", [])],
                base_offset=0,
                last_offset_delta=5,
                relative=True,
            ),
        ),
        "compressed-keyless-on-compacted": produce_values(
            COMPACTED, build_batch([(b"k", b"v"), (None, b"v")], timestamp_ms=now_ms(), compression=GZIP)
        ),
        "zstd": produce_values(TOPIC, build_batch([(b"k", b"v")], timestamp_ms=now_ms(), compression=ZSTD)),
    }
    for case, values in cases.items():
        compare_at_every_version(obs, sides, f"wire/Produce/{case}", 0, values, warm.ranges)
    obs.check()


def fetch_values(topic: str, offset: int, partition: int = 0):
    def values(side: Side, v: int) -> dict[str, Any]:
        return {
            "replica_id": -1,
            "max_wait": 0,
            "min_bytes": 1,
            "max_bytes": 1 << 20,
            "session_epoch": -1,
            "topics": [
                {
                    "topic": topic,
                    "topic_id": side.tid(topic),
                    "partitions": [
                        {
                            "partition": partition,
                            "fetch_offset": offset,
                            "current_leader_epoch": -1,
                            "log_start_offset": -1,
                            "partition_max_bytes": 1 << 20,
                        }
                    ],
                }
            ],
        }

    return values


def list_offsets_values(topic: str, timestamp: int, partition: int = 0):
    def values(side: Side, v: int) -> dict[str, Any]:
        return {
            "replica_id": -1,
            "timeout": 5000,
            "topics": [
                {
                    "name": topic,
                    "partitions": [{"partition_index": partition, "timestamp": timestamp, "current_leader_epoch": -1}],
                }
            ],
        }

    return values


def test_fetch_and_list_offsets_error_paths(warm, sides):
    obs = Observations()
    fetches = {
        "unknown-topic": fetch_values("oracle-no-such-topic", 0),
        "unknown-partition": fetch_values(TOPIC, 0, partition=99),
        "offset-out-of-range": fetch_values(TOPIC, 1000, partition=2),
        "empty-partition": fetch_values(TOPIC, 0, partition=2),
    }
    for case, values in fetches.items():
        compare_at_every_version(obs, sides, f"wire/Fetch/{case}", 1, values, warm.ranges)
    listings = {
        "unknown-topic": list_offsets_values("oracle-no-such-topic", -1),
        "unknown-partition": list_offsets_values(TOPIC, -1, partition=99),
        "latest": list_offsets_values(TOPIC, -1, partition=2),
        "earliest": list_offsets_values(TOPIC, -2, partition=2),
        "max-timestamp": list_offsets_values(TOPIC, -3, partition=2),
        "bad-timestamp": list_offsets_values(TOPIC, -7, partition=2),
    }
    for case, values in listings.items():
        compare_at_every_version(obs, sides, f"wire/ListOffsets/{case}", 2, values, warm.ranges)
    obs.check()


def fixed(values: dict[str, Any]):
    return lambda side, v: values


def test_topic_admin_error_paths(warm, sides):
    obs = Observations()

    def create(name: str, partitions: int = 1, rf: int = 1, configs=(), validate_only: bool = True):
        return fixed(
            {
                "timeout": 5000,
                "validate_only": validate_only,
                "topics": [
                    {
                        "name": name,
                        "num_partitions": partitions,
                        "replication_factor": rf,
                        "configs": [{"name": k, "value": val} for k, val in configs],
                    }
                ],
            }
        )

    creates = {
        "exists": create(TOPIC),
        "bad-name": create("bad name!"),
        "zero-partitions": create("oracle-new", partitions=0),
        "replication-factor-above-brokers": create("oracle-new", rf=3),
        "invalid-config-value": create("oracle-new", configs=[("cleanup.policy", "bogus")]),
        "unknown-config": create("oracle-new", configs=[("no.such.config", "1")]),
        "validate-only": create("oracle-new", partitions=2),
    }
    for case, values in creates.items():
        compare_at_every_version(obs, sides, f"wire/CreateTopics/{case}", 19, values, warm.ranges)
    compare_at_every_version(
        obs,
        sides,
        "wire/DeleteTopics/unknown-topic",
        20,
        lambda side, v: {
            "timeout": 5000,
            "topic_names": ["oracle-no-such-topic"],
            "topics": [{"name": "oracle-no-such-topic", "topic_id": uuid.UUID(int=0)}],
        },
        warm.ranges,
    )
    for case, topic, count in (("fewer", TOPIC, 2), ("unknown-topic", "oracle-no-such-topic", 4)):
        compare_at_every_version(
            obs,
            sides,
            f"wire/CreatePartitions/{case}",
            37,
            fixed({"timeout": 5000, "validate_only": True, "topics": [{"name": topic, "count": count}]}),
            warm.ranges,
        )
    for case, path in (("own-log-dir", None), ("unknown-log-dir", "/oracle-no-such-log-dir")):
        compare_at_every_version(
            obs,
            sides,
            f"wire/AlterReplicaLogDirs/{case}",
            34,
            lambda side, v, path=path: {
                "dirs": [
                    {
                        "path": path or str(getattr(side.server, "log_dir", None) or side.server.data_dir),
                        "topics": [
                            {"name": TOPIC, "partitions": [0, 99]},
                            {"name": "oracle-no-such-topic", "partitions": [0]},
                        ],
                    }
                ]
            },
            warm.ranges,
        )
    compare_at_every_version(  # preferred leaders already leading, an unknown partition and topic
        obs,
        sides,
        "wire/ElectLeaders/not-needed-and-unknown",
        43,
        fixed(
            {
                "election_type": 0,
                "timeout_ms": 5000,
                "topic_partitions": [
                    {"topic": "oracle-no-such-topic", "partitions": [0]},
                    {"topic": TOPIC, "partitions": [0, 99]},
                ],
            }
        ),
        warm.ranges,
    )
    compare_at_every_version(
        obs,
        sides,
        "wire/DescribeProducers/unknown-topic-and-partition",
        61,
        fixed(
            {
                "topics": [
                    {"name": "oracle-no-such-topic", "partition_indexes": [0]},
                    {"name": TOPIC, "partition_indexes": [99]},
                ]
            }
        ),
        warm.ranges,
    )
    compare_at_every_version(
        obs,
        sides,
        "wire/Metadata/unknown-topic",
        3,
        fixed({"topics": [{"name": "oracle-no-such-topic"}], "allow_auto_topic_creation": False}),
        warm.ranges,
        versions=range(4, 99),
    )
    compare_at_every_version(
        obs,
        sides,
        "wire/DeleteRecords/error-paths",
        21,
        fixed(
            {
                "timeout": 5000,
                "topics": [
                    {"name": TOPIC, "partitions": [{"partition_index": 2, "offset": 50}]},
                    {"name": "oracle-no-such-topic", "partitions": [{"partition_index": 0, "offset": 0}]},
                ],
            }
        ),
        warm.ranges,
    )
    obs.check()


def test_acl_requests_with_an_unknown_enum(warm, sides):
    """Without an authorizer: an ACL naming an UNKNOWN (0) resource type, pattern type,
    operation or permission type fails its request's parsing at Kafka (the connection is
    closed); the same ACL with known values is refused SECURITY_DISABLED."""
    obs = Observations()
    acl = {"resource_name": "t", "principal": "User:a", "host": "*"}
    known = {"resource_type": 2, "resource_pattern_type": 3, "operation": 3, "permission_type": 3}
    known_filter = {"resource_type_filter": 2, "pattern_type_filter": 3, "operation": 3, "permission_type": 3}
    for field in ("resource_type", "operation", "permission_type", None):
        create = {**acl, **known, **({field: 0} if field else {})}
        compare_at_every_version(
            obs, sides, f"wire/CreateAcls/unknown-{field or 'none'}", 30, fixed({"creations": [create]}), warm.ranges
        )
    for field in ("resource_type_filter", "pattern_type_filter", "operation", "permission_type", None):
        values = {
            "resource_name_filter": "t",
            "principal_filter": None,
            "host_filter": None,
            **known_filter,
            **({field: 0} if field else {}),
        }
        compare_at_every_version(
            obs, sides, f"wire/DeleteAcls/unknown-{field or 'none'}", 31, fixed({"filters": [values]}), warm.ranges
        )
    obs.check()


def test_config_error_paths(warm, sides):
    obs = Observations()
    describe = {
        "unknown-topic": [{"resource_type": 2, "resource_name": "oracle-no-such-topic"}],
        "unknown-broker": [{"resource_type": 4, "resource_name": "7"}],
        "broker-not-an-integer": [{"resource_type": 4, "resource_name": "one"}],
        "topic": [{"resource_type": 2, "resource_name": COMPACTED}],
    }
    for case, resources in describe.items():
        compare_at_every_version(
            obs,
            sides,
            f"wire/DescribeConfigs/{case}",
            32,
            fixed({"resources": resources, "include_synonyms": True}),
            warm.ranges,
        )
    alters = {
        "invalid-value": [{"name": "cleanup.policy", "config_operation": 0, "value": "bogus"}],
        "unknown-key": [{"name": "no.such.config", "config_operation": 0, "value": "1"}],
        "valid": [{"name": "retention.ms", "config_operation": 0, "value": "600000"}],
    }
    retention = {"resource_type": 2, "resource_name": TOPIC, "configs": alters["valid"]}
    # A resource named twice, between two others (IncrementalAlterConfigs only: Kafka 4.4 never
    # answers the legacy AlterConfigs so, which here refuses the resource's entries the same way)
    for api in (44,):
        compare_at_every_version(
            obs,
            sides,
            f"wire/{NAMES[api]}/duplicate-resource",
            api,
            fixed(
                {
                    "validate_only": True,
                    "resources": [
                        retention,
                        {"resource_type": 2, "resource_name": COMPACTED, "configs": []},
                        retention,
                        {"resource_type": 4, "resource_name": "", "configs": []},
                    ],
                }
            ),
            warm.ranges,
        )
    for case, configs in alters.items():
        compare_at_every_version(
            obs,
            sides,
            f"wire/IncrementalAlterConfigs/{case}",
            44,
            fixed(
                {
                    "validate_only": True,
                    "resources": [{"resource_type": 2, "resource_name": TOPIC, "configs": configs}],
                }
            ),
            warm.ranges,
        )
    obs.check()


BROKER_LOGGER, SET, DELETE, APPEND, SUBTRACT = 8, 0, 1, 2, 3


def logger_values(configs: list[tuple[str, int, str | None]], name: str = "1", validate_only: bool = False):
    return fixed(
        {
            "validate_only": validate_only,
            "resources": [
                {
                    "resource_type": BROKER_LOGGER,
                    "resource_name": name,
                    "configs": [{"name": n, "config_operation": op, "value": v} for n, op, v in configs],
                }
            ],
        }
    )


def describe_loggers(keys: list[str] | None, name: str = "1"):
    return fixed(
        {
            "resources": [{"resource_type": BROKER_LOGGER, "resource_name": name, "configuration_keys": keys}],
            "include_synonyms": True,
            "include_documentation": True,
        }
    )


def test_broker_loggers_described_and_changed_as_kafka(warm, sides):
    """BROKER_LOGGER: the levels of `root` and `kafka` (Kafka's broker loggers' parent; this
    server's own loggers here) set, described, unset, and every refusal; the loggers each
    broker has differ (listed apart), the shape of their entries does not."""
    obs = Observations()
    ours = {name: logging.getLogger(name).level for name in ("", "coordinator")}  # restored after
    compare = lambda key, api, values: compare_at_every_version(obs, sides, key, api, values, warm.ranges)  # noqa: E731
    try:
        compare(
            "wire/IncrementalAlterConfigs/broker-logger-set",
            44,
            logger_values([("root", SET, "WARN"), ("kafka", SET, "ERROR")]),
        )
        compare("wire/DescribeConfigs/broker-logger", 32, describe_loggers(["root", "kafka", "oracle.no.such.logger"]))
        compare(
            "wire/IncrementalAlterConfigs/broker-logger-validate-only",
            44,
            logger_values([("root", SET, "DEBUG")], validate_only=True),
        )
        compare("wire/IncrementalAlterConfigs/broker-logger-unset", 44, logger_values([("kafka", DELETE, None)]))
        compare("wire/DescribeConfigs/broker-logger-unset", 32, describe_loggers(["root", "kafka"]))
        refusals = {
            "unknown-logger": [("oracle.no.such.logger", SET, "INFO")],
            "unknown-level": [("root", SET, "LOUD")],
            "lower-case-level": [("root", SET, "info")],
            "unset-root": [("root", DELETE, None)],
            "unset-unknown": [("oracle.no.such.logger", DELETE, None)],
            "append": [("root", APPEND, "INFO")],
            "subtract": [("root", SUBTRACT, "INFO")],
            "null-value": [("root", SET, None)],
            "duplicate-key": [("root", SET, "INFO"), ("root", SET, "WARN")],
        }
        for case, configs in refusals.items():
            compare(f"wire/IncrementalAlterConfigs/broker-logger-{case}", 44, logger_values(configs))
        for case, name in {"other-broker": "7", "not-an-integer": "one", "empty-name": ""}.items():
            compare(
                f"wire/IncrementalAlterConfigs/broker-logger-{case}", 44, logger_values([("root", SET, "INFO")], name)
            )
            compare(f"wire/DescribeConfigs/broker-logger-{case}", 32, describe_loggers(None, name))
        compare(
            "wire/AlterConfigs/broker-logger",
            33,
            fixed(
                {
                    "validate_only": True,
                    "resources": [
                        {
                            "resource_type": BROKER_LOGGER,
                            "resource_name": "1",
                            "configs": [{"name": "root", "value": "INFO"}],
                        }
                    ],
                }
            ),
        )
        # every logger: each broker its own names, in entries of one shape
        names, shapes = [], []
        for side in sides:
            result = side.call(32, 4, describe_loggers(None)(side, 4)).results[0]
            assert result.error_code == 0, result
            names.append(sorted(c.name for c in result.configs))
            shapes.append(sorted({json.dumps({**plain(c), "name": "", "value": ""}) for c in result.configs}))
        obs.compare("wire/DescribeConfigs/broker-logger-all", *shapes)
        obs.compare("wire/DescribeConfigs/broker-logger-names", *names)
        # kafka-configs: set, describe (the lines of the loggers both have), unset
        configs = TOOLS + "ConfigCommand"
        entity = ("--entity-type", "broker-loggers", "--entity-name", "1")
        run_tool(
            warm,
            obs,
            "tools/kafka-configs/alter-broker-loggers",
            configs,
            "--alter",
            *entity,
            "--add-config",
            "kafka=INFO",
        )
        described = []
        for server in both(warm):
            r = warm.tools.run(configs, "--bootstrap-server", server.bootstrap, "--describe", *entity)
            lines = tool_text(r.out, server).splitlines()
            described.append(
                {
                    "exit": r.code,
                    "out": [x for x in lines if not x.startswith(" ") or x.split("=")[0].strip() in ("root", "kafka")],
                }
            )
        obs.compare("tools/kafka-configs/describe-broker-loggers", *described)
        run_tool(
            warm,
            obs,
            "tools/kafka-configs/unset-broker-loggers",
            configs,
            "--alter",
            *entity,
            "--delete-config",
            "kafka",
        )
    finally:
        for name, level in ours.items():
            logging.getLogger(name).setLevel(level)
    obs.check()


def test_classic_group_error_paths(warm, sides):
    obs = Observations()
    group = "oracle-classic-unknown"
    member = {"group_id": group, "member_id": "oracle-no-such-member", "generation_id": 1}
    compare_at_every_version(obs, sides, "wire/Heartbeat/unknown-group", 12, fixed(member), warm.ranges)
    compare_at_every_version(
        obs,
        sides,
        "wire/SyncGroup/unknown-group",
        14,
        fixed({**member, "protocol_type": "consumer", "protocol_name": "range"}),
        warm.ranges,
    )
    compare_at_every_version(
        obs,
        sides,
        "wire/LeaveGroup/unknown-group",
        13,
        fixed({"group_id": group, "member_id": "oracle-no-such-member", "members": [{"member_id": "m"}]}),
        warm.ranges,
    )
    compare_at_every_version(
        obs,
        sides,
        "wire/JoinGroup/unknown-member",
        11,
        fixed(
            {
                "group_id": group,
                "member_id": "oracle-no-such-member",
                "session_timeout": 30000,
                "rebalance_timeout": 30000,
                "protocol_type": "consumer",
                "protocols": [{"name": "range", "metadata": b""}],
            }
        ),
        warm.ranges,
    )
    compare_at_every_version(
        obs,
        sides,
        "wire/JoinGroup/session-timeout-too-small",
        11,
        fixed(
            {
                "group_id": group,
                "member_id": "",
                "session_timeout": 1,
                "rebalance_timeout": 30000,
                "protocol_type": "consumer",
                "protocols": [{"name": "range", "metadata": b""}],
            }
        ),
        warm.ranges,
    )
    compare_at_every_version(
        obs, sides, "wire/DescribeGroups/unknown-group", 15, fixed({"groups": [group]}), warm.ranges
    )
    compare_at_every_version(
        obs, sides, "wire/DeleteGroups/unknown-group", 42, fixed({"groups_names": [group]}), warm.ranges
    )
    compare_at_every_version(
        obs,
        sides,
        "wire/OffsetFetch/unknown-group",
        9,
        fixed(
            {
                "group_id": group,
                "topics": [{"name": TOPIC, "partition_indexes": [0]}],
                "groups": [{"group_id": group, "topics": [{"name": TOPIC, "partition_indexes": [0]}]}],
            }
        ),
        warm.ranges,
    )
    compare_at_every_version(
        obs,
        sides,
        "wire/OffsetCommit/unknown-topic",
        8,
        fixed(
            {
                "group_id": "oracle-simple",
                "generation_id_or_member_epoch": -1,
                "member_id": "",
                "retention_time_ms": -1,
                "topics": [
                    {
                        "name": "oracle-no-such-topic",
                        "partitions": [{"partition_index": 0, "committed_offset": 1, "committed_leader_epoch": -1}],
                    }
                ],
            }
        ),
        warm.ranges,
    )
    # what KafkaApis refuses itself (an unknown topic or partition) is answered before the
    # group coordinator's answers, a topic's in one entry (OffsetCommitResponse.Builder)
    compare_at_every_version(
        obs,
        sides,
        "wire/OffsetCommit/unknown-before-known",
        8,
        fixed(
            {
                "group_id": "oracle-simple",
                "generation_id_or_member_epoch": -1,
                "member_id": "",
                "retention_time_ms": -1,
                "topics": [
                    {
                        "name": name,
                        "partitions": [
                            {"partition_index": p, "committed_offset": 1, "committed_leader_epoch": -1} for p in ps
                        ],
                    }
                    for name, ps in ((TOPIC, [0, 9]), ("oracle-no-such-topic", [0]), (TOPIC, [1]))
                ],
            }
        ),
        warm.ranges,
        versions=range(0, 10),  # (v10 names topics by id)
    )
    compare_at_every_version(
        obs,
        sides,
        "wire/OffsetCommit/unknown-generation",
        8,
        fixed(
            {
                "group_id": "oracle-simple",
                "generation_id_or_member_epoch": 5,
                "member_id": "oracle-no-such-member",
                "retention_time_ms": -1,
                "topics": [
                    {
                        "name": TOPIC,
                        "partitions": [{"partition_index": 0, "committed_offset": 1, "committed_leader_epoch": -1}],
                    }
                ],
            }
        ),
        warm.ranges,
    )
    compare_at_every_version(
        obs,
        sides,
        "wire/OffsetDelete/unknown-group",
        47,
        fixed({"group_id": group, "topics": [{"name": TOPIC, "partitions": [{"partition_index": 0}]}]}),
        warm.ranges,
    )
    obs.check()


# Groups on eleven __consumer_offsets partitions (two share one), which Kafka answers in its
# partition map's order, not the request's.
SPREAD_GROUPS = [
    f"oracle-order-{w}"
    for w in ("alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa", "lambda", "mu")
]


def test_describe_and_delete_groups_answer_in_coordinator_order(warm, sides):
    """DescribeGroups and DeleteGroups of groups on many coordinator partitions, some existing
    (an offset committed), one named twice: the results come in Kafka's order."""
    obs = Observations()
    existing = SPREAD_GROUPS[::3]

    def describe(side: Side, v: int) -> dict[str, Any]:
        return {"groups": [*SPREAD_GROUPS, SPREAD_GROUPS[1]], "include_authorized_operations": True}

    def delete(side: Side, v: int) -> dict[str, Any]:
        for group in existing:
            commit_offsets(side.server.port, group, TOPIC, {0: 1})
        return {"groups_names": [*SPREAD_GROUPS, SPREAD_GROUPS[1]]}

    for group in existing:
        for side in sides:
            commit_offsets(side.server.port, group, TOPIC, {0: 1})
    compare_at_every_version(obs, sides, "wire/DescribeGroups/many-partitions", 15, describe, warm.ranges)
    for api in (69, 77, 89):  # {Consumer,Share,Streams}GroupDescribe: classic groups or none, and ""
        values = fixed({"group_ids": ["", *SPREAD_GROUPS, SPREAD_GROUPS[1]], "include_authorized_operations": True})
        compare_at_every_version(obs, sides, f"wire/{NAMES[api]}/many-partitions", api, values, warm.ranges)
    compare_at_every_version(obs, sides, "wire/DeleteGroups/many-partitions", 42, delete, warm.ranges)
    obs.check()


def consumer_heartbeat(side: Side, v: int, group: str, member: str, epoch: int, topics=None) -> Any:
    return side.call(
        68,
        v,
        {
            "group_id": group,
            "member_id": member,
            "member_epoch": epoch,
            "rebalance_timeout": 30000,
            "subscribed_topic_names": topics,
            "server_assignor": None,
            "topic_partitions": [] if epoch == 0 else None,
        },
    )


def test_consumer_group_heartbeat_life_cycle(warm, sides):
    """A KIP-848 member joins alone, heartbeats, then wrong member ids and stale and future
    epochs, then leaves: at each version both serve, each answer compared."""
    obs = Observations()
    kafka_ranges, our_ranges = warm.ranges
    for v in common_versions(kafka_ranges, our_ranges, 68):
        group = f"oracle-consumer-v{v}"
        member = str(uuid.uuid4())
        steps: list[list[Any]] = [[], []]
        for i, side in enumerate(sides):
            joined = consumer_heartbeat(side, v, group, member if v >= 1 else "", 0, [TOPIC])
            steps[i].append(("join", plain(joined)))
            mid = joined.member_id or member
            epoch = joined.member_epoch
            steps[i].append(("heartbeat", plain(consumer_heartbeat(side, v, group, mid, epoch))))
            steps[i].append(("unknown-member", plain(consumer_heartbeat(side, v, group, str(uuid.uuid4()), epoch))))
            steps[i].append(("stale-epoch", plain(consumer_heartbeat(side, v, group, mid, max(epoch - 1, 1)))))
            steps[i].append(("future-epoch", plain(consumer_heartbeat(side, v, group, mid, epoch + 5))))
            described = side.call(69, 0, {"group_ids": [group], "include_authorized_operations": False})
            steps[i].append(("describe", plain(described)))
            steps[i].append(("leave", plain(consumer_heartbeat(side, v, group, mid, -1))))
        for (name, kafka), (_, ours) in zip(steps[0], steps[1], strict=True):
            obs.compare(f"wire/ConsumerGroupHeartbeat/{name}", kafka, ours, f"v{v}")
    compare_at_every_version(
        obs,
        sides,
        "wire/ConsumerGroupDescribe/unknown-group",
        69,
        fixed({"group_ids": ["oracle-no-such-group"], "include_authorized_operations": False}),
        warm.ranges,
    )
    obs.check()


def without_assignment(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: without_assignment(v) for k, v in value.items() if k != "assignment"}
    if isinstance(value, list):
        return [without_assignment(v) for v in value]
    return value


def test_share_group_heartbeat_life_cycle(warm, sides):
    obs = Observations()
    kafka_ranges, our_ranges = warm.ranges
    for v in common_versions(kafka_ranges, our_ranges, 76):
        group = f"oracle-share-v{v}"
        member = str(uuid.uuid4())

        def scenario(side: Side, v: int = v, group: str = group, member: str = member) -> list[tuple[str, Any]]:
            def beat(mid: str, epoch: int, topics=None) -> Any:
                return side.call(
                    76,
                    v,
                    {"group_id": group, "member_id": mid, "member_epoch": epoch, "subscribed_topic_names": topics},
                )

            steps: list[tuple[str, Any]] = []
            joined = beat(member, 0, [TOPIC])
            # (Kafka assigns a share partition only once its share state is initialised, in the
            # background, and at a later group epoch: when is a matter of timing, so
            # assignments are not compared here, and the heartbeat compared is the one that
            # finds the member at that epoch, once the assignment interval has passed.)
            steps.append(("join", without_assignment(plain(joined))))
            mid, epoch = joined.member_id or member, joined.member_epoch
            settled = beat(mid, epoch)
            for _ in range(200):
                if settled.error_code or settled.member_epoch != epoch:
                    break
                time.sleep(0.05)
                settled = beat(mid, epoch)
            steps.append(("heartbeat", without_assignment(plain(settled))))
            epoch = settled.member_epoch
            steps.append(("unknown-member", plain(beat(str(uuid.uuid4()), epoch))))
            steps.append(("future-epoch", plain(beat(mid, epoch + 5))))
            described = side.call(77, 1, {"group_ids": [group], "include_authorized_operations": False})
            steps.append(("describe", without_assignment(plain(described))))
            steps.append(("leave", plain(beat(mid, -1))))
            return steps

        steps = on_both(scenario, sides)
        for (name, kafka), (_, ours) in zip(steps[0], steps[1], strict=True):
            obs.compare(f"wire/ShareGroupHeartbeat/{name}", kafka, ours, f"v{v}")
    obs.check()


SHARE_STATE_TOPIC, SHARE_STATE_GROUP = "oracle-share-state", "oracle-share-state"
SHARE_STATE_RECORDS = 505  # past Kafka's default 500 updates per snapshot


def runs(items: list[str]) -> list[str]:
    """["a", "a", "b"] as ["a x2", "b x1"]."""
    out: list[list[Any]] = []
    for item in items:
        if out and out[-1][0] == item:
            out[-1][1] += 1
        else:
            out.append([item, 1])
    return [f"{item} x{n}" for item, n in out]


def share_state_records(server, group: str) -> list[Any]:
    """The group's `__share_group_state` records as the broker wrote them (read from its log
    files): each a snapshot or an update, with its value (timestamps left out)."""
    from protocol.record_batch import CorruptBatch, iter_batch_records, iter_batches
    from protocol.share_records import decode_state_key, decode_state_value

    root = getattr(server, "log_dir", None) or server.data_dir
    out: list[tuple[int, str, Any]] = []
    for directory in sorted(root.glob("__share_group_state-*")):
        for segment in sorted(directory.glob("*.log")):
            data = segment.read_bytes()
            try:
                for pos, h in iter_batches(data, verify_crc=False):
                    for r in iter_batch_records(data[pos : pos + h.size], h):
                        key = decode_state_key(r.key)
                        if key.group != group:
                            continue
                        value = None if r.value is None else plain(decode_state_value(key, r.value))
                        if value is not None:
                            value = {k: v for k, v in value.items() if not k.endswith("timestamp")}
                        out.append((r.offset, "snapshot" if key.snapshot else "update", value))
            except CorruptBatch:
                pass  # (the end of what was written)
    return [(kind, value) for _, kind, value in sorted(out, key=lambda x: x[0])]


def create_share_topic(side: Side, topic: str, partitions: int) -> Any:
    """The topic a share scenario reads, created on `side`; its id there."""
    spec = {"name": topic, "num_partitions": partitions, "replication_factor": 1}
    created = side.call(19, 7, {"timeout": 30000, "topics": [spec]})
    assert created.topics[0].error_code == 0, created
    wait_for_partitions(side.server.port, topic, partitions)
    side.learn_topic_ids()
    return side.tid(topic)


def until_served(produce: Callable[[], Any]) -> None:
    """A Produce (one partition) sent again while a partition just created is not yet served
    by its leader (Kafka answers NOT_LEADER_OR_FOLLOWER for a moment after its metadata shows
    it), until it is appended."""
    deadline = time.monotonic() + 15
    while True:
        answer = produce()
        error = answer.responses[0].partition_responses[0].error_code
        if error in (3, 6) and time.monotonic() < deadline:  # UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER
            time.sleep(0.1)
            continue
        assert error == 0, answer
        return


def produce_to(side: Side, topic: str, records: bytes, partition: int = 0) -> None:
    """`records` appended (until_served)."""
    until_served(lambda: side.call(0, 11, produce_values(topic, records, partition=partition)(side, 11)))


def join_share_group(side: Side, group: str, topic: str, partitions: int) -> tuple[str, Callable[..., Any]]:
    """One member of a share group reading `topic` from its start, joined until all its
    partitions are assigned: its member id and its heartbeat (member id, epoch)."""
    reset = {"name": "share.auto.offset.reset", "config_operation": 0, "value": "earliest"}
    configs = {"resources": [{"resource_type": 32, "resource_name": group, "configs": [reset]}]}
    assert side.call(44, 1, configs).responses[0].error_code == 0

    def beat(mid: str, epoch: int, topics: list[str] | None = None) -> Any:
        values = {"group_id": group, "member_id": mid, "member_epoch": epoch}
        return side.call(76, 1, {**values, "subscribed_topic_names": topics})

    joined = beat(str(uuid.uuid4()), 0, [topic])
    mid, epoch = joined.member_id, joined.member_epoch
    deadline = time.monotonic() + 60
    while not (joined.assignment and sum(len(t.partitions) for t in joined.assignment.topic_partitions) == partitions):
        assert time.monotonic() < deadline, "no assignment"
        time.sleep(0.05)
        joined = beat(mid, epoch)
        epoch = joined.member_epoch
    return mid, beat


def test_share_group_state_snapshots_as_kafka(warm, sides):
    """A share group reads a partition record by record, accepting each in its next ShareFetch:
    `__share_group_state` gets Kafka's records, a ShareSnapshot when the partition is
    initialized and, after 500 ShareUpdates more than one, the next (ShareCoordinatorShard)."""
    obs = Observations()

    def scenario(side: Side) -> list[Any]:
        tid = create_share_topic(side, SHARE_STATE_TOPIC, 1)
        for n in range(SHARE_STATE_RECORDS):
            produce_to(side, SHARE_STATE_TOPIC, batch([(b"k", b"%d" % n)]))
        deadline = time.monotonic() + 60
        mid, beat = join_share_group(side, SHARE_STATE_GROUP, SHARE_STATE_TOPIC, 1)

        def fetch(session: int, acked: int | None, partitions: bool = True) -> Any:
            acks = [] if acked is None else [{"first_offset": acked, "last_offset": acked, "acknowledge_types": [1]}]
            part = {"partition_index": 0, "acknowledgement_batches": acks}
            return side.call(
                78,
                1,
                {
                    "group_id": SHARE_STATE_GROUP,
                    "member_id": mid,
                    "share_session_epoch": session,
                    "max_wait": 0,
                    "min_bytes": 1,
                    "max_bytes": 1 << 20,
                    "max_records": 1,
                    "batch_size": 1,
                    "topics": [{"topic_id": tid, "partitions": [part]}] if partitions or acks else [],
                },
            )

        session, acked, done = 0, None, 0
        while done < SHARE_STATE_RECORDS:
            assert time.monotonic() < deadline + 120, f"{done} records accepted"
            body = fetch(session, acked)
            session += 1
            assert body.error_code == 0, body
            if not body.responses:  # nothing acquired (max_wait 0 while the share-partition loads)
                assert acked is None, body
                continue
            part = body.responses[0].partitions[0]
            assert part.error_code == 0 and part.acknowledge_error_code == 0, part
            done += acked is not None
            acked = part.acquired_records[0].first_offset if part.acquired_records else None
        assert fetch(-1, None, partitions=False).error_code == 0
        beat(mid, -1)
        return share_state_records(side.server, SHARE_STATE_GROUP)

    answers = on_both(scenario, sides)
    kinds = [runs([kind for kind, _ in records]) for records in answers]
    obs.compare("wire/ShareFetch/share-group-state-record-kinds", *kinds)
    obs.compare("wire/ShareFetch/share-group-state-records", *answers)
    obs.check()


SHARE_FIRST_TOPIC, SHARE_FIRST_GROUP = "oracle-share-first-fetch", "oracle-share-first-fetch"


def test_share_first_fetch_over_new_share_partitions(warm, sides):
    """librdkafka's 0179: 50 records on each of two partitions; a member's first ShareFetch
    (500 records allowed) gets partition 0's alone, as Kafka loads each share-partition's
    state before acquiring from it, and its next fetch partition 1's."""
    obs = Observations()

    def scenario(side: Side) -> list[Any]:
        answers: list[Any] = []
        tid = create_share_topic(side, SHARE_FIRST_TOPIC, 2)
        for p in (0, 1):
            produce_to(side, SHARE_FIRST_TOPIC, batch([(b"k", b"%d" % n) for n in range(50)]), p)
        mid, beat = join_share_group(side, SHARE_FIRST_GROUP, SHARE_FIRST_TOPIC, 2)
        for session in (0, 1):
            parts = [{"partition_index": p, "acknowledgement_batches": []} for p in (0, 1)]
            body = side.call(
                78,
                1,
                {
                    "group_id": SHARE_FIRST_GROUP,
                    "member_id": mid,
                    "share_session_epoch": session,
                    "max_wait": 5000,
                    "min_bytes": 1,
                    "max_bytes": 52428800,
                    "max_records": 500,
                    "batch_size": 500,
                    "topics": [{"topic_id": tid, "partitions": parts if session == 0 else []}],
                },
            )
            assert body.error_code == 0, body
            answers.append(
                sorted(
                    (p.partition_index, [(a.first_offset, a.last_offset) for a in p.acquired_records])
                    for t in body.responses
                    for p in t.partitions
                    if p.acquired_records
                )
            )
        beat(mid, -1)
        # Gone once compared: left empty, it would join the share groups that later tool runs
        # list, whose order is each broker's own map order.
        deleted = side.call(42, 2, {"groups_names": [SHARE_FIRST_GROUP]})
        assert deleted.results[0].error_code == 0, deleted
        return answers

    answers = on_both(scenario, sides)
    obs.compare("wire/ShareFetch/first-fetch-over-new-share-partitions", *answers)
    obs.check()


def streams_heartbeat(side: Side, v: int, group: str, member: str, epoch: int, topology: Any = None, **kw: Any) -> Any:
    joining = epoch == 0
    values = {
        "group_id": group,
        "member_id": member,
        "member_epoch": epoch,
        "endpoint_information_epoch": 0,
        "rebalance_timeout": 30000 if joining else -1,
        "topology": topology,
        "active_tasks": [] if joining else None,
        "standby_tasks": [] if joining else None,
        "warmup_tasks": [] if joining else None,
        "process_id": "oracle-process" if joining else None,
    }
    values.update(kw)
    return side.call(88, v, values)


def stateless_topology(**subtopology: Any) -> dict[str, Any]:
    """One subtopology reading TOPIC, no state: nothing for the coordinator to create."""
    return {"epoch": 1, "subtopologies": [{"subtopology_id": "0", "source_topics": [TOPIC], **subtopology}]}


def word_count_topology(app: str, source: str, **repartition_source: Any) -> tuple[str, str, dict[str, Any]]:
    """A word count's topology: subtopology 0 reads `source` into a repartition topic, 1 reads
    it and keeps counts in a compacted changelog (both internal topics the coordinator creates).
    The repartition topic's name, the changelog's, and the topology."""
    rep, changelog = f"{app}-words-repartition", f"{app}-counts-changelog"
    topology = {
        "epoch": 1,
        "subtopologies": [
            {"subtopology_id": "0", "source_topics": [source], "repartition_sink_topics": [rep]},
            {
                "subtopology_id": "1",
                "state_changelog_topics": [
                    {"name": changelog, "topic_configs": [{"key": "cleanup.policy", "value": "compact"}]}
                ],
                "repartition_source_topics": [{"name": rep, **repartition_source}],
            },
        ],
    }
    return rep, changelog, topology


def test_streams_group_heartbeat_life_cycle(warm, sides):
    """A KIP-1071 member joins alone with a stateless topology (Kafka's 3 s initial rebalance
    delay: the join is answered before any task is assigned), heartbeats, then an unknown
    member, a future epoch, leaves of an unknown member and of an unknown instance, a topology
    where only a join may send one, malformed topologies, a join without a topology; describe at
    every version; leave. Each answer compared."""
    obs = Observations()
    kafka_ranges, our_ranges = warm.ranges
    for v in common_versions(kafka_ranges, our_ranges, 88):
        group = f"oracle-streams-v{v}"
        member = str(uuid.uuid4())
        steps: list[list[Any]] = [[], []]
        for i, side in enumerate(sides):
            joined = streams_heartbeat(side, v, group, member, 0, stateless_topology())
            steps[i].append(("join", plain(joined)))
            epoch = joined.member_epoch
            steps[i].append(("heartbeat", plain(streams_heartbeat(side, v, group, member, epoch))))
            steps[i].append(("unknown-member", plain(streams_heartbeat(side, v, group, str(uuid.uuid4()), epoch))))
            steps[i].append(("future-epoch", plain(streams_heartbeat(side, v, group, member, epoch + 5))))
            steps[i].append(("unknown-member-leave", plain(streams_heartbeat(side, v, group, str(uuid.uuid4()), -1))))
            steps[i].append(
                (
                    "unknown-instance-leave",
                    plain(streams_heartbeat(side, v, group, str(uuid.uuid4()), -2, instance_id="oracle-nobody")),
                )
            )
            steps[i].append(
                ("topology-not-joining", plain(streams_heartbeat(side, v, group, member, epoch, stateless_topology())))
            )
            bad = stateless_topology(state_changelog_topics=[{"name": "c", "partitions": 3, "replication_factor": 0}])
            steps[i].append(("changelog-partitions", plain(streams_heartbeat(side, v, f"{group}-x", "m", 0, bad))))
            steps[i].append(("no-topology", plain(streams_heartbeat(side, v, f"{group}-x", "m", 0, None))))
            regex = {"epoch": 1, "subtopologies": [{"subtopology_id": "0", "source_topic_regex": ["oracle-.*"]}]}
            steps[i].append(("regex", plain(streams_heartbeat(side, v, f"{group}-x", "m", 0, regex))))
            for dv in common_versions(kafka_ranges, our_ranges, 89):
                described = side.call(
                    89, dv, {"group_ids": [group, f"{group}-x"], "include_authorized_operations": False}
                )
                steps[i].append((f"describe-v{dv}", plain(described)))
            steps[i].append(("leave", plain(streams_heartbeat(side, v, group, member, -1))))
        for (name, kafka), (_, ours) in zip(steps[0], steps[1], strict=True):
            obs.compare(f"wire/StreamsGroupHeartbeat/{name}", kafka, ours, f"v{v}")
    obs.check()


def test_streams_group_word_count_topology_and_internal_topics(warm, sides):
    """The same word-count topology given to both (a repartition topic and a compacted
    changelog that the coordinator creates): the heartbeats until the member runs its tasks,
    then StreamsGroupDescribe (the configured topology with its partition counts, the member
    and its tasks), compared."""
    obs = Observations()
    kafka_ranges, our_ranges = warm.ranges
    v = max(common_versions(kafka_ranges, our_ranges, 88))
    app = "oracle-wc"
    rep, changelog, topology = word_count_topology(
        app, TOPIC, topic_configs=[{"key": "cleanup.policy", "value": "delete"}]
    )

    def scenario(side: Side) -> list[tuple[str, Any]]:
        answers: list[tuple[str, Any]] = []
        member = str(uuid.uuid4())
        joined = streams_heartbeat(side, v, app, member, 0, topology)
        answers.append(("join", plain(joined)))
        epoch, tasks = joined.member_epoch, None
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # the internal topics appear, the initial delay passes
            beat = streams_heartbeat(side, v, app, member, epoch, active_tasks=[], standby_tasks=[], warmup_tasks=[])
            epoch = beat.member_epoch
            if beat.active_tasks:
                tasks = plain(beat.active_tasks)
            if not beat.status and tasks:
                break
            time.sleep(0.2)
        answers.append(("tasks", tasks))
        described = side.call(89, 1, {"group_ids": [app], "include_authorized_operations": False})
        answers.append(("describe", plain(described)))
        streams_heartbeat(side, v, app, member, -1)
        return answers

    answers = on_both(scenario, sides)
    for (name, kafka), (_, ours) in zip(answers[0], answers[1], strict=True):
        obs.compare(f"wire/StreamsGroupHeartbeat/word-count-{name}", kafka, ours, f"v{v}")
    obs.check()


STREAMS_GROUPS = TOOLS + "streams.StreamsGroupCommand"


def streams_member_running(side: Side, v: int, app: str, topology: Any) -> tuple[str, int]:
    """A member that joined with `topology` and heartbeats until it runs tasks (the internal
    topics created, the initial rebalance delay over): its id and epoch."""
    member = str(uuid.uuid4())
    epoch = streams_heartbeat(side, v, app, member, 0, topology).member_epoch
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        beat = streams_heartbeat(side, v, app, member, epoch, active_tasks=[], standby_tasks=[], warmup_tasks=[])
        epoch = beat.member_epoch
        if not beat.status and beat.active_tasks:
            return member, epoch
        time.sleep(0.05)
    raise AssertionError(f"{app}: no tasks within 30 s")


def test_kafka_streams_groups_tool(warm, sides):
    """Kafka 4.4's kafka-streams-groups (StreamsGroupCommand) against both, after the same
    steps: a streams group with a word-count topology (a repartition topic, a changelog), its
    member running every task, an offset committed on the input topic; --list, --describe with
    --members, --offsets and --state (and --verbose), --delete refused while the member is in;
    then the member leaves: --reset-offsets (dry run, then executed, which deletes the
    internal topics), --describe, --delete. Outputs compared as text, ids and hosts masked."""
    obs = Observations()
    v = max(common_versions(*warm.ranges, 88))
    app, source = "oracle-tool-app", "oracle-tool-in"
    rep, changelog, topology = word_count_topology(app, source)

    def member_committed(side: Side) -> tuple[str, int]:
        answer = side.call(
            19, 7, {"timeout": 30000, "topics": [{"name": source, "num_partitions": 2, "replication_factor": 1}]}
        )
        assert [t.error_code for t in answer.topics] == [0], answer
        wait_for_partitions(side.server.port, source, 2)
        produce_records(side.server.port, source, 0, 5)
        no_delay = {"name": "streams.initial.rebalance.delay.ms", "config_operation": 0, "value": "0"}
        altered = side.call(
            44,
            1,
            {"validate_only": False, "resources": [{"resource_type": 32, "resource_name": app, "configs": [no_delay]}]},
        )
        assert [r.error_code for r in altered.responses] == [0], altered
        member, epoch = streams_member_running(side, v, app, topology)
        committed = side.call(
            8,
            9,
            {
                "group_id": app,
                "generation_id_or_member_epoch": epoch,
                "member_id": member,
                "topics": [
                    {
                        "name": source,
                        "partitions": [{"partition_index": 0, "committed_offset": 3, "committed_leader_epoch": -1}],
                    }
                ],
            },
        )
        assert all(p.error_code == 0 for t in committed.topics for p in t.partitions), committed
        return member, epoch

    members = on_both(member_committed, sides)

    def tool(key: str, *args: str, lines: bool = False) -> None:
        run_tool(warm, obs, f"tools/kafka-streams-groups/{key}", STREAMS_GROUPS, *args, lines=lines)

    tool("list", "--list", lines=True)
    tool("list-state", "--list", "--state", lines=True)
    tool("describe", "--describe", "--group", app)
    tool("describe-members", "--describe", "--group", app, "--members")
    tool("describe-members-verbose", "--describe", "--group", app, "--members", "--verbose")
    tool("describe-state", "--describe", "--group", app, "--state")
    tool("describe-state-verbose", "--describe", "--group", app, "--state", "--verbose")
    tool("describe-offsets-verbose", "--describe", "--group", app, "--offsets", "--verbose")
    tool("describe-unknown", "--describe", "--group", "oracle-no-such-group")
    tool("delete-non-empty", "--delete", "--group", app)
    for side, (member, _) in zip(sides, members, strict=True):
        assert streams_heartbeat(side, v, app, member, -1).error_code == 0
    tool("describe-empty", "--describe", "--group", app, "--state")
    tool("reset-dry-run", "--reset-offsets", "--group", app, "--input-topic", source, "--to-earliest", "--dry-run")
    tool("reset-dry-run-all", "--reset-offsets", "--group", app, "--all-input-topics", "--to-latest", "--dry-run")
    tool("reset-execute", "--reset-offsets", "--group", app, "--all-input-topics", "--to-offset", "1", "--execute")
    tool("describe-after-reset", "--describe", "--group", app, "--offsets")
    tool("delete-offsets", "--delete-offsets", "--group", app, "--all-input-topics")
    tool("delete", "--delete", "--group", app)
    tool("list-after-delete", "--list", lines=True)
    obs.check()


def test_streams_group_members_get_kafkas_tasks(warm, sides):
    """Three members on two processes join a word-count streams group one after another, with
    a standby replica of each stateful task (the GROUP config streams.num.standby.replicas);
    after each join every member heartbeats what it owns until the group is Stable. Each
    member's tasks and target (StreamsGroupDescribe) compared with Kafka's after every step:
    the assignor's choices, its inputs (the tasks members hold) and the reconciliation.
    (Member and process ids fall in distinct buckets of Kafka's hash maps, so that the order
    Kafka's own group iterates its members in cannot matter.)"""
    obs = Observations()
    v = max(common_versions(*warm.ranges, 88))
    app, source = "oracle-sticky", "oracle-sticky-in"
    rep, changelog, topology = word_count_topology(app, source)
    joins = [("sticky-a", "process-1"), ("sticky-b", "process-2"), ("sticky-c", "process-2")]

    def tasks(answer_tasks: Any) -> list[dict[str, Any]]:
        return [{"subtopology_id": t.subtopology_id, "partitions": sorted(t.partitions)} for t in answer_tasks]

    def scenario(side: Side) -> list[tuple[str, Any]]:
        steps: list[tuple[str, Any]] = []
        answer = side.call(
            19, 7, {"timeout": 30000, "topics": [{"name": source, "num_partitions": 4, "replication_factor": 1}]}
        )
        assert [t.error_code for t in answer.topics] == [0], answer
        wait_for_partitions(side.server.port, source, 4)
        standby = {
            "resource_type": 32,
            "resource_name": app,
            "configs": [
                {"name": "streams.num.standby.replicas", "config_operation": 0, "value": "1"},
                # (no initial rebalance delay: a step waits for the heartbeats only, not 3 s)
                {"name": "streams.initial.rebalance.delay.ms", "config_operation": 0, "value": "0"},
            ],
        }
        altered = side.call(44, 1, {"validate_only": False, "resources": [standby]})
        assert [r.error_code for r in altered.responses] == [0], altered
        owned: dict[str, dict[str, Any]] = {}
        epochs: dict[str, int] = {}
        for member, process in joins:
            joined = streams_heartbeat(side, v, app, member, 0, topology, process_id=process)
            assert joined.error_code == 0, joined
            epochs[member] = joined.member_epoch
            owned[member] = {"active_tasks": [], "standby_tasks": [], "warmup_tasks": []}
            deadline = time.monotonic() + 30
            while True:  # every member heartbeats what it owns until the group is Stable
                for m in owned:
                    beat = streams_heartbeat(side, v, app, m, epochs[m], **owned[m])
                    assert beat.error_code == 0, beat
                    epochs[m] = beat.member_epoch
                    for kind in ("active_tasks", "standby_tasks", "warmup_tasks"):
                        if getattr(beat, kind) is not None:
                            owned[m][kind] = tasks(getattr(beat, kind))
                group = side.call(89, 1, {"group_ids": [app], "include_authorized_operations": False}).groups[0]
                if (
                    group.group_state == "Stable"
                    and all(x.member_epoch == group.assignment_epoch for x in group.members)
                    and len(group.members) == len(owned)
                ):
                    break
                assert time.monotonic() < deadline, f"{app} not Stable within 30 s: {group}"
                time.sleep(0.05)
            steps.append(
                (
                    f"after-{member}-joined",
                    sorted(
                        (x.member_id, x.process_id, plain(x.assignment), plain(x.target_assignment))
                        for x in group.members
                    ),
                )
            )
        for m in owned:
            streams_heartbeat(side, v, app, m, -1)
        return steps

    steps = on_both(scenario, sides)
    for (name, kafka), (_, ours) in zip(steps[0], steps[1], strict=True):
        obs.compare(f"wire/StreamsGroupDescribe/sticky-{name}", kafka, ours, f"v{v}")
    obs.check()


def test_streams_sticky_task_assignor_assigns_as_kafkas(oracle, tmp_path):
    """Kafka 4.4's StickyTaskAssignor itself (kcoord.oracle.StickyTaskAssignorCheck) and this
    server's on the same generated groups (tests/support/streams_assignor_cases.py: members
    on shared processes, stateful and stateless subtopologies, standbys, earlier assignments
    with members gone and come, stale holdings, reported task offsets): every member's active
    and standby tasks equal, tie-breaks included."""
    cases = streams_assignor_cases.generate(seed=44, count=600)
    path = tmp_path / "assignor-cases.txt"
    path.write_text(streams_assignor_cases.cases_text(cases))
    r = oracle.tools.run("kcoord.oracle.StickyTaskAssignorCheck", str(path))
    assert r.code == 0, r.err[-2000:]
    kafka = r.out.split("case ")[1:]
    ours = streams_assignor_cases.ours_text(cases).split("case ")[1:]
    assert len(kafka) == len(ours) == len(cases)
    differ = [i for i, (k, o) in enumerate(zip(kafka, ours, strict=True)) if k != o]
    assert not differ, (
        f"{len(differ)} of {len(cases)} differ; the first:\n"
        + streams_assignor_cases.cases_text([cases[differ[0]]])
        + f"Kafka: {kafka[differ[0]]}ours:  {ours[differ[0]]}"
    )


def test_transaction_error_paths(warm, sides):
    obs = Observations()
    compare_at_every_version(
        obs,
        sides,
        "wire/InitProducerId/timeout-above-max",
        22,
        fixed(
            {
                "transactional_id": "oracle-txn",
                "transaction_timeout": 3_600_000_000 // 1000,
                "producer_id": -1,
                "producer_epoch": -1,
            }
        ),
        warm.ranges,
    )
    compare_at_every_version(
        obs,
        sides,
        "wire/AddPartitionsToTxn/unknown-producer",
        24,
        fixed(
            {
                "v3_and_below_transactional_id": "oracle-txn-unknown",
                "v3_and_below_producer_id": 123456,
                "v3_and_below_producer_epoch": 0,
                "v3_and_below_topics": [{"name": TOPIC, "partitions": [0]}],
            }
        ),
        warm.ranges,
        versions=range(0, 4),
    )
    compare_at_every_version(  # an internal topic: not authorized to a client, the others not attempted
        obs,
        sides,
        "wire/AddPartitionsToTxn/internal-topic",
        24,
        fixed(
            {
                "v3_and_below_transactional_id": "oracle-txn-unknown",
                "v3_and_below_producer_id": 123456,
                "v3_and_below_producer_epoch": 0,
                "v3_and_below_topics": [
                    {"name": "__consumer_offsets", "partitions": [0]},
                    {"name": TOPIC, "partitions": [0]},
                    {"name": "oracle-no-such-topic", "partitions": [0]},
                ],
            }
        ),
        warm.ranges,
        versions=range(0, 4),
    )
    compare_at_every_version(
        obs,
        sides,
        "wire/EndTxn/unknown-producer",
        26,
        fixed(
            {"transactional_id": "oracle-txn-unknown", "producer_id": 123456, "producer_epoch": 0, "committed": True}
        ),
        warm.ranges,
    )
    compare_at_every_version(
        obs,
        sides,
        "wire/DescribeTransactions/unknown",
        65,
        fixed({"transactional_ids": ["oracle-txn-unknown"]}),
        warm.ranges,
    )
    obs.check()


def wait_for_txn_state(side: Side, txn_id: str, state: str) -> None:
    for _ in range(300):
        body = side.call(65, 0, {"transactional_ids": [txn_id]})
        if body.transaction_states[0].transaction_state == state:
            return
        time.sleep(0.05)
    raise AssertionError(f"{txn_id} never reached {state} on port {side.server.port}")


def produce_retrying(side: Side, txn_id: str, topic: str, records: bytes, retry: tuple[int, ...] = (6,)) -> Any:
    """A transactional Produce to partition 0, retried while Kafka's broker is not yet the
    leader of a topic just created (NOT_LEADER_OR_FOLLOWER) or another error of `retry`."""
    values = {
        "transactional_id": txn_id,
        "acks": -1,
        "timeout": 5000,
        "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": records}]}],
    }
    for _ in range(100):
        produced = side.call(0, 9, values)
        if produced.responses[0].partition_responses[0].error_code not in retry:
            break
        time.sleep(0.1)
    return produced


def test_tools_transactions_open_hanging_and_abort(warm, sides):
    """Kafka 4.4's kafka-transactions after the same steps on both brokers: describe-producers,
    describe and list during an open transaction; find-hanging with a transactional batch no
    coordinator knows of (written with verification off, as a broker before KIP-890 took it);
    abort of that transaction, then describe-producers and find-hanging again. Each side's
    producer id of the open transaction, timestamps and durations are masked. On the wire:
    InitProducerId fencing an open transaction, then the fenced epoch and a producer id never
    given on Produce, AddPartitionsToTxn, TxnOffsetCommit and EndTxn, and nothing written."""
    obs = Observations()
    topic, txn_id, hanging_pid = "oracle-txn-tools", "oracle-tools-txn", 4240  # (bucket 0 of a Java map)
    old = 1_700_000_000_000  # the hanging batch's timestamp: long past any transaction timeout
    pids = []
    for side in sides:
        answer = side.call(
            19, 7, {"timeout": 30000, "topics": [{"name": topic, "num_partitions": 1, "replication_factor": 1}]}
        )
        assert [t.error_code for t in answer.topics] == [0], answer
        wait_for_partitions(side.server.port, topic, 1)
        init = side.call(
            22, 4, {"transactional_id": txn_id, "transaction_timeout": 60_000, "producer_id": -1, "producer_epoch": -1}
        )
        assert init.error_code == 0, init
        pids.append(init.producer_id)
        added = side.call(
            24,
            3,
            {
                "v3_and_below_transactional_id": txn_id,
                "v3_and_below_producer_id": init.producer_id,
                "v3_and_below_producer_epoch": init.producer_epoch,
                "v3_and_below_topics": [{"name": topic, "partitions": [0]}],
            },
        )
        assert added.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code == 0, added
        records = build_batch(
            [(b"k", b"v")],
            timestamp_ms=old,
            producer_id=init.producer_id,
            producer_epoch=init.producer_epoch,
            base_sequence=0,
            transactional=True,
        )
        produced = produce_retrying(side, txn_id, topic, records)
        assert produced.responses[0].partition_responses[0].error_code == 0, produced

    def masked(text: str, server: Any, pid: int) -> str:
        text = tool_text(text, server)
        if pids[0] != pids[1]:  # (a producer id in its column: each broker hands out its own)
            text = re.sub(rf"(?m)(^|\t){pid} *(\t)", r"\1<pid>\2", text)
        # epoch milliseconds, and the durations counted from them to the tool's clock
        text = re.sub(r"\b1[0-9]{12}\b", "<timestamp>", text)
        # (with the column's padding: the tool pads each value to the column's width, so a
        # duration of another digit count is padded with as many more or fewer spaces)
        return re.sub(r"(<timestamp> *\t)[0-9]+ *", r"\1<n> ", text)

    def tool(key: str, *args: str) -> None:
        results = []
        for server, pid in zip(both(warm), pids):
            r = warm.tools.run(TOOLS + "TransactionsCommand", "--bootstrap-server", server.bootstrap, *args)
            out, err = masked(r.out, server, pid).splitlines(), masked(r.err, server, pid)
            if args[0] == "list":  # (each coordinator's ids in its hash map's order)
                out = out[:1] + sorted(out[1:])
            results.append({"exit": r.code, "out": out, "err": err.splitlines()[:3]})
        obs.compare(f"tools/kafka-transactions/{key}", *results)

    tool("describe-producers-open", "describe-producers", "--topic", topic, "--partition", "0")
    tool("describe-open", "describe", "--transactional-id", txn_id)
    tool("list-open", "list")
    for side, pid in zip(sides, pids):
        ended = side.call(
            26, 3, {"transactional_id": txn_id, "producer_id": pid, "producer_epoch": 0, "committed": True}
        )
        assert ended.error_code == 0, ended
        wait_for_txn_state(side, txn_id, "CompleteCommit")
        verification = {
            "resource_type": 4,
            "resource_name": "1",
            "configs": [{"name": "transaction.partition.verification.enable", "config_operation": 0, "value": "false"}],
        }
        altered = side.call(44, 1, {"validate_only": False, "resources": [verification]})
        assert [r.error_code for r in altered.responses] == [0], altered
        records = build_batch(
            [(b"k", b"h")],
            timestamp_ms=old,
            producer_id=hanging_pid,
            producer_epoch=0,
            base_sequence=0,
            transactional=True,
        )
        # (INVALID_PRODUCER_ID_MAPPING until Kafka's broker has the config from its metadata)
        produced = produce_retrying(side, "oracle-hanging", topic, records, retry=(6, 49))
        assert produced.responses[0].partition_responses[0].error_code == 0, produced
        verification["configs"][0]["config_operation"] = 1  # (delete: back to the default)
        altered = side.call(44, 1, {"validate_only": False, "resources": [verification]})
        assert [r.error_code for r in altered.responses] == [0], altered
    tool("describe-producers-hanging", "describe-producers", "--topic", topic, "--partition", "0")
    tool("find-hanging", "find-hanging", "--broker-id", "1")
    tool("find-hanging-topic", "find-hanging", "--topic", topic, "--max-transaction-timeout", "1")
    tool("abort", "abort", "--topic", topic, "--partition", "0", "--start-offset", "2")
    tool("describe-producers-aborted", "describe-producers", "--topic", topic, "--partition", "0")
    tool("find-hanging-after-abort", "find-hanging", "--broker-id", "1")
    # InitProducerId from a new instance while a transaction is open: CONCURRENT_TRANSACTIONS
    # while the old one is aborted under a bumped epoch, then the epoch after it
    answers: list[list[Any]] = [[], []]
    for side, seen in zip(sides, answers):
        init_values = {"transactional_id": "oracle-fenced", "transaction_timeout": 60_000}
        init_values.update(producer_id=-1, producer_epoch=-1)
        first = side.call(22, 4, init_values)
        added = side.call(
            24,
            3,
            {
                "v3_and_below_transactional_id": "oracle-fenced",
                "v3_and_below_producer_id": first.producer_id,
                "v3_and_below_producer_epoch": first.producer_epoch,
                "v3_and_below_topics": [{"name": topic, "partitions": [0]}],
            },
        )
        seen.append(plain(added))
        fencing = side.call(22, 4, init_values)
        seen.append((fencing.error_code, fencing.producer_id == -1, fencing.producer_epoch))
        wait_for_txn_state(side, "oracle-fenced", "CompleteAbort")
        again = side.call(22, 4, init_values)
        seen.append((again.error_code, again.producer_id == first.producer_id, again.producer_epoch))
        # the fenced instance (epoch 0) and a producer id the coordinator never gave: refused
        # everywhere, nothing written
        for pid, epoch in ((first.producer_id, first.producer_epoch), (first.producer_id + 1000, again.producer_epoch)):
            records = build_batch(
                [(b"k", b"z")],
                timestamp_ms=old,
                producer_id=pid,
                producer_epoch=epoch,
                base_sequence=0,
                transactional=True,
            )
            produced = produce_retrying(side, "oracle-fenced", topic, records)
            seen.append(produced.responses[0].partition_responses[0].error_code)
            ids = {"v3_and_below_transactional_id": "oracle-fenced", "v3_and_below_producer_id": pid}
            added = side.call(
                24,
                3,
                {
                    **ids,
                    "v3_and_below_producer_epoch": epoch,
                    "v3_and_below_topics": [{"name": topic, "partitions": [0]}],
                },
            )
            seen.append(added.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code)
            committed = side.call(
                28,
                3,
                {
                    "transactional_id": "oracle-fenced",
                    "group_id": "oracle-fenced-group",
                    "producer_id": pid,
                    "producer_epoch": epoch,
                    "topics": [
                        {
                            "name": topic,
                            "partitions": [{"partition_index": 0, "committed_offset": 1, "committed_metadata": ""}],
                        }
                    ],
                },
            )
            seen.append(committed.topics[0].partitions[0].error_code)
            ended = side.call(
                26,
                3,
                {"transactional_id": "oracle-fenced", "producer_id": pid, "producer_epoch": epoch, "committed": True},
            )
            seen.append(ended.error_code)
        latest = side.call(
            2,
            7,
            {
                "replica_id": -1,
                "isolation_level": 0,
                "topics": [{"name": topic, "partitions": [{"partition_index": 0, "timestamp": -1}]}],
            },
        )
        seen.append(latest.topics[0].partitions[0].offset)
    obs.compare("wire/InitProducerId/fences-open-transaction", *answers)
    obs.check()


# ---------------------------------------------------------------------------------------------
# Tools: Kafka 4.4's command-line tools, in the order a user would run them

TOOL_TOPIC, TOOL_GROUP = "oracle-tools", "oracle-tools-group"


def commit_offsets(port: int, group: str, topic: str, offsets: dict[int, int]) -> None:
    conn = Conn(port)
    try:
        answer = conn.call(
            8,
            9,
            {
                "group_id": group,
                "generation_id_or_member_epoch": -1,
                "member_id": "",
                "topics": [
                    {
                        "name": topic,
                        "partitions": [
                            {"partition_index": p, "committed_offset": o, "committed_leader_epoch": -1}
                            for p, o in offsets.items()
                        ],
                    }
                ],
            },
        )
        assert all(p.error_code == 0 for t in answer.topics for p in t.partitions), answer
    finally:
        conn.close()


def produce_records(port: int, topic: str, partition: int, count: int) -> None:
    """`count` records appended (until_served)."""
    records = batch([(b"k%d" % i, b"v") for i in range(count)])
    values = {
        "acks": -1,
        "timeout": 5000,
        "topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": records}]}],
    }
    conn = Conn(port)
    try:
        until_served(lambda: conn.call(0, 9, values))
    finally:
        conn.close()


def test_tools_topics_configs_offsets_and_groups(warm, tmp_path):
    obs = Observations()
    t = TOOL_TOPIC

    def tool(key: str, main: str, *args: str, lines: bool = False) -> None:
        run_tool(warm, obs, f"tools/{key}", main, *args, lines=lines)

    tool("kafka-topics/create", TOPICS, "--create", "--topic", t, "--partitions", "2")
    for server in both(warm):
        wait_for_partitions(server.port, t, 2)
    tool("kafka-topics/create-exists", TOPICS, "--create", "--topic", t, "--partitions", "2")
    tool("kafka-topics/alter-partitions", TOPICS, "--alter", "--topic", t, "--partitions", "3")
    for server in both(warm):
        wait_for_partitions(server.port, t, 3)
    tool("kafka-topics/describe", TOPICS, "--describe", "--topic", t)
    tool("kafka-topics/describe-unknown", TOPICS, "--describe", "--topic", "oracle-no-such-topic")
    tool("kafka-topics/delete-unknown", TOPICS, "--delete", "--topic", "oracle-no-such-topic")
    for server in both(warm):
        produce_records(server.port, t, 0, 5)
        commit_offsets(server.port, TOOL_GROUP, t, {0: 3})
    configs = TOOLS + "ConfigCommand"
    tool(
        "kafka-configs/alter-topic",
        configs,
        "--alter",
        "--entity-type",
        "topics",
        "--entity-name",
        t,
        "--add-config",
        "retention.ms=600000",
    )
    tool("kafka-configs/describe-topic", configs, "--describe", "--entity-type", "topics", "--entity-name", t)
    tool(
        "kafka-configs/describe-topic-all",
        configs,
        "--describe",
        "--entity-type",
        "topics",
        "--entity-name",
        t,
        "--all",
        lines=True,
    )
    tool("kafka-configs/describe-broker", configs, "--describe", "--entity-type", "brokers", "--entity-name", "1")
    tool(
        "kafka-configs/describe-broker-all",
        configs,
        "--describe",
        "--entity-type",
        "brokers",
        "--entity-name",
        "1",
        "--all",
        lines=True,
    )
    tool(
        "kafka-configs/describe-group-all",
        configs,
        "--describe",
        "--entity-type",
        "groups",
        "--entity-name",
        TOOL_GROUP,
        "--all",
        lines=True,
    )
    tool(
        "kafka-configs/alter-invalid",
        configs,
        "--alter",
        "--entity-type",
        "topics",
        "--entity-name",
        t,
        "--add-config",
        "cleanup.policy=bogus",
    )
    tool("kafka-get-offsets/topic", TOOLS + "GetOffsetShell", "--topic", t)
    tool("kafka-get-offsets/earliest", TOOLS + "GetOffsetShell", "--topic", t, "--time", "-2")
    groups = TOOLS + "consumer.group.ConsumerGroupCommand"
    tool("kafka-consumer-groups/list", groups, "--list", lines=True)
    tool("kafka-consumer-groups/describe", groups, "--describe", "--group", TOOL_GROUP)
    tool("kafka-consumer-groups/describe-state", groups, "--describe", "--group", TOOL_GROUP, "--state")
    tool("kafka-consumer-groups/describe-unknown", groups, "--describe", "--group", "oracle-no-such-group")
    tool(
        "kafka-consumer-groups/reset-dry-run",
        groups,
        "--reset-offsets",
        "--group",
        TOOL_GROUP,
        "--topic",
        t,
        "--to-earliest",
        "--dry-run",
    )
    tool(
        "kafka-consumer-groups/reset-execute",
        groups,
        "--reset-offsets",
        "--group",
        TOOL_GROUP,
        "--topic",
        f"{t}:0",
        "--to-offset",
        "1",
        "--execute",
    )
    tool("kafka-consumer-groups/delete-offsets", groups, "--delete-offsets", "--group", TOOL_GROUP, "--topic", t)
    tool("kafka-consumer-groups/delete", groups, "--delete", "--group", TOOL_GROUP)
    records = tmp_path / "delete-records.json"
    records.write_text(json.dumps({"version": 1, "partitions": [{"topic": t, "partition": 0, "offset": 2}]}))
    tool("kafka-delete-records/delete", TOOLS + "DeleteRecordsCommand", "--offset-json-file", str(records))
    tool(
        "kafka-leader-election/preferred",
        TOOLS + "LeaderElectionCommand",
        "--election-type",
        "preferred",
        "--all-topic-partitions",
    )
    reassign = TOOLS + "reassign.ReassignPartitionsCommand"
    topics_json = tmp_path / "topics.json"
    topics_json.write_text(json.dumps({"version": 1, "topics": [{"topic": t}]}))
    tool("kafka-reassign-partitions/list", reassign, "--list")
    tool(
        "kafka-reassign-partitions/generate",
        reassign,
        "--generate",
        "--topics-to-move-json-file",
        str(topics_json),
        "--broker-list",
        "1",
    )
    tool("kafka-log-dirs/describe", TOOLS + "LogDirsCommand", "--describe", "--topic-list", t)
    tool("kafka-acls/list", TOOLS + "AclCommand", "--list")
    tool("kafka-transactions/list", TOOLS + "TransactionsCommand", "--bootstrap-server", "{bootstrap}", "list")
    tool(
        "kafka-transactions/describe-producers",
        TOOLS + "TransactionsCommand",
        "--bootstrap-server",
        "{bootstrap}",
        "describe-producers",
        "--topic",
        t,
        "--partition",
        "0",
    )
    tool(
        "kafka-transactions/find-hanging",
        TOOLS + "TransactionsCommand",
        "--bootstrap-server",
        "{bootstrap}",
        "find-hanging",
        "--broker-id",
        "1",
    )
    shares = TOOLS + "consumer.group.ShareGroupCommand"
    tool("kafka-share-groups/list", shares, "--list")
    tool("kafka-share-groups/describe-unknown", shares, "--describe", "--group", "oracle-no-such-group")
    tool("kafka-cluster/cluster-id", TOOLS + "ClusterTool", "cluster-id", "--bootstrap-server", "{bootstrap}")
    tool("kafka-client-metrics/list", TOOLS + "ClientMetricsCommand", "--list")
    tool(
        "kafka-metadata-quorum/describe-status",
        TOOLS + "MetadataQuorumCommand",
        "--bootstrap-server",
        "{bootstrap}",
        "describe",
        "--status",
    )
    tool("kafka-broker-api-versions/list", TOOLS + "BrokerApiVersionsCommand", lines=True)
    tool("kafka-topics/list", TOPICS, "--list", lines=True)
    obs.check()


# ---------------------------------------------------------------------------------------------
# Clients: confluent-kafka's and kafka-python's admin calls and the three group types' life
# cycles, as their describe calls (and Kafka's own tools) report them

CLIENT_TOPIC = "oracle-clients"


def enum_name(value: Any) -> Any:
    return getattr(value, "name", value)


def confluent_group(admin, group: str) -> dict[str, Any]:
    d = admin.describe_consumer_groups([group])[group].result(15)
    return {
        "state": enum_name(d.state),
        "type": enum_name(d.type),
        "simple": d.is_simple_consumer_group,
        "assignor": d.partition_assignor,
        "coordinator": d.coordinator.id,
        "members": sorted(
            (
                m.client_id,
                sorted((tp.topic, tp.partition) for tp in m.assignment.topic_partitions),
                sorted((tp.topic, tp.partition) for tp in m.target_assignment.topic_partitions)
                if m.target_assignment is not None
                else None,
            )
            for m in d.members
        ),
    }


def confluent_offsets(admin, group: str) -> list[Any]:
    from confluent_kafka import ConsumerGroupTopicPartitions

    answer = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(15)
    return sorted((tp.topic, tp.partition, tp.offset) for tp in answer.topic_partitions)


def until(what: str, predicate, timeout: float = 60) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def consume(consumer, count: int) -> list[tuple[int, int]]:
    seen: list[tuple[int, int]] = []

    def more() -> bool:
        m = consumer.poll(0.2)
        if m is not None and m.error() is None:
            seen.append((m.partition(), m.offset()))
        return len(seen) >= count

    until(f"{count} records", more)
    return sorted(seen)


def group_tool(tools, server, *args: str) -> dict[str, Any]:
    """kafka-consumer-groups against one broker, its output masked as run_tool masks it."""
    r = tools.run(TOOLS + "consumer.group.ConsumerGroupCommand", "--bootstrap-server", server.bootstrap, *args)
    return {
        "exit": r.code,
        "out": tool_text(r.out, server).splitlines(),
        "err": tool_text(r.err, server).splitlines()[:3],
    }


def group_life_cycle(server, protocol: str, group: str, tools=None) -> list[tuple[str, Any]]:
    """One member of a classic or KIP-848 group reads what was produced, commits and leaves;
    what confluent-kafka's admin and the group's own describe API report at each step."""
    from confluent_kafka import Consumer
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": server.bootstrap})
    steps: list[tuple[str, Any]] = []
    c = Consumer(
        {
            "bootstrap.servers": server.bootstrap,
            "group.id": group,
            "group.protocol": protocol,
            "client.id": "oracle-member",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    try:
        c.subscribe([CLIENT_TOPIC])
        steps.append(("consumed", consume(c, 4)))
        c.commit(asynchronous=False)
        until("a stable group", lambda: confluent_group(admin, group)["state"] == "STABLE")
        steps.append(("describe-stable", confluent_group(admin, group)))
        steps.append(("offsets", confluent_offsets(admin, group)))
        if tools is not None:  # kafka-consumer-groups on the live group: members, offsets, state
            for view in ("--members", "--offsets", "--state"):
                steps.append((f"tool-describe{view}", group_tool(tools, server, "--describe", "--group", group, view)))
        if protocol == "consumer":
            conn = Conn(server.port)
            body = conn.call(69, 1, {"group_ids": [group], "include_authorized_operations": False})
            conn.close()
            steps.append(("wire-describe-stable", plain(body)))
    finally:
        c.close()
    steps.append(("describe-after-close", confluent_group(admin, group)))
    return steps


def prepare_client_topic(server) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": server.bootstrap})
    admin.create_topics([NewTopic(CLIENT_TOPIC, 2, 1)])[CLIENT_TOPIC].result(15)
    wait_for_partitions(server.port, CLIENT_TOPIC, 2)
    p = Producer({"bootstrap.servers": server.bootstrap, "linger.ms": 0})
    for i in range(4):
        p.produce(CLIENT_TOPIC, b"v%d" % i, key=b"k%d" % i, partition=i % 2)
    assert p.flush(15) == 0


@pytest.fixture(scope="module")
def client_topic(warm):
    """Both brokers with CLIENT_TOPIC: two partitions, two records in each."""
    on_both(prepare_client_topic, both(warm))
    return CLIENT_TOPIC


def test_client_confluent_admin_and_group_life_cycles(warm, client_topic):
    obs = Observations()
    for protocol, group in (("classic", "oracle-classic"), ("consumer", "oracle-kip848")):
        runs = on_both(
            lambda server, protocol=protocol, group=group: group_life_cycle(server, protocol, group, warm.tools),
            both(warm),
        )
        for (step, kafka), (_, ours) in zip(*runs, strict=True):
            obs.compare(f"client/confluent/{protocol}-group/{step}", kafka, ours)
    obs.check()


def test_client_confluent_admin_calls(warm, sides, client_topic):
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

    obs = Observations()
    answers: list[dict[str, Any]] = []
    for server in both(warm):
        admin = AdminClient({"bootstrap.servers": server.bootstrap})
        a: dict[str, Any] = {}
        md = admin.list_topics(timeout=15)
        a["list-topics"] = sorted(
            (name, len(t.partitions)) for name, t in md.topics.items() if name.startswith("oracle")
        )
        cluster = admin.describe_cluster().result(15)
        a["describe-cluster"] = {
            "controller": cluster.controller.id if cluster.controller else None,
            "nodes": sorted(n.id for n in cluster.nodes),
        }
        try:
            admin.create_topics([NewTopic(TOPIC, 3, 1)])[TOPIC].result(15)
            a["create-topic-exists"] = "created"
        except KafkaException as e:
            a["create-topic-exists"] = [e.args[0].name(), e.args[0].str()]
        res = ConfigResource("TOPIC", COMPACTED)
        configs = admin.describe_configs([res])[res].result(15)
        a["describe-configs-topic"] = {k: [v.value, enum_name(v.source), v.is_read_only] for k, v in configs.items()}
        a["list-groups"] = sorted(
            (g.group_id, enum_name(g.type))
            for g in admin.list_consumer_groups().result(15).valid
            if g.group_id.startswith("oracle-")
        )
        try:
            admin.describe_acls(_any_acl_filter()).result(15)
            a["describe-acls"] = "answered"
        except KafkaException as e:
            a["describe-acls"] = [e.args[0].name(), e.args[0].str()]
        answers.append(a)
    for key in answers[0]:
        obs.compare(f"client/confluent/admin/{key}", answers[0][key], answers[1][key])
    obs.check()


def _any_acl_filter():
    from confluent_kafka.admin import (
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        ResourcePatternType,
        ResourceType,
    )

    return AclBindingFilter(
        ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY, AclPermissionType.ANY
    )


def test_client_kafka_python_admin_calls(warm, sides, client_topic):
    from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient

    obs = Observations()
    calls = {
        "list-groups": lambda admin: sorted(
            (g for g in plain(admin.list_groups()) if "oracle" in json.dumps(g)), key=json.dumps
        ),
        "describe-groups": lambda admin: plain(admin.describe_groups(["oracle-classic"])),
        "describe-configs-topic": lambda admin: plain(
            admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, COMPACTED)])
        ),
        "describe-features": lambda admin: plain(admin.describe_features()),
        "describe-cluster": lambda admin: plain(admin.describe_cluster()),
        "describe-topics": lambda admin: plain(admin.describe_topics([CLIENT_TOPIC])),
    }
    answers: list[dict[str, Any]] = []
    for server in both(warm):
        admin = KafkaAdminClient(bootstrap_servers=server.bootstrap, request_timeout_ms=15000)
        a: dict[str, Any] = {}
        try:
            for key, call in calls.items():
                try:
                    a[key] = call(admin)
                except Exception as e:  # (a client error is an answer to compare too)
                    a[key] = f"{type(e).__name__}: {e}"
        finally:
            admin.close()
        answers.append(a)
    for key in calls:
        obs.compare(f"client/kafka-python/admin/{key}", answers[0][key], answers[1][key])
    obs.check()


def test_client_share_group_life_cycle(warm, client_topic):
    """A confluent-kafka ShareConsumer reads the topic (share.auto.offset.reset=earliest set with
    kafka-configs) and leaves; the share group as the wire describe and kafka-share-groups show it."""
    import confluent_kafka

    if not hasattr(confluent_kafka, "ShareConsumer"):
        pytest.skip("confluent-kafka without ShareConsumer")
    from confluent_kafka import ShareConsumer

    obs = Observations()
    group = "oracle-share-clients"
    run_tool(
        warm,
        obs,
        "tools/kafka-configs/alter-share-group",
        TOOLS + "ConfigCommand",
        "--alter",
        "--entity-type",
        "groups",
        "--entity-name",
        group,
        "--add-config",
        "share.auto.offset.reset=earliest",
    )

    def scenario(server: Any) -> list[tuple[str, Any]]:
        c = ShareConsumer({"bootstrap.servers": server.bootstrap, "group.id": group, "client.id": "oracle-share"})
        seen: list[tuple[int, int]] = []
        try:
            c.subscribe([CLIENT_TOPIC])

            def more() -> bool:
                for m in c.poll(0.5):
                    if m.error() is None:
                        seen.append((m.partition(), m.offset()))
                return len(seen) >= 4

            until("4 shared records", more)
            # Every record accepted, and the broker's answer awaited: the describes below then
            # read settled share-partition state at both brokers.
            c.commit_sync(15)
            conn = Conn(server.port)
            body = conn.call(77, 1, {"group_ids": [group], "include_authorized_operations": False})
            conn.close()
            return [("consumed", sorted(seen)), ("wire-describe", plain(body))]
        finally:
            c.close()

    steps = on_both(scenario, both(warm))
    for (step, kafka), (_, ours) in zip(*steps, strict=True):
        obs.compare(f"client/confluent/share-group/{step}", kafka, ours)
    shares = TOOLS + "consumer.group.ShareGroupCommand"
    run_tool(warm, obs, "tools/kafka-share-groups/describe-offsets", shares, "--describe", "--group", group)
    run_tool(warm, obs, "tools/kafka-share-groups/describe-state", shares, "--describe", "--group", group, "--state")
    run_tool(warm, obs, "tools/kafka-share-groups/list-after-use", shares, "--list")
    obs.check()


DLQ_SOURCE, DLQ_TOPIC = "oracle-dlq-source", "dlq.oracle-share"


def dead_letter_run(server, group: str) -> list[tuple[str, Any]]:
    """A share group with a dead-letter queue (KIP-1191, share.version 2): a ShareConsumer in
    explicit mode rejects two records and releases one twice (share.delivery.count.limit 2);
    the dead letters as a consumer reads them back (partition, key, value, headers; their
    timestamps are when they were written), and the share-partitions' offsets once the records
    are archived."""
    from confluent_kafka import AcknowledgeType, Consumer, Producer, ShareConsumer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": server.bootstrap})
    topics = [
        NewTopic(DLQ_SOURCE, 3, 1),
        NewTopic(DLQ_TOPIC, 2, 1, config={"errors.deadletterqueue.group.enable": "true"}),
    ]
    for future in admin.create_topics(topics).values():
        future.result(15)
    wait_for_partitions(server.port, DLQ_SOURCE, 3)
    wait_for_partitions(server.port, DLQ_TOPIC, 2)
    p = Producer({"bootstrap.servers": server.bootstrap, "linger.ms": 0})
    for key, partition in ((b"a", 2), (b"b", 2), (b"c", 0)):
        p.produce(DLQ_SOURCE, b"value-" + key, key=key, partition=partition, headers=[("h", b"x")])
    assert p.flush(15) == 0
    steps: list[tuple[str, Any]] = []
    c = ShareConsumer(
        {
            "bootstrap.servers": server.bootstrap,
            "group.id": group,
            "client.id": "oracle-dlq",
            "share.acknowledgement.mode": "explicit",
        }
    )
    try:
        c.subscribe([DLQ_SOURCE])
        seen: list[tuple[int, int]] = []

        def deliveries() -> bool:
            # (explicit mode: every record of a poll is acknowledged before the next poll)
            for m in c.poll(0.5):
                if m.error() is None:
                    seen.append((m.partition(), m.offset()))
                    released = (m.partition(), m.offset()) == (2, 1)
                    c.acknowledge(m, AcknowledgeType.RELEASE if released else AcknowledgeType.REJECT)
            c.commit_sync(15)
            return len(seen) >= 4

        # 2-0 and 0-0 rejected; 2-1 released at its first delivery and at its second (the limit)
        until("4 deliveries", deliveries)
        steps.append(("deliveries", sorted(seen)))
    finally:
        c.close()
    reader = Consumer(
        {"bootstrap.servers": server.bootstrap, "group.id": f"{group}-reader", "enable.auto.commit": False}
    )
    letters: list[Any] = []
    try:
        reader.assign([TopicPartition(DLQ_TOPIC, p, 0) for p in range(2)])

        def read() -> bool:
            m = reader.poll(0.2)
            if m is not None and m.error() is None:
                letters.append((m.partition(), m.key(), m.value(), m.headers(), m.timestamp()[0]))
            return len(letters) >= 3

        until("3 dead letters", read)
    finally:
        reader.close()
    steps.append(("dead-letters", sorted(letters, key=repr)))
    conn = Conn(server.port)
    try:
        values = {"groups": [{"group_id": group, "topics": None}]}

        def archived() -> Any:
            body = plain(conn.call(90, 1, values))
            lags = {p["partition_index"]: p["lag"] for t in body["groups"][0]["topics"] for p in t["partitions"]}
            return body if (lags.get(0), lags.get(2)) == (0, 0) else None

        # (no lag once the records are Archived, after their dead letters: Archiving counts)
        body = until("the records archived", archived)
        for t in body["groups"][0]["topics"]:
            t["topic_id"] = "<id>"
        steps.append(("describe-offsets", body))
    finally:
        conn.close()
    return steps


def test_client_share_group_dead_letter_queue(warm):
    import confluent_kafka

    if not hasattr(confluent_kafka, "ShareConsumer"):
        pytest.skip("confluent-kafka without ShareConsumer")
    obs = Observations()
    group = "oracle-share-dlq"
    configs = (
        "share.auto.offset.reset=earliest,share.delivery.count.limit=2,"
        f"errors.deadletterqueue.topic.name={DLQ_TOPIC},errors.deadletterqueue.copy.record.enable=true"
    )
    alter = ("--alter", "--entity-type", "groups", "--entity-name", group, "--add-config", configs)
    run_tool(warm, obs, "tools/kafka-configs/alter-share-group-dlq", TOOLS + "ConfigCommand", *alter)
    runs = on_both(lambda server: dead_letter_run(server, group), both(warm))
    for (step, kafka), (_, ours) in zip(*runs, strict=True):
        obs.compare(f"client/confluent/share-group-dlq/{step}", kafka, ours)
    shares = TOOLS + "consumer.group.ShareGroupCommand"
    run_tool(warm, obs, "tools/kafka-share-groups/describe-offsets-dlq", shares, "--describe", "--group", group)
    obs.check()


VERIFIABLE_TOPIC = "oracle-verifiable"
# Figures of a run rather than of a broker: when, how fast, how long.
EVENT_NOISE = {"timestamp", "avg_throughput", "target_throughput", "elapsed_time_ms", "avg_latency"}


def events(text: str) -> list[Any]:
    """VerifiableProducer's or VerifiableConsumer's JSON events, without their figures of the
    run; consecutive records_consumed events summed (how a poll splits records is timing)."""
    out: list[Any] = []
    for line in text.splitlines():
        try:
            e = json.loads(line)
        except ValueError:
            out.append(line)
            continue
        e = {k: v for k, v in e.items() if k not in EVENT_NOISE}
        if e.get("name") in ("partitions_assigned", "partitions_revoked") and not e.get("partitions"):
            continue  # (whether a KIP-848 member's first heartbeat already carries its partitions is timing)
        if e.get("name") == "records_consumed" and out and isinstance(out[-1], dict):
            if out[-1].get("name") == "records_consumed":
                out[-1]["count"] += e["count"]
                continue
        out.append(e)
    return out


def test_tools_verifiable_producer_and_consumers(warm):
    """VerifiableProducer writes five records; VerifiableConsumer reads them in a classic and in a
    KIP-848 group: their event streams (assignments, records, commits) compared."""
    obs = Observations()
    results: list[dict[str, Any]] = []
    for server in both(warm):
        conn = Conn(server.port)
        conn.call(
            19,
            7,
            {"timeout": 15000, "topics": [{"name": VERIFIABLE_TOPIC, "num_partitions": 1, "replication_factor": 1}]},
        )
        conn.close()
        wait_for_partitions(server.port, VERIFIABLE_TOPIC, 1)
        r: dict[str, Any] = {}
        produced = warm.tools.run(
            TOOLS + "VerifiableProducer",
            "--bootstrap-server",
            server.bootstrap,
            "--topic",
            VERIFIABLE_TOPIC,
            "--max-messages",
            "5",
            "--acks",
            "-1",
        )
        r["producer"] = {"exit": produced.code, "events": events(produced.out)}
        for protocol in ("classic", "consumer"):
            consumed = warm.tools.run(
                TOOLS + "VerifiableConsumer",
                "--bootstrap-server",
                server.bootstrap,
                "--topic",
                VERIFIABLE_TOPIC,
                "--group-id",
                f"oracle-verifiable-{protocol}",
                "--group-protocol",
                protocol,
                "--max-messages",
                "5",
                "--reset-policy",
                "earliest",
            )
            r[f"consumer-{protocol}"] = {"exit": consumed.code, "events": events(consumed.out)}
        results.append(r)
    # The scenario did what it says at Kafka (an empty run on both would compare equal too).
    kafka_events = results[0]
    assert [e.get("name") for e in kafka_events["producer"]["events"]].count("producer_send_success") == 5
    for protocol in ("classic", "consumer"):
        consumed = [e for e in kafka_events[f"consumer-{protocol}"]["events"] if e.get("name") == "records_consumed"]
        assert sum(e["count"] for e in consumed) == 5, kafka_events
    for key in results[0]:
        obs.compare(f"tools/verifiable/{key}", results[0][key], results[1][key])
    obs.check()


# ---------------------------------------------------------------------------------------------
# The group's records in __consumer_offsets, decoded


def group_records(side: Side, group: str, labels: dict[str, str] | None = None) -> list[tuple[str, Any]]:
    """The records of `group` in its __consumer_offsets partition as (key, value) data:
    topic ids named, member ids the broker made up by their `labels`, and what must differ
    masked (times, metadata versions and hashes, which hash topic ids, the client's address;
    a classic group's record only by its generation, protocol and member count)."""
    from aiokafka.record.memory_records import MemoryRecords

    from coordinator.log.offsets import partition_for
    from protocol.group_records import decode_key, decode_value

    body = side.call(
        1,
        12,
        {
            "replica_id": -1,
            "max_wait": 0,
            "min_bytes": 1,
            "max_bytes": 1 << 22,
            "session_epoch": -1,
            "topics": [
                {
                    "topic": "__consumer_offsets",
                    "partitions": [
                        {
                            "partition": partition_for(group),
                            "fetch_offset": 0,
                            "current_leader_epoch": -1,
                            "log_start_offset": -1,
                            "partition_max_bytes": 1 << 22,
                        }
                    ],
                }
            ],
        },
    )
    names = {tid: name for name, tid in side.topic_ids.items()}
    masked = {"timestamp", "version", "assignment_timestamp", "metadata_hash"}

    def shown(value: Any, field: str = "") -> Any:
        if labels and isinstance(value, str) and value in labels:
            return labels[value]
        if type(value).__name__ == "GroupMetadataValue":
            return {
                "protocol_type": value.protocol_type,
                "generation": value.generation,
                "protocol": value.protocol,
                "members": len(value.members),
            }
        if isinstance(value, uuid.UUID):
            return names.get(value, "<topic id>")
        if field in masked and isinstance(value, int):
            return "<set>" if value else 0
        if field == "client_host":
            return value.lstrip("/")
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            return {f.name: shown(getattr(value, f.name), f.name) for f in dataclasses.fields(value)}
        if isinstance(value, (tuple, list)):
            return [shown(v) for v in value]
        return value

    out: list[tuple[str, Any]] = []
    records = MemoryRecords(body.responses[0].partitions[0].records or b"")
    while (batch := records.next_batch()) is not None:
        if batch.is_control_batch:
            continue
        for record in batch:
            key = decode_key(record.key)
            if getattr(key, "group", None) != group:
                continue
            value = None if record.value is None else decode_value(key, record.value)
            out.append((type(key).__name__, [shown(key), shown(value)]))
    # Members' records of one type written together (several members' targets) come in Kafka's
    # hash maps' order of member ids: each such run compared as a set.
    runs: list[list[tuple[str, Any]]] = []
    for entry in out:
        if runs and runs[-1][0][0] == entry[0]:
            runs[-1].append(entry)
        else:
            runs.append([entry])
    return [
        entry
        for run in runs
        for entry in (sorted(run, key=lambda e: json.dumps(e, default=str)) if "member_id" in run[0][1][0] else run)
    ]


def regex_heartbeat(side: Side, group: str, member: str, epoch: int, names, regex, owned) -> Any:
    answer = side.call(
        68,
        1,
        {
            "group_id": group,
            "member_id": member,
            "member_epoch": epoch,
            "rebalance_timeout": 30000,
            "subscribed_topic_names": names,
            "subscribed_topic_regex": regex,
            "server_assignor": None,
            "topic_partitions": owned,
        },
    )
    assert answer.error_code == 0, answer
    return answer


class RegexMember:
    """One KIP-848 member of a group on one side, heartbeating over ConsumerGroupHeartbeat v1
    as a client would: it owns what it was last given (revoking at once)."""

    def __init__(self, side: Side, group: str, member: str) -> None:
        self.side, self.group, self.member = side, group, member
        self.epoch, self.owned = 0, []

    def beat(self, names=None, regex=None, first: bool = False) -> Any:
        answer = regex_heartbeat(
            self.side, self.group, self.member, 0 if first else self.epoch, names, regex, [] if first else self.owned
        )
        self.epoch = answer.member_epoch
        if answer.assignment is not None:
            self.owned = [
                {"topic_id": t.topic_id, "partitions": sorted(t.partitions)} for t in answer.assignment.topic_partitions
            ]
        return answer

    def group_epoch(self) -> int:
        described = self.side.call(69, 0, {"group_ids": [self.group], "include_authorized_operations": False})
        return described.groups[0].group_epoch

    def settled(self, count: int) -> None:
        """Heartbeats (each writes only what it changes) until it owns `count` partitions at
        the group's epoch."""

        def done() -> bool:
            self.beat()
            return self.epoch == self.group_epoch() and sum(len(t["partitions"]) for t in self.owned) == count

        until(f"{count} partitions at the group epoch", done)

    def resolved(self, before: int) -> None:
        """A regex is resolved apart from the heartbeat (Kafka's executor): wait for the epoch
        it bumps before the next heartbeat, so both brokers write in one order. A heartbeat
        every 3 s meanwhile keeps the member alive: on a loaded machine Kafka may resolve
        before its group coordinator's metadata image has the new topic (nothing matched, no
        epoch bump) and resolves again only at a heartbeat past its 10 s refresh interval;
        without one the member would expire first. A heartbeat before the resolution writes
        nothing on either broker."""
        last = time.monotonic()

        def bumped() -> bool:
            nonlocal last
            if self.group_epoch() > before:
                return True
            if time.monotonic() - last > 3:
                last = time.monotonic()
                self.beat()
            return False

        until("the regex resolved", bumped)


def groups_see(side: Side, topic: str) -> None:
    """Wait until the side's group coordinator assigns `topic`: Kafka's learns of a new topic
    from its metadata image a moment after its broker serves it, and a member that subscribed
    meanwhile (loaded machine) gets nothing, its regex matches nothing, and the scenario writes
    other records. A probe member of a group of its own asks until it is given a partition of
    the topic, then leaves and its group is deleted (the suite's listings see no extra group)."""
    group, member = f"{topic}-probe", str(uuid.UUID(int=0x9E0))

    def assigned() -> bool:
        answer = regex_heartbeat(side, group, member, 0, [topic], None, [])
        return answer.assignment is not None and bool(answer.assignment.topic_partitions)

    until(f"the group coordinator to assign {topic}", assigned)
    regex_heartbeat(side, group, member, -1, None, None, None)
    deleted = side.call(42, 2, {"groups_names": [group]})
    assert [g.error_code for g in deleted.results] == [0], deleted


def topic_for_a_group_assigning_at_once(side: Side, group: str, topic: str) -> None:
    """`topic` (2 partitions) made on `side`, and `group` set to compute a new target at every
    change (consumer.assignment.interval.ms 0), so both brokers write each step's records."""
    answer = side.call(
        19, 7, {"timeout": 30000, "topics": [{"name": topic, "num_partitions": 2, "replication_factor": 1}]}
    )
    assert [t.error_code for t in answer.topics] == [0], answer
    wait_for_partitions(side.server.port, topic, 2)
    side.learn_topic_ids()
    groups_see(side, topic)
    every_change = {"name": "consumer.assignment.interval.ms", "config_operation": 0, "value": "0"}
    resource = {"resource_type": 32, "resource_name": group, "configs": [every_change]}
    altered = side.call(44, 1, {"validate_only": False, "resources": [resource]})
    assert [r.error_code for r in altered.responses] == [0], altered


def test_consumer_group_records_with_a_regex(warm, sides):
    """A KIP-848 member subscribes with a regex, moves to the topic it matched by name, back to
    the regex, and leaves: the group's records in __consumer_offsets, decoded, are Kafka's
    (ConsumerGroupRegularExpression records and their tombstones, the epochs, targets and
    current assignments, in Kafka's order)."""
    group, topic, regex = "oracle-records-regex", "oracle-rx-a", "oracle-rx-.*"

    def scenario(side: Side) -> list[tuple[str, Any]]:
        topic_for_a_group_assigning_at_once(side, group, topic)
        m = RegexMember(side, group, str(uuid.UUID(int=0x848)))
        m.beat([], regex, first=True)
        m.resolved(1)
        m.settled(2)
        m.beat([topic], "")  # by name: the regex's last subscriber drops it
        m.settled(2)
        before = m.group_epoch()
        m.beat([], regex)  # back to the regex: resolved again
        m.resolved(before)
        m.settled(2)
        assert regex_heartbeat(side, group, m.member, -1, None, None, None).member_epoch == -1
        return group_records(side, group)

    dumps = on_both(scenario, sides)
    obs = Observations()
    obs.compare("records/consumer-group-regex", *dumps)
    obs.check()


def classic_member(side: Side, group: str, topic: str) -> str:
    """A classic member (JoinGroup v5, SyncGroup v3) that joins `group` alone and assigns
    itself both partitions of `topic`: its member id."""
    subscription = struct.pack(">hih", 0, 1, len(topic)) + topic.encode() + struct.pack(">i", -1)
    join = {
        "group_id": group,
        "session_timeout": 30000,
        "rebalance_timeout": 30000,
        "member_id": "",
        "group_instance_id": None,
        "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": subscription}],
    }
    joined = side.call(11, 5, join)
    if joined.error_code == 79:  # MEMBER_ID_REQUIRED
        joined = side.call(11, 5, {**join, "member_id": joined.member_id})
    assert joined.error_code == 0, joined
    assignment = write_assignment(0, [(topic, [0, 1])])
    synced = side.call(
        14,
        3,
        {
            "group_id": group,
            "generation_id": joined.generation_id,
            "member_id": joined.member_id,
            "group_instance_id": None,
            "assignments": [{"member_id": joined.member_id, "assignment": assignment}],
        },
    )
    assert synced.error_code == 0, synced
    return joined.member_id


def test_consumer_group_records_of_converted_classic_groups(warm, sides):
    """A consumer-protocol member joins a classic group with a member (Kafka's online upgrade)
    and one whose member left (Empty): the groups' records in __consumer_offsets, decoded, are
    Kafka's (the classic group's tombstone, the converted group's records, then the
    heartbeat's)."""
    topic, member = "oracle-mig", str(uuid.UUID(int=0x849))
    dumps: list[list[Any]] = [[], []]
    for i, side in enumerate(sides):
        answer = side.call(
            19, 7, {"timeout": 30000, "topics": [{"name": topic, "num_partitions": 2, "replication_factor": 1}]}
        )
        assert [t.error_code for t in answer.topics] == [0], answer
        wait_for_partitions(side.server.port, topic, 2)
        side.learn_topic_ids()
        for group, leaves in (("oracle-mig-live", False), ("oracle-mig-empty", True)):
            every_change = {"name": "consumer.assignment.interval.ms", "config_operation": 0, "value": "0"}
            resource = {"resource_type": 32, "resource_name": group, "configs": [every_change]}
            altered = side.call(44, 1, {"validate_only": False, "resources": [resource]})
            assert [r.error_code for r in altered.responses] == [0], altered
            classic = classic_member(side, group, topic)
            if leaves:
                left = side.call(13, 3, {"group_id": group, "members": [{"member_id": classic}]})
                assert left.error_code == 0, left
            joined = regex_heartbeat(side, group, member, 0, [topic], None, [])
            assert joined.error_code == 0
            dumps[i].append(group_records(side, group, {classic: "<classic member>"}))
            # (the group left memberless, as the suite's later listings expect its groups)
            assert regex_heartbeat(side, group, member, -1, None, None, None).member_epoch == -1
            if not leaves:
                left = side.call(13, 3, {"group_id": group, "members": [{"member_id": classic}]})
                assert left.error_code == 0, left
    obs = Observations()
    for group, kafka, ours in zip(("live", "empty"), *dumps, strict=True):
        # the classic group's records, then from its tombstone on the conversion's
        cut = [
            next(i for i, (k, (_, v)) in enumerate(d) if k == "GroupMetadataKey" and v is None) for d in (kafka, ours)
        ]
        obs.compare("records/classic-group-join", kafka[: cut[0]], ours[: cut[1]], group)
        obs.compare("records/classic-to-consumer-group", kafka[cut[0] :], ours[cut[1] :], group)
    obs.check()


def member_view(m: RegexMember, answer: Any) -> Any:
    """A heartbeat's answer as compared: its error, the member's epoch and what it owns after."""
    names = {tid: name for name, tid in m.side.topic_ids.items()}
    owned = sorted((names.get(t["topic_id"]), p) for t in m.owned for p in t["partitions"])
    return {"error": answer.error_code, "epoch": answer.member_epoch, "owns": owned}


def test_consumer_group_rejoin_at_epoch_zero_while_revoking(warm, sides):
    """A KIP-848 member that rejoins at epoch 0 under its member id while it is told to revoke
    a partition for a newcomer (a client fenced, or restarted with its id): Kafka 4.4 keeps the
    member, its epoch and assignment (throwIfConsumerGroupMemberEpochIsInvalid accepts epoch
    0), counts what it gave up as revoked, and the newcomer gets the partition then, not
    before. Each answer and the group's decoded records compared."""
    group, topic = "oracle-rejoin-zero", "oracle-rejoin"
    a_id, b_id = str(uuid.UUID(int=0x850)), str(uuid.UUID(int=0x851))

    def scenario(side: Side) -> tuple[list[tuple[str, Any]], list[tuple[str, Any]]]:
        topic_for_a_group_assigning_at_once(side, group, topic)
        a, b = RegexMember(side, group, a_id), RegexMember(side, group, b_id)
        seen = member_view
        steps = [("a joins", seen(a, a.beat([topic], None, first=True)))]
        steps.append(("b joins", seen(b, b.beat([topic], None, first=True))))
        steps.append(("a told to revoke", seen(a, a.beat())))
        steps.append(("b before a revokes", seen(b, b.beat())))
        steps.append(("a rejoins at epoch 0", seen(a, a.beat([topic], None, first=True))))
        steps.append(("b after a rejoined", seen(b, b.beat())))
        steps.append(("a again", seen(a, a.beat())))
        dump = group_records(side, group)
        for m in (a, b):  # (the group left memberless, as the suite's later listings expect its groups)
            assert regex_heartbeat(side, group, m.member, -1, None, None, None).member_epoch == -1
        return steps, dump

    (kafka_steps, kafka_dump), (our_steps, our_dump) = on_both(scenario, sides)
    steps, dumps = [kafka_steps, our_steps], [kafka_dump, our_dump]
    obs = Observations()
    for (name, kafka), (_, ours) in zip(steps[0], steps[1], strict=True):
        obs.compare("wire/ConsumerGroupHeartbeat/rejoin-at-epoch-0", kafka, ours, name)
    obs.compare("records/consumer-group-rejoin-at-epoch-0", *dumps)
    obs.check()
