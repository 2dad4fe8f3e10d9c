"""Share groups with several brokers in one process (the kafka_cluster fixture): ShareFetch
and ShareAcknowledge are served by the partition's leader (NOT_LEADER_OR_FOLLOWER elsewhere,
with KIP-951's leader hint and its endpoint), ShareGroupHeartbeat by the group's coordinator."""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode as E

from tests.support.share import ACCEPT, SACK, SFETCH, SHB, acquired, cls, part, sack, set_group_configs, sfetch
from tests.support.wire_client import WireClient


@pytest.mark.kafka_cluster(brokers=2)
async def test_share_partitions_live_on_their_leader(kafka_cluster):
    conns = {}
    for b in kafka_cluster.brokers():
        conns[b["node_id"]] = await WireClient("share-cluster").connect(b["host"], b["port"])
    try:
        any_conn = conns[1]
        await any_conn.create_topics("t", partitions=1)
        coordinator = kafka_cluster.coordinator_of("g")
        assert (await set_group_configs(any_conn, "g", share_auto_offset_reset="earliest")).error_code == 0
        wrong = await conns[3 - coordinator].request(SHB, 1, cls(SHB, 1)(
            group_id="g", member_id="a", member_epoch=0, subscribed_topic_names=("t",)))
        assert wrong.error_code == E.not_coordinator
        hb = await conns[coordinator].request(SHB, 1, cls(SHB, 1)(
            group_id="g", member_id="a", member_epoch=0, subscribed_topic_names=("t",)))
        tid = hb.assignment.topic_partitions[0].topic_id
        leader = kafka_cluster.leader_of("t", 0)
        r = await conns[3 - leader].request(SFETCH, 1, sfetch("g", "a", 0, tid))
        p = part(r)
        assert p.error_code == E.not_leader_or_follower and p.current_leader.leader_id == leader
        assert [n.node_id for n in r.node_endpoints] == [leader]
        r = await conns[leader].request(SFETCH, 1, sfetch("g", "a", 0, tid))
        assert part(r).error_code == E.none and acquired(r) == []
        r = await conns[3 - leader].request(SACK, 1, sack("g", "a", 1, tid, {0: [(0, 0, [ACCEPT])]}))
        assert part(r).error_code == E.not_leader_or_follower
    finally:
        for c in conns.values():
            await c.close()
