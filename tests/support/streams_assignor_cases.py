"""Generated streams groups for the sticky task assignor, written in the form Kafka's own
assignor reads them in (tests/oracle/.../StickyTaskAssignorCheck.java) and this server's
assignor run on the same: the differential suite compares the two answers."""

from __future__ import annotations

import base64
import random
import uuid

from coordinator.groups.streams.assignor import AssignorMember, Tasks, sticky_assign

Case = tuple[dict[str, AssignorMember], dict[str, tuple[int, bool]], int]


def _member_id(rng: random.Random) -> str:
    # as Kafka Streams' members are named (a random Uuid, base64 url-safe, unpadded) or short
    if rng.random() < 0.8:
        return base64.urlsafe_b64encode(rng.randbytes(16)).decode().rstrip("=")
    return f"m{rng.randrange(1000)}"


def _tasks(rng: random.Random, all_tasks: list[tuple[str, int]], most: int) -> Tasks:
    out: dict[str, set[int]] = {}
    for s, p in rng.sample(all_tasks, min(len(all_tasks), rng.randint(0, most))):
        out.setdefault(s, set()).add(p)
    return {s: frozenset(ps) for s, ps in out.items()}


def generate(seed: int, count: int) -> list[Case]:
    """Groups of 1-9 members on 1-5 processes, 1-4 subtopologies of 0-8 tasks (stateful or
    not), 0-2 standbys; half start from an earlier assignment of this assignor with members
    gone and new ones come (the usual case), half from random, overlapping, stale holdings
    with reported task offsets (a restart, a member fenced)."""
    rng = random.Random(seed)
    cases: list[Case] = []
    for _ in range(count):
        processes = [str(uuid.UUID(int=rng.getrandbits(128))) for _ in range(rng.randint(1, 5))]
        subtopologies = {str(s): (rng.randint(0, 8), rng.random() < 0.6) for s in range(rng.randint(1, 4))}
        standbys = rng.choice((0, 1, 1, 2))
        all_tasks = [(s, p) for s, (n, _) in subtopologies.items() for p in range(n)]
        members = {_member_id(rng): AssignorMember(rng.choice(processes)) for _ in range(rng.randint(1, 9))}
        if rng.random() < 0.5:
            earlier = sticky_assign(members, subtopologies, standbys)
            kept = {m: members[m] for m in members if rng.random() < 0.75}
            for m in kept:
                kept[m].active, kept[m].standby = earlier[m]
            for _ in range(rng.randint(0, 3)):
                kept[_member_id(rng)] = AssignorMember(rng.choice(processes))
            members = kept or members
        else:
            for m in members.values():
                m.active = _tasks(rng, all_tasks, 4)
                m.standby = _tasks(rng, all_tasks, 3)
                if all_tasks and rng.random() < 0.5:
                    reported = rng.sample(all_tasks, min(len(all_tasks), rng.randint(0, 3)))
                    m.task_offsets = {t: rng.choice((0, 5, 10, 100)) for t in reported}
        cases.append((members, subtopologies, standbys))
    return cases


def _words(tasks: Tasks) -> str:
    return ",".join(f"{s}:{p}" for s in sorted(tasks) for p in sorted(tasks[s]))


def cases_text(cases: list[Case]) -> str:
    lines = []
    for i, (members, subtopologies, standbys) in enumerate(cases):
        lines.append(f"case {i} {standbys}")
        lines += [f"sub {s} {n} {int(stateful)}" for s, (n, stateful) in subtopologies.items()]
        for m, a in members.items():
            offsets = ",".join(f"{s}:{p}:{o}" for (s, p), o in sorted(a.task_offsets.items()))
            lines.append(f"member {m} {a.process_id} A={_words(a.active)} S={_words(a.standby)} O={offsets}")
        lines.append("end")
    return "\n".join(lines) + "\n"


def ours_text(cases: list[Case]) -> str:
    """This server's answers, as StickyTaskAssignorCheck prints Kafka's."""
    lines = []
    for i, (members, subtopologies, standbys) in enumerate(cases):
        out = sticky_assign(members, subtopologies, standbys)
        lines.append(f"case {i}")
        lines += [f"member {m} A={_words(out[m][0])} S={_words(out[m][1])}" for m in members]
    return "\n".join(lines) + "\n"
