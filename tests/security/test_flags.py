"""Values that make no sense are refused before any work, naming the flag (issue 18, finding 9):
negative, zero, NaN or empty where a count, a size or a folder is meant, a config whose sizes are
not numbers, and a results folder that cannot be written (exit 74, as the README says, not 70
after the cell ran)."""

import json
import subprocess
import sys

import pytest

from conftest import ROOT, assert_clean_error, run_compat

BAD = [
    (
        ["recommend", "--gpu", "P4", "--model-size", "7B", "--seq-len", "-5"],
        "argument --seq-len: -5: must be 1 or more",
    ),
    (["recommend", "--gpu", "P4", "--model-size", "7B", "--seq-len", "0"], "argument --seq-len: 0: must be 1 or more"),
    (["recommend", "--gpu", "P4", "--gpus", "0"], "argument --gpus: 0: must be 1 or more"),
    (["recommend", "--gpu", "P4", "--model-size", ""], "argument --model-size: must not be empty"),
    (["recommend", "--gpu", " "], "argument --gpu: must not be empty"),
    (
        ["fit", "--model-size", "7B", "--gpu-memory", "nan"],
        "argument --gpu-memory: nan: must be a finite number above 0",
    ),
    (["fit", "--model-size", "7B", "--gpu-memory", "-1"], "argument --gpu-memory: -1: must be a finite number above 0"),
    (["fit", "--model-size", "7B", "--gpu-memory", "0"], "argument --gpu-memory: 0: must be a finite number above 0"),
    (
        ["fit", "--model-size", "7B", "--gpu-memory", "inf"],
        "argument --gpu-memory: inf: must be a finite number above 0",
    ),
    (["fit", "--model-size", ""], "argument --model-size: must not be empty"),
    (["fit", "--model-size", "7B", "--batch", "0"], "argument --batch: 0: must be 1 or more"),
    (["fit", "--model-size", "7B", "--gpus", "two"], "argument --gpus: 'two' is not a whole number"),
    (["envs", "--prune", "--older-than", "nan"], "argument --older-than: nan: must be a finite number of at least 0"),
    (["envs", "--prune", "--older-than", "-1"], "argument --older-than: -1: must be a finite number of at least 0"),
    (["table", "--results", ""], "argument --results: must not be empty"),
    (["merge", "results/records.jsonl", "--into", ""], "argument --into: must not be empty"),
    (["run", "--matrix", "matrix/local.toml", "--results", ""], "argument --results: must not be empty"),
    (
        ["run", "--matrix", "matrix/local.toml", "--timeout", "0"],
        "argument --timeout: 0: must be a finite number above 0",
    ),
    (
        ["run", "--matrix", "matrix/local.toml", "--stop-after", "nan"],
        "argument --stop-after: nan: must be a finite number of at least 0",
    ),
    (
        ["preflight", "--preset", "deepke-llama2-4bit", "--plan", "--gpus", "-2"],
        "argument --gpus: -2: must be 1 or more",
    ),
]


@pytest.mark.parametrize("args, message", BAD, ids=[" ".join(a) for a, _ in BAD])
def test_a_value_that_makes_no_sense_is_refused_naming_the_flag(args, message, tmp_path):
    proc = run_compat(*args, env={"COMPAT_ENV_DIR": str(tmp_path / "envs")}, timeout=60)
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    assert message in proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout
    assert not list(tmp_path.iterdir())  # nothing made
    assert not (ROOT / "COMPATIBILITY.md").exists() and not (ROOT / "records.jsonl").exists()


