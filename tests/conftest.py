import contextlib
import io
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# what compat keeps of its data files between runs (harness/tomldata.py) goes to a folder of the
# tests' own, never the user's cache; it is keyed by content, so runs may share it
os.environ.setdefault("COMPAT_CACHE_DIR", str(Path(tempfile.gettempdir()) / f"compat-tests-{os.getuid()}" / "cache"))
# the runner key that signs the records the tests' runs write (harness/evidence/signature.py): the
# tests' own, never the user's
os.environ.setdefault(
    "COMPAT_RUNNER_KEY", str(Path(tempfile.gettempdir()) / f"compat-tests-{os.getuid()}" / "runner-key")
)
if os.environ.get("PYTEST_XDIST_WORKER"):
    # the cells of two workers side by side on the same cores: one torch thread each, or their
    # OpenMP threads spin waiting for one another (two local grids at once took 3x the CPU time
    # of one, measured on 2 cores; at one thread each they take what one takes alone)
    os.environ.setdefault("OMP_NUM_THREADS", "1")


def run_compat(
    *args: str, env: dict | None = None, cwd: Path = ROOT, timeout: float = 900, input: str | None = None, **popen
) -> subprocess.CompletedProcess:
    """The CLI exactly as a user runs it: a separate process, its exit code and its two streams
    (`input` on its stdin). The one subprocess helper of the tests; call_compat where a process
    of its own adds nothing."""
    return subprocess.run(
        [sys.executable, "-m", "harness", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=timeout,
        input=input,
        env={**os.environ, **(env or {})},
        **popen,
    )


def call_compat(
    *args: str,
    env: dict | None = None,
    cwd: Path = ROOT,
    input: bytes | str | None = None,
    timeout: float | None = None,
) -> subprocess.CompletedProcess:
    """The CLI's main() in this process, answered as run_compat answers: its exit code and its two
    streams, with `env` laid over the environment, `cwd` as the working folder and `input` on
    stdin for the call. No interpreter to start (a third of a second each): for what only a
    process of its own shows (signals, the console script, a clean import, concurrency), use
    run_compat. `timeout` is taken for run_compat's sake and not enforced here."""
    from harness.cli import main

    data = input.encode() if isinstance(input, str) else (input or b"")
    out, err = io.StringIO(), io.StringIO()
    stdin = io.TextIOWrapper(io.BytesIO(data), encoding="utf-8")
    saved = {k: os.environ.get(k) for k in (env or {})}
    here = os.getcwd()
    os.environ.update(env or {})
    os.chdir(cwd)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), _stdin(stdin):
            try:
                code = main(list(args))
            except SystemExit as exc:  # argparse's own usage errors
                code = exc.code
    finally:
        os.chdir(here)
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return subprocess.CompletedProcess(["compat", *args], code, out.getvalue(), err.getvalue())


@contextlib.contextmanager
def _stdin(stream):
    saved, sys.stdin = sys.stdin, stream
    try:
        yield
    finally:
        sys.stdin = saved


