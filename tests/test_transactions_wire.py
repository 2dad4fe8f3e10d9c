"""Transactions over raw frames: every error path of the transaction coordinator, the
partition side (transactional Produce, markers, LSO, read_committed Fetch and ListOffsets)
and the group side (TxnOffsetCommit, OffsetFetch require_stable), and a restart."""

from __future__ import annotations

import pytest

import asyncio
import struct
import subprocess
import sys
import uuid

from tests.support.consumer_groups import hb, topic_ids
from tests.support.wire_client import WireClient
from protocol.record_batch import build_batch, iter_batches

from tests.support.transactions_wire import (
    FIND_COORDINATOR,
    ADD_OFFSETS,
    LIST_TXNS,
    E_NONE,
    UNKNOWN_TOPIC,
    INVALID_PRODUCER_EPOCH,
    INVALID_TXN_STATE,
    INVALID_PID_MAPPING,
    INVALID_TIMEOUT,
    TXN_ID_NOT_FOUND,
    OPERATION_NOT_ATTEMPTED,
    UNSTABLE,
    CONCURRENT,
    PRODUCER_FENCED,
    cls,
    init_pid,
    add_partitions,
    end_txn,
    produce_txn,
    fetch,
    latest,
    txn_commit,
    offset_fetch,
    describe,
    describe_unknown,
    wait_for_state,
    describe_producers,
    end_txn_v5,
    write_marker,
    set_broker_config,
    TXN_COORDINATOR_FENCED,
    MS,
)


