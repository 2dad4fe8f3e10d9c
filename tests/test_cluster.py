"""Several brokers in one process (coordinator/topology.py), over the wire: Metadata,
FindCoordinator, DescribeCluster and OffsetForLeaderEpoch agree with each other and with
the cluster's controls, the wrong broker answers NOT_LEADER_OR_FOLLOWER / NOT_COORDINATOR,
and bad control input changes nothing. The clusters come from the kafka_cluster fixture
(coordinator/pytest_plugin.py)."""

from __future__ import annotations

import datetime

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from kio.schema.errors import ErrorCode as E

from tests.support.cluster_wire import close, connect, create_topic, nested
from tests.support.groups_wire import COMMIT, commit_body
from tests.support.wire_client import WireClient, request_class
from coordinator.testing import Cluster, ClusterError

METADATA, FIND_COORDINATOR, OFFSET_FOR_LEADER_EPOCH, DESCRIBE_CLUSTER = 3, 10, 23, 60
PRODUCE, FETCH, LIST_OFFSETS, OFFSET_FETCH, HEARTBEAT = 0, 1, 2, 9, 12


async def metadata(conn: WireClient, *topics: str):
    return await conn.request(
        METADATA,
        12,
        request_class(METADATA, 12)(
            topics=tuple(nested(METADATA, 12, "MetadataRequestTopic")(name=t, topic_id=None) for t in topics),
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=False,
        ),
    )


async def find_coordinator(conn: WireClient, key: str, key_type: int = 0):
    r = await conn.request(
        FIND_COORDINATOR, 4, request_class(FIND_COORDINATOR, 4)(key_type=key_type, coordinator_keys=(key,))
    )
    return r.coordinators[0]


async def offset_fetch_error(conn: WireClient, group: str) -> int:
    r = await conn.request(
        OFFSET_FETCH, 7, request_class(OFFSET_FETCH, 7)(group_id=group, topics=None, require_stable=False)
    )
    return r.error_code


async def end_offset(conn: WireClient, topic: str, partition: int, epoch: int, current: int = -1):
    r = await conn.request(
        OFFSET_FOR_LEADER_EPOCH,
        4,
        request_class(OFFSET_FOR_LEADER_EPOCH, 4)(
            replica_id=-2,
            topics=(
                nested(OFFSET_FOR_LEADER_EPOCH, 4, "OffsetForLeaderTopic")(
                    topic=topic,
                    partitions=(
                        nested(OFFSET_FOR_LEADER_EPOCH, 4, "OffsetForLeaderPartition")(
                            partition=partition, current_leader_epoch=current, leader_epoch=epoch
                        ),
                    ),
                ),
            ),
        ),
    )
    return r.topics[0].partitions[0]


@pytest.mark.kafka_cluster(brokers=3)
async def test_three_brokers_in_metadata_and_describe_cluster_with_replication_factor_3(kafka_cluster):
    conns = await connect(kafka_cluster)
    try:
        one = conns[1]
        assert await create_topic(one, "rf3", 6, 3) == E.none
        assert await create_topic(one, "rf4", 1, 4) == E.invalid_replication_factor  # 3 brokers
        assert await create_topic(one, "rf0", 1, 0) == E.invalid_replication_factor
        for conn in conns.values():
            md = await metadata(conn, "rf3")
            assert sorted(b.node_id for b in md.brokers) == [1, 2, 3]
            assert {b.node_id: b.port for b in md.brokers} == {b["node_id"]: b["port"] for b in kafka_cluster.brokers()}
            parts = md.topics[0].partitions
            assert all(sorted(p.replica_nodes) == [1, 2, 3] and sorted(p.isr_nodes) == [1, 2, 3] for p in parts)
            assert {p.leader_id for p in parts} == {1, 2, 3}  # leaders spread over the brokers
            assert all(p.leader_id == kafka_cluster.leader_of("rf3", p.partition_index) for p in parts)
            dc = await conn.request(
                DESCRIBE_CLUSTER,
                1,
                request_class(DESCRIBE_CLUSTER, 1)(include_cluster_authorized_operations=False, endpoint_type=1),
            )
            assert sorted(b.broker_id for b in dc.brokers) == [1, 2, 3]
        # __consumer_offsets partitions, so group coordinators, are spread too
        coordinators = {(await find_coordinator(one, f"group-{i}")).node_id for i in range(30)}
        assert coordinators == {1, 2, 3}
    finally:
        await close(conns)


