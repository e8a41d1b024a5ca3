"""The scheduler that runs independent cells side by side, each on cards of its own. Jobs here are
plain callables; concurrency is proven with barriers (a job that waits for N others can only
finish if N ran at the same time), never with timings."""

import threading

import pytest

from harness.catalog.cell import Cell
from harness.run.hardware import Gpu, Host
from harness.run.runner import cell_need, device_pools
from harness.run.schedule import Need, run_jobs

H100 = "NVIDIA H100 80GB HBM3"


class Tracker:
    """Checks that no slot is ever held by two jobs at once, and counts jobs running together."""

    def __init__(self):
        self.lock = threading.Lock()
        self.held: set = set()
        self.running = 0
        self.max_running = 0
        self.started: list = []
        self.done: list = []
        self.done_threads: set = set()

    def enter(self, job, slots):
        with self.lock:
            assert not self.held & set(slots), f"{job} got {slots}, some already held: {self.held}"
            self.held |= set(slots)
            self.running += 1
            self.max_running = max(self.max_running, self.running)
            self.started.append(job)

    def leave(self, slots):
        with self.lock:
            self.held -= set(slots)
            self.running -= 1

    def finish(self, job, result):
        self.done.append((job, result))
        self.done_threads.add(threading.get_ident())


def test_four_one_card_jobs_run_at_once_on_four_cards():
    t = Tracker()
    barrier = threading.Barrier(4, timeout=30)  # broken (and the test failed) unless 4 run together

    def execute(job, slots):
        t.enter(job, slots)
        barrier.wait()
        t.leave(slots)
        return slots

    run_jobs(list("abcd"), {"sm_90": [0, 1, 2, 3]}, lambda j: Need("sm_90", 1), execute, t.finish)
    assert t.max_running == 4
    assert sorted(slot for _, (slot,) in t.done) == [0, 1, 2, 3]
    assert t.done_threads == {threading.get_ident()}  # done runs in the caller's thread


def test_jobs_never_share_a_card_and_get_exactly_what_they_need():
    t = Tracker()
    sizes = {"a": 2, "b": 1, "c": 3, "d": 1, "e": 2, "f": 1, "g": 4}

    def execute(job, slots):
        t.enter(job, slots)
        assert len(slots) == sizes[job]
        t.leave(slots)
        return len(slots)

    run_jobs(list(sizes), {"sm_80": [0, 1, 2, 3]}, lambda j: Need("sm_80", sizes[j]), execute, t.finish)
    assert sorted(j for j, _ in t.done) == sorted(sizes)
    assert all(n == sizes[j] for j, n in t.done)


def test_a_job_that_does_not_fit_yet_lets_smaller_ones_start():
    # 2 cards: "big" (2 cards) is first but one card is busy with "hold"; "small" (1 card) fits
    # beside "hold" and starts before "big", which then gets both cards
    t = Tracker()
    small_started = threading.Event()

    def execute(job, slots):
        t.enter(job, slots)
        if job == "hold":
            assert small_started.wait(30), "small never started beside hold"
        if job == "small":
            small_started.set()
        t.leave(slots)
        return slots

    sizes = {"hold": 1, "big": 2, "small": 1}
    run_jobs(["hold", "big", "small"], {"sm_90": [0, 1]}, lambda j: Need("sm_90", sizes[j]), execute, t.finish)
    assert t.started.index("small") < t.started.index("big")
    assert dict(t.done)["big"] == (0, 1)


def test_cpu_cells_run_one_at_a_time_beside_gpu_cells():
    host = Host("cpu", tuple(Gpu(i, H100, "9.0", 80 * 2**30) for i in range(2)), "580", "13.0", "test")
    cells = [
        Cell("cpu", "local", "fp32", "none", "full", "single"),
        Cell("cpu", "local", "fp32", "none", "full", "ddp", ranks=2),
        Cell("sm_90", "local", "bf16", "none", "lora", "single"),
        Cell("sm_90", "local", "bf16", "none", "lora", "zero3", ranks=2),
    ]
    assert device_pools(host) == {"cpu": [0], "sm_90": [0, 1]}
    assert [cell_need(c) for c in cells] == [Need("cpu", 1), Need("cpu", 1), Need("sm_90", 1), Need("sm_90", 2)]
    lock = threading.Lock()
    cpu_running, cpu_max = [0], [0]
    gpu_slots = {}

    def execute(cell, slots):
        if cell.hardware == "cpu":
            with lock:
                cpu_running[0] += 1
                cpu_max[0] = max(cpu_max[0], cpu_running[0])
            with lock:
                cpu_running[0] -= 1
        else:
            gpu_slots[cell.id] = slots
        return cell.id

    done = []
    run_jobs(cells, device_pools(host), cell_need, execute, lambda c, r: done.append(r))
    assert sorted(done) == sorted(c.id for c in cells)
    assert cpu_max[0] == 1
    assert gpu_slots == {cells[2].id: (0,), cells[3].id: (0, 1)}


def test_a_failing_job_stops_new_starts():
    started = []

    def execute(job, slots):
        started.append(job)
        if job == "a":
            raise RuntimeError("harness bug in a")
        return job

    with pytest.raises(RuntimeError, match="harness bug in a"):
        run_jobs(list("abc"), {"sm_90": [0]}, lambda j: Need("sm_90", 1), execute, lambda j, r: None)
    assert started == ["a"]


def test_a_failing_job_waits_for_the_running_ones_and_keeps_their_results():
    done = []
    a_raising = threading.Event()

    def execute(job, slots):
        if job == "a":
            a_raising.set()
            raise RuntimeError("harness bug in a")
        assert a_raising.wait(30)  # b ends after a raised
        return job

    with pytest.raises(RuntimeError, match="harness bug in a"):
        run_jobs(list("ab"), {"sm_90": [0, 1]}, lambda j: Need("sm_90", 1), execute, lambda j, r: done.append(j))
    assert done == ["b"]


def test_prepare_runs_before_each_start_in_the_callers_thread():
    seen = []
    run_jobs(
        list("ab"),
        {"cpu": [0]},
        lambda j: Need("cpu", 1),
        lambda j, s: j,
        lambda j, r: None,
        prepare=lambda j: seen.append((j, threading.get_ident())),
    )
    assert seen == [("a", threading.get_ident()), ("b", threading.get_ident())]


def test_a_job_bigger_than_its_pool_is_refused_before_anything_runs():
    ran = []
    with pytest.raises(ValueError, match="needs 4 of 'sm_90'; the host has 2"):
        run_jobs(
            ["x", "y"],
            {"sm_90": [0, 1]},
            lambda j: Need("sm_90", 4 if j == "y" else 1),
            lambda j, s: ran.append(j),
            lambda j, r: None,
        )
    assert ran == []


def test_once_the_budget_is_spent_no_job_starts_and_the_rest_are_handed_back():
    """compat run --stop-after: the running jobs finish and keep their results, the others wait
    for --resume. The budget is a count of starts here, not a clock."""
    starts, done = [], []
    left = run_jobs(
        list("abcde"),
        {"cpu": [0]},
        lambda j: Need("cpu", 1),
        lambda j, s: starts.append(j) or j,
        lambda j, r: done.append(r),
        may_start=lambda: len(starts) < 2,
    )
    assert (starts, done, left) == (["a", "b"], ["a", "b"], ["c", "d", "e"])
    assert run_jobs(list("ab"), {"cpu": [0]}, lambda j: Need("cpu", 1), lambda j, s: j, lambda j, r: None) == []
