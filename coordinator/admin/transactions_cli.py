"""`kcoord transactions`: kafka-transactions.sh's views of transactions and producers.

    kcoord transactions list [--state Ongoing]
    kcoord transactions describe TXN_ID
    kcoord transactions producers TOPIC [--partition 0]

As Kafka's tool: list asks every broker for the transactional ids it coordinates
(ListTransactions); describe asks the id's coordinator (DescribeTransactions); producers asks
each partition's leader for its active producers (DescribeProducers, KIP-664), with the first
offset of the transaction each has open there, so an open transaction shows where it holds the
last stable offset.
"""

from __future__ import annotations

import datetime
from typing import Any

import click
from kio.serial.errors import SerialError

from .client import Cluster, Connection
from .common import Failure, cluster_of, emit, error_name, topic_partitions

FIND_COORDINATOR, DESCRIBE_PRODUCERS, DESCRIBE_TRANSACTIONS, LIST_TRANSACTIONS = 10, 61, 65, 66
TRANSACTION_KEY = 1


def _coordinator(cluster: Cluster, txn_id: str) -> Connection:
    r = cluster.bootstrap.request(FIND_COORDINATOR, key=txn_id, key_type=TRANSACTION_KEY, coordinator_keys=(txn_id,))
    coordinators = getattr(r, "coordinators", None)
    c = coordinators[0] if coordinators else r
    if c.error_code:
        raise Failure(f"no coordinator for transactional id {txn_id!r}: {error_name(c.error_code)}")
    return cluster.node(c.node_id)


def _listed(cluster: Cluster, states: tuple[str, ...]) -> list[tuple[Any, int]]:
    """(ListTransactions' entry, the broker that coordinates it) from every broker."""
    out: list[tuple[Any, int]] = []
    for node_id in sorted(cluster.brokers):
        r = cluster.node(node_id).request(
            LIST_TRANSACTIONS, state_filters=states, producer_id_filters=(), duration_filter=-1
        )
        if r.error_code:
            raise Failure(f"broker {node_id}: {error_name(r.error_code)}")
        out.extend((t, node_id) for t in r.transaction_states)
    return out


@click.group("transactions")
def transactions() -> None:
    """Transactions and the producers writing them (kafka-transactions)."""


@transactions.command("list")
@click.option("--state", "states", multiple=True, help="only transactions in this state (repeatable)")
@click.pass_context
def transactions_list(ctx: click.Context, states: tuple[str, ...]) -> None:
    """Every transactional id, its coordinator, producer id and state (kafka-transactions list)."""
    cluster = cluster_of(ctx)
    rows = [[t.transactional_id, node, t.producer_id, t.transaction_state] for t, node in _listed(cluster, states)]
    emit(ctx, ["TRANSACTIONAL_ID", "COORDINATOR", "PRODUCER_ID", "STATE"], sorted(rows))


@transactions.command("describe")
@click.argument("transactional_id")
@click.pass_context
def transactions_describe(ctx: click.Context, transactional_id: str) -> None:
    """One transactional id: producer id and epoch, state, timeout, start of the open
    transaction and its partitions (kafka-transactions describe)."""
    cluster = cluster_of(ctx)
    conn = _coordinator(cluster, transactional_id)
    try:
        d = conn.request(DESCRIBE_TRANSACTIONS, transactional_ids=(transactional_id,)).transaction_states[0]
    except SerialError:
        # (no transaction started: Kafka's start time -1, which the decoder cannot read)
        listed = [t for t, _ in _listed(cluster, ()) if t.transactional_id == transactional_id]
        if not listed:
            raise Failure(f"transactional id {transactional_id!r}: TRANSACTIONAL_ID_NOT_FOUND") from None
        t = listed[0]
        emit(ctx, _DESCRIBE, [[transactional_id, t.producer_id, None, t.transaction_state, None, None, ""]])
        return
    if d.error_code:
        raise Failure(f"transactional id {transactional_id!r}: {error_name(d.error_code)}")
    start = d.transaction_start_time
    started = int(start.timestamp() * 1000) if isinstance(start, datetime.datetime) else None
    partitions = ",".join(f"{t.topic}-{p}" for t in d.topics for p in t.partitions)
    emit(
        ctx,
        _DESCRIBE,
        [
            [
                transactional_id,
                d.producer_id,
                d.producer_epoch,
                d.transaction_state,
                int(d.transaction_timeout.total_seconds() * 1000)
                if isinstance(d.transaction_timeout, datetime.timedelta)
                else d.transaction_timeout,
                started if started is not None and started >= 0 else None,
                partitions,
            ]
        ],
    )


_DESCRIBE = ["TRANSACTIONAL_ID", "PRODUCER_ID", "EPOCH", "STATE", "TIMEOUT_MS", "START_TIME_MS", "PARTITIONS"]


@transactions.command("producers")
@click.argument("topic")
@click.option("--partition", type=int, default=None, help="only this partition")
@click.pass_context
def transactions_producers(ctx: click.Context, topic: str, partition: int | None) -> None:
    """The active producers of a topic's partitions, from their leaders: epoch, last sequence
    and timestamp, coordinator epoch of their last marker, and the first offset of the
    transaction each has open (kafka-transactions describe-producers)."""
    cluster = cluster_of(ctx)
    leaders = topic_partitions(cluster, [topic])[topic]
    if partition is not None:
        if partition not in leaders:
            raise Failure(f"topic {topic!r} has no partition {partition}")
        leaders = {partition: leaders[partition]}
    rows = []
    for p, leader in sorted(leaders.items()):
        conn = cluster.node(leader)
        t = conn.nested(DESCRIBE_PRODUCERS, "TopicRequest", name=topic, partition_indexes=(p,))
        answer = conn.request(DESCRIBE_PRODUCERS, topics=(t,)).topics[0].partitions[0]
        if answer.error_code:
            raise Failure(f"{topic}-{p}: {error_name(answer.error_code)}")
        for s in answer.active_producers:
            rows.append(
                [
                    topic,
                    p,
                    s.producer_id,
                    s.producer_epoch,
                    s.last_sequence,
                    s.last_timestamp,
                    s.coordinator_epoch,
                    s.current_txn_start_offset if s.current_txn_start_offset >= 0 else None,
                ]
            )
    emit(
        ctx,
        [
            "TOPIC",
            "PARTITION",
            "PRODUCER_ID",
            "EPOCH",
            "LAST_SEQUENCE",
            "LAST_TIMESTAMP",
            "COORDINATOR_EPOCH",
            "TXN_START_OFFSET",
        ],
        rows,
    )
