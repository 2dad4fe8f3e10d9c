"""KIP-848 ConsumerGroupHeartbeat and ConsumerGroupDescribe over the raw wire client."""

from __future__ import annotations

import datetime

from tests.support.wire_client import request_class

HB, CG_DESCRIBE, API_VERSIONS = 68, 69, 18


MINUTE = datetime.timedelta(minutes=1)


def hb(group, member_id, epoch, topics=None, owned=(), v=1, **kw):
    TP = request_class(HB, v, "TopicPartitions")
    if epoch == 0:
        kw.setdefault("rebalance_timeout", MINUTE)
    return request_class(HB, v)(
        group_id=group,
        member_id=member_id,
        member_epoch=epoch,
        subscribed_topic_names=topics,
        topic_partitions=None if owned is None else tuple(TP(topic_id=t, partitions=tuple(ps)) for t, ps in owned),
        **kw,
    )


def owned_of(resp):
    return [(t.topic_id, list(t.partitions)) for t in resp.assignment.topic_partitions]


def flat(owned):
    return {(t, p) for t, ps in owned for p in ps}


async def describe(conn, *groups):
    r = await conn.request(
        CG_DESCRIBE, 1, request_class(CG_DESCRIBE, 1)(group_ids=groups, include_authorized_operations=False)
    )
    return r.groups


async def topic_ids(conn, *names):
    M = request_class(3, 12, "MetadataRequestTopic")
    r = await conn.request(
        3,
        12,
        request_class(3, 12)(
            topics=tuple(M(name=n, topic_id=None) for n in names),
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=False,
        ),
    )
    return {t.name: t.topic_id for t in r.topics}