@pytest.mark.kafka_cluster(brokers=2)
async def test_the_wrong_broker_answers_not_leader_and_not_coordinator(kafka_cluster):
    conns = await connect(kafka_cluster)
    try:
        assert await create_topic(conns[1], "t", 2, 2) == E.none
        leader = kafka_cluster.leader_of("t", 0)
        other = 3 - leader
        r = await conns[other].request(
            LIST_OFFSETS,
            7,
            request_class(LIST_OFFSETS, 7)(
                replica_id=-1,
                isolation_level=0,
                topics=(
                    nested(LIST_OFFSETS, 7, "ListOffsetsTopic")(
                        name="t",
                        partitions=(
                            nested(LIST_OFFSETS, 7, "ListOffsetsPartition")(
                                partition_index=0, current_leader_epoch=-1, timestamp=-1
                            ),
                        ),
                    ),
                ),
            ),
        )
        assert r.topics[0].partitions[0].error_code == E.not_leader_or_follower
        assert (await end_offset(conns[other], "t", 0, 0)).error_code == E.not_leader_or_follower
        assert (await end_offset(conns[leader], "t", 0, 0)).error_code == E.none
        fetch = await conns[other].request(
            FETCH,
            12,
            request_class(FETCH, 12)(
                replica_id=-1,
                max_wait=datetime.timedelta(0),
                min_bytes=1,
                max_bytes=1 << 20,
                isolation_level=0,
                session_id=0,
                session_epoch=-1,
                topics=(
                    nested(FETCH, 12, "FetchTopic")(
                        topic="t",
                        partitions=(
                            nested(FETCH, 12, "FetchPartition")(
                                partition=0,
                                current_leader_epoch=-1,
                                fetch_offset=0,
                                last_fetched_epoch=-1,
                                log_start_offset=-1,
                                partition_max_bytes=1 << 20,
                            ),
                        ),
                    ),
                ),
                forgotten_topics_data=(),
                rack_id="",
            ),
        )
        part = fetch.responses[0].partitions[0]
        assert part.error_code == E.not_leader_or_follower
        assert part.current_leader.leader_id == leader  # KIP-951's hint
        coordinator = kafka_cluster.coordinator_of("g")
        assert (await find_coordinator(conns[3 - coordinator], "g")).node_id == coordinator
        assert await offset_fetch_error(conns[3 - coordinator], "g") == E.not_coordinator
        assert await offset_fetch_error(conns[coordinator], "g") == E.none
        hb = await conns[3 - coordinator].request(
            HEARTBEAT,
            4,
            request_class(HEARTBEAT, 4)(group_id="g", generation_id=1, member_id="m", group_instance_id=None),
        )
        assert hb.error_code == E.not_coordinator
    finally:
        await close(conns)


@pytest.mark.kafka_cluster(brokers=3)
async def test_a_commit_to_a_broker_not_coordinating_its_group_names_unknown_topics_first(kafka_cluster):
    """Kafka's KafkaApis answers a partition that does not exist itself, before it asks the
    group coordinator: UNKNOWN_TOPIC_OR_PARTITION on every broker, NOT_COORDINATOR for the
    others on a broker that does not coordinate the group (and on that one alone, the commit)."""
    conns = await connect(kafka_cluster)
    try:
        assert await create_topic(conns[1], "t", 1, 3) == E.none
        coordinator = kafka_cluster.coordinator_of("g")
        other = next(n for n in conns if n != coordinator)

        async def commit(node, offsets):
            r = await conns[node].request(COMMIT, 9, commit_body(9, "g", "", -1, offsets))
            return [(t.name, p.partition_index, p.error_code) for t in r.topics for p in t.partitions]

        mixed = [("t", 0, 1), ("nowhere", 0, 1), ("t", 5, 1)]
        assert await commit(other, mixed) == [
            ("t", 5, E.unknown_topic_or_partition),
            ("t", 0, E.not_coordinator),
            ("nowhere", 0, E.unknown_topic_or_partition),
        ]
        assert await commit(other, [("nowhere", 0, 1)]) == [("nowhere", 0, E.unknown_topic_or_partition)]
        assert await commit(coordinator, mixed) == [
            ("t", 5, E.unknown_topic_or_partition),
            ("t", 0, E.none),
            ("nowhere", 0, E.unknown_topic_or_partition),
        ]
    finally:
        await close(conns)