async def test_transaction_error_paths_and_abort(server):
    conn = await WireClient("txn-wire").connect("127.0.0.1", server.port)
    await conn.create_topics("tw", partitions=1)
    try:
        # FindCoordinator for a transactional id: this broker
        r = await conn.request(FIND_COORDINATOR, 4, cls(FIND_COORDINATOR, 4)(key_type=1, coordinator_keys=("t1",)))
        assert r.coordinators[0].error_code == E_NONE and r.coordinators[0].port == server.port
        # InitProducerId: the timeout must be within (0, transaction.max.timeout.ms]
        assert (await init_pid(conn, "t1", timeout_ms=0))[0] == INVALID_TIMEOUT
        assert (await init_pid(conn, "t1", timeout_ms=900_001))[0] == INVALID_TIMEOUT
        assert (await init_pid(conn, ""))[0] == 42  # INVALID_REQUEST: an empty transactional id
        error, pid, epoch = await init_pid(conn, "t1")
        assert (error, epoch) == (E_NONE, 0) and pid >= 0
        # checks every transactional request makes
        assert await add_partitions(conn, "t1", pid + 1, epoch, [("tw", 0)]) == {("tw", 0): INVALID_PID_MAPPING}
        assert await add_partitions(conn, "nope", pid, epoch, [("tw", 0)]) == {("tw", 0): INVALID_PID_MAPPING}
        assert await add_partitions(conn, "t1", pid, epoch + 1, [("tw", 0)]) == {("tw", 0): PRODUCER_FENCED}
        assert await add_partitions(conn, "t1", pid, epoch + 1, [("tw", 0)], v=1) == {("tw", 0): INVALID_PRODUCER_EPOCH}
        assert await add_partitions(conn, "t1", pid, epoch, [("tw", 0), ("missing", 0)]) == {
            ("tw", 0): OPERATION_NOT_ATTEMPTED,
            ("missing", 0): UNKNOWN_TOPIC,
        }
        assert await end_txn(conn, "t1", pid, epoch, True) == INVALID_TXN_STATE  # Empty: nothing to end
        # a transactional batch to a partition not in the transaction (KIP-890 verification)
        assert (await produce_txn(conn, "t1", "tw", 0, pid, epoch, 0))[0] == INVALID_TXN_STATE
        assert await add_partitions(conn, "t1", pid, epoch, [("tw", 0)]) == {("tw", 0): E_NONE}
        error, first = await produce_txn(conn, "t1", "tw", 0, pid, epoch, 0)
        assert error == E_NONE
        # the open transaction holds the LSO at its first offset
        assert await latest(conn, "tw", 1) == first and await latest(conn, "tw", 0) == first + 2
        data = await fetch(conn, "tw", 0, isolation=1)
        assert data.records in (b"", None) and data.last_stable_offset == first and data.high_watermark == first + 2
        assert len(list(iter_batches((await fetch(conn, "tw", 0, isolation=0)).records))) == 1
        # offsets in the transaction are pending: unstable for require_stable readers
        r = await conn.request(
            ADD_OFFSETS,
            3,
            cls(ADD_OFFSETS, 3)(transactional_id="t1", producer_id=pid, producer_epoch=epoch, group_id="tg"),
        )
        assert r.error_code == E_NONE
        r = await conn.request(
            ADD_OFFSETS,
            3,
            cls(ADD_OFFSETS, 3)(transactional_id="t1", producer_id=pid, producer_epoch=epoch, group_id=""),
        )
        assert r.error_code == E_NONE  # as at Kafka: "" names a __consumer_offsets partition as any group id does
        assert await txn_commit(conn, "t1", "tg", pid, epoch, "tw", 2) == E_NONE
        assert await txn_commit(conn, "t1", "tg", pid, epoch + 1, "tw", 2) == INVALID_PRODUCER_EPOCH
        assert await txn_commit(conn, "t1", "tg", pid, epoch + 1, "tw", 2, v=2) == INVALID_PRODUCER_EPOCH
        assert await offset_fetch(conn, "tg", "tw", True) == (UNSTABLE, -1)
        assert await offset_fetch(conn, "tg", "tw", False) == (E_NONE, -1)
        state = await describe(conn, "t1")
        assert state.transaction_state == "Ongoing" and state.producer_id == pid
        topics = {t.topic: tuple(t.partitions) for t in state.topics}
        assert topics["tw"] == (0,) and len(topics["__consumer_offsets"]) == 2  # tg's and ""'s
        assert await describe_unknown(server.port, "unknown") == TXN_ID_NOT_FOUND
        r = await conn.request(
            LIST_TXNS,
            1,
            cls(LIST_TXNS, 1)(state_filters=("Ongoing", "Bogus"), producer_id_filters=(), duration_filter=-1),
        )
        assert [s.transactional_id for s in r.transaction_states] == ["t1"] and r.unknown_state_filters == ("Bogus",)
        # abort: marker written, the aborted range reported to read_committed fetches
        assert await end_txn(conn, "t1", pid, epoch, False) == E_NONE
        await wait_for_state(conn, "t1", "CompleteAbort")
        assert await end_txn(conn, "t1", pid, epoch, False) == E_NONE  # a retry of the same EndTxn
        assert await end_txn(conn, "t1", pid, epoch, True) == INVALID_TXN_STATE
        data = await fetch(conn, "tw", 0, isolation=1)
        headers = [h for _, h in iter_batches(data.records)]
        assert [h.is_control for h in headers] == [False, True] and data.last_stable_offset == first + 3
        assert [(a.producer_id, a.first_offset) for a in data.aborted_transactions] == [(pid, first)]
        assert await offset_fetch(conn, "tg", "tw", True) == (E_NONE, -1)  # dropped with the abort
        # a new instance (KIP-360: it names the producer it was) bumps the epoch; the old epoch is fenced
        error, pid2, epoch2 = await init_pid(conn, "t1", pid=pid, epoch=epoch)
        assert (error, pid2, epoch2) == (E_NONE, pid, epoch + 1)
        assert (await init_pid(conn, "t1", pid=pid, epoch=epoch + 5))[0] == PRODUCER_FENCED
        assert (await init_pid(conn, "t1", pid=pid, epoch=epoch + 5, v=3))[0] == INVALID_PRODUCER_EPOCH
        assert await add_partitions(conn, "t1", pid, epoch, [("tw", 0)]) == {("tw", 0): PRODUCER_FENCED}
        # commit: the offsets apply, the data becomes visible
        assert await add_partitions(conn, "t1", pid, epoch2, [("tw", 0)]) == {("tw", 0): E_NONE}
        assert (await produce_txn(conn, "t1", "tw", 0, pid, epoch2, 0))[0] == E_NONE
        r = await conn.request(
            ADD_OFFSETS,
            3,
            cls(ADD_OFFSETS, 3)(transactional_id="t1", producer_id=pid, producer_epoch=epoch2, group_id="tg"),
        )
        assert await txn_commit(conn, "t1", "tg", pid, epoch2, "tw", 7) == E_NONE
        assert await end_txn(conn, "t1", pid, epoch2, True) == E_NONE
        await wait_for_state(conn, "t1", "CompleteCommit")
        assert await offset_fetch(conn, "tg", "tw", True) == (E_NONE, 7)
        end = await latest(conn, "tw", 0)
        assert await latest(conn, "tw", 1) == end
    finally:
        await conn.close()
    # a restart replays __transaction_state and the markers: same state, same offsets
    server.restart()
    conn = await WireClient("txn-wire").connect("127.0.0.1", server.port)
    try:
        state = await describe(conn, "t1")
        assert (state.transaction_state, state.producer_id, state.producer_epoch) == ("CompleteCommit", pid, epoch2)
        assert await offset_fetch(conn, "tg", "tw", True) == (E_NONE, 7)
        data = await fetch(conn, "tw", 0, isolation=1)
        assert [(a.producer_id, a.first_offset) for a in data.aborted_transactions] == [(pid, first)]
        assert await latest(conn, "tw", 1) == end
    finally:
        await conn.close()
    # the dump CLI shows the markers and the transaction records
    dump = subprocess.run(
        [sys.executable, "-m", "coordinator.log", "dump", str(server.data_dir)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "endTxnMarker: ABORT coordinatorEpoch: 0" in dump and "endTxnMarker: COMMIT" in dump
    assert "transaction_metadata::transactionalId=t1" in dump and "state=CompleteCommit" in dump


@pytest.mark.process  # killed (SIGKILL) or read by pid: needs a real process
async def test_pending_offsets_survive_a_restart_and_timeouts_abort(server_factory):
    """A transaction open at a restart keeps its pending offsets (replayed from the
    transactional batch); past transaction.timeout.ms the coordinator aborts it under a
    bumped epoch, fencing the producer."""
    server = server_factory("--transaction-abort-check-interval-ms", "100")
    conn = await WireClient("txn-wire").connect("127.0.0.1", server.port)
    await conn.create_topics("tt", partitions=1)
    _, pid, epoch = await init_pid(conn, "slow", timeout_ms=60_000)
    assert await add_partitions(conn, "slow", pid, epoch, [("tt", 0)]) == {("tt", 0): E_NONE}
    assert (await produce_txn(conn, "slow", "tt", 0, pid, epoch, 0))[0] == E_NONE
    await conn.request(
        ADD_OFFSETS,
        3,
        cls(ADD_OFFSETS, 3)(transactional_id="slow", producer_id=pid, producer_epoch=epoch, group_id="sg"),
    )
    assert await txn_commit(conn, "slow", "sg", pid, epoch, "tt", 1) == E_NONE
    await conn.close()
    server.restart(sig=9)
    conn = await WireClient("txn-wire").connect("127.0.0.1", server.port)
    try:
        assert (await describe(conn, "slow")).transaction_state == "Ongoing"
        assert await offset_fetch(conn, "sg", "tt", True) == (UNSTABLE, -1)
        assert await latest(conn, "tt", 1) == 0
        # a 200 ms transaction: aborted by the coordinator soon after
        _, pid2, e2 = await init_pid(conn, "short", timeout_ms=200)
        assert await add_partitions(conn, "short", pid2, e2, [("tt", 0)]) == {("tt", 0): E_NONE}
        await wait_for_state(conn, "short", "CompleteAbort")
        state = await describe(conn, "short")
        assert state.producer_epoch == e2 + 1  # fenced
        assert await end_txn(conn, "short", pid2, e2, True) == PRODUCER_FENCED
    finally:
        await conn.close()
    assert "Traceback" not in server.log_text()


@pytest.mark.process  # killed (SIGKILL) or read by pid: needs a real process
async def test_a_transaction_prepared_before_a_crash_completes_at_startup(server):
    """PrepareCommit is durable, the markers are not: a restart writes them (and
    CompleteCommit), so the data becomes visible and the pending offsets apply."""
    from coordinator.log.offsets import OffsetsLog
    from coordinator.transactions.coordinator import TOPIC
    from protocol.transaction_records import PREPARE_COMMIT, TransactionLogValue, encode_key, encode_value

    conn = await WireClient("txn-wire").connect("127.0.0.1", server.port)
    await conn.create_topics("tp", partitions=1)
    _, pid, epoch = await init_pid(conn, "crashy")
    assert await add_partitions(conn, "crashy", pid, epoch, [("tp", 0)]) == {("tp", 0): E_NONE}
    assert (await produce_txn(conn, "crashy", "tp", 0, pid, epoch, 0))[0] == E_NONE
    await conn.request(
        ADD_OFFSETS,
        3,
        cls(ADD_OFFSETS, 3)(transactional_id="crashy", producer_id=pid, producer_epoch=epoch, group_id="cg"),
    )
    assert await txn_commit(conn, "crashy", "cg", pid, epoch, "tp", 2) == E_NONE
    partitions = {t.topic: list(t.partitions) for t in (await describe(conn, "crashy")).topics}
    await conn.close()
    server.stop(9)
    # what the coordinator writes when EndTxn(commit) arrives, and nothing after it
    log = await OffsetsLog.open(server.data_dir, 50, topic=TOPIC, background=False)
    fut = asyncio.get_running_loop().create_future()
    log.append(
        "crashy",
        [
            (
                encode_key("crashy"),
                encode_value(TransactionLogValue(pid, epoch, 60_000, PREPARE_COMMIT, partitions, 1, 1)),
            )
        ],
        lambda error, _: fut.set_result(error),
    )
    assert await fut is None
    await log.close()
    server.start()
    conn = await WireClient("txn-wire").connect("127.0.0.1", server.port)
    try:
        await wait_for_state(conn, "crashy", "CompleteCommit")
        assert await offset_fetch(conn, "cg", "tp", True) == (E_NONE, 2)
        controls, offset = [], 0
        while offset < 3:  # (a restart starts a new segment: a Fetch reads within one)
            data = await fetch(conn, "tp", offset, isolation=1)
            assert not data.aborted_transactions and data.last_stable_offset == 3
            for _, h in iter_batches(data.records):
                controls.append(h.is_control)
                offset = h.next_offset
        assert controls == [False, True]
    finally:
        await conn.close()


async def test_unused_transactional_ids_expire(server_factory):
    """transactional.id.expiration.ms, as Kafka's TransactionStateManager: an id left Empty,
    CompleteCommit or CompleteAbort that long is removed at the next sweep
    (transaction.remove.expired.transaction.cleanup.interval.ms): a tombstone in
    __transaction_state, then DescribeTransactions answers TRANSACTIONAL_ID_NOT_FOUND and
    ListTransactions leaves it out; an Ongoing one stays. Used again, it starts afresh under a
    new producer id."""
    from coordinator.transactions.coordinator import TransactionCoordinator

    server = server_factory(
        "--transactional-id-expiration-ms", "300", "--transaction-remove-expired-interval-ms", "100"
    )
    conn = await WireClient("txn-wire").connect("127.0.0.1", server.port)
    await conn.create_topics("ex", partitions=1)
    try:
        error, pid, _ = await init_pid(conn, "short-lived")
        assert error == E_NONE
        _, cpid, cepoch = await init_pid(conn, "committed")
        assert await add_partitions(conn, "committed", cpid, cepoch, [("ex", 0)]) == {("ex", 0): E_NONE}
        assert await end_txn(conn, "committed", cpid, cepoch, True) == E_NONE
        _, opid, oepoch = await init_pid(conn, "open")
        assert await add_partitions(conn, "open", opid, oepoch, [("ex", 0)]) == {("ex", 0): E_NONE}
        deadline = asyncio.get_running_loop().time() + 10
        while {await describe_unknown(server.port, t) for t in ("short-lived", "committed")} != {TXN_ID_NOT_FOUND}:
            assert asyncio.get_running_loop().time() < deadline, "never expired"
            await asyncio.sleep(0.05)
        assert (await describe(conn, "open")).transaction_state == "Ongoing"
        r = await conn.request(
            LIST_TXNS, 1, cls(LIST_TXNS, 1)(state_filters=(), producer_id_filters=(), duration_filter=-1)
        )
        assert [s.transactional_id for s in r.transaction_states] == ["open"]
        coordinator = next(c for c in server._server.components if isinstance(c, TransactionCoordinator))
        assert server._call(_last_record_is_tombstone(coordinator, "short-lived"))
        assert server._call(_last_record_is_tombstone(coordinator, "committed"))
        error, pid2, epoch2 = await init_pid(conn, "short-lived")
        assert error == E_NONE and pid2 != pid and epoch2 == 0  # a new producer id: the old one is forgotten
    finally:
        await conn.close()
    assert "transactional id short-lived expired" in server.log_text()


async def _value_versions(coordinator, txn_id):
    from protocol.record_batch import iter_batch_records
    from protocol.transaction_records import decode_key

    plog = coordinator.log.logs[coordinator.log.partition_for(txn_id)]
    records = [r for _, data in plog.batches() for r in iter_batch_records(data) if decode_key(r.key) == txn_id]
    return {struct.unpack_from(">h", r.value)[0] for r in records if r.value is not None}


async def test_transactions_v1_are_logged_in_value_version_1(server):
    """With transaction.version finalized at 2 (the default), a transactions v1 transaction's
    states are written as TransactionLogValue v1, as Kafka's TransactionLog writes them."""
    from coordinator.transactions.coordinator import TransactionCoordinator

    conn = await WireClient("txn-log").connect("127.0.0.1", server.port)
    await conn.create_topics("lv", partitions=1)
    try:
        error, pid, epoch = await init_pid(conn, "v1-logged")
        assert await add_partitions(conn, "v1-logged", pid, epoch, [("lv", 0)]) == {("lv", 0): E_NONE}
        assert await end_txn(conn, "v1-logged", pid, epoch, False) == E_NONE
        await wait_for_state(conn, "v1-logged", "CompleteAbort")
        coordinator = next(c for c in server._server.components if isinstance(c, TransactionCoordinator))
        assert server._call(_value_versions(coordinator, "v1-logged")) == {1}
    finally:
        await conn.close()


async def _last_record_is_tombstone(coordinator, txn_id):
    from protocol.record_batch import iter_batch_records
    from protocol.transaction_records import decode_key

    plog = coordinator.log.logs[coordinator.log.partition_for(txn_id)]
    values = [r.value for _, data in plog.batches() for r in iter_batch_records(data) if decode_key(r.key) == txn_id]
    return len(values) > 1 and values[-1] is None


def test_transaction_log_value_codec():
    """TransactionLogValue: v0 round trip; v1 (flexible, tagged ClientTransactionVersion and
    producer ids), as Kafka 4 writes for transactions v2, read and written; a bad key version
    refused."""
    import pytest

    from protocol.group_records import RecordDecodeError
    from protocol.transaction_records import ONGOING, TransactionLogValue, decode_key, decode_value, encode_value

    v = TransactionLogValue(5, 2, 60_000, ONGOING, {"t": [0, 1], "__consumer_offsets": [3]}, 123, 100)
    assert decode_value(encode_value(v)) == v
    v1 = (
        struct.pack(">hqhib", 1, 7, 3, 1000, 1)
        + bytes([2, 2])
        + b"t"
        + bytes([3])
        + struct.pack(">ii", 0, 4)
        + bytes([0])
        + struct.pack(">qq", 11, 9)
        + bytes([1, 2, 2])
        + struct.pack(">h", 2)
    )
    expected = TransactionLogValue(7, 3, 1000, 1, {"t": [0, 4]}, 11, 9, client_transaction_version=2)
    assert decode_value(v1) == expected and encode_value(expected) == v1
    rotated = expected._replace(previous_producer_id=6, next_producer_id=8)
    assert decode_value(encode_value(rotated)) == rotated
    with pytest.raises(RecordDecodeError):
        decode_key(b"\x00\x01\x00\x00")


async def test_describe_producers_write_txn_markers_and_verification(server):
    """DescribeProducers (KIP-664) as the partition's producer state; WriteTxnMarkers as the
    admin's abortTransaction sends it, refused for an old producer or coordinator epoch;
    transaction.partition.verification.enable off lets a batch of no transaction in (a
    hanging transaction), which a marker then ends; producer.id.expiration.ms forgets the
    producers with no transaction open."""
    conn = await WireClient("txn-producers").connect("127.0.0.1", server.port)
    await conn.create_topics("dp", partitions=1)
    try:
        assert await describe_producers(conn, "dp") == (E_NONE, {})
        assert (await describe_producers(conn, "nope"))[0] == UNKNOWN_TOPIC
        error, pid, epoch = await init_pid(conn, "d1")
        # verification on (Kafka's default): a partition never added takes nothing
        assert (await produce_txn(conn, "d1", "dp", 0, pid, epoch, 0))[0] == INVALID_TXN_STATE
        assert await latest(conn, "dp", 0) == 0 and await describe_producers(conn, "dp") == (E_NONE, {})
        assert await add_partitions(conn, "d1", pid, epoch, [("dp", 0)]) == {("dp", 0): E_NONE}
        assert await produce_txn(conn, "d1", "dp", 0, pid, epoch, 0) == (E_NONE, 0)
        assert await describe_producers(conn, "dp") == (E_NONE, {pid: (epoch, 1, 1_700_000_000_000, -1, 0)})
        assert await end_txn(conn, "d1", pid, epoch, True) == E_NONE
        await wait_for_state(conn, "d1", "CompleteCommit")
        ((_, state),) = [await describe_producers(conn, "dp")]
        assert state[pid][:2] == (epoch, 1) and state[pid][3:] == (0, -1)  # the marker's coordinator epoch
        assert state[pid][2] > 1_700_000_000_000  # the marker's time
        # verification off: a transactional batch nobody added is written (and hangs)
        await set_broker_config(conn, "transaction.partition.verification.enable", "false")
        assert await produce_txn(conn, "ghost", "dp", 0, 4242, 3, 0) == (E_NONE, 3)
        assert (await describe_producers(conn, "dp"))[1][4242] == (3, 1, 1_700_000_000_000, -1, 3)
        assert await latest(conn, "dp", 1) == 3  # the LSO waits for it
        # markers older than the producer's epoch, or than the last marker's coordinator epoch
        assert await write_marker(conn, 4242, 2, False, [("dp", 0), ("nope", 0)]) == {
            ("dp", 0): INVALID_PRODUCER_EPOCH,
            ("nope", 0): UNKNOWN_TOPIC,
        }
        assert await write_marker(conn, 4242, 3, False, [("dp", 0)], coordinator_epoch=5) == {("dp", 0): E_NONE}
        assert await latest(conn, "dp", 1) == 6 == await latest(conn, "dp", 0)
        assert (await describe_producers(conn, "dp"))[1][4242][3:] == (5, -1)
        assert await write_marker(conn, 4242, 3, False, [("dp", 0)], coordinator_epoch=4) == {
            ("dp", 0): TXN_COORDINATOR_FENCED
        }
        # transactions v2 markers carry a bumped epoch: the same epoch is refused
        assert await write_marker(conn, 4242, 3, False, [("dp", 0)], 5, v=2, transaction_version=2) == {
            ("dp", 0): INVALID_PRODUCER_EPOCH
        }
        assert await write_marker(conn, 4242, 4, False, [("dp", 0)], 5, v=2, transaction_version=2) == {
            ("dp", 0): E_NONE
        }
        assert (await describe_producers(conn, "dp"))[1][4242][0] == 4
        assert await latest(conn, "dp", 0) == 7
        # producer.id.expiration.ms: only the producer with a transaction open stays
        assert await add_partitions(conn, "d1", pid, epoch, [("dp", 0)]) == {("dp", 0): E_NONE}
        assert await produce_txn(conn, "d1", "dp", 0, pid, epoch, 2) == (E_NONE, 7)
        await set_broker_config(conn, "producer.id.expiration.ms", "1")
        assert await describe_producers(conn, "dp") == (E_NONE, {pid: (epoch, 3, 1_700_000_000_000, 0, 7)})
    finally:
        await conn.close()


async def test_transactions_v2(server):
    """KIP-890 part 2 over raw frames: Produce v12 and TxnOffsetCommit v5 add their partition
    and group themselves; EndTxn v5 bumps the epoch and answers it (retries of it answered
    alike), the old epoch is fenced everywhere (a zombie's batch: INVALID_PRODUCER_EPOCH,
    nothing written); an abort with nothing added still bumps; at the exhausted epoch the
    producer moves to a new id; the state survives a restart."""
    from coordinator.transactions.coordinator import MAX_EPOCH, TransactionCoordinator

    conn = await WireClient("txn-v2").connect("127.0.0.1", server.port)
    await conn.create_topics("v2", partitions=1)
    try:
        error, pid, epoch = await init_pid(conn, "tv2", v=5)
        assert (error, epoch) == (E_NONE, 0)
        # Produce v12 adds the partition, TxnOffsetCommit v5 the group: no AddPartitions/AddOffsets
        assert await produce_txn(conn, "tv2", "v2", 0, pid, 0, 0, v=12) == (E_NONE, 0)
        assert await txn_commit(conn, "tv2", "g2", pid, 0, "v2", 2, v=5) == E_NONE
        d = await describe(conn, "tv2")
        assert d.transaction_state == "Ongoing"
        assert sorted(t.topic for t in d.topics for p in t.partitions) == ["__consumer_offsets", "v2"]
        assert await end_txn_v5(conn, "tv2", pid, 0, True) == (E_NONE, pid, 1)
        await wait_for_state(conn, "tv2", "CompleteCommit")
        assert await end_txn_v5(conn, "tv2", pid, 0, True) == (E_NONE, pid, 1)  # a retry: the same answer
        assert await offset_fetch(conn, "g2", "v2", True) == (E_NONE, 2)
        assert await latest(conn, "v2", 1) == 3  # the marker (written under epoch 1) at offset 2
        assert (await describe_producers(conn, "v2"))[1][pid][:2] == (1, -1)
        # the zombie (epoch 0) is fenced: nothing of it is written
        assert (await produce_txn(conn, "tv2", "v2", 0, pid, 0, 2, v=12))[0] == INVALID_PRODUCER_EPOCH
        assert (await produce_txn(conn, "tv2", "v2", 0, pid, 0, 2, v=9))[0] == INVALID_PRODUCER_EPOCH
        assert await txn_commit(conn, "tv2", "g2", pid, 0, "v2", 9, v=5) == INVALID_PRODUCER_EPOCH
        # (epoch 0 is the bumped-from epoch: a retry that asks the other outcome)
        assert await end_txn_v5(conn, "tv2", pid, 0, False) == (INVALID_TXN_STATE, -1, -1)
        assert await end_txn_v5(conn, "tv2", pid + 100, 1, False) == (INVALID_PID_MAPPING, -1, -1)
        assert await end_txn_v5(conn, "", pid, 1, False) == (42, -1, -1)  # INVALID_REQUEST
        assert await latest(conn, "v2", 0) == 3
        # the next transaction, aborted under epoch 1 -> 2
        assert await produce_txn(conn, "tv2", "v2", 0, pid, 1, 0, v=12) == (E_NONE, 3)
        assert await end_txn_v5(conn, "tv2", pid, 1, False) == (E_NONE, pid, 2)
        await wait_for_state(conn, "tv2", "CompleteAbort")
        assert await end_txn_v5(conn, "tv2", pid, 0, False) == (PRODUCER_FENCED, -1, -1)
        # an abort with nothing added bumps too; a commit of nothing is refused
        assert await end_txn_v5(conn, "tv2", pid, 2, True) == (INVALID_TXN_STATE, -1, -1)
        assert await end_txn_v5(conn, "tv2", pid, 2, False) == (E_NONE, pid, 3)
        await wait_for_state(conn, "tv2", "CompleteAbort")
        # a transaction that reaches the last epoch ends under a new producer id
        coordinator = next(c for c in server._server.components if isinstance(c, TransactionCoordinator))
        server._call(_set_epoch(coordinator, "tv2", MAX_EPOCH - 2))
        assert await produce_txn(conn, "tv2", "v2", 0, pid, MAX_EPOCH - 2, 0, v=12) == (E_NONE, 6)
        assert await end_txn_v5(conn, "tv2", pid, MAX_EPOCH - 2, True) == (E_NONE, pid, MAX_EPOCH - 1)
        await wait_for_state(conn, "tv2", "CompleteCommit")
        assert await produce_txn(conn, "tv2", "v2", 0, pid, MAX_EPOCH - 1, 0, v=12) == (E_NONE, 9)
        error, new_pid, new_epoch = await end_txn_v5(conn, "tv2", pid, MAX_EPOCH - 1, True)
        assert error == E_NONE and new_pid != pid and new_epoch == 0
        await wait_for_state(conn, "tv2", "CompleteCommit")
        assert await end_txn_v5(conn, "tv2", pid, MAX_EPOCH - 1, True) == (E_NONE, new_pid, 0)  # its retry
        assert (await describe_producers(conn, "v2"))[1][pid][0] == MAX_EPOCH  # the markers' epoch
        assert await produce_txn(conn, "tv2", "v2", 0, new_pid, 0, 0, v=12) == (E_NONE, 12)
        # Produce v13 names the topic by id (an unknown id: UNKNOWN_TOPIC_ID, nothing written)
        (topic_id,) = (await topic_ids(conn, "v2")).values()
        assert await produce_txn(conn, "tv2", "v2", 0, new_pid, 0, 2, v=13, topic_id=topic_id) == (E_NONE, 14)
        assert (await produce_txn(conn, "tv2", "", 0, new_pid, 0, 4, v=13, topic_id=uuid.uuid4()))[0] == 100
        assert await latest(conn, "v2", 0) == 16
        await conn.close()
        server.restart()  # the v1 records of __transaction_state bring it all back
        conn = await WireClient("txn-v2").connect("127.0.0.1", server.port)
        d = await describe(conn, "tv2")
        assert (d.transaction_state, d.producer_id, d.producer_epoch) == ("Ongoing", new_pid, 0)
        assert await end_txn_v5(conn, "tv2", new_pid, 0, True) == (E_NONE, new_pid, 1)
        await wait_for_state(conn, "tv2", "CompleteCommit")
        assert await end_txn_v5(conn, "tv2", pid, MAX_EPOCH - 1, True) == (INVALID_PID_MAPPING, -1, -1)
    finally:
        await conn.close()


def _txn_produce(pid, epoch, parts):
    """A Produce v12 body of one transactional batch per (partition, base sequence) of topic 'ord'."""
    P, T = cls(0, 12, "PartitionProduceData"), cls(0, 12, "TopicProduceData")
    batches = tuple(
        P(
            index=partition,
            records=build_batch(
                [(b"k", b"v"), (b"k", b"v")],
                timestamp_ms=1_700_000_000_000,
                producer_id=pid,
                producer_epoch=epoch,
                base_sequence=seq,
                transactional=True,
            ),
        )
        for partition, seq in parts
    )
    return cls(0, 12)(
        transactional_id="ord", acks=-1, timeout=5000 * MS, topic_data=(T(name="ord", partition_data=batches),)
    )


async def test_pipelined_transactional_produces_append_in_the_order_sent(server):
    """Kafka reads a connection's next request only after answering this one. A Produce v12
    that adds a partition to the transaction waits on the coordinator; the request sent after
    it, to a partition already in the transaction, must not append first (its sequence would
    leave a gap: OUT_OF_ORDER_SEQUENCE_NUMBER, which franz-go's TestTxnEtl hit)."""
    conn = await WireClient("txn-order").connect("127.0.0.1", server.port)
    await conn.create_topics("ord", partitions=2)
    try:
        error, pid, epoch = await init_pid(conn, "ord", v=5)
        assert error == E_NONE
        assert await produce_txn(conn, "ord", "ord", 0, pid, epoch, 0, v=12) == (E_NONE, 0)
        first, second = conn.send_many(
            [(0, 12, _txn_produce(pid, epoch, [(1, 0), (0, 2)])), (0, 12, _txn_produce(pid, epoch, [(0, 4)]))]
        )
        answers = [
            (p.index, p.error_code, p.base_offset)
            for r in (await first, await second)
            for p in r.responses[0].partition_responses
        ]
        assert answers == [(1, E_NONE, 0), (0, E_NONE, 2), (0, E_NONE, 4)]
    finally:
        await conn.close()


async def _set_epoch(coordinator, txn_id, epoch):
    """Move an idle transactional id to a late epoch (a state 32,000 transactions would reach)."""
    meta = coordinator.txns[txn_id]
    async with meta.lock:
        await coordinator._write(meta, {"producer_epoch": epoch})


async def test_txn_offset_commit_v6(server):
    """TxnOffsetCommit v6 (KIP-1319) names topics by id, in the request and the answer: an id
    no topic has is UNKNOWN_TOPIC_ID, nothing committed. Of a group, an unknown group asked
    with a generation is GROUP_ID_NOT_FOUND and a member's newer epoch STALE_MEMBER_EPOCH,
    where v5 answers both ILLEGAL_GENERATION (Kafka's OffsetMetadataManager)."""
    conn = await WireClient("txn-v6").connect("127.0.0.1", server.port)
    await conn.create_topics("t6", partitions=1)
    try:
        (topic_id,) = (await topic_ids(conn, "t6")).values()
        error, pid, epoch = await init_pid(conn, "tv6", v=5)
        assert await txn_commit(conn, "tv6", "g6", pid, epoch, "", 7, v=6, topic_id=topic_id) == E_NONE
        assert await txn_commit(conn, "tv6", "g6", pid, epoch, "", 8, v=6, topic_id=uuid.uuid4()) == 100
        assert await txn_commit(conn, "tv6", "none", pid, epoch, "", 8, v=6, generation=3, topic_id=topic_id) == 69
        assert await txn_commit(conn, "tv6", "none", pid, epoch, "t6", 8, v=5, generation=3) == 22
        # a consumer-protocol member at epoch 2, committing as epoch 3
        r = await conn.request(68, 1, hb("g6m", "m", 0, ["t6"]))
        assert (r.error_code, r.member_epoch) == (E_NONE, 2)
        args = ("tv6", "g6m", pid, epoch)
        assert await txn_commit(conn, *args, "", 8, v=6, generation=3, member="m", topic_id=topic_id) == 113
        assert await txn_commit(conn, *args, "t6", 8, v=5, generation=3, member="m") == 22
        assert await txn_commit(conn, *args, "", 9, v=6, generation=2, member="m", topic_id=topic_id) == E_NONE
        assert await end_txn_v5(conn, "tv6", pid, epoch, True) == (E_NONE, pid, epoch + 1)
        await wait_for_state(conn, "tv6", "CompleteCommit")
        assert await offset_fetch(conn, "g6", "t6", True) == (E_NONE, 7)
        assert await offset_fetch(conn, "g6m", "t6", True) == (E_NONE, 9)
    finally:
        await conn.close()


async def test_bad_input_is_refused_with_nothing_written(server):
    """Kafka's error for each bad transactional request, and nothing of it written: a batch or a
    transactional commit of an unknown producer id (INVALID_PRODUCER_ID_MAPPING), of an old
    epoch (INVALID_PRODUCER_EPOCH on Produce and TxnOffsetCommit, verified through the
    transaction coordinator; PRODUCER_FENCED on the coordinator's own APIs).
    InitProducerId from a new instance while a transaction is open fences the old one and
    answers CONCURRENT_TRANSACTIONS once the abort is decided (Kafka's PrepareEpochFence);
    its retry gets the epoch after the fencing one."""
    conn = await WireClient("txn-bad").connect("127.0.0.1", server.port)
    await conn.create_topics("bi", partitions=1)
    try:
        error, pid, epoch = await init_pid(conn, "t-bad")
        assert await add_partitions(conn, "t-bad", pid, epoch, [("bi", 0)]) == {("bi", 0): E_NONE}
        assert await produce_txn(conn, "t-bad", "bi", 0, pid, epoch, 0) == (E_NONE, 0)
        assert (await produce_txn(conn, "t-bad", "bi", 0, pid + 100, epoch, 0))[0] == INVALID_PID_MAPPING
        assert (await produce_txn(conn, "t-bad", "bi", 0, pid, epoch + 1, 0))[0] == INVALID_PRODUCER_EPOCH
        assert await txn_commit(conn, "t-bad", "gb", pid + 100, epoch, "bi", 1) == INVALID_PID_MAPPING
        assert await offset_fetch(conn, "gb", "bi", True) == (E_NONE, -1)  # nothing pending
        assert await latest(conn, "bi", 0) == 2
        # a new instance: the open transaction is aborted under epoch + 1
        assert await init_pid(conn, "t-bad") == (CONCURRENT, -1, -1)
        await wait_for_state(conn, "t-bad", "CompleteAbort")
        assert (await describe(conn, "t-bad")).producer_epoch == epoch + 1
        assert await init_pid(conn, "t-bad") == (E_NONE, pid, epoch + 2)
        # the fenced instance: refused everywhere, nothing written
        assert (await produce_txn(conn, "t-bad", "bi", 0, pid, epoch, 2))[0] == INVALID_PRODUCER_EPOCH
        assert await add_partitions(conn, "t-bad", pid, epoch, [("bi", 0)]) == {("bi", 0): PRODUCER_FENCED}
        assert await txn_commit(conn, "t-bad", "gb", pid, epoch, "bi", 1) == INVALID_PRODUCER_EPOCH
        assert await end_txn(conn, "t-bad", pid, epoch, True) == PRODUCER_FENCED
        assert await latest(conn, "bi", 0) == 3 == await latest(conn, "bi", 1)  # 2 records and the abort marker
        assert (await fetch(conn, "bi", 0, isolation=1)).aborted_transactions[0].producer_id == pid
    finally:
        await conn.close()
