"""The initial rebalance delay: consumers started together form one generation, as they do
against Kafka's 3 s delay (librdkafka's tests 0102 and 0113 create them one after the other
and expect it).

The servers here run a 1 s delay rather than the default: what is tested is that members
arriving within the window join its generation, and a window twenty times the default holds
on a loaded machine, where the second member's join may come later than the default's."""

from __future__ import annotations

from tests.support.process import create_topics, wait_for


DELAY = ("--group-initial-rebalance-delay-ms", "1000")


def test_two_consumers_started_together_form_one_generation(server_factory):
    server = server_factory(*DELAY)
    from confluent_kafka import Consumer

    create_topics(server.port, "together", partitions=4)
    assigned: list[list] = [[], []]
    consumers = []
    for i in range(2):  # one after the other, as librdkafka's tests do
        c = Consumer(
            {
                "bootstrap.servers": server.bootstrap,
                "group.id": "duo",
                "session.timeout.ms": 10000,
                "partition.assignment.strategy": "range",
            }
        )
        c.subscribe(
            ["together"], on_assign=lambda _c, parts, i=i: assigned[i].append(sorted(p.partition for p in parts))
        )
        consumers.append(c)

    def settled() -> bool:
        for c in consumers:
            c.poll(0.02)
        # both hold an assignment and their latest ones split the partitions (with two
        # generations the first is assigned all four, then two)
        return all(assigned) and sum(len(a[-1]) for a in assigned) == 4

    wait_for(settled, what="both consumers assigned")
    for c in consumers:
        c.close()
    assert [len(a) for a in assigned] == [1, 1], assigned  # one generation: each assigned once
    assert sorted(assigned[0][0] + assigned[1][0]) == [0, 1, 2, 3]


async def test_a_member_arriving_during_the_first_window_joins_the_first_generation(server_factory):
    """Raw JoinGroup v3 (no KIP-394 round trip): B arrives 10 ms after A; the delay holds A's
    join, so both are in generation 1 (with 0 A would form generation 1 alone)."""
    import asyncio

    server = server_factory(*DELAY)

    from tests.support.wire_client import WireClient
    from tests.support.groups_wire import JOIN, join_body

    a = await WireClient("a").connect("127.0.0.1", server.port)
    b = await WireClient("b").connect("127.0.0.1", server.port)
    first = a.send(JOIN, 3, join_body(3, "pair"))
    await asyncio.sleep(0.01)
    second = b.send(JOIN, 3, join_body(3, "pair"))
    ra, rb = await asyncio.gather(first, second)
    assert (ra.error_code, rb.error_code, ra.generation_id, rb.generation_id) == (0, 0, 1, 1)
    assert len((ra if ra.leader == ra.member_id else rb).members) == 2
    await a.close()
    await b.close()
