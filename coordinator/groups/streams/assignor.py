"""Kafka 4.4's StickyTaskAssignor (group/streams/assignor), the streams groups' default
task assignor, and the warm-up refinement in front of the reconciliation (AssignmentRefiner).

A task is (subtopology id, partition); a subtopology has as many tasks as its largest
source topic has partitions. Members belong to processes (a Kafka Streams instance runs one
member per stream thread, all with its process id); load is counted per process, by the
tasks it holds over the members it has.

Active tasks: each goes back to the member that had it, while that member is under its
share (ceil(tasks / members)); else to the least loaded of the members that held it as a
standby or warm-up (most caught-up first); else to the least loaded process, to its least
loaded member. Standby tasks (stateful subtopologies only, `num_standby_replicas` copies):
never on the process that runs the task active, nor twice on one process; a previous
holder first, else the least loaded process that may take it. A copy that no process may
take is left out, as Kafka does (with a warning).
"""

from __future__ import annotations

import heapq
import logging
from dataclasses import dataclass, field

log = logging.getLogger(__name__)

TaskId = tuple[str, int]
# subtopology id -> partitions
Tasks = dict[str, frozenset[int]]


@dataclass
class AssignorMember:
    """What the assignor knows of a member: its process and what it holds now."""

    process_id: str
    active: Tasks = field(default_factory=dict)
    standby: Tasks = field(default_factory=dict)
    warmup: Tasks = field(default_factory=dict)
    # (subtopology, partition) -> changelog offset sum the member reported (KIP-1071 task offsets)
    task_offsets: dict[TaskId, int] = field(default_factory=dict)


@dataclass
class _Process:
    process_id: str
    members: list[str] = field(default_factory=list)
    active: dict[str, set[TaskId]] = field(default_factory=dict)
    standby: dict[str, set[TaskId]] = field(default_factory=dict)
    held: set[TaskId] = field(default_factory=set)  # every task it holds, active or standby

    def count(self, member: str) -> int:
        return len(self.active.get(member, ())) + len(self.standby.get(member, ()))

    def load(self) -> float:
        return len(self.held) / max(len(self.members), 1)

    def least_loaded_member(self) -> str:
        return min(self.members, key=lambda m: (self.count(m), m))


