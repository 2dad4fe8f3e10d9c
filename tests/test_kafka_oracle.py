"""The differential suite: a real Apache Kafka 4.4 node as the oracle. The same scenarios run
against Kafka and against this server (in this process), their answers are compared field by
field after masking what must differ (tests/support/kafka_differences.py), and every
difference is either listed there with its reason (docs/kafka-differences.md) or fails the
test. One Kafka node for the whole module, which is why the suite is one module: pytest-xdist
runs a module in one worker (--dist loadfile), and tests/conftest.py schedules this one first.

Needs Java 17 and `make oracle` (Kafka's jars from Maven); skipped, saying why, without them."""

from __future__ import annotations

import re
import threading
import time
from types import SimpleNamespace
from typing import Any

import pytest

from tests.support import kafka_oracle
from tests.support.kafka_differences import Observations, plain
from tests.support.oracle_wire import NAMES, Conn, api_ranges, common_versions
from tests.support.process import InProcessServer

UNAVAILABLE = kafka_oracle.unavailable()
pytestmark = [pytest.mark.slow, pytest.mark.skipif(UNAVAILABLE is not None, reason=UNAVAILABLE or "")]


@pytest.fixture(scope="module")
def oracle(tmp_path_factory):
    """Kafka 4.4, the tool launcher and this server, started side by side."""
    base = tmp_path_factory.mktemp("oracle")
    kafka = kafka_oracle.KafkaNode(base / "kafka")
    errors: list[BaseException] = []

    def start() -> None:
        try:
            kafka.start()
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
        kafka.close()


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


def both(oracle) -> list[Any]:
    return [oracle.kafka, oracle.ours]


# ---------------------------------------------------------------------------------------------
# Tools: output text, with what must differ masked

TOPIC_ID = re.compile(r"\b[A-Za-z0-9_-]{22}\b")


def tool_text(text: str, server) -> str:
    text = text.replace(server.bootstrap, "<bootstrap>")
    text = re.sub(r"127\.0\.0\.1:\d+", "<host:port>", text)
    text = re.sub(r"(localhost|127\.0\.0\.1)", "<host>", text)
    text = TOPIC_ID.sub("<id>", text)
    text = re.sub(r"\bEpoch: \d+", "Epoch: <n>", text)
    return re.sub(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", "<uuid>", text)


def run_tool(oracle, obs: Observations, key: str, main: str, *args: str, lines: bool = False) -> None:
    """One tool invocation against both brokers; outputs compared as text (or as sets of lines
    where the tool's order is not defined)."""
    results = []
    for server in both(oracle):
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


TOPICS = "org.apache.kafka.tools.TopicCommand"
FEATURES = "org.apache.kafka.tools.FeatureCommand"


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
SWEEP_SKIPS = {
    17: "SaslHandshake on a plaintext listener is the SASL suite's business",
    36: "SaslAuthenticate: as SaslHandshake",
}
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
