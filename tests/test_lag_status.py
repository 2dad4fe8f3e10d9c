"""Burrow's partition verdict (coordinator.metrics.lag.partition_status), rule by rule, in
Burrow's order: the one implementation the metrics and `kcoord groups status` show."""

from __future__ import annotations

import pytest

from coordinator.metrics.lag import Commit, group_status, partition_status

NOW = 100_000


def commits(*rows: tuple[int, int, int]) -> list[Commit]:
    return [Commit(t, offset, lag) for t, offset, lag in rows]


@pytest.mark.parametrize(
    "window, lag_now, expected",
    [
        ([], 5, "OK"),  # nothing to judge
        (commits((90_000, 10, 5), (95_000, 12, 5)), 0, "OK"),  # no lag now
        (commits((90_000, 10, 5), (95_000, 12, 0), (99_000, 12, 3)), 3, "OK"),  # lag 0 within the window
        (commits((10_000, 10, 5), (20_000, 8, 7)), 7, "REWIND"),  # rewind outranks stop
        (commits((10_000, 10, 5), (20_000, 12, 5)), 5, "STOP"),  # silent 80 s > 10 s span
        (commits((90_000, 10, 5), (95_000, 10, 6), (99_000, 10, 7)), 7, "STALL"),  # committing, not moving
        (
            commits(
                (100_000, 10, 5),
            ),
            5,
            "STALL",
        ),  # one commit, just now: stalled
        (
            commits(
                (99_000, 10, 5),
            ),
            5,
            "STOP",
        ),  # one commit a second ago: stopped
        (commits((90_000, 10, 5), (95_000, 12, 5), (99_000, 14, 6)), 6, "WARN"),  # lag never decreased
        (commits((90_000, 10, 5), (95_000, 12, 4), (99_000, 14, 6)), 6, "OK"),  # it decreased once
    ],
)
def test_burrow_rules_in_burrows_order(window, lag_now, expected):
    assert partition_status(window, lag_now, NOW) == expected


def test_group_is_its_worst_partition_capped_at_err():
    assert group_status(["OK", "WARN"]) == "WARN"
    assert group_status(["WARN", "STALL"]) == "ERR"
    assert group_status([]) == "OK"
