"""The JSON stores (topics, broker configs, ACLs, SCRAM credentials, producer id blocks, client quotas)
survive a kill at every step of a write: the server that restarts reads the old document or
the new one, never neither and never a torn one, no client was answered before its change
was durable, and no producer id is handed out twice."""

from __future__ import annotations

import datetime
import json
import os
import signal

import pytest

from tests.support.acls import GROUP, READ, create_acls_body
from tests.support.wire_client import WireClient, request_class as rc
from coordinator.durable import STEPS, JsonFile
from tests.support.cli import one_error_line, refused, start
from tests.support.process import InProcessServer, ServerProcess

pytestmark = pytest.mark.slow  # a server process killed at every step of each store's write

INIT_PRODUCER_ID, METADATA, CREATE_TOPICS, CREATE_ACLS, INCREMENTAL_ALTER_CONFIGS, ALTER_SCRAM = 22, 3, 19, 30, 44, 51
AFTER_RENAME = STEPS.index("renamed")


async def init_producer_id(c: WireClient) -> int:
    r = await c.request(
        INIT_PRODUCER_ID,
        4,
        rc(INIT_PRODUCER_ID, 4)(
            transactional_id=None, transaction_timeout=datetime.timedelta(seconds=60), producer_id=-1, producer_epoch=-1
        ),
    )
    assert r.error_code == 0
    return r.producer_id


def create_topic(name: str):
    T = rc(CREATE_TOPICS, 7, "CreatableTopic")
    return (
        CREATE_TOPICS,
        7,
        rc(CREATE_TOPICS, 7)(
            topics=(T(name=name, num_partitions=1, replication_factor=-1, assignments=(), configs=()),),
            timeout=datetime.timedelta(seconds=5),
            validate_only=False,
        ),
    )


def create_acl(group: str):
    return CREATE_ACLS, 3, create_acls_body((GROUP, group, "User:ops", READ))


def set_retention(ms: int):
    C, R = rc(INCREMENTAL_ALTER_CONFIGS, 1, "AlterableConfig"), rc(INCREMENTAL_ALTER_CONFIGS, 1, "AlterConfigsResource")
    return (
        INCREMENTAL_ALTER_CONFIGS,
        1,
        rc(INCREMENTAL_ALTER_CONFIGS, 1)(
            resources=(
                R(
                    resource_type=4,
                    resource_name="1",
                    configs=(C(name="log.retention.ms", config_operation=0, value=str(ms)),),
                ),
            ),
            validate_only=False,
        ),
    )


def upsert_user(name: str):
    U = rc(ALTER_SCRAM, 0, "ScramCredentialUpsertion")
    return (
        ALTER_SCRAM,
        0,
        rc(ALTER_SCRAM, 0)(
            deletions=(),
            upsertions=(U(name=name, mechanism=2, iterations=4096, salt=b"salt" * 4, salted_password=b"p" * 64),),
        ),
    )


# store file -> (server flags, the request of the first change, of the second, what each leaves)
STORES = {
    "topics.json": ((), create_topic("first"), create_topic("second"), lambda doc: sorted(doc)),
    "acls.json": (("--authorizer",), create_acl("g1"), create_acl("g2"), lambda doc: sorted(a["name"] for a in doc)),
    "broker-configs.json": ((), set_retention(7_200_000), set_retention(3_600_000), lambda doc: doc["broker"]),
    "scram-credentials.json": ((), upsert_user("carol"), upsert_user("dave"), lambda doc: sorted(doc)),
}


def crashing(tmp_path, name: str, step: str, nth: int, *flags: str) -> ServerProcess:
    s = ServerProcess(tmp_path / "data", list(flags))
    os.environ["COORDINATOR_TEST_CRASH_AT"] = f"{name}:{step}:{nth}"
    try:
        s.start()
    finally:
        del os.environ["COORDINATOR_TEST_CRASH_AT"]
    return s


