"""Bad input, generated: matrix files, known-issue files, GPU names, results lines and logs, at
least 60 of each, through the CLI as users call it (in process, for speed). Every case must end
with exit code 0 (the input happened to be valid) or a clear message and its exit code, never a
traceback (exit code 70 is compat's own bug) and never a hang: an alarm turns a hang into a test
failure instead of a stuck CI job (a guard, not a timing assertion)."""

import contextlib
import json
import shutil
import signal
import sys
import tomllib

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from harness.catalog import known_issues
from harness.evidence import records

from conftest import ROOT, call_compat, real_records

SETTINGS = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
HANG_GUARD_CPU_S = 60  # CPU seconds of this process: a loaded machine slows a case, it does not spend more CPU
HANG_GUARD_WALL_S = 900  # and a case blocked without spending any (a read that never returns)


@contextlib.contextmanager
def no_hang():
    """A case that spins for HANG_GUARD_CPU_S of CPU time, or waits HANG_GUARD_WALL_S, fails.
    CPU time, not wall time: on a machine shared with other jobs the wall clock of an honest
    case stretches (a 60 s wall alarm once tripped so), its CPU time does not."""

    def fail(signum, frame):
        what, limit = ("CPU", HANG_GUARD_CPU_S) if signum == signal.SIGPROF else ("wall-clock", HANG_GUARD_WALL_S)
        raise AssertionError(f"still running after {limit} s of {what} time: a hang")

    saved = {s: signal.signal(s, fail) for s in (signal.SIGPROF, signal.SIGALRM)}
    signal.setitimer(signal.ITIMER_PROF, HANG_GUARD_CPU_S)
    signal.setitimer(signal.ITIMER_REAL, HANG_GUARD_WALL_S)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.setitimer(signal.ITIMER_REAL, 0)
        for s, handler in saved.items():
            signal.signal(s, handler)


def test_the_hang_guard_stops_a_case_that_spins(monkeypatch):
    monkeypatch.setattr(sys.modules[__name__], "HANG_GUARD_CPU_S", 0.2)
    spun = 0
    try:
        with no_hang():
            while True:
                spun += 1
    except AssertionError as exc:
        assert str(exc) == "still running after 0.2 s of CPU time: a hang"
    assert spun > 1000


def cli(*args, env=None):
    """main(args) as the console script runs it: (exit code, stdout, stderr)."""
    with no_hang():
        proc = call_compat(*args, env=env)
    return proc.returncode, proc.stdout, proc.stderr


def assert_clean(code, out, err, allowed=(0, 2)):
    assert code in allowed, (code, err[-2000:])
    assert "Traceback" not in err  # (stdout may quote a log's own traceback back: explain does)
    if code == 2:
        assert err.startswith("compat: error: ") or err.startswith("usage: "), err[:500]


# -- text mutations of a valid file ------------------------------------------------------------