@pytest.mark.kafka_cluster(brokers=3)
async def test_a_moved_leader_bumps_its_epoch_and_offset_for_leader_epoch_follows(kafka_cluster):
    conns = await connect(kafka_cluster)
    try:
        assert await create_topic(conns[1], "e", 1, 3) == E.none
        old = kafka_cluster.leader_of("e", 0)
        new = await kafka_cluster.amove_leader("e", 0)
        assert new != old and kafka_cluster.leader_of("e", 0) == new
        md = await metadata(conns[old], "e")
        p = md.topics[0].partitions[0]
        assert (p.leader_id, p.leader_epoch) == (new, 1)
        # epoch 0 ended where epoch 1 began (the log end offset then, 0)
        answer = await end_offset(conns[new], "e", 0, 0, current=1)
        assert (answer.error_code, answer.leader_epoch, answer.end_offset) == (E.none, 0, 0)
        assert (await end_offset(conns[new], "e", 0, 0, current=0)).error_code == E.fenced_leader_epoch
        assert (await end_offset(conns[new], "e", 0, 0, current=2)).error_code == E.unknown_leader_epoch
        assert (await end_offset(conns[old], "e", 0, 0, current=1)).error_code == E.not_leader_or_follower
    finally:
        await close(conns)


async def fetch_part(
    conn: WireClient, topic: str, current: int, v: int = 12, session_epoch: int = -1, session_id: int = 0
):
    r = await conn.request(
        FETCH,
        v,
        request_class(FETCH, v)(
            replica_id=-1,
            max_wait=datetime.timedelta(0),
            min_bytes=1,
            max_bytes=1 << 20,
            isolation_level=0,
            session_id=session_id,
            session_epoch=session_epoch,
            topics=(
                nested(FETCH, v, "FetchTopic")(
                    topic=topic,
                    partitions=(
                        nested(FETCH, v, "FetchPartition")(
                            partition=0,
                            current_leader_epoch=current,
                            fetch_offset=0,
                            last_fetched_epoch=-1,
                            log_start_offset=-1,
                            partition_max_bytes=1 << 20,
                        ),
                    ),
                ),
            ),
            forgotten_topics_data=(),
            rack_id="",
        ),
    )
    return r


@pytest.mark.kafka_cluster(brokers=3)
async def test_fetch_checks_the_current_leader_epoch(kafka_cluster):
    """Kafka's Partition.checkCurrentLeaderEpoch on Fetch v9+: an older epoch is fenced (with
    KIP-951's leader hint), a newer one unknown; a negative one is no epoch (not checked), as
    Kafka's FetchRequest reads it. A fetch session keeps the epoch of the latest request that
    lists the partition."""
    conns = await connect(kafka_cluster)
    try:
        assert await create_topic(conns[1], "fe", 1, 3) == E.none
        new = await kafka_cluster.amove_leader("fe", 0)  # epoch 1
        for current, error in [
            (-1, E.none),
            (-5, E.none),
            (1, E.none),
            (0, E.fenced_leader_epoch),
            (2, E.unknown_leader_epoch),
        ]:
            part = (await fetch_part(conns[new], "fe", current)).responses[0].partitions[0]
            assert part.error_code == error, current
        fenced = (await fetch_part(conns[new], "fe", 0)).responses[0].partitions[0]
        assert (fenced.current_leader.leader_id, fenced.current_leader.leader_epoch) == (new, 1)
        # a session opened under epoch 1 is fenced once the leadership moves back and forth
        opened = await fetch_part(conns[new], "fe", 1, session_epoch=0)
        assert opened.session_id > 0 and opened.responses[0].partitions[0].error_code == E.none
        await kafka_cluster.amove_leader("fe", 0, to=new % 3 + 1)
        await kafka_cluster.amove_leader("fe", 0, to=new)  # epoch 3
        r = await conns[new].request(
            FETCH,
            12,
            request_class(FETCH, 12)(
                replica_id=-1,
                max_wait=datetime.timedelta(0),
                min_bytes=1,
                max_bytes=1 << 20,
                isolation_level=0,
                session_id=opened.session_id,
                session_epoch=1,
                topics=(),
                forgotten_topics_data=(),
                rack_id="",
            ),
        )
        assert r.responses[0].partitions[0].error_code == E.fenced_leader_epoch
        # the client learns the new epoch and says so in the session: served again
        r = await fetch_part(conns[new], "fe", 3, session_id=opened.session_id, session_epoch=2)
        assert r.responses[0].partitions[0].error_code == E.none
        # Fetch v8 carries no epoch: not checked
        assert (
            await conns[new].request(
                FETCH,
                8,
                request_class(FETCH, 8)(
                    replica_id=-1,
                    max_wait=datetime.timedelta(0),
                    min_bytes=1,
                    max_bytes=1 << 20,
                    isolation_level=0,
                    session_id=0,
                    session_epoch=-1,
                    topics=(
                        nested(FETCH, 8, "FetchTopic")(
                            topic="fe",
                            partitions=(
                                nested(FETCH, 8, "FetchPartition")(
                                    partition=0, fetch_offset=0, log_start_offset=-1, partition_max_bytes=1 << 20
                                ),
                            ),
                        ),
                    ),
                    forgotten_topics_data=(),
                ),
            )
        ).responses[0].partitions[0].error_code == E.none
    finally:
        await close(conns)