def test_a_config_whose_sizes_are_not_numbers_is_refused(tmp_path):
    # TinyLlama-1.1B's config.json (its public shape), with one size spoiled at a time
    good = {
        "hidden_size": 2048,
        "intermediate_size": 5632,
        "num_hidden_layers": 22,
        "num_attention_heads": 32,
        "num_key_value_heads": 4,
        "vocab_size": 32000,
    }
    path = tmp_path / "config.json"
    for key, value, said in [
        ("hidden_size", True, "hidden_size = true is not a whole number"),
        ("num_hidden_layers", "22", 'num_hidden_layers = "22" is not a whole number'),
        ("vocab_size", 32000.5, "vocab_size = 32000.5 is not a whole number"),
        ("num_attention_heads", None, "it needs hidden_size, num_attention_heads"),
    ]:
        path.write_text(json.dumps(dict(good, **{key: value})))
        proc = run_compat("fit", "--model", str(path), timeout=60)
        assert_clean_error(proc, 2)
        assert said in proc.stderr, proc.stderr
    path.write_text(json.dumps(dict(good, hidden_size=2048.0)))  # a whole number written as a float is one
    proc = run_compat("fit", "--model", str(path), "--format", "json", timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["model"]["parameters"] == 1100048384


def test_a_results_folder_that_is_a_file_is_exit_74_before_any_cell(tmp_path):
    afile = tmp_path / "results"
    afile.write_text("not a folder\n")
    for args in (
        ["run", "--matrix", "matrix/local.toml", "--select", "cpu-local-fp32-none-full-single"],
        ["table"],
        ["preflight", "--preset", "deepke-llama2-4bit"],
    ):
        proc = run_compat(*args, "--results", str(afile), env={"COMPAT_ENV_DIR": str(tmp_path / "envs")}, timeout=120)
        assert_clean_error(proc, 74)
        assert f"--results {afile}: is a file, not a results folder; nothing was run or written" in proc.stderr
        assert "[1/" not in proc.stdout  # no cell ran
    proc = run_compat("merge", str(ROOT / "results" / "records.jsonl"), "--into", str(afile), timeout=120)
    assert_clean_error(proc, 74)
    assert afile.read_text() == "not a folder\n"


def test_a_read_only_results_folder_is_exit_74_before_any_cell(tmp_path):
    # a read-only tmpfs in a mount namespace of its own (root ignores file modes, so a mode would
    # not make a folder unwritable when the tests run as root)
    folder = tmp_path / "ro"
    folder.mkdir()
    script = (
        f"mount -t tmpfs -o ro tmpfs {folder} || exit 99; cd {ROOT}; "
        f"{sys.executable} -m harness run --matrix matrix/local.toml "
        f"--select cpu-local-fp32-none-full-single --results {folder}/results"
    )
    try:
        proc = subprocess.run(["unshare", "-rm", "sh", "-c", script], capture_output=True, text=True, timeout=120)
    except FileNotFoundError:
        pytest.skip("no unshare on this host")
    if proc.returncode == 99 or "unshare:" in proc.stderr:
        pytest.skip(f"this host lets no test mount a read-only tmpfs: {proc.stderr.strip()[:200]}")
    assert_clean_error(proc, 74)
    assert f"--results {folder}/results: cannot be written (Read-only file system)" in proc.stderr
    assert "[1/" not in proc.stdout


# issue 41, finding 7: absurd values were taken silently (`--gpus 99999999999`, `--lora-r
# 99999999999`), or ended in exit 70 (a time limit of 1e300 s overflows time_t). Each numeric
# flag, past its upper bound; run and bisect name a grid or stack that is not there, so that a
# compat that took the value stops there with another message instead of running a cell
NO_GRID = ["--matrix", "no-such-grid.toml"]
ABSURD = [
    (["fit", "--model-size", "7B", "--gpus", "99999999999"], "--gpus", "1 or more and at most 1024"),
    (["fit", "--model-size", "7B", "--lora-r", "99999999999"], "--lora-r", "1 or more and at most 65536"),
    (["fit", "--model-size", "7B", "--seq-len", "99999999999"], "--seq-len", "1 or more and at most 16777216"),
    (["fit", "--model-size", "7B", "--batch", "99999999999"], "--batch", "1 or more and at most 65536"),
    (["fit", "--model-size", "7B", "--grad-accum", "99999999999"], "--grad-accum", "1 or more and at most 65536"),
    (["fit", "--model-size", "7B", "--gpu-memory", "1e300"], "--gpu-memory", "above 0 and at most 65536"),
    (["fit", "--model-size", "7B", "--host-memory", "1e300"], "--host-memory", "above 0 and at most 65536"),
    (["recommend", "--gpu", "A100", "--gpus", "99999999999"], "--gpus", "1 or more and at most 1024"),
    (["recommend", "--gpu", "A100", "--seq-len", "99999999999"], "--seq-len", "1 or more and at most 16777216"),
    (["recommend", "--gpu", "A100", "--gpu-memory", "1e300"], "--gpu-memory", "above 0 and at most 65536"),
    (["preflight", "--preset", "deepke-llama2-4bit", "--plan", "--gpus", "99999999999"], "--gpus", "at most 1024"),
    (["run", *NO_GRID, "--timeout", "1e300"], "--timeout", "above 0 and at most 604800"),
    (["run", *NO_GRID, "--stop-after", "1e300"], "--stop-after", "of at least 0 and at most 604800"),
    (["run", *NO_GRID, "--shard", "1/99999999999"], "--shard", "N must be at most 1024"),
    (["list", *NO_GRID, "--shard", "1/99999999999"], "--shard", "N must be at most 1024"),
    (["bisect", "--package", "peft", "--stack", "none", "--max-probes", "99999999999", "x"], "--max-probes", "1024"),
    (["bisect", "--package", "peft", "--stack", "none", "--timeout", "1e300", "x"], "--timeout", "at most 604800"),
    (["envs", "--older-than", "1e300"], "--older-than", "of at least 0 and at most 36525"),
    (["wheelhouse", "w", "--max-part", "2048G"], "--max-part", "1 MiB or more and at most 1 TiB"),
]


@pytest.mark.parametrize("args, flag, bound", ABSURD, ids=[" ".join(a[:1] + a[-2:]) for a, _, _ in ABSURD])
def test_an_absurd_value_is_refused_naming_the_flag_and_its_range(args, flag, bound, compat, tmp_path):
    proc = compat(*args, env={"COMPAT_ENV_DIR": str(tmp_path / "envs")})
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    assert f"argument {flag}: " in proc.stderr and bound in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout
    assert not list(tmp_path.iterdir())  # nothing made


def test_every_numeric_flag_is_bounded_and_tested():
    """A flag added later with type=int or float, or a bounded one left out of ABSURD, fails here."""
    from harness import commands
    from harness.cli import build_parser
    from harness.commands import common

    bounded, tested = set(), {(args[0], flag) for args, flag, _ in ABSURD}
    for name in commands.HELP:
        sub = build_parser(name)._subparsers._group_actions[0].choices[name]
        for action in sub._actions:
            assert action.type not in (int, float), (name, action.option_strings)
            if hasattr(action.type, "bounds") or action.type is common.parse_shard:
                bounded.add((name, action.option_strings[0]))
    assert bounded == tested


def _tree(folder):
    return {p.relative_to(folder): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_a_python_that_is_no_interpreter_is_refused_before_any_cell(compat, tmp_path):
    """Issue 41, finding 7: `compat run --python /nonexistent` stored a false install-error record
    for each cell of a stack env (an infra record for the local stack's) and exited 0. Now: exit 2
    naming --python, and the results folder as it was (or still absent)."""
    folder = tmp_path / "folder"
    folder.mkdir()
    text = tmp_path / "notes.txt"
    text.write_text("not a program\n")
    silent, python2 = tmp_path / "silent", tmp_path / "python2"
    silent.write_text("#!/bin/sh\nexit 0\n")  # /bin/true: runs, says nothing
    python2.write_text('#!/bin/sh\necho \'{"version": "2.7.18", "executable": "x", "torch": null, "site_dirs": []}\'\n')
    for script in (silent, python2):
        script.chmod(0o755)
    results = tmp_path / "results"
    results.mkdir()
    with open(ROOT / "results" / "records.jsonl", "rb") as f:
        (results / "records.jsonl").write_bytes(b"".join(line for _, line in zip(range(20), f)))
    before = _tree(results)
    for python, said in [
        (tmp_path / "nonexistent", "no such file"),
        ("no-such-python-here", "no such command on $PATH"),
        (folder, "is a folder, not an interpreter"),
        (text, "is not an executable file"),
        (silent, "is not a Python 3.8 or later: asked what it is, it said 'nothing'"),
        (python2, 'is not a Python 3.8 or later: asked what it is, it said \'{"version": "2.7.18"'),
    ]:
        for grid, cell in [("local", "cpu-local-fp32-none-full-single"), ("quick", "cpu-hf2026-fp32-none-full-single")]:
            for where in (results, tmp_path / "absent"):
                proc = compat(
                    "run", "--matrix", grid, "--select", cell, "--python", str(python), "--results", str(where),
                    env={"COMPAT_ENV_DIR": str(tmp_path / "envs")},
                )  # fmt: skip
                assert_clean_error(proc, 2)
                assert proc.stderr.startswith(f"compat: error: --python {python}"), proc.stderr
                assert said in proc.stderr and "nothing was run or written" in proc.stderr, proc.stderr
    assert _tree(results) == before
    assert not (tmp_path / "absent").exists() and not (tmp_path / "envs").exists()
