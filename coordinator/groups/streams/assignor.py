"""Kafka 4.4's StickyTaskAssignor (group/streams/assignor), the streams groups' default
task assignor. (Kafka 4.4's AssignmentRefiner, in front of the reconciliation, keeps its
target as it is: no warm-up tasks.)

A task is (subtopology id, partition); a subtopology has as many tasks as its largest
source topic has partitions. Members belong to processes (a Kafka Streams instance runs one
member per stream thread, all with its process id); a process's load is the tasks it holds
over the members it has. Quotas: ceil(active tasks / members) active tasks and
ceil(all tasks with the standbys / members) tasks a member; a member that reaches a quota
leaves the division, the rest share what is left.

Active tasks, in (partition, subtopology) order: back to the member that had it while it is
under its quota; else to the previous standby holders' best (first in the candidates' order,
replaced only by one whose process and member are both less loaded) if under quota; then the
rest, in (subtopology, partition) order, each to the least loaded process (a Java priority
queue by load), to its least loaded member. Standby tasks (stateful subtopologies,
`num_standby_replicas` copies), in descending (partition, subtopology) order: to the previous
active owner if its process lacks the task and it is under quota, else to the best previous
standby holder whose process lacks it; the copies left go, in descending (subtopology,
partition) order, to the least loaded process that lacks the task. A copy no process may take
is left out, with Kafka's warning. Previous standby holders: members that hold the task as a
standby, then members that report an offset for it (state on disk), each most caught up first.

Where Kafka's choice rests on the order of its Java collections (which of equally loaded
processes or members comes first), the same order is taken: the members as a HashMap of
their ids iterates them (put in the group's order), processes likewise, and Java's binary
heap (coordinator/java_order.py). tests/test_kafka_oracle.py compares the assignments with
Kafka 4.4's own class on generated groups.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from ...java_order import JavaHashMap, JavaPriorityQueue, java_hash_order

log = logging.getLogger(__name__)

TaskId = tuple[str, int]
# subtopology id -> partitions
Tasks = dict[str, frozenset[int]]


@dataclass
class AssignorMember:
    """What the assignor knows of a member: its process and what it holds now. (Kafka 4.4's
    assignor is given the member's warm-up tasks too and does not read them.)"""

    process_id: str
    active: Tasks = field(default_factory=dict)
    standby: Tasks = field(default_factory=dict)
    # (subtopology, partition) -> changelog offset sum the member reported (KIP-1071 task offsets)
    task_offsets: dict[TaskId, int] = field(default_factory=dict)


def _java_div(a: int, b: int) -> tuple[int, int]:
    """Java's int / and % (truncating toward zero)."""
    q = abs(a) // abs(b)
    q = q if (a >= 0) == (b > 0) else -q
    return q, a - q * b


def _tasks_per_member(tasks: int, members: int) -> int:
    """computeTasksPerMember: ceil, in Java's int arithmetic (a share left may go negative)."""
    if members == 0:
        return 0
    q, r = _java_div(tasks, members)
    return q + 1 if r > 0 else q


class _Process:
    """Kafka's ProcessState: its members' task counts, what they hold, its load."""

    def __init__(self, process_id: str) -> None:
        self.process_id = process_id
        self.joined: list[str] = []  # members, in the order they were put in (memberToTaskCounts)
        self.counts: dict[str, int] = {}
        self.active: dict[str, set[TaskId]] = {}
        self.standby: dict[str, set[TaskId]] = {}
        self.tasks: set[TaskId] = set()
        self.task_count = 0
        self.load = 0.0
        self.by_load: JavaPriorityQueue[list[object]] | None = None

    def add_member(self, member_id: str) -> None:
        self.joined.append(member_id)
        self.counts[member_id] = 0
        self.load = self.task_count / len(self.joined)

    def has(self, task: TaskId) -> bool:
        return task in self.tasks

    def _add(self, member_id: str, task: TaskId, active: bool) -> int:
        self.task_count += 1
        self.tasks.add(task)
        (self.active if active else self.standby).setdefault(member_id, set()).add(task)
        n = self.counts[member_id] = self.counts[member_id] + 1
        self.load = self.task_count / len(self.joined)
        return n

    def add_task(self, member_id: str, task: TaskId, active: bool) -> int:
        """To this member; its new task count. (The members' heap is dropped, as Kafka's.)"""
        n = self._add(member_id, task, active)
        self.by_load = None
        return n

    def add_to_least_loaded(self, task: TaskId, active: bool) -> int:
        """addTaskToLeastLoadedMember: a heap of the members by task count, built in the order
        the members' HashMap iterates them."""
        if not self.joined:
            return -1
        if len(self.joined) == 1:
            return self._add(self.joined[0], task, active)
        if self.by_load is None:
            self.by_load = JavaPriorityQueue(lambda a, b: _cmp(a[1], b[1]))
            self.by_load.add_all([m, self.counts[m]] for m in java_hash_order(self.joined))
        entry = self.by_load.poll()
        assert entry is not None
        n = self._add(str(entry[0]), task, active)
        entry[1] = n
        self.by_load.add(entry)
        return n


def _cmp(a: float | int | object, b: float | int | object) -> int:
    return (a > b) - (a < b)  # type: ignore[operator]  # numbers only


def _by_load(a: _Process, b: _Process) -> int:
    return _cmp(a.load, b.load)


class _StickyAssignment:
    def __init__(
        self, members: dict[str, AssignorMember], subtopologies: dict[str, tuple[int, bool]], standbys: int
    ) -> None:
        self.standbys = standbys
        member_ids = java_hash_order(members)  # (GroupSpec's members: a HashMap)
        self.total_active = sum(n for n, _ in subtopologies.values())
        self.total_tasks = sum(n + (n * standbys if stateful else 0) for n, stateful in subtopologies.values())
        self.members_with_active_capacity = self.members_with_capacity = len(member_ids)
        self.active_per_member = _tasks_per_member(self.total_active, len(member_ids))
        self.tasks_per_member = _tasks_per_member(self.total_tasks, len(member_ids))
        self.processes: dict[str, _Process] = {}
        self.process_of: dict[str, _Process] = {}
        self.prev_active: dict[TaskId, str] = {}
        candidates: dict[TaskId, list[tuple[int, int, int, str]]] = {}
        for seq, member_id in enumerate(member_ids):
            m = members[member_id]
            process = self.processes.setdefault(m.process_id, _Process(m.process_id))
            process.add_member(member_id)
            self.process_of[member_id] = process
            for s, ps in m.active.items():
                for p in ps:
                    self.prev_active[(s, p)] = member_id  # (two claimants: the later one)
            for s, ps in m.standby.items():
                for p in ps:
                    candidates.setdefault((s, p), []).append((0, -m.task_offsets.get((s, p), 0), seq, member_id))
            for task, offset in m.task_offsets.items():
                if task[1] not in m.standby.get(task[0], ()):
                    candidates.setdefault(task, []).append((1, -offset, seq, member_id))
        # processIdToState: a HashMap sized for the members, filled by computeIfAbsent
        process_ids = JavaHashMap(len(member_ids))
        for member_id in member_ids:
            process_ids.compute_if_absent(members[member_id].process_id)
        self.process_order = [self.processes[p] for p in process_ids.keys()]
        self.prev_standby = {task: [c[3] for c in sorted(cs)] for task, cs in candidates.items()}

    def _active_quota_reached(self, n: int) -> None:
        if n == self.active_per_member:
            self.members_with_active_capacity -= 1
            self.total_active -= n
            self.active_per_member = _tasks_per_member(self.total_active, self.members_with_active_capacity)

    def _quota_reached(self, n: int) -> None:
        if n == self.tasks_per_member:
            self.members_with_capacity -= 1
            self.total_tasks -= n
            self.tasks_per_member = _tasks_per_member(self.total_tasks, self.members_with_capacity)

    def _add_active(self, process: _Process, member_id: str | None, task: TaskId) -> None:
        n = process.add_task(member_id, task, True) if member_id else process.add_to_least_loaded(task, True)
        self._active_quota_reached(n)
        self._quota_reached(n)

    def _prev_least_loaded(self, members: list[str] | None, standby_of: TaskId | None) -> str | None:
        """findPrevMemberWithLeastLoad: the first candidate, replaced only by one whose
        process and member are both less loaded; a process holding `standby_of` is skipped."""
        chosen, process_load, member_load = None, 0.0, 0
        for member_id in members or ():
            process = self.process_of[member_id]
            if standby_of is not None and process.has(standby_of):
                continue
            load, count = process.load, process.counts[member_id]
            if chosen is None or (load < process_load and count < member_load):
                chosen, process_load, member_load = member_id, load, count
        return chosen

    def assign_active(self, tasks: list[TaskId]) -> None:
        tasks.sort(key=lambda t: (t[1], t[0]))
        left = []
        for task in tasks:  # 1. to the previous owner, under its quota
            prev = self.prev_active.get(task)
            if prev is not None and self.process_of[prev].counts[prev] < self.active_per_member:
                self._add_active(self.process_of[prev], prev, task)
            else:
                left.append(task)
        tasks, left = left, []
        for task in tasks:  # 2. to a previous standby holder, under its quota
            prev = self._prev_least_loaded(self.prev_standby.get(task), None)
            if prev is not None and self.process_of[prev].counts[prev] < self.active_per_member:
                self._add_active(self.process_of[prev], prev, task)
            else:
                left.append(task)
        left.sort()
        queue: JavaPriorityQueue[_Process] = JavaPriorityQueue(_by_load)
        queue.add_all(self.process_order)
        for task in left:  # 3. the least loaded process
            process = queue.poll()
            assert process is not None  # (there are members)
            self._add_active(process, None, task)
            queue.add(process)

    def assign_standby(self, tasks: list[TaskId]) -> None:
        tasks.sort(key=lambda t: (t[1], t[0]), reverse=True)
        left: list[tuple[TaskId, int]] = []
        for task in tasks:
            for i in range(self.standbys):
                prev = self.prev_active.get(task)
                if prev is not None:
                    process = self.process_of[prev]
                    if not process.has(task) and process.counts[prev] < self.tasks_per_member:
                        self._quota_reached(process.add_task(prev, task, False))
                        continue
                prev = self._prev_least_loaded(self.prev_standby.get(task), task)
                if prev is not None:
                    process = self.process_of[prev]
                    if process.counts[prev] < self.tasks_per_member:
                        self._quota_reached(process.add_task(prev, task, False))
                        continue
                left.append((task, self.standbys - i))
                break
        left.sort(reverse=True)
        queue: JavaPriorityQueue[_Process] = JavaPriorityQueue(_by_load)
        queue.add_all(self.process_order)
        for task, copies in left:
            for i in range(copies):
                if not self._standby_to_least_loaded(queue, task):
                    log.warning(
                        "Unable to assign %d of %d standby tasks for task [%s]. There is not enough available "
                        "capacity. You should increase the number of threads and/or application instances to "
                        "maintain the requested number of standby replicas.",
                        self.standbys - i,
                        self.standbys,
                        f"{task[0]}_{task[1]}",
                    )
                    break

    def _standby_to_least_loaded(self, queue: JavaPriorityQueue[_Process], task: TaskId) -> bool:
        """assignStandbyToMemberWithLeastLoad: the least loaded process that lacks the task (the
        ones polled on the way go back in the queue after)."""
        process = queue.poll()
        if process is None:
            return False
        found = False
        if not process.has(task):
            n = process.add_to_least_loaded(task, False)
            if n != -1:
                found = True
                self._quota_reached(n)
        elif len(queue):
            found = self._standby_to_least_loaded(queue, task)
        queue.add(process)
        return found


def sticky_assign(
    members: dict[str, AssignorMember],
    subtopologies: dict[str, tuple[int, bool]],
    num_standby_replicas: int,
) -> dict[str, tuple[Tasks, Tasks]]:
    """The target (active, standby) of every member. `members` in the group's order;
    `subtopologies`: id -> (number of tasks, stateful)."""
    if not members:
        return {}
    state = _StickyAssignment(members, subtopologies, num_standby_replicas)
    state.assign_active([(s, i) for s, (n, _) in subtopologies.items() for i in range(n)])
    if num_standby_replicas > 0:
        state.assign_standby([(s, i) for s, (n, stateful) in subtopologies.items() if stateful for i in range(n)])
    out: dict[str, tuple[Tasks, Tasks]] = {}
    for member_id in members:
        p = state.process_of[member_id]
        out[member_id] = (_compact(p.active.get(member_id, set())), _compact(p.standby.get(member_id, set())))
    return out


def _compact(tasks: set[TaskId]) -> Tasks:
    out: dict[str, set[int]] = {}
    for s, i in tasks:
        out.setdefault(s, set()).add(i)
    return {s: frozenset(ps) for s, ps in out.items()}
