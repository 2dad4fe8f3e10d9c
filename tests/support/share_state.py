"""A share-partition's state under test: the manager of an in-process server, a state log made
to fail its writes, and the share-partition as a restart would rebuild it from memory."""

from __future__ import annotations

import asyncio
import errno

from coordinator.share.manager import SharePartitionManager
from coordinator.share.partition import ACQUIRED, AVAILABLE


def shares(server) -> SharePartitionManager:
    return next(c for c in server._server.components if isinstance(c, SharePartitionManager))


class FailingWrites:
    """While on, every append to `__share_group_state` fails as a full disk makes it fail
    (reported later, as the log reports a failed sync), and nothing of it reaches the log."""

    def __init__(self, server) -> None:
        self.log = shares(server).state.log
        self.real = self.log.append_to
        self.failed = 0

    def __enter__(self) -> FailingWrites:
        def fail(p, records, done=None, timestamp_ms=None):
            self.failed += 1
            asyncio.get_running_loop().call_soon(done, OSError(errno.ENOSPC, "No space left on device"), None)

        self.log.append_to = fail
        return self

    def __exit__(self, *exc) -> None:
        self.log.append_to = self.real


def live(server, group="g", partition=0):
    """The share-partition in memory, as a restart would see it: an acquisition is never
    written (as in Kafka), so an Acquired record counts one delivery less, and one never
    delivered before is not there at all."""
    m = shares(server)
    key = next(k for k in m.partitions if k[0] == group and k[2] == partition)
    sp = m.partitions[key]
    view = {}
    for o, r in sp.records.items():
        if r.state != ACQUIRED:
            view[o] = (r.state, r.count)
        elif r.count > 1:
            view[o] = (AVAILABLE, r.count - 1)
    return sp.start, view