def _tasks_per_member(total: int, members: int) -> int:
    return -(-total // members) if members else 0


def sticky_assign(
    members: dict[str, AssignorMember],
    subtopologies: dict[str, tuple[int, bool]],
    num_standby_replicas: int,
) -> dict[str, tuple[Tasks, Tasks]]:
    """The target (active, standby) of every member. `subtopologies`: id -> (number of
    tasks, stateful)."""
    if not members:
        return {}
    processes: dict[str, _Process] = {}
    member_process: dict[str, _Process] = {}
    for member_id in sorted(members):
        proc = processes.setdefault(members[member_id].process_id, _Process(members[member_id].process_id))
        proc.members.append(member_id)
        member_process[member_id] = proc
    tasks = [(s, i) for s in sorted(subtopologies) for i in range(subtopologies[s][0])]
    stateful = [t for t in tasks if subtopologies[t[0]][1]]
    n = len(members)
    active_quota = _tasks_per_member(len(tasks), n)
    total_quota = _tasks_per_member(len(tasks) + len(stateful) * num_standby_replicas, n)

    prev_active: dict[TaskId, str] = {}
    prev_standby: dict[TaskId, list[tuple[int, int, str]]] = {}  # task -> (rank, -offset sum, member)
    for member_id in sorted(members):
        am = members[member_id]
        for s, ps in am.active.items():
            for i in ps:
                prev_active[(s, i)] = member_id
        for rank, held in ((0, am.standby), (0, am.warmup)):
            for s, ps in held.items():
                for i in ps:
                    prev_standby.setdefault((s, i), []).append((rank, -am.task_offsets.get((s, i), 0), member_id))
        for task, offset in am.task_offsets.items():
            if task not in prev_active or prev_active[task] != member_id:
                if not any(x[2] == member_id for x in prev_standby.get(task, ())):
                    prev_standby.setdefault(task, []).append((1, -offset, member_id))
    for candidates in prev_standby.values():
        candidates.sort()

    def add_active(member_id: str, task: TaskId) -> None:
        p = member_process[member_id]
        p.active.setdefault(member_id, set()).add(task)
        p.held.add(task)

    def add_standby(member_id: str, task: TaskId) -> None:
        p = member_process[member_id]
        p.standby.setdefault(member_id, set()).add(task)
        p.held.add(task)

    def active_count(member_id: str) -> int:
        return len(member_process[member_id].active.get(member_id, ()))

    # active tasks: stickiness, then previous standbys, then the least loaded process
    unassigned: list[TaskId] = []
    for task in tasks:
        owner = prev_active.get(task)
        if owner is not None and owner in members and active_count(owner) < active_quota:
            add_active(owner, task)
        else:
            unassigned.append(task)
    still: list[TaskId] = []
    for task in unassigned:
        holders = [m for _, _, m in prev_standby.get(task, ()) if m in members and active_count(m) < active_quota]
        if holders:
            add_active(min(holders, key=lambda m: (member_process[m].load(), active_count(m))), task)
        else:
            still.append(task)
    heap = [(p.load(), p.process_id) for p in processes.values()]
    heapq.heapify(heap)
    for task in still:
        while True:
            load, pid = heapq.heappop(heap)
            p = processes[pid]
            if load == p.load():
                break
            heapq.heappush(heap, (p.load(), pid))  # stale entry: its load moved since
        add_active(p.least_loaded_member(), task)
        heapq.heappush(heap, (p.load(), pid))

    # standby tasks
    if num_standby_replicas > 0:
        for task in stateful:
            for _ in range(num_standby_replicas):
                placed = False
                for _, _, holder in prev_standby.get(task, ()):
                    hp = member_process.get(holder)
                    if hp is None or task in hp.held or hp.count(holder) >= total_quota:
                        continue
                    add_standby(holder, task)
                    placed = True
                    break
                if placed:
                    continue
                free = [p for p in processes.values() if task not in p.held]
                if not free:
                    log.warning(
                        "Unable to assign %d of %d standby tasks for task [%s]. There is not enough available "
                        "capacity. You should increase the number of application instances to maintain the "
                        "requested number of standby replicas.",
                        num_standby_replicas,
                        num_standby_replicas,
                        f"{task[0]}_{task[1]}",
                    )
                    break
                chosen = min(free, key=lambda x: (x.load(), x.process_id))
                add_standby(chosen.least_loaded_member(), task)

    out: dict[str, tuple[Tasks, Tasks]] = {}
    for member_id in members:
        p = member_process[member_id]
        out[member_id] = (_compact(p.active.get(member_id, set())), _compact(p.standby.get(member_id, set())))
    return out


def _compact(tasks: set[TaskId]) -> Tasks:
    out: dict[str, set[int]] = {}
    for s, i in tasks:
        out.setdefault(s, set()).add(i)
    return {s: frozenset(ps) for s, ps in out.items()}


def refine_warmups(
    members: dict[str, AssignorMember],
    target: dict[str, tuple[Tasks, Tasks]],
    stateful: set[str],
    num_warmup_replicas: int,
    acceptable_recovery_lag: int,
    end_offsets: dict[TaskId, int],
) -> dict[str, tuple[Tasks, Tasks, Tasks]]:
    """AssignmentRefiner: a stateful active task that moves to a process that does not hold
    its state caught up (its reported offset within `acceptable_recovery_lag` of the task's
    end offset) stays with its current owner for now, and the new owner gets it as a warm-up
    task to restore the state in the background; at most `num_warmup_replicas` such tasks
    at a time. Once caught up, the next assignment moves it. Held in memory only, as Kafka's."""
    out: dict[str, tuple[Tasks, Tasks, Tasks]] = {m: (dict(a), dict(s), {}) for m, (a, s) in target.items()}
    if num_warmup_replicas <= 0:
        return out
    owner: dict[TaskId, str] = {}
    for member_id, m in members.items():
        for s, ps in m.active.items():
            for p in ps:
                owner[(s, p)] = member_id
    budget = num_warmup_replicas
    for member_id in sorted(target):
        active = out[member_id][0]
        for s in sorted(active):
            if s not in stateful:
                continue
            for p in sorted(active[s]):
                task = (s, p)
                current = owner.get(task)
                if current is None or current == member_id or current not in out or budget <= 0:
                    continue
                me = members.get(member_id)
                if me is None or (
                    current in members and members[current].process_id == me.process_id
                ):  # the same process holds the state
                    continue
                offset = me.task_offsets.get(task)
                end = end_offsets.get(task)
                if offset is not None and end is not None and end - offset <= acceptable_recovery_lag:
                    continue  # caught up: it may move
                # keep it active where it is, warm it up where it goes
                active[s] = active[s] - {p}
                if not active[s]:
                    del active[s]
                cur_active = out[current][0]
                cur_active[s] = cur_active.get(s, frozenset()) | {p}
                cur_standby = out[current][1]
                if p in cur_standby.get(s, frozenset()):
                    cur_standby[s] = cur_standby[s] - {p}
                    if not cur_standby[s]:
                        del cur_standby[s]
                warm = out[member_id][2]
                warm[s] = warm.get(s, frozenset()) | {p}
                budget -= 1
    return out
