"""harness/run/guard.py, the process every cell and install runs under: it ends as its command ended,
says when the command could not start, and leaves no process behind, neither when the command
ends nor when compat itself is killed."""

import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid

import pytest

from harness.run import guard

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc"), reason="the guard's process tree is read from /proc")


def alive(marker: str) -> list[int]:
    out = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if marker.encode() in f.read():
                    out.append(int(pid))
        except OSError:
            pass
    return out


def gone(marker: str, within_s: float = 5.0) -> bool:
    deadline = time.monotonic() + within_s
    while alive(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not alive(marker)


def guarded(tmp_path, *cmd: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        guard.command(list(cmd), tmp_path / "start-error"), capture_output=True, text=True, timeout=60
    )


def test_it_ends_as_its_command_ended(tmp_path):
    assert guarded(tmp_path, "sh", "-c", "exit 3").returncode == 3
    assert guarded(tmp_path, "sh", "-c", "kill -SEGV $$").returncode == -signal.SIGSEGV
    assert guarded(tmp_path, "sh", "-c", "kill -KILL $$").returncode == -signal.SIGKILL
    assert guard.start_error(tmp_path / "start-error") is None


def test_a_command_that_cannot_start_is_told_apart(tmp_path):
    proc = guarded(tmp_path, str(tmp_path / "no-such-program"))
    assert proc.returncode == guard.START_FAILED
    assert guard.start_error(tmp_path / "start-error") == (
        f"could not start {tmp_path / 'no-such-program'}: [Errno 2] No such file or directory: "
        f"'{tmp_path / 'no-such-program'}'"
    )


@pytest.mark.skipif(not guard.SHM.is_dir(), reason="no /dev/shm on this host")
def test_the_shared_memory_a_cell_leaves_goes_with_it(tmp_path):
    """DeepSpeed's CPU ranks create /dev/shm/deepspeed_allreduce_buffer_{uid}_{addr}_{port}_{rank}
    and never unlink it (66 MB each): the guard removes the names of its cell's port once the
    command has ended, and no other port's."""
    from harness.run import launch

    port, other = 40000 + uuid.uuid4().int % 20000, 1
    mine = [guard.SHM / f"deepspeed_allreduce_buffer_{os.getuid()}_127.0.0.1_{port}_{rank}" for rank in (0, 1)]
    theirs = guard.SHM / f"deepspeed_allreduce_buffer_{os.getuid()}_127.0.0.1_{port}{other}_0"
    theirs.write_bytes(b"another cell's")
    try:
        cmd = ["python", "-m", "deepspeed.launcher.runner", "--master_port", str(port), "x.py"]
        pattern = launch.shm_left_by(cmd)
        made = "; ".join(f"echo rank > {p}" for p in mine)
        proc = subprocess.run(
            guard.command(["sh", "-c", made], tmp_path / "start-error", shm=pattern),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert proc.returncode == 0, proc.stderr
        assert [p.exists() for p in mine] == [False, False] and theirs.exists()
        assert launch.shm_left_by(["python", "train.py"]) is None
    finally:
        for p in [*mine, theirs]:
            p.unlink(missing_ok=True)


def test_what_the_command_left_behind_goes_with_it_even_in_a_session_of_its_own(tmp_path):
    marker = f"{uuid.uuid4().int % 10**6}.5"  # sleep's argument: finds the process by its command line
    proc = guarded(tmp_path, "sh", "-c", f"setsid sleep {marker} & sleep {marker} & exit 0")
    assert proc.returncode == 0
    assert gone(marker, within_s=0)


def test_compat_killed_by_sigkill_takes_its_cells_with_it(tmp_path):
    """The guard's parent dies without running any handler: the guard kills everything below it,
    a process in a session of its own included, and removes the cell's work folder."""
    marker = f"{uuid.uuid4().int % 10**6}.5"
    work = tmp_path / "work"
    work.mkdir()
    parent = textwrap.dedent(f"""
        import os, signal, subprocess, sys, time
        sys.path.insert(0, {os.getcwd()!r})
        from harness.run import guard
        subprocess.Popen(guard.command(["sh", "-c", "setsid sleep {marker} & sleep {marker}"],
                         {str(tmp_path / "start-error")!r}, {str(work)!r}), start_new_session=True)
        time.sleep(1)
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    proc = subprocess.run([sys.executable, "-c", parent], timeout=60)
    assert proc.returncode == -signal.SIGKILL
    assert gone(marker)
    deadline = time.monotonic() + 5
    while work.exists() and time.monotonic() < deadline:  # removed just after the kill
        time.sleep(0.05)
    assert not work.exists()


@pytest.fixture
def stand_in(monkeypatch):
    monkeypatch.setattr(guard, "STAND_IN", True)


def test_behind_a_stand_in_it_still_ends_as_its_command_ended(tmp_path, stand_in):
    assert guarded(tmp_path, "sh", "-c", "exit 3").returncode == 3
    assert guarded(tmp_path, "sh", "-c", "kill -SEGV $$").returncode == -signal.SIGSEGV
    assert guarded(tmp_path, str(tmp_path / "no-such-program")).returncode == guard.START_FAILED
    assert guard.start_error(tmp_path / "start-error").startswith(f"could not start {tmp_path / 'no-such-program'}")


def test_a_stand_in_killed_by_its_supervisor_takes_the_command_with_it(tmp_path, stand_in):
    """A Ray worker that exits SIGKILLs its direct children, not theirs: under Ray that child is a
    stand-in, and the guard below it, seeing its parent gone, kills the command and removes the
    cell's work folder. Without the stand-in the command would go on running."""
    marker = f"{uuid.uuid4().int % 10**6}.5"
    work = tmp_path / "work"
    work.mkdir()
    proc = subprocess.Popen(
        guard.command(["sh", "-c", f"setsid sleep {marker} & sleep {marker}"], tmp_path / "start-error", work),
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 10
        while len(alive(marker)) < 5 and time.monotonic() < deadline:  # two guards, the shell, two sleeps
            time.sleep(0.05)
        assert len(alive(marker)) == 5, alive(marker)
        os.kill(proc.pid, signal.SIGKILL)  # what Ray does to a dead worker's children
        assert gone(marker)
        deadline = time.monotonic() + 5
        while work.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not work.exists()
    finally:
        for pid in alive(marker):
            os.kill(pid, signal.SIGKILL)
        proc.wait(timeout=10)


def test_a_stop_through_a_stand_in_reaches_the_command_once(tmp_path, stand_in):
    """guard.stop (SIGTERM) on the stand-in is passed to the guard below, which passes it to the
    command: the command sees one SIGTERM, not one from each guard."""
    script = tmp_path / "count.sh"
    script.write_text(
        f"n=0; trap 'n=$((n+1)); echo $n > {tmp_path / 'terms'}' TERM; "
        "touch " + str(tmp_path / "ready") + "; i=0; while [ $i -lt 30 ]; do sleep 0.1; i=$((i+1)); done; exit 7\n"
    )
    proc = subprocess.Popen(guard.command(["sh", str(script)], tmp_path / "start-error"))
    deadline = time.monotonic() + 10
    while not (tmp_path / "ready").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    guard.stop(proc.pid)
    assert proc.wait(timeout=20) == 7
    assert (tmp_path / "terms").read_text().strip() == "1"


def test_an_interrupted_run_stops_its_cells_and_removes_their_folders(tmp_path, monkeypatch):
    """launch.kill_running, what an interrupted run (Ctrl-C, SIGTERM) does: each cell runs in a
    thread compat does not wait for at exit, so the cells' folders are removed before it returns
    (issue 41, finding 7); and a run after it starts cells and makes folders again."""
    import tempfile
    import threading

    from harness.run import launch

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    marker = f"compat-test-{uuid.uuid4().hex}"
    made, ended = [], []

    def cell():
        with launch.scratch("compat-cell-") as folder:
            made.append(folder)
            (folder / "result").mkdir()
            command = ["sh", "-c", f"sleep 3600; : {marker}"]
            ended.append(launch.launch(command, dict(os.environ), folder, tmp_path / "cell.log", 3600, folder))

    worker = threading.Thread(target=cell, daemon=True)
    worker.start()

    def running() -> bool:  # the command itself, not the guard whose arguments name it
        for pid in alive(marker):
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    if f.read().startswith(b"sh\0"):
                        return True
            except OSError:
                pass  # it ended meanwhile
        return False

    give_up = time.monotonic() + 60  # a guard against a cell that never starts, not a timing
    while not running() and time.monotonic() < give_up:
        time.sleep(0.02)
    assert running() and made[0].is_dir()
    launch.kill_running()
    assert not made[0].exists()
    assert gone(marker)
    worker.join(10)
    assert ended and ended[0].returncode == -signal.SIGKILL
    with launch.scratch("compat-cell-") as again:  # nothing of the stop is left over
        assert again.is_dir()
    assert [p.name for p in tmp_path.iterdir()] == ["cell.log"]
