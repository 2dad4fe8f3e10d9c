"""The transaction coordinator moving with its `__transaction_state` partition (Kafka's
TransactionStateManager emigration and immigration), over the wire on an in-process
3-broker cluster: the old broker answers NOT_COORDINATOR, the new one
COORDINATOR_LOAD_IN_PROGRESS until it has loaded the partition from the log; an ongoing
transaction comes back with its partitions, timeout and start time; one left in
PrepareCommit is completed by the new coordinator (its markers written, under its coordinator
epoch: the partition's leader epoch, risen with the move); a transactions v2
transaction moved mid-way ends there with its epoch bump."""

from __future__ import annotations

import asyncio
import time

import pytest
from kio.schema.errors import ErrorCode as E

from tests.support.wire_client import WireClient
from tests.support.cluster_wire import close, connect, create_topic
from tests.support.transactions_wire import (
    add_partitions,
    describe,
    describe_producers,
    describe_unknown,
    end_txn,
    fetch,
    init_pid,
    produce_txn,
    wait_for_state,
    write_marker,
)
from protocol.record_batch import iter_batches


def on_loop(cluster, coro):
    """Run a coroutine on the in-process cluster's event loop (where its server runs)."""
    return asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, cluster._loop))


async def open_transaction(cluster, conns: dict[int, WireClient], txn_id: str) -> tuple[int, int, int]:
    """(coordinator, producer id, epoch) of a transaction holding two records of tt-0."""
    coordinator = cluster.transaction_coordinator_of(txn_id)
    error, pid, epoch = await init_pid(conns[coordinator], txn_id)
    assert error == E.none
    assert await add_partitions(conns[coordinator], txn_id, pid, epoch, [("tt", 0)]) == {("tt", 0): E.none}
    assert (await produce_txn(conns[cluster.leader_of("tt", 0)], txn_id, "tt", 0, pid, epoch, 0))[0] == E.none
    return coordinator, pid, epoch


async def committed_records(conn: WireClient) -> list[bool]:
    """The batches of tt-0 a read_committed consumer gets (is_control of each)."""
    data = await fetch(conn, "tt", 0, isolation=1)
    return [h.is_control for _, h in iter_batches(data.records)]


@pytest.mark.kafka_cluster(brokers=3)
async def test_an_ongoing_transaction_moves_with_its_partitions_and_timeout(kafka_cluster):
    conns = await connect(kafka_cluster)
    try:
        assert await create_topic(conns[1], "tt", 1, 3) == E.none
        old, pid, epoch = await open_transaction(kafka_cluster, conns, "mover")
        before = await describe(conns[old], "mover")
        assert before.transaction_state == "Ongoing"
        # The id's lock held on the old coordinator: the move waits in the unload, as
        # Kafka's emigration waits for the write under way, and the brokers answer meanwhile.
        txns = kafka_cluster._server.control.transactions
        meta = txns.txns["mover"]
        await on_loop(kafka_cluster, meta.lock.acquire())
        move = asyncio.ensure_future(kafka_cluster.amove_transaction_coordinator("mover"))
        deadline = time.monotonic() + 30
        while kafka_cluster.transaction_coordinator_of("mover") == old:
            assert time.monotonic() < deadline, "the move never began"
            await asyncio.sleep(0.01)
        new = kafka_cluster.transaction_coordinator_of("mover")
        assert (await init_pid(conns[new], "mover"))[0] == E.coordinator_load_in_progress
        assert await end_txn(conns[new], "mover", pid, epoch, True) == E.coordinator_load_in_progress
        assert await end_txn(conns[old], "mover", pid, epoch, True) == E.not_coordinator
        kafka_cluster._loop.call_soon_threadsafe(meta.lock.release)
        assert await move == new
        assert meta.unloaded and txns.txns["mover"] is not meta  # loaded afresh from the log
        assert await describe_unknown(kafka_cluster.brokers()[old - 1]["port"], "mover") == E.not_coordinator
        after = await describe(conns[new], "mover")
        assert (after.transaction_state, after.producer_id, after.producer_epoch) == ("Ongoing", pid, epoch)
        assert after.transaction_timeout == before.transaction_timeout
        assert after.transaction_start_time == before.transaction_start_time
        assert [(t.topic, list(t.partitions)) for t in after.topics] == [("tt", [0])]
        assert await committed_records(conns[kafka_cluster.leader_of("tt", 0)]) == []
        assert await end_txn(conns[new], "mover", pid, epoch, True) == E.none
        await wait_for_state(conns[new], "mover", "CompleteCommit")
        assert await committed_records(conns[kafka_cluster.leader_of("tt", 0)]) == [False, True]
    finally:
        await close(conns)