def restarted(crashed: ServerProcess, *flags: str) -> InProcessServer:
    """The server started again on the killed one's data dir, in this process (only the
    crash needs a process of its own)."""
    assert crashed.proc.wait(15) == -signal.SIGKILL
    crashed.proc = None
    again = InProcessServer(crashed.data_dir, list(flags))
    again.start()  # loads every store: a torn or missing one would fail here
    assert not list(crashed.data_dir.glob("*.tmp")), "a write's leftover was not cleaned"
    return again


@pytest.mark.parametrize("step", STEPS)
@pytest.mark.parametrize("name", list(STORES))
async def test_a_kill_at_any_step_of_a_store_write_leaves_the_old_or_the_new_document(tmp_path, name, step):
    flags, first, second, summary = STORES[name]
    s, again = crashing(tmp_path, name, step, 2, *flags), None
    try:
        c = await WireClient("crash").connect("127.0.0.1", s.port)
        await c.request(*first)
        old = summary(json.loads((s.data_dir / name).read_text()))
        with pytest.raises(ConnectionError):  # killed before the answer: it waits for durability
            await c.request(*second)
        await c.close()
        again = restarted(s, *flags)
        now = summary(JsonFile(s.data_dir / name).load())
        if STEPS.index(step) < AFTER_RENAME:
            assert now == old
        else:
            assert now != old
        if name == "topics.json":  # and the server serves what the file says
            c = await WireClient("crash").connect("127.0.0.1", again.port)
            r = await c.request(
                METADATA,
                12,
                rc(METADATA, 12)(
                    topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False
                ),
            )
            assert sorted(t.name for t in r.topics if not t.is_internal) == now
            await c.close()
    finally:
        s.close()
        if again is not None:
            again.close()


@pytest.mark.parametrize("step", STEPS)
async def test_producer_ids_are_never_handed_out_twice_across_a_kill(tmp_path, step):
    """Ids come in durable blocks of 1000: a kill while the second block is being written
    loses the unused ids, never reuses one."""
    s, again = crashing(tmp_path, "producer_ids.json", step, 2), None
    try:
        c = await WireClient("crash").connect("127.0.0.1", s.port)
        given = {await init_producer_id(c) for _ in range(1000)}
        assert given == set(range(1000))
        with pytest.raises(ConnectionError):
            await init_producer_id(c)
        await c.close()
        again = restarted(s)
        c = await WireClient("crash").connect("127.0.0.1", again.port)
        after = await init_producer_id(c)
        await c.close()
        assert after not in given and after >= 1000
    finally:
        s.close()
        if again is not None:
            again.close()


async def test_a_stale_tmp_file_is_ignored(tmp_path, server_factory):
    data = tmp_path / "data"
    data.mkdir()
    (data / "topics.json").write_text(
        json.dumps({"kept": {"partitions": 1, "topic_id": "00000000-0000-0000-0000-00000000002a"}})
    )
    (data / "topics.json.tmp").write_text('{"torn": {"parti')
    s = server_factory(data_dir=data)
    c = await WireClient("tmp").connect("127.0.0.1", s.port)
    r = await c.request(
        METADATA,
        12,
        rc(METADATA, 12)(topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False),
    )
    await c.close()
    assert [t.name for t in r.topics if not t.is_internal] == ["kept"] and not (data / "topics.json.tmp").exists()


