"""The orders Java's collections give, where Kafka's answer depends on them: String.hashCode,
the order a java.util.HashMap iterates its keys, and java.util.PriorityQueue's binary heap
(which of equal elements it gives first). Kafka's partition of a group (hashCode), the order it
lists features in and its streams task assignor's tie-breaks rest on these."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Generic, TypeVar

T = TypeVar("T")


def java_string_hashcode(s: str) -> int:
    """Java's String.hashCode: over UTF-16 code units, wrapping at 32 bits (signed)."""
    h = 0
    data = s.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] << 8 | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def topic_partition_hashcode(topic: str, partition: int) -> int:
    """Kafka's TopicPartition.hashCode: 31 * (31 + partition) + topic.hashCode(), in 32 bits."""
    h = (31 * (31 + partition) + java_string_hashcode(topic)) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


class JavaHashMap:
    """The order of a java.util.HashMap's keys: its table of buckets (the key's hashCode,
    String's unless `hash_code` says, spread by h ^ h >>> 16, masked by the table's size), one
    bucket a list, the table doubled past 3/4 full with each bucket's order kept. `put` adds at
    a bucket's tail and resizes after; `compute_if_absent` adds at its head and resizes before,
    as Java's do. (A bucket of more than 8 keys becomes a tree: not modelled, it needs more keys
    than these maps hold.)"""

    def __init__(
        self, initial_capacity: int | None = None, hash_code: Callable[[Any], int] = java_string_hashcode
    ) -> None:
        self.hash_code = hash_code
        self.table: list[list[Any]] | None = None
        self.threshold = 0
        if initial_capacity is not None:  # new HashMap<>(n): tableSizeFor(n), allocated later
            n = 1
            while n < initial_capacity:
                n <<= 1
            self.threshold = n
        self.size = 0

    def _spread(self, key: Any) -> int:
        h = self.hash_code(key) & 0xFFFFFFFF
        return h ^ (h >> 16)

    def _resize(self) -> list[list[Any]]:
        old = self.table
        old_cap = len(old) if old is not None else 0
        if old_cap > 0:
            cap = old_cap << 1
            threshold = self.threshold << 1 if old_cap >= 16 else int(cap * 0.75)
        elif self.threshold > 0:
            cap = self.threshold
            threshold = int(cap * 0.75)
        else:
            cap, threshold = 16, 12
        table: list[list[Any]] = [[] for _ in range(cap)]
        for bucket in old or ():
            for key in bucket:  # (a bucket splits in two, each keeping its order)
                table[self._spread(key) & (cap - 1)].append(key)
        self.table, self.threshold = table, threshold
        return table

    def _bucket(self, table: list[list[Any]], key: Any) -> list[Any]:
        return table[self._spread(key) & (len(table) - 1)]

    def put(self, key: Any) -> None:
        table = self.table if self.table is not None else self._resize()
        bucket = self._bucket(table, key)
        if key in bucket:
            return
        bucket.append(key)
        self.size += 1
        if self.size > self.threshold:
            self._resize()

    def compute_if_absent(self, key: Any) -> None:
        table = self.table
        if table is None or self.size > self.threshold:
            table = self._resize()
        bucket = self._bucket(table, key)
        if key in bucket:
            return
        bucket.insert(0, key)
        self.size += 1

    def keys(self) -> list[Any]:
        return [key for bucket in self.table or () for key in bucket]


def java_hash_order(keys: Iterable[str], initial_capacity: int | None = None) -> list[str]:
    """The order a java.util.HashMap iterates these string keys, `put` in this order into a
    map made with `initial_capacity` (None: `new HashMap<>()`)."""
    m = JavaHashMap(initial_capacity)
    for key in keys:
        m.put(key)
    return m.keys()


class JavaPriorityQueue(Generic[T]):
    """java.util.PriorityQueue with a comparator (negative, zero, positive): its siftUp on
    offer and siftDown on poll, so that among equal elements the one it gives is Java's."""

    def __init__(self, compare: Callable[[T, T], int]) -> None:
        self.compare = compare
        self.queue: list[T] = []

    def __len__(self) -> int:
        return len(self.queue)

    def add(self, x: T) -> None:
        q, cmp = self.queue, self.compare
        q.append(x)
        k = len(q) - 1
        while k > 0:
            parent = (k - 1) >> 1
            e = q[parent]
            if cmp(x, e) >= 0:
                break
            q[k] = e
            k = parent
        q[k] = x

    def add_all(self, xs: Iterable[T]) -> None:
        for x in xs:  # (AbstractQueue.addAll: one add each, no heapify)
            self.add(x)

    def poll(self) -> T | None:
        q, cmp = self.queue, self.compare
        if not q:
            return None
        result = q[0]
        x = q.pop()
        n = len(q)
        if n:
            k, half = 0, n >> 1
            while k < half:
                child = 2 * k + 1
                c = q[child]
                right = child + 1
                if right < n and cmp(c, q[right]) > 0:
                    child = right
                    c = q[child]
                if cmp(x, c) <= 0:
                    break
                q[k] = c
                k = child
            q[k] = x
        return result