@pytest.mark.kafka_cluster(brokers=3)
async def test_a_prepared_transaction_is_completed_by_the_new_coordinator(kafka_cluster):
    """PrepareCommit is in the log but the old coordinator lost its partition before the
    markers: the new coordinator writes them once it has loaded the partition."""
    from protocol.transaction_records import PREPARE_COMMIT, TransactionLogValue, encode_key, encode_value

    conns = await connect(kafka_cluster)
    try:
        assert await create_topic(conns[1], "tt", 1, 3) == E.none
        old, pid, epoch = await open_transaction(kafka_cluster, conns, "prepared")
        txns = kafka_cluster._server.control.transactions

        async def prepare() -> None:
            fut = asyncio.get_running_loop().create_future()
            now = int(time.time() * 1000)
            txns.log.append(
                "prepared",
                [
                    (
                        encode_key("prepared"),
                        encode_value(TransactionLogValue(pid, epoch, 60_000, PREPARE_COMMIT, {"tt": [0]}, now, now)),
                    )
                ],
                lambda error, _: fut.set_result(error),
            )
            assert await fut is None

        await on_loop(kafka_cluster, prepare())
        new = await kafka_cluster.amove_transaction_coordinator("prepared")
        assert new != old
        await wait_for_state(conns[new], "prepared", "CompleteCommit")
        leader = conns[kafka_cluster.leader_of("tt", 0)]
        assert await committed_records(leader) == [False, True]
        # a retry of the EndTxn the old coordinator had taken: the same outcome, from the new one
        assert await end_txn(conns[new], "prepared", pid, epoch, True) == E.none
        # The new coordinator's epoch is its __transaction_state partition's leader epoch, one
        # above the old one's: its markers carry it, a marker of the old epoch is fenced.
        assert (await describe_producers(leader, "tt"))[1][pid][3] == 1
        assert await write_marker(leader, pid, epoch + 1, False, [("tt", 0)], coordinator_epoch=0) == {
            ("tt", 0): E.transaction_coordinator_fenced
        }
    finally:
        await close(conns)


@pytest.mark.kafka_cluster(brokers=3)
async def test_list_transactions_on_each_broker_lists_the_ids_it_coordinates(kafka_cluster):
    from tests.support.transactions_wire import LIST_TXNS, cls

    conns = await connect(kafka_cluster)
    try:
        assert await create_topic(conns[1], "tt", 1, 3) == E.none
        await open_transaction(kafka_cluster, conns, "listed")

        async def listed(node: int) -> list[str]:
            r = await conns[node].request(LIST_TXNS, 0, cls(LIST_TXNS, 0)(state_filters=(), producer_id_filters=()))
            return [s.transactional_id for s in r.transaction_states]

        coordinator = kafka_cluster.transaction_coordinator_of("listed")
        assert {n: await listed(n) for n in conns} == {n: (["listed"] if n == coordinator else []) for n in conns}
        new = await kafka_cluster.amove_transaction_coordinator("listed")
        assert {n: await listed(n) for n in conns} == {n: (["listed"] if n == new else []) for n in conns}
    finally:
        await close(conns)


@pytest.mark.kafka_cluster(brokers=3)
async def test_a_transactions_v2_transaction_moves_mid_way(kafka_cluster):
    """Transactions v2 on three brokers: a transaction begun by Produce v12 (its partition added
    by the leader) moves with its coordinator; the new one, loading TransactionLogValue v1,
    knows it is v2: EndTxn v5 there bumps the epoch, the committed records appear once, the
    next transaction goes on under the new epoch and the old epoch is fenced."""
    from tests.support.transactions_wire import end_txn_v5

    conns = await connect(kafka_cluster)
    try:
        assert await create_topic(conns[1], "tt", 1, 3) == E.none
        old = kafka_cluster.transaction_coordinator_of("v2-mover")
        error, pid, epoch = await init_pid(conns[old], "v2-mover", v=5)
        leader = conns[kafka_cluster.leader_of("tt", 0)]
        assert await produce_txn(leader, "v2-mover", "tt", 0, pid, epoch, 0, v=12) == (E.none, 0)
        new = await kafka_cluster.amove_transaction_coordinator("v2-mover")
        assert new != old
        assert await end_txn_v5(conns[old], "v2-mover", pid, epoch, True) == (E.not_coordinator, -1, -1)
        deadline = time.monotonic() + 30
        while (answer := await end_txn_v5(conns[new], "v2-mover", pid, epoch, True))[0] != E.none:
            assert answer[0] == E.coordinator_load_in_progress and time.monotonic() < deadline, answer
            await asyncio.sleep(0.02)
        assert answer == (E.none, pid, epoch + 1)
        await wait_for_state(conns[new], "v2-mover", "CompleteCommit")
        assert await committed_records(leader) == [False, True]
        assert (await produce_txn(leader, "v2-mover", "tt", 0, pid, epoch, 2, v=12))[0] == E.invalid_producer_epoch
        assert await produce_txn(leader, "v2-mover", "tt", 0, pid, epoch + 1, 0, v=12) == (E.none, 3)
        assert await end_txn_v5(conns[new], "v2-mover", pid, epoch + 1, False) == (E.none, pid, epoch + 2)
        await wait_for_state(conns[new], "v2-mover", "CompleteAbort")
        data = await fetch(leader, "tt", 0, isolation=1)  # (the aborted batch, listed as aborted)
        assert [h.is_control for _, h in iter_batches(data.records)] == [False, True, False, True]
        assert [(a.producer_id, a.first_offset) for a in data.aborted_transactions] == [(pid, 3)]
    finally:
        await close(conns)
