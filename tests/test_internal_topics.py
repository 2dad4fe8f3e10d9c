"""The internal topics as Kafka 4.4 lists and creates them: none on a fresh broker;
__consumer_offsets at the first FindCoordinator of a group, __transaction_state at the first of a
transactional id, __share_group_state when a share group member first subscribes; each then
listed (internal, all its partitions) and kept across a restart. And CreateTopics' words for a
name taken."""

from __future__ import annotations

from tests.support.data_plane import MS, create
from tests.support.share import NO_BATCHING, SFETCH, acquired, sfetch, start
from tests.support.wire_client import WireClient, request_class as cls

GROUP, TRANSACTION = 0, 1


async def listed(conn) -> dict[str, tuple[bool, int]]:
    body = cls(3, 12)(topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False)
    r = await conn.request(3, 12, body)
    return {t.name: (t.is_internal, len(t.partitions)) for t in r.topics}


async def find(conn, key_type: int, key: str) -> int:
    r = await conn.request(10, 4, cls(10, 4)(key_type=key_type, coordinator_keys=(key,)))
    return r.coordinators[0].error_code


async def test_internal_topics_appear_at_their_first_use(server):
    conn = await WireClient().connect("127.0.0.1", server.port)
    assert await listed(conn) == {}  # a fresh broker lists no topic
    assert await create(conn, "t", partitions=1) == 0
    C = cls(19, 7, "CreatableTopic")
    again = C(name="t", num_partitions=1, replication_factor=-1, assignments=(), configs=())
    r = await conn.request(19, 7, cls(19, 7)(topics=(again,), timeout=5000 * MS, validate_only=False))
    assert (r.topics[0].error_code, r.topics[0].error_message) == (36, "Topic 't' already exists.")
    assert set(await listed(conn)) == {"t"}
    for name, partitions, code, message in (
        ("bad name!", 1, 17, "Topic name is invalid: 'bad name!' contains one or more characters other than ASCII "
         "alphanumerics, '.', '_' and '-'"),
        ("..", 1, 17, "Topic name is invalid: '..' is not allowed"),
        ("", 1, 17, "Topic name is invalid: the empty string is not allowed"),
        ("zero", 0, 37, "Number of partitions was set to an invalid non-positive value."),
    ):  # fmt: skip
        bad = C(name=name, num_partitions=partitions, replication_factor=-1, assignments=(), configs=())
        r = await conn.request(19, 7, cls(19, 7)(topics=(bad,), timeout=5000 * MS, validate_only=False))
        assert (r.topics[0].error_code, r.topics[0].error_message, r.topics[0].configs) == (code, message, ())

    assert await find(conn, GROUP, "g") == 0
    assert await listed(conn) == {"t": (False, 1), "__consumer_offsets": (True, 50)}
    assert await find(conn, TRANSACTION, "tx") == 0
    assert (await listed(conn))["__transaction_state"] == (True, 50)
    await conn.close()

    server.restart()  # kept: the topics exist from now on
    conn = await WireClient().connect("127.0.0.1", server.port)
    assert set(await listed(conn)) == {"t", "__consumer_offsets", "__transaction_state"}
    await conn.close()


async def test_share_group_state_topic_appears_when_a_share_group_subscribes(server_factory):
    server = server_factory(*NO_BATCHING)
    conn = await WireClient().connect("127.0.0.1", server.port)
    assert "__share_group_state" not in await listed(conn)
    await conn.close()
    conn, tid = await start(server, records=3)  # a member subscribes: its share-partitions are initialized
    assert (await listed(conn))["__share_group_state"] == (True, 50)
    r = await conn.request(SFETCH, 1, sfetch("g", "a", 0, tid))
    assert acquired(r)  # (and their state is written there)
    await conn.close()


async def test_a_metadata_naming_an_internal_topic_creates_it(server):
    conn = await WireClient().connect("127.0.0.1", server.port)
    T = cls(3, 12, "MetadataRequestTopic")
    body = cls(3, 12)(
        topics=(T(name="__consumer_offsets", topic_id=None),),
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )
    r = await conn.request(3, 12, body)
    assert (r.topics[0].error_code, r.topics[0].is_internal, len(r.topics[0].partitions)) == (0, True, 50)
    assert "__consumer_offsets" in await listed(conn)
    await conn.close()
