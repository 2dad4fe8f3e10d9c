"""With no authorizer, every operation a resource supports is allowed (KIP-430): Metadata
answers the full sets when asked, INT32_MIN ("not asked") otherwise."""

from __future__ import annotations

from tests.support.wire_client import WireClient
from tests.support.process import create_topics
from tests.support.data_plane import METADATA, cls

NOT_ASKED = -(2**31)


async def test_metadata_authorized_operations_over_the_wire(server):
    conn = await WireClient("ops").connect("127.0.0.1", server.port)
    await conn.create_topics("t", partitions=1)
    T = cls(METADATA, 10, "MetadataRequestTopic")

    async def ask(topic_ops, cluster_ops):
        return await conn.request(
            METADATA,
            10,
            cls(METADATA, 10)(
                topics=(T(name="t", topic_id=None),),
                allow_auto_topic_creation=False,
                include_cluster_authorized_operations=cluster_ops,
                include_topic_authorized_operations=topic_ops,
            ),
        )

    asked = await ask(True, True)
    # READ WRITE CREATE DELETE ALTER DESCRIBE DESCRIBE_CONFIGS ALTER_CONFIGS
    assert asked.topics[0].topic_authorized_operations == sum(1 << op for op in (3, 4, 5, 6, 7, 8, 10, 11))
    # CREATE ALTER DESCRIBE CLUSTER_ACTION DESCRIBE_CONFIGS ALTER_CONFIGS IDEMPOTENT_WRITE
    assert asked.cluster_authorized_operations == sum(1 << op for op in (5, 7, 8, 9, 10, 11, 12))
    not_asked = await ask(False, False)  # (a different cached answer)
    assert not_asked.topics[0].topic_authorized_operations == NOT_ASKED
    assert not_asked.cluster_authorized_operations == NOT_ASKED
    await conn.close()


def test_confluent_describe_topics_with_authorized_operations(server):
    from confluent_kafka import TopicCollection
    from confluent_kafka.admin import AclOperation, AdminClient

    create_topics(server.port, "described", partitions=2)
    admin = AdminClient({"bootstrap.servers": server.bootstrap})
    described = admin.describe_topics(TopicCollection(["described"]), include_authorized_operations=True)
    topic = described["described"].result(timeout=30)
    assert len(topic.partitions) == 2
    assert set(topic.authorized_operations) == {
        AclOperation.READ,
        AclOperation.WRITE,
        AclOperation.CREATE,
        AclOperation.DELETE,
        AclOperation.ALTER,
        AclOperation.DESCRIBE,
        AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS,
    }