@pytest.mark.kafka_cluster(brokers=3)
def test_a_stopped_broker_leaves_metadata_and_isr_and_comes_back(kafka_cluster):
    import asyncio

    async def check(stopped: int | None) -> None:
        conns = await connect(kafka_cluster)
        try:
            for conn in conns.values():
                md = await metadata(conn, "s")
                live = sorted(b.node_id for b in md.brokers)
                assert live == sorted(n for n in (1, 2, 3) if n != stopped)
                for p in md.topics[0].partitions:
                    assert p.leader_id in live and sorted(p.isr_nodes) == live
                    assert stopped is None or list(p.offline_replicas) == [stopped]
        finally:
            await close(conns)

    async def create() -> None:
        conns = await connect(kafka_cluster)
        assert await create_topic(conns[1], "s", 3, 3) == E.none
        await close(conns)

    asyncio.run(create())
    led = [p for p in range(3) if kafka_cluster.leader_of("s", p) == 2]
    kafka_cluster.stop_broker(2)
    assert [b["alive"] for b in kafka_cluster.brokers()] == [True, False, True]
    asyncio.run(check(stopped=2))
    kafka_cluster.start_broker(2)
    asyncio.run(check(stopped=None))
    assert all(kafka_cluster.leader_of("s", p) != 2 for p in led)  # not led again unless asked
    kafka_cluster.stop_broker(2)
    kafka_cluster.start_broker(2, preferred=True)
    assert all(kafka_cluster.leader_of("s", p) == 2 for p in led)


@pytest.mark.kafka_cluster(brokers=2)
def test_bad_control_input_is_refused_and_changes_nothing(kafka_cluster):
    before = kafka_cluster.brokers()
    coordinator = kafka_cluster.coordinator_of("g")
    with pytest.raises(ClusterError, match="no broker 7"):
        kafka_cluster.stop_broker(7)
    with pytest.raises(ClusterError, match="no broker"):
        kafka_cluster.move_coordinator("g", to=9)
    with pytest.raises(ClusterError, match="no partition"):
        kafka_cluster.move_leader("no-such-topic", 0)
    with pytest.raises(ClusterError, match="no partition"):
        kafka_cluster.leader_of("__consumer_offsets", 999)
    with pytest.raises(ClusterError, match="non-empty"):
        kafka_cluster.move_coordinator("")
    kafka_cluster.stop_broker(2)
    with pytest.raises(ClusterError, match="last one running"):
        kafka_cluster.stop_broker(1)
    with pytest.raises(ClusterError, match="is stopped"):
        kafka_cluster.move_coordinator("g", to=2)
    kafka_cluster.start_broker(2)
    assert [b["alive"] for b in kafka_cluster.brokers()] == [b["alive"] for b in before]
    assert kafka_cluster.coordinator_of("g") in (1, 2)
    assert coordinator in (1, 2)


# Metadata, FindCoordinator and the group APIs agree at every moment -------------------

_OPS = st.lists(
    st.one_of(
        st.tuples(st.just("move_leader"), st.integers(0, 2), st.one_of(st.none(), st.integers(1, 3))),
        st.tuples(
            st.just("move_coordinator"), st.sampled_from(["ga", "gb", "gc"]), st.one_of(st.none(), st.integers(1, 3))
        ),
        st.tuples(
            st.just("move_transaction_coordinator"),
            st.sampled_from(["ta", "tb"]),
            st.one_of(st.none(), st.integers(1, 3)),
        ),
        st.tuples(st.just("stop"), st.integers(1, 3)),
        st.tuples(st.just("start"), st.integers(1, 3)),
    ),
    min_size=1,
    max_size=6,
)


