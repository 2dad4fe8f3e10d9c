"""`kcoord share-groups` against a real server: list, describe (offsets and lag, members,
state), reset-offsets (dry run, then --execute, refused while members are in), delete, and
one-line failures."""

from __future__ import annotations


from tests.support.share import (
    ACCEPT,
    SACK,
    SFETCH,
    SHB,
    acquired,
    cls,
    kcoord,
    kcoord_fails,
    kcoord_ok as ok,
    sack,
    sfetch,
    start,
)


async def test_share_groups_cli(server):
    conn, tid = await start(server, topic="jobs", group="workers", records=10)
    try:
        r = await conn.request(SFETCH, 1, sfetch("workers", "a", 0, tid, max_records=4))
        assert acquired(r) == [(0, 3, 1)]
        await conn.request(SACK, 1, sack("workers", "a", 1, tid, {0: [(0, 2, [ACCEPT])]}))

        assert ok(server, "share-groups", "list") == [{"GROUP": "workers", "STATE": "Stable"}]
        assert ok(server, "share-groups", "describe", "workers") == [
            # Kafka's view: the acknowledgement written with the start it had (0), 3 done of 10.
            {"GROUP": "workers", "TOPIC": "jobs", "PARTITION": 0, "START-OFFSET": 0, "LAG": 7}
        ]
        members = ok(server, "share-groups", "describe", "workers", "--members")
        assert [(m["CONSUMER-ID"], m["#PARTITIONS"], m["ASSIGNMENT"]) for m in members] == [("a", 1, "jobs:0")]
        (state,) = ok(server, "share-groups", "describe", "workers", "--state")
        assert (state["STATE"], state["GROUP-EPOCH"], state["#MEMBERS"]) == ("Stable", 3, 1)

        # Not while a member is in the group; a dry run changes nothing.
        failed = kcoord_fails(
            server, "share-groups", "reset-offsets", "workers", "--topic", "jobs", "--to-latest", "--execute"
        )
        assert "has no members" in failed
        await conn.request(SHB, 1, cls(SHB, 1)(group_id="workers", member_id="a", member_epoch=-1))
        assert ok(server, "share-groups", "reset-offsets", "workers", "--topic", "jobs", "--to-offset", "8") == [
            {"GROUP": "workers", "TOPIC": "jobs", "PARTITION": 0, "NEW-START-OFFSET": 8}
        ]
        assert ok(server, "share-groups", "describe", "workers")[0]["START-OFFSET"] != 8  # (a dry run)
        ok(server, "share-groups", "reset-offsets", "workers", "--topic", "jobs", "--to-offset", "8", "--execute")
        assert ok(server, "share-groups", "describe", "workers")[0]["START-OFFSET"] == 8
        b = await conn.request(SFETCH, 1, sfetch("workers", "b", 0, tid))
        assert acquired(b) == [(8, 9, 1)]

        assert ok(server, "share-groups", "delete", "workers") == [{"GROUP": "workers", "RESULT": "would be deleted"}]
        ok(server, "share-groups", "delete", "workers", "--execute")
        assert ok(server, "share-groups", "list") == []
        missing = kcoord_fails(server, "share-groups", "describe", "workers")
        assert "GROUP_ID_NOT_FOUND" in missing or "not found" in missing
        await conn.request(
            68,
            1,
            cls(68, 1)(
                group_id="cg",
                member_id="m",
                member_epoch=0,
                rebalance_timeout=r.acquisition_lock_timeout,
                subscribed_topic_names=("jobs",),
                topic_partitions=(),
            ),
        )
        other = kcoord_fails(server, "share-groups", "describe", "cg")
        assert "is not a share group" in other
        # Usage errors: exit status 2, one line, nothing changed.
        for args in (
            ["reset-offsets", "cg2", "--topic", "jobs"],
            ["reset-offsets", "cg2", "--topic", "jobs", "--to-earliest", "--to-offset", "3"],
            ["reset-offsets", "cg2", "--topic", "jobs:x", "--to-earliest"],
        ):
            r = kcoord(server, "share-groups", *args)
            assert r.returncode == 2 and "Traceback" not in r.stderr, (args, r.stderr)
        r = kcoord(server, "share-groups", "reset-offsets", "new", "--topic", "nope", "--to-earliest")
        assert r.returncode == 1 and "nope" in r.stderr and "Traceback" not in r.stderr
    finally:
        await conn.close()
