"""Kafka 4.4's `kafka-transactions` tool (org.apache.kafka.tools.TransactionsCommand, run in
one JVM by the differential suite's launcher, `make oracle`) against the server: list, describe, describe-producers, and a hanging
transaction (a transactional batch no coordinator knows of, older than the tool's
--max-transaction-timeout) found by find-hanging and aborted by abort (WriteTxnMarkers);
`kcoord transactions` shows the same."""

from __future__ import annotations

import asyncio
import json

import pytest

from tests.support.kafka_oracle import Tools, unavailable
from tests.support import cli
from tests.support.transactions_wire import (
    E_NONE,
    add_partitions,
    describe_producers,
    init_pid,
    latest,
    produce_txn,
    set_broker_config,
)
from tests.support.wire_client import WireClient

pytestmark = [pytest.mark.slow]  # Kafka's tool in a JVM

MAIN = "org.apache.kafka.tools.TransactionsCommand"


@pytest.fixture(scope="module")
def tools(tmp_path_factory):
    why = unavailable()
    if why:
        pytest.skip(why)
    t = Tools(tmp_path_factory.mktemp("tools") / "launcher.log")
    yield t
    t.close()


def tool(tools: Tools, bootstrap: str, *args: str) -> tuple[int, list[list[str]], str]:
    """(exit code, the printed table's rows split on tabs and stripped, stderr)."""
    run = tools.run(MAIN, "--bootstrap-server", bootstrap, *args)
    rows = [[cell.strip() for cell in line.split("\t")[:-1]] for line in run.out.splitlines() if "\t" in line]
    return run.code, rows, run.err


async def _setup(port: int) -> tuple[int, int]:
    """A live transaction (its partition added) and a hanging one (no transactional id, written
    with verification off); both batches carry a timestamp of 2023, older than any timeout."""
    conn = await WireClient("txn-tool").connect("127.0.0.1", port)
    try:
        await conn.create_topics("hang", partitions=1)
        await set_broker_config(conn, "transaction.partition.verification.enable", "false")
        assert await produce_txn(conn, "ghost", "hang", 0, 4242, 3, 0) == (E_NONE, 0)
        error, pid, epoch = await init_pid(conn, "live")
        assert await add_partitions(conn, "live", pid, epoch, [("hang", 0)]) == {("hang", 0): E_NONE}
        assert await produce_txn(conn, "live", "hang", 0, pid, epoch, 0) == (E_NONE, 2)
        return pid, epoch
    finally:
        await conn.close()


async def _state(port: int) -> tuple[int, dict]:
    conn = await WireClient("txn-tool").connect("127.0.0.1", port)
    try:
        return await latest(conn, "hang", 1), (await describe_producers(conn, "hang"))[1]
    finally:
        await conn.close()


def kcoord(server, *args: str) -> list[dict]:
    run = cli.kcoord("--bootstrap-server", server.bootstrap, "--output", "json", *args)
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout)


def test_kafka_transactions_tool(server, tools):
    pid, epoch = asyncio.run(_setup(server.port))
    b = server.bootstrap
    assert tool(tools, b, "list")[1] == [
        ["TransactionalId", "Coordinator", "ProducerId", "TransactionState"],
        ["live", "1", str(pid), "Ongoing"],
    ]
    rc, rows, _ = tool(tools, b, "describe", "--transactional-id", "live")
    assert rc == 0 and rows[0][0] == "CoordinatorId" and len(rows) == 2
    assert rows[1][:6] == ["1", "live", str(pid), str(epoch), "Ongoing", "60000"] and rows[1][8] == "hang-0"
    assert tool(tools, b, "describe-producers", "--topic", "hang", "--partition", "0")[1] == [
        [
            "ProducerId",
            "ProducerEpoch",
            "LatestCoordinatorEpoch",
            "LastSequence",
            "LastTimestamp",
            "CurrentTransactionStartOffset",
        ],
        [str(pid), str(epoch), "-1", "1", "1700000000000", "2"],
        ["4242", "3", "-1", "1", "1700000000000", "0"],
    ]
    assert kcoord(server, "transactions", "list") == [
        {"TRANSACTIONAL_ID": "live", "COORDINATOR": 1, "PRODUCER_ID": pid, "STATE": "Ongoing"}
    ]
    (described,) = kcoord(server, "transactions", "describe", "live")
    assert (described["STATE"], described["EPOCH"], described["PARTITIONS"]) == ("Ongoing", epoch, "hang-0")
    assert [(p["PRODUCER_ID"], p["TXN_START_OFFSET"]) for p in kcoord(server, "transactions", "producers", "hang")] == [
        (pid, 2),
        (4242, 0),
    ]
    # the live transaction is its coordinator's; the other hangs
    rc, rows, _ = tool(tools, b, "find-hanging", "--broker-id", "1")
    assert rc == 0 and [r[:6] for r in rows[1:]] == [["hang", "0", "4242", "3", "-1", "0"]]
    assert tool(tools, b, "find-hanging", "--topic", "hang", "--partition", "0")[1][1:] == rows[1:]
    assert asyncio.run(_state(server.port))[0] == 0  # the LSO held by the hanging transaction
    rc, _, err = tool(tools, b, "abort", "--topic", "hang", "--partition", "0", "--start-offset", "0")
    assert rc == 0, err
    lso, producers = asyncio.run(_state(server.port))
    assert lso == 2 and producers[4242][3:] == (0, -1)  # only the live transaction holds it now
    rc, rows, _ = tool(tools, b, "find-hanging", "--broker-id", "1")
    assert rc == 0 and rows[1:] == []
    rc, _, err = tool(tools, b, "abort", "--topic", "hang", "--partition", "0", "--start-offset", "7")
    assert rc == 1 and "Could not find any open transactions starting at offset 7" in err
