"""The task assignor of streams groups: sticky and balanced, as Kafka's
StickyTaskAssignor in what it promises (not in its exact choices).

Every task (a subtopology and a partition) has one active owner. A task stays with the
member that had it in the previous target assignment while that member holds no more
than its share (the number of tasks over the number of members, rounded up); the
others go, one by one, to the member with the fewest tasks (ties: the member id). With
`num_standby_replicas` N > 0, each task also gets up to N standby copies on members of
other processes than its active owner's (a standby beside its active task in the same
process would restore nothing new), for stateful tasks only, sticky and balanced the
same way.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass

from .streams_group_records import TaskAssignment, Tasks

Task = tuple[str, int]


@dataclass(frozen=True)
class AssignmentMember:
    process_id: str
    previous: TaskAssignment


def _tasks(tasks: Tasks) -> set[Task]:
    return {(s, p) for s, ps in tasks.items() for p in ps}


def _grouped(tasks: set[Task]) -> Tasks:
    out: dict[str, set[int]] = {}
    for s, p in tasks:
        out.setdefault(s, set()).add(p)
    return {s: frozenset(ps) for s, ps in out.items()}


def assign(members: Mapping[str, AssignmentMember], task_counts: Mapping[str, int],
           num_standby_replicas: int = 0, stateful: frozenset[str] = frozenset()) -> dict[str, TaskAssignment]:
    """`stateful`: the subtopologies with state stores (changelog topics): only their
    tasks get standby copies, as in Kafka (a stateless task has nothing to restore)."""
    if not members:
        return {}
    tasks = sorted((s, p) for s, n in task_counts.items() for p in range(n))
    ids = sorted(members)
    share = -(-len(tasks) // len(ids))
    active: dict[str, set[Task]] = {m: set() for m in ids}
    owner: dict[Task, str] = {}
    previous_owner = {t: m for m in ids for t in _tasks(members[m].previous.active)}
    unplaced = []
    for task in tasks:
        m = previous_owner.get(task)
        if m is not None and len(active[m]) < share:
            active[m].add(task)
            owner[task] = m
        else:
            unplaced.append(task)
    for task in unplaced:
        m = min(ids, key=lambda i: (len(active[i]), i))
        active[m].add(task)
        owner[task] = m

    standby: dict[str, set[Task]] = {m: set() for m in ids}
    if num_standby_replicas > 0:
        load: Counter[str] = Counter()
        previous_standby = {m: _tasks(members[m].previous.standby) for m in ids}
        standby_tasks = [t for t in tasks if t[0] in stateful]
        standby_share = -(-len(standby_tasks) * num_standby_replicas // len(ids))
        for task in standby_tasks:
            active_process = members[owner[task]].process_id
            candidates = [m for m in ids if members[m].process_id != active_process]
            chosen: list[str] = []
            processes: set[str] = set()
            # Sticky while within its share, then the least loaded; one copy per process.
            ordered = sorted(candidates, key=lambda i: (task not in previous_standby[i] or load[i] >= standby_share,
                                                        load[i], i))
            for m in ordered:
                if len(chosen) == num_standby_replicas:
                    break
                if members[m].process_id in processes:
                    continue
                chosen.append(m)
                processes.add(members[m].process_id)
            for m in chosen:
                standby[m].add(task)
                load[m] += 1
    return {m: TaskAssignment(_grouped(active[m]), _grouped(standby[m]), {}) for m in ids}
