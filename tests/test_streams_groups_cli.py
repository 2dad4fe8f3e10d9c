"""`kcoord streams-groups` and the metrics with a streams group (KIP-1071) on a real server:
list, describe (offsets and lag of the topics it reads, members with their tasks, state),
delete (refused while members are in), and the group's state and members in the metrics."""

from __future__ import annotations

import asyncio


from tests.support.groups_wire import COMMIT, commit_body
from tests.support.metrics_scrape import scrape, value
from tests.support.process import free_port
from tests.support.share import kcoord_fails, kcoord_ok as ok
from tests.support.streams import NO_DELAY, SHB, active_of, shb, word_count
from tests.support.wire_client import WireClient


async def test_streams_groups_cli_and_metrics(server_factory):
    metrics = free_port()
    server = server_factory(*NO_DELAY, "--metrics-port", str(metrics))
    conn = await WireClient().connect("127.0.0.1", server.port)
    try:
        await conn.create_topics("words", partitions=2)
        a = await conn.request(SHB, 1, shb("wc", "a", 0, word_count("wc")))
        for _ in range(100):  # until the coordinator has created the internal topics
            a = await conn.request(SHB, 1, shb("wc", "a", a.member_epoch, active={}))
            if not a.status:
                break
            await asyncio.sleep(0.02)
        assert active_of(a) == {"0": [0, 1], "1": [0, 1]}
        await conn.request(COMMIT, 9, commit_body(9, "wc", "a", a.member_epoch, [("words", 0, 0)]))

        assert ok(server, "streams-groups", "list") == [{"GROUP": "wc", "STATE": "Stable"}]
        rows = ok(server, "streams-groups", "describe", "wc")
        assert [(r["TOPIC"], r["PARTITION"], r["CURRENT-OFFSET"], r["LAG"]) for r in rows] == [
            ("wc-KSTREAM-AGGREGATE-STATE-STORE-0000000003-repartition", 0, None, None),
            ("wc-KSTREAM-AGGREGATE-STATE-STORE-0000000003-repartition", 1, None, None),
            ("words", 0, 0, 0),
            ("words", 1, None, None),
        ]
        (member,) = ok(server, "streams-groups", "describe", "wc", "--members")
        assert (member["MEMBER"], member["PROCESS"], member["ACTIVE"]) == ("a", "process-a", "0:[0,1]; 1:[0,1]")
        (state,) = ok(server, "streams-groups", "describe", "wc", "--state")
        assert (state["STATE"], state["ASSIGNOR"], state["#MEMBERS"]) == ("Stable", "sticky", 1)
        assert "NON_EMPTY_GROUP" in kcoord_fails(server, "streams-groups", "delete", "wc", "--execute")
        # the metrics hold it beside the other types
        samples = scrape(metrics)
        assert value(samples, "kcoord_group_state", group="wc", type="streams", state="Stable") == 1
        assert value(samples, "kcoord_group_members", group="wc") == 1

        await conn.request(SHB, 1, shb("wc", "a", -1))
        assert ok(server, "streams-groups", "delete", "wc", "--execute") == [{"GROUP": "wc", "RESULT": "deleted"}]
        assert "not found" in kcoord_fails(server, "streams-groups", "describe", "wc")
    finally:
        await conn.close()