def network_cut() -> list[str]:
    """A command prefix that runs its command with no network (unshare: a user and network
    namespace), or [] where this host does not allow one."""
    import shutil

    if shutil.which("unshare") is None:
        return []
    probe = subprocess.run(
        ["unshare", "-rn", sys.executable, "-c", "import socket; socket.create_connection(('1.1.1.1', 53), 2)"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    return ["unshare", "-rn"] if probe.returncode != 0 and "Network is unreachable" in probe.stderr else []


def compat_home(home: Path, stacks_toml: str, grid_toml: str) -> Path:
    """A compat home of its own in `home`: the shipped axes and defaults, the given stacks, and
    the given grid as grid.toml."""
    import shutil
    import textwrap

    (home / "matrix").mkdir(parents=True)
    for name in ("axes.toml", "defaults.toml"):
        shutil.copy(ROOT / "matrix" / name, home / "matrix" / name)
    (home / "matrix" / "stacks.toml").write_text(textwrap.dedent(stacks_toml))
    (home / "grid.toml").write_text(textwrap.dedent(grid_toml))
    return home


@pytest.fixture
def compat():
    """compat's CLI, in this process (call_compat)."""
    return call_compat


def assert_clean_error(proc: subprocess.CompletedProcess, code: int) -> None:
    """A user-facing error: the given exit code, a message on stderr, no traceback."""
    assert proc.returncode == code, (proc.returncode, proc.stdout, proc.stderr)
    assert proc.stderr.startswith("compat: error: "), proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout


def real_records(n: int) -> list[dict]:
    """The first n records this project measured (results/records.jsonl), as they are."""
    import json

    with open(ROOT / "results" / "records.jsonl", encoding="utf-8") as f:
        return [json.loads(line) for _, line in zip(range(n), f)]


def second_runner(rec: dict, runner: str, **changes) -> dict:
    """A test input for merging: `rec` as a second runner would send it (its own id and runner
    name), with `changes` applied. Used to test merge, conflicts and rendering, never as a result."""
    import copy
    import uuid

    out = copy.deepcopy(rec)
    out.update(id=uuid.uuid4().hex, runner={"name": runner}, **changes)
    return out


def slow_view(raw: bytes):
    """What records.reader_view must give for a line: the line parsed whole by the standard
    library (JSON has no NaN or Infinity), cut (records.slim), then validated by the schema:
    (view, None) or (None, why not)."""
    import json

    from harness.evidence import records

    def not_json(name):
        raise ValueError(name)

    try:
        rec = records.slim(json.loads(raw, parse_constant=not_json))
    except (ValueError, RecursionError):
        return None, "not JSON"
    why = records.validate(rec)
    return (None, why) if why else (rec, None)


def fast_view(raw: bytes):
    """records.reader_view's answer for a line, in slow_view's terms."""
    from harness.evidence import records

    try:
        return records.reader_view(raw), None
    except records.NotARecord as exc:
        return None, "not JSON" if str(exc).startswith("not a JSON record") else str(exc)


def p4_record(base: dict, runner: str = "ci-gpu-p4") -> dict:
    """`base` moved onto a Tesla P4 (sm_61) for rendering tests: GPU fingerprint and per-card
    torch/NVML memory figures in the shape the workload and the harness write them."""
    axes = dict(base["axes"], hardware="sm_61")
    # a GPU record's torch is a CUDA build
    fp = dict(
        base["fingerprint"],
        hardware={
            "cpu": "Test CPU",
            "driver": "550.54",
            "cuda_driver": "12.4",
            "gpus": [
                {
                    "index": 0,
                    "name": "Tesla P4",
                    "compute_capability": "6.1",
                    "memory_bytes": 8 * 2**30,
                    "arch": "sm_61",
                }
            ],
        },
        torch={"version": "2.6.0+cu124", "cuda": "12.4"},
    )
    memory = [
        {
            "rank": 0,
            "device": "cuda:0",
            "physical_index": 0,
            "peak_rss_bytes": 900 * 2**20,
            "torch_max_allocated_bytes": 300 * 2**20,
            "torch_max_reserved_bytes": 420 * 2**20,
            "nvml_baseline_used_bytes": 0,
            "nvml_peak_used_bytes": 700 * 2**20,
            "nvml_processes_max": 1,
        }
    ]
    cell = base["cell"].replace(base["axes"]["hardware"] + "-", "sm_61-", 1)
    return second_runner(base, runner, axes=axes, fingerprint=fp, memory=memory, cell=cell)


def make_wheel(folder: Path, name: str, version: str, requires: list[str]) -> Path:
    """A pure-Python wheel whose metadata requires `requires`: a test input standing in for a
    package such as bitsandbytes 0.48 (which requires torch >= 2.4), built here."""
    import base64
    import hashlib
    import zipfile

    module = name.replace("-", "_")
    dist = f"{module}-{version}"
    files = {
        f"{module}/__init__.py": "",
        f"{dist}.dist-info/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
        + "".join(f"Requires-Dist: {r}\n" for r in requires),
        f"{dist}.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: compat-tests\nRoot-Is-Purelib: true\nTag: "
        "py3-none-any\n",
    }
    record = []
    for path, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(text.encode())}")
    files[f"{dist}.dist-info/RECORD"] = "\n".join(record + [f"{dist}.dist-info/RECORD,,"]) + "\n"
    folder.mkdir(parents=True, exist_ok=True)
    wheel = folder / f"{dist}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        for path, text in files.items():
            z.writestr(path, text)
    return wheel


COSTLY = ("integration", "slow", "gpu", "browser", "ray")  # markers for what a fast run leaves out
# the longest files, started first so that no worker is left alone with one at the end (tox -e py
# runs the suite on every core); measured with --durations, each some minutes of real cells
FIRST = (
    "integration/test_stacks.py",
    "integration/test_presets_run.py",
    "integration/test_cpu_run.py",
    "integration/test_faults.py",
)


def pytest_collection_modifyitems(config, items):
    """Every test that is none of COSTLY is a unit test: `pytest -m unit` (tox -e unit) is the fast
    suite, and a test cannot fall between the two; every test of tests/integration is integration.
    Outside tests/unit a file's tests stay together on one worker under `--dist loadgroup` (they
    share module fixtures: stack envs, a browser, a run's results); unit tests spread one by one.
    The longest files go first."""
    for item in items:
        if _where(item).startswith("integration/") and not item.get_closest_marker("integration"):
            item.add_marker(pytest.mark.integration)  # the folder says it: a file there cannot pass for fast
        if not any(item.get_closest_marker(name) for name in COSTLY):
            item.add_marker(pytest.mark.unit)
        where = _where(item)
        if not where.startswith("unit/"):
            item.add_marker(pytest.mark.xdist_group(where))
    items.sort(key=lambda item: FIRST.index(_where(item)) if _where(item) in FIRST else len(FIRST))


def _where(item) -> str:
    return Path(item.fspath).resolve().relative_to(ROOT / "tests").as_posix()