@pytest.fixture(scope="module")
def shared_cluster():
    import asyncio

    with Cluster(brokers=3) as cluster:

        async def create() -> None:
            conns = await connect(cluster)
            assert await create_topic(conns[1], "p", 3, 2) == E.none
            await close(conns)

        asyncio.run(create())
        yield cluster


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=_OPS)
def test_metadata_find_coordinator_and_the_apis_agree_through_any_moves(shared_cluster, ops):
    import asyncio

    cluster = shared_cluster
    for op in ops:
        try:
            if op[0] == "move_leader":
                cluster.move_leader("p", op[1], op[2])
            elif op[0] == "move_coordinator":
                cluster.move_coordinator(op[1], op[2])
            elif op[0] == "move_transaction_coordinator":
                cluster.move_transaction_coordinator(op[1], op[2])
            elif op[0] == "stop":
                cluster.stop_broker(op[1])
            else:
                cluster.start_broker(op[1])
        except ClusterError:
            pass  # (a stopped target, the last broker: refused, and nothing changed)
        asyncio.run(_consistent(cluster))
    for node in (1, 2, 3):
        cluster.start_broker(node)


async def _consistent(cluster: Cluster) -> None:
    conns = await connect(cluster)
    try:
        leaders = {p: cluster.leader_of("p", p) for p in range(3)}
        coordinators = {g: cluster.coordinator_of(g) for g in ("ga", "gb", "gc")}
        txn_coordinators = {t: cluster.transaction_coordinator_of(t) for t in ("ta", "tb")}
        assert set(coordinators.values()) | set(txn_coordinators.values()) <= set(conns)
        for node, conn in conns.items():
            md = await metadata(conn, "p")
            assert sorted(b.node_id for b in md.brokers) == sorted(conns)
            epochs = {}
            for p in md.topics[0].partitions:
                assert p.leader_id == leaders[p.partition_index] and p.leader_id in conns
                epochs[p.partition_index] = p.leader_epoch
            for p, leader in leaders.items():
                answer = await end_offset(conn, "p", p, epochs[p], current=epochs[p])
                assert answer.error_code == (E.none if node == leader else E.not_leader_or_follower)
            for g, coordinator in coordinators.items():
                assert (await find_coordinator(conn, g)).node_id == coordinator
                assert await offset_fetch_error(conn, g) == (E.none if node == coordinator else E.not_coordinator)
            for t, coordinator in txn_coordinators.items():
                assert (await find_coordinator(conn, t, key_type=1)).node_id == coordinator
    finally:
        await close(conns)


def _two_free_ports() -> int:
    """A port p with p + 1 free too (the second broker listens on the next port)."""
    import socket

    for _ in range(50):
        with socket.socket() as a:
            a.bind(("127.0.0.1", 0))
            port = a.getsockname()[1]
            if port >= 65535:
                continue
            with socket.socket() as b:
                try:
                    b.bind(("127.0.0.1", port + 1))
                except OSError:
                    continue
        return port
    raise AssertionError("no two consecutive free ports")


def test_listeners_and_advertised_listeners_go_up_by_one_per_broker(tmp_path):
    import asyncio

    port = _two_free_ports()
    with Cluster(
        brokers=2,
        data_dir=tmp_path / "d",
        listeners=f"PLAINTEXT://127.0.0.1:{port}",
        advertised_listeners="PLAINTEXT://localhost:19092",
    ) as cluster:
        assert [(b["node_id"], b["port"]) for b in cluster.brokers()] == [(1, 19092), (2, 19093)]

        async def advertised() -> list:
            conn = await WireClient("listeners").connect("127.0.0.1", port + 1)
            md = await metadata(conn)
            await conn.close()
            return sorted((b.node_id, b.host, b.port) for b in md.brokers)

        assert asyncio.run(advertised()) == [(1, "localhost", 19092), (2, "localhost", 19093)]


