"""A share-partition's state under test: the manager of an in-process server, a state log made
to fail its writes, and the share-partition as a restart would rebuild it from memory."""

from __future__ import annotations

import errno

from coordinator.share.manager import SharePartitionManager
from coordinator.share.partition import ACQUIRED, AVAILABLE


def shares(server) -> SharePartitionManager:
    return next(c for c in server._server.components if isinstance(c, SharePartitionManager))


class FailingWrites:
    """While on, every append to `__share_group_state` fails as a full disk makes it fail
    (reported later, as the log reports a failed sync), and nothing of it reaches the log:
    through the log's fault seam (OffsetsLog.fault), as a compiled log's methods are fixed."""

    def __init__(self, server) -> None:
        self.log = shares(server).state.log
        self.failed = 0

    def refuse(self, partition: int) -> OSError:
        self.failed += 1
        return OSError(errno.ENOSPC, "No space left on device")

    def __enter__(self) -> FailingWrites:
        self.log.fault = self.refuse
        return self

    def __exit__(self, *exc) -> None:
        self.log.fault = None


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