def mutated(valid: str):
    """Strategies for broken versions of a valid text file: characters deleted, inserted or
    replaced at random places, lines dropped or duplicated, values swapped for other types."""
    lines = valid.splitlines()
    junk = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=12)

    @st.composite
    def edit(draw):
        text = valid
        for _ in range(draw(st.integers(1, 4))):
            kind = draw(st.sampled_from(["delete", "insert", "replace_line", "drop_line", "dup_line", "value"]))
            if not text:
                break
            at = draw(st.integers(0, len(text) - 1))
            if kind == "delete":
                text = text[:at] + text[at + draw(st.integers(1, 20)) :]
            elif kind == "insert":
                text = text[:at] + draw(junk) + text[at:]
            else:
                ls = text.splitlines() or [""]
                i = draw(st.integers(0, len(ls) - 1))
                if kind == "replace_line":
                    ls[i] = draw(junk)
                elif kind == "drop_line":
                    del ls[i]
                elif kind == "dup_line":
                    ls.insert(i, ls[i])
                elif "=" in ls[i]:
                    key = ls[i].split("=")[0]
                    value = draw(
                        st.sampled_from(
                            ["1", "-5", "0", "true", '"x"', "[]", '[1, "a"]', "{a = 1}", "1e400", '"' + "z" * 300 + '"']
                        )
                    )
                    ls[i] = f"{key}= {value}"
                text = "\n".join(ls)
        return text

    return st.one_of(edit(), junk.map(lambda j: "\n".join(lines[: len(lines) // 2]) + j))


MATRIX = (ROOT / "matrix" / "cpu-dist.toml").read_text()


@SETTINGS
@given(text=mutated(MATRIX))
def test_broken_matrix_files(tmp_path_factory, text):
    path = tmp_path_factory.mktemp("m") / "m.toml"
    path.write_text(text, encoding="utf-8")
    assert_clean(*cli("list", "--matrix", str(path), "--json"))


@SETTINGS
@given(data=st.binary(max_size=400))
def test_matrix_files_of_random_bytes(tmp_path_factory, data):
    path = tmp_path_factory.mktemp("m") / "m.toml"
    path.write_bytes(data)
    assert_clean(*cli("list", "--matrix", str(path)))


def compat_home(tmp):
    home = tmp / "home"
    shutil.copytree(ROOT / "matrix", home / "matrix")
    return home


KNOWN = (ROOT / "matrix" / "known_issues.toml").read_text()


@SETTINGS
@given(text=mutated(KNOWN))
@example(text=KNOWN.replace('pins = { torch = ">=2.1" }', "pins = 1", 1))  # found by this test: was internal error 70
def test_broken_known_issue_files(tmp_path_factory, text):
    home = compat_home(tmp_path_factory.mktemp("k"))
    (home / "matrix" / "known_issues.toml").write_text(text, encoding="utf-8")
    log = home / "train.log"
    log.write_text(
        "Traceback (most recent call last):\nRuntimeError: \"triu_tril_cuda_template\" not implemented for 'BFloat16'\n"
    )
    assert_clean(*cli("explain", str(log), env={"COMPAT_HOME": str(home)}))


gpu_names = st.one_of(
    st.text(max_size=40),
    st.sampled_from(["P4", "tesla p4", "NVIDIA A100-SXM4-80GB", "4090", "h100", "GeForce RTX-4090"]),
    st.text(alphabet="PpTtAaHh0123456789 -_", min_size=1, max_size=12),
    st.builds(lambda s: s * 500, st.text(min_size=1, max_size=3)),
)


@SETTINGS
@given(name=gpu_names)
@example(name="--")  # Python 3.11's argparse reads `--gpu=--` as []: found by this test
def test_gpu_names(tmp_path_factory, name):
    empty = tmp_path_factory.mktemp("r")
    code, out, err = cli("recommend", f"--gpu={name}", "--results", str(empty))
    assert_clean(code, out, err)
    if code == 2 and err.startswith("compat: error: unknown GPU"):
        assert len(err.splitlines()) == 1  # one line, with suggestions where there are close ones


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4),
    max_leaves=12,
)
REAL = real_records(3)


@st.composite
def results_line(draw):
    kind = draw(st.sampled_from(["json", "mutated", "bytes", "cut"]))
    if kind == "json":
        return json.dumps(draw(json_values)).encode()
    if kind == "bytes":
        return draw(st.binary(max_size=200)).replace(b"\n", b" ")
    rec = dict(draw(st.sampled_from(REAL)))
    if kind == "cut":
        line = json.dumps(rec).encode()
        return line[: draw(st.integers(0, len(line) - 1))]
    key = draw(st.sampled_from(sorted(rec)))
    rec[key] = draw(json_values)
    return json.dumps(rec).encode()


@SETTINGS
@given(lines=st.lists(results_line(), min_size=1, max_size=5))
def test_results_lines(tmp_path_factory, lines):
    tmp = tmp_path_factory.mktemp("j")
    src = tmp / "theirs.jsonl"
    src.write_bytes(b"\n".join([json.dumps(REAL[0]).encode(), *lines]) + b"\n")
    recs, bad = records.read_records([src])
    # every non-blank line is either a record or reported (blank lines are neither)
    assert len(recs) + len(bad) == 1 + sum(1 for line in lines if line.strip()) and REAL[0]["id"] in {
        r["id"] for r in recs
    }
    code, out, err = cli("merge", str(src), "--into", str(tmp / "results"))
    assert_clean(code, out, err, allowed=(0, 1))
    merged, _ = records.read_records([tmp / "results" / "records.jsonl"])
    assert REAL[0]["id"] in {r["id"] for r in merged}  # the valid line always gets through
    # and whatever got through renders
    assert (tmp / "results" / "index.html").is_file() and (tmp / "results" / "COMPATIBILITY.md").is_file()


pathological_logs = st.one_of(
    st.binary(max_size=2000),
    st.text(max_size=2000).map(str.encode),
    st.builds(
        lambda a, n: (a * n).encode(),
        st.sampled_from(["a", "(", "Error: ", "\x1b[31m", "\r", "Traceback (most recent call last):\n", " " * 7 + "x"]),
        st.integers(1000, 300_000),
    ),
    st.builds(
        lambda s: ("Traceback (most recent call last):\n" + s + "\nRuntimeError: " + s * 50).encode(),
        st.text(max_size=100),
    ),
)
CATALOGUE = known_issues.KnownIssues.load(ROOT / "matrix")


@SETTINGS
@given(data=pathological_logs)
def test_logs_for_explain(tmp_path_factory, data):
    log = tmp_path_factory.mktemp("l") / "x.log"
    log.write_bytes(data)
    code, out, err = cli("explain", str(log), "--format", "json")
    assert_clean(code, out, err, allowed=(0, 2))
    if code == 2:  # an empty log, or bytes that are not text with no error line in them: refused by name
        assert str(log) in err and (": is empty" in err or ": is not text" in err), err
    else:
        assert isinstance(json.loads(out)["matches"], list)


def test_the_mutations_do_break_files():
    """The generators above are worth something only if they make invalid files: check that a
    fair share of mutated matrix files really is rejected (and some stay valid)."""
    outcomes = []

    @settings(max_examples=80, deadline=None, database=None)
    @given(text=mutated(MATRIX))
    def probe(text):
        try:
            doc = tomllib.loads(text)
        except tomllib.TOMLDecodeError:
            outcomes.append("not toml")
            return
        outcomes.append("toml" if isinstance(doc, dict) else "?")

    probe()
    assert outcomes.count("not toml") >= 10 and outcomes.count("toml") >= 10