def test_brokers_with_several_listeners_take_ports_a_stride_apart():
    from coordinator.config import parse_args
    from coordinator.listeners import listeners_of

    config = parse_args(
        [
            "--brokers",
            "3",
            "--listeners",
            "PLAINTEXT://127.0.0.1:9092,SASL_SSL://127.0.0.1:9093",
            "--advertised-listeners",
            "PLAINTEXT://kafka:19092,SASL_SSL://kafka:19093",
        ]
    )
    assert [(x.node_id, x.protocol, x.port, x.advertised) for x in listeners_of(config)] == [
        (1, "PLAINTEXT", 9092, ("kafka", 19092)),
        (1, "SASL_SSL", 9093, ("kafka", 19093)),
        (2, "PLAINTEXT", 9094, ("kafka", 19094)),
        (2, "SASL_SSL", 9095, ("kafka", 19095)),
        (3, "PLAINTEXT", 9096, ("kafka", 19096)),
        (3, "SASL_SSL", 9097, ("kafka", 19097)),
    ]


def test_bad_brokers_flag_is_one_line_and_exit_2(tmp_path):
    import subprocess
    import sys

    for args, message in (
        (["--brokers", "0"], "--brokers: 0; at least 1"),
        (["--brokers", "3", "--port", "65534"], "port is past 65535"),
        (["--port", "99999"], "--port 99999: not a port (0-65535)"),
        (["--port", "-1"], "--port -1: not a port (0-65535)"),
        (["--advertised-port", "70000"], "--advertised-port 70000: not a port (0-65535)"),
        (["--offsets-partitions", "0"], "--offsets-partitions: 0; at least 1"),
        (["--num-partitions", "-1"], "--num-partitions: -1; at least 1"),
    ):
        done = subprocess.run(
            [sys.executable, "-m", "coordinator", "--data-dir", str(tmp_path / "d"), *args],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 2 and message in done.stderr
        assert len(done.stderr.strip().splitlines()) == 1


def test_leader_epochs_outlive_a_restart(tmp_path):
    """Epochs are kept in each partition's leader-epoch-checkpoint: after a restart Metadata
    reports the epoch the batches carry, and OffsetForLeaderEpoch still ends each older epoch
    where the next began."""
    import asyncio

    from confluent_kafka import Producer

    def produce(bootstrap: str, n: int) -> None:
        p = Producer({"bootstrap.servers": bootstrap})
        for i in range(n):
            p.produce("kept", str(i).encode(), partition=0)
        assert p.flush(30) == 0

    async def create(cluster: Cluster) -> None:
        conns = await connect(cluster)
        assert await create_topic(conns[1], "kept", 1, 3) == E.none
        await close(conns)

    async def answers(cluster: Cluster) -> tuple:
        conns = await connect(cluster)
        try:
            leader = cluster.leader_of("kept", 0)
            p = (await metadata(conns[leader], "kept")).topics[0].partitions[0]
            ends = []
            for epoch in (0, 1, 2):
                r = await end_offset(conns[leader], "kept", 0, epoch, current=p.leader_epoch)
                ends.append((r.error_code, r.leader_epoch, r.end_offset))
            return p.leader_epoch, ends
        finally:
            await close(conns)

    with Cluster(brokers=3, data_dir=tmp_path / "d") as cluster:
        asyncio.run(create(cluster))
        produce(cluster.bootstrap, 5)
        cluster.move_leader("kept", 0)
        produce(cluster.bootstrap, 5)
        cluster.move_leader("kept", 0)
        before = asyncio.run(answers(cluster))
    assert before == (2, [(E.none, 0, 5), (E.none, 1, 10), (E.none, 2, 10)])
    with Cluster(brokers=3, data_dir=tmp_path / "d") as cluster:
        assert asyncio.run(answers(cluster)) == before


@pytest.mark.parametrize("subprocess", [False, True])
@pytest.mark.parametrize(
    "kw, message",
    [
        ({"brokers": 0}, "brokers: 0; at least 1"),
        ({"brokers": "3"}, "brokers: '3'; at least 1"),
        ({"no_such_setting": 1}, "unrecognized arguments: --no-such-setting 1"),
        ({"fsync": "bogus"}, "argument --fsync: invalid choice: 'bogus'"),
        ({"group_consumer_session_timeout_ms": "soon"}, "--group-consumer-session-timeout-ms"),
    ],
)
def test_bad_cluster_arguments_are_one_value_error(tmp_path, kw, message, subprocess):
    """Cluster() raises the server's one-line complaint as a ValueError (not argparse's exit),
    whether the brokers would run in this process or a child."""
    with pytest.raises(ValueError) as raised:
        Cluster(subprocess=subprocess, **kw).start()
    assert message in str(raised.value) and "\n" not in str(raised.value)