@pytest.mark.parametrize(
    "name, text",
    [
        ("topics.json", '{"t": {"parti'),
        ("topics.json", '{"t": {"partitions": "3", "topic_id": "00000000-0000-0000-0000-00000000002a"}}'),
        ("producer_ids.json", '{"next_block": "a"}'),
        ("broker-configs.json", "[1, 2]"),
        ("acls.json", '[{"nonsense": 1}]'),
        ("scram-credentials.json", '{"alice": 3}'),
        ("topics.json", '{"../x": {"partitions": 1, "topic_id": "00000000-0000-0000-0000-00000000002a"}}'),
        ("topics.json", '{"t": "\xff"}'.encode("latin-1")),
        ("broker-configs.json", '{"broker": {"log.retention.ms": "abc"}}'),
        ("client-quotas.json", "null"),
        ("client-quotas.json", '{"a": 1}'),
        ("client-quotas.json", '[{"entity": 3}]'),
        ("client-quotas.json", '[{"entity": {"user": "a"}, "quotas": {"producer_byte_rate": "x"}}]'),
        ("client-quotas.json", '[{"entity": {"planet": "a"}, "quotas": {"producer_byte_rate": 5}}]'),
        ("group-configs.json", "[1]"),
        ("group-configs.json", '{"g": {"consumer.session.timeout.ms": 50000}}'),
        ("group-configs.json", '{"g": {"consumer.session.timeout.ms": "soon"}}'),
        ("partition-placement.json", "[1]"),
        ("partition-placement.json", '{"partitions": 5}'),
        ("partition-placement.json", '{"partitions": [{"topic": "t", "partition": 0}]}'),
        ("partition-placement.json", '{"partitions": [{"topic": "t", "partition": 0, "replicas": 1, "leader": 1}]}'),
    ],
)
async def test_a_store_edited_into_nonsense_is_one_line_at_startup(tmp_path, name, text):
    data = tmp_path / "data"
    data.mkdir()
    (data / name).write_bytes(text if isinstance(text, bytes) else text.encode())
    line = await refused("--port", "0", "--data-dir", str(data), "--authorizer")
    assert name in line and "unreadable" in line


@pytest.mark.parametrize(
    "name",
    [
        "topics.json",
        "broker-configs.json",
        "client-quotas.json",
        "group-configs.json",
        "acls.json",
        "scram-credentials.json",
        "producer_ids.json",
        "partition-placement.json",
    ],
)
async def test_a_store_that_cannot_be_read_is_one_line_at_startup(tmp_path, name):
    data = tmp_path / "data"
    (data / name).mkdir(parents=True)  # a directory where the document belongs
    line = await refused("--port", "0", "--data-dir", str(data), "--authorizer")
    assert name in line and "cannot read it" in line


def test_a_bad_store_is_one_line_from_the_process_and_exit_status_2(tmp_path):
    """What `python -m coordinator` makes of the StartupError the tests above get in process (cli.refused)."""
    for name, content, says in (("topics.json", '{"t": {"parti', "unreadable"), ("acls.json", None, "cannot read it")):
        data = tmp_path / name / "data"
        data.mkdir(parents=True)
        (data / name).mkdir() if content is None else (data / name).write_text(content)
        line = one_error_line(start("--port", "0", "--data-dir", str(data), "--authorizer"))
        assert name in line and says in line


async def test_group_configs_and_broker_configs_load_again_as_written(server_factory):
    """What the shape checks at load accept is what the stores write: a group's configs and a
    broker's dynamic configs survive a restart."""
    from tests.support.configs import BROKER, by_name, describe, incremental

    GROUP, SET = 32, 0
    s = server_factory()
    c = await WireClient("stores").connect("127.0.0.1", s.port)
    assert await incremental(
        c, GROUP, "g", [("consumer.session.timeout.ms", SET, "50000"), ("share.auto.offset.reset", SET, "earliest")]
    ) == (0, None)
    assert await incremental(c, BROKER, "1", [("log.retention.ms", SET, "600000")]) == (0, None)
    await c.close()
    s.restart()
    c = await WireClient("stores").connect("127.0.0.1", s.port)
    group, broker = by_name(await describe(c, GROUP, "g")), by_name(await describe(c, BROKER, "1"))
    await c.close()
    assert (
        group["consumer.session.timeout.ms"].value == "50000" and group["share.auto.offset.reset"].value == "earliest"
    )
    assert broker["log.retention.ms"].value == "600000"
