"""Run independent jobs side by side, each on the devices it needs.

A job asks for `count` slots of one pool: a GPU cell for `ranks` cards of its architecture (the
pool's slots are those cards' indices, which become the cell's CUDA_VISIBLE_DEVICES); a CPU cell
for the single "cpu" slot, since a CPU cell's ranks already use every core. Jobs start in the
given order as soon as their slots are free; a job that does not fit yet lets later, smaller jobs
go first (first fit), so 4 cards running 1-card cells stay busy while a 2-card cell waits.

Each job runs in its own thread (the work itself is a subprocess); `done` is called in the
caller's thread, one job at a time, in the order jobs finish, so whatever it writes needs no
lock. Pure scheduling: no torch, no processes of its own; tests drive it with plain callables.
"""

from __future__ import annotations

import dataclasses
import queue
import threading
from typing import Callable, Generic, Hashable, Sequence, TypeVar

J = TypeVar("J")
R = TypeVar("R")


@dataclasses.dataclass(frozen=True)
class Need:
    pool: Hashable  # "cpu", or a GPU architecture such as "sm_90"
    count: int


@dataclasses.dataclass(frozen=True)
class _Finished(Generic[J, R]):
    job: J
    pool: Hashable
    slots: tuple
    result: R | None
    error: BaseException | None


def run_jobs(
    jobs: Sequence[J],
    pools: dict[Hashable, Sequence],
    need: Callable[[J], Need],
    execute: Callable[[J, tuple], R],
    done: Callable[[J, R], None],
    prepare: Callable[[J], None] = lambda job: None,
    may_start: Callable[[], bool] = lambda: True,
) -> list[J]:
    """Run every job; `execute(job, slots)` in a worker thread, `done(job, result)` here. Returns
    the jobs never started: once `may_start()` is False (a time budget spent), no job starts, the
    running ones finish, and the rest are handed back.

    `prepare(job)` runs here, just before a job starts (making its stack's environment): it may
    block, and running jobs carry on meanwhile. If `execute`, `prepare` or `done` raises, no new
    job starts, the running ones are waited for (their `done` still called), then it is raised.
    A job that needs more slots than its pool has is a ValueError before anything starts.
    """
    free = {pool: list(slots) for pool, slots in pools.items()}
    for job in jobs:
        n = need(job)
        if n.count < 1 or n.count > len(free.get(n.pool, ())):
            raise ValueError(f"job {job} needs {n.count} of {n.pool!r}; the host has {len(free.get(n.pool, ()))}")
    run = _Run(free, list(jobs), need, execute, prepare, may_start)
    while run.pending or run.running:
        if run.failure is None:
            run.start_what_fits()
        if not run.running:
            break
        got = run.finished.get()
        run.running -= 1
        free[got.pool] = sorted(free[got.pool] + list(got.slots))
        if got.error is not None:
            run.fail(got.error)
            continue
        try:
            done(got.job, got.result)
        except BaseException as exc:
            run.fail(exc)
    if run.failure is not None:
        raise run.failure
    return run.left


class _Run(Generic[J, R]):
    """run_jobs' state: the free slots of each pool, the jobs not yet started, how many run,
    the first failure, and the jobs handed back when the budget ran out."""

    def __init__(self, free: dict, pending: list[J], need, execute, prepare, may_start):
        self.free, self.pending, self.need = free, pending, need
        self.execute, self.prepare, self.may_start = execute, prepare, may_start
        self.finished: queue.Queue[_Finished] = queue.Queue()
        self.running = 0
        self.failure: BaseException | None = None
        self.left: list[J] = []

    def fail(self, exc: BaseException) -> None:
        """No new job starts; the first failure is the one raised."""
        self.failure = self.failure or exc
        self.pending.clear()

    def start_what_fits(self) -> None:
        """Start each pending job whose pool has the slots free, in order, after its prepare;
        once may_start() is False, hand the pending jobs back instead."""
        if self.pending and not self.may_start():
            self.left, self.pending = list(self.pending), []
        for job in list(self.pending):
            n = self.need(job)
            if len(self.free[n.pool]) < n.count:
                continue
            try:
                self.prepare(job)
            except BaseException as exc:
                self.fail(exc)
                return
            if not self.may_start():  # the budget ran out while the job was prepared
                self.left, self.pending = list(self.pending), []
                return
            slots = tuple(self.free[n.pool][: n.count])
            del self.free[n.pool][: n.count]
            self.pending.remove(job)
            self.running += 1
            threading.Thread(target=self._work, args=(job, n.pool, slots), daemon=True).start()

    def _work(self, job, pool, slots) -> None:
        try:
            self.finished.put(_Finished(job, pool, slots, self.execute(job, slots), None))
        except BaseException as exc:  # handed to the caller's thread, which decides
            self.finished.put(_Finished(job, pool, slots, None, exc))
