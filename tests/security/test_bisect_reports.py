"""Bisection reports under the same trust as records (issue 41, finding 1). A report in
results/bisect/ was read with no checks: a 400-byte file citing two records that never existed moved
`compat recommend --gpu H100`'s transformers pin, labelled measured; nested JSON or a release that
is not a version ended `compat table` and `recommend` in exit 70; markup in a report reached
COMPATIBILITY.md as markup. Now a report counts only as the records it cites show it, and what
cannot be read is named and left out. Every report here is a TEST INPUT made from the project's
real reports and probe records (results/bisect/), changed as an attacker would."""

import json
import shutil
import uuid

import pytest

from conftest import ROOT

REAL = "bisect-20261126T061911Z-a246de"  # bitsandbytes on this project's CPU, 2026-11-26


@pytest.fixture
def results(tmp_path):
    """A copy of the published results folder (records, bisections; no logs)."""
    folder = tmp_path / "results"
    folder.mkdir()
    shutil.copy(ROOT / "results" / "records.jsonl", folder)
    shutil.copytree(ROOT / "results" / "bisect", folder / "bisect", ignore=shutil.ignore_patterns("logs"))
    return folder


def answers(compat, results) -> dict:
    """What compat publishes and answers from a results folder: the table, the page, recommend."""
    assert compat("table", "--results", str(results)).returncode == 0
    out = {name: (results / name).read_bytes() for name in ("COMPATIBILITY.md", "index.html")}
    for gpu, method in (("H100", "lora"), ("H100", "qlora"), ("A100", "full")):
        proc = compat("recommend", "--gpu", gpu, "--method", method, "--results", str(results), "--format", "json")
        assert proc.returncode == 0, proc.stderr
        out[f"recommend {gpu} {method}"] = proc.stdout
    return out


def forged_sm90_report() -> dict:
    """The issue's forgery: transformers 4.40.2 good and 4.41.0 bad on sm_90, citing records
    that do not exist."""
    return {
        "id": "bisect-20261127T000000Z-f0f0f0",
        "cell": "sm_90-hf2026-bf16-none-lora-single",
        "package": "transformers",
        "base_stack": "hf2026",
        "releases": ["4.40.2", "4.41.0"],
        "probes": [
            {"version": "4.41.0", "outcome": "fail", "signature": "x", "verdict": "bad", "record": uuid.uuid4().hex},
            {"version": "4.40.2", "outcome": "pass", "signature": "", "verdict": "good", "record": uuid.uuid4().hex},
        ],
    }


def test_a_report_citing_records_that_do_not_exist_changes_nothing(compat, results):
    clean = answers(compat, results)
    path = results / "bisect" / "bisect-20261127T000000Z-f0f0f0.json"
    path.write_text(json.dumps(forged_sm90_report()))
    assert answers(compat, results) == clean
    proc = compat("recommend", "--gpu", "H100", "--method", "lora", "--results", str(results))
    assert f"{path}: not a bisection report compat can read (probe 4.41.0: record" in proc.stderr
    assert "is not among the bisection records beside it" in proc.stderr


@pytest.mark.parametrize(
    "change, why",
    [
        (lambda d: d["probes"].__setitem__(0, {**d["probes"][0], "verdict": "good"}), "its records say bad"),
        (lambda d: d.update(releases=[{"nested": [[[[[[[[[1]]]]]]]]]}]), "nested deeper than 8"),
        (lambda d: d.update(releases=["not-a-version"]), "must match pattern"),
        (lambda d: d.update(releases=["1.0.0.dev0.x"]), "release '1.0.0.dev0.x' is not a version"),
        (lambda d: d.update(id="bisect-20991127T000000Z-a246de"), "is not its file's name"),
        (lambda d: d.update(package="transformers"), "was made by another bisection or of another release"),
        (lambda d: d["probes"][0].update(record=d["probes"][1]["record"]), "was made by another bisection"),
    ],
    ids=["verdict", "nested", "release-pattern", "release", "id", "package", "record"],
)
def test_a_real_report_changed_is_left_out_and_named(compat, results, change, why):
    """The real report changed in one place: each is named and left out, and nothing compat publishes
    or answers moves (the real report's boundary stays out of it: it is read again unchanged)."""
    path = results / "bisect" / f"{REAL}.json"
    clean = answers(compat, results)
    doc = json.loads(path.read_text())
    change(doc)
    path.write_text(json.dumps(doc))
    proc = compat("table", "--results", str(results))
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    assert f"{path}: not a bisection report compat can read" in proc.stderr and why in proc.stderr, proc.stderr
    left_out = answers(compat, results)
    assert left_out["COMPATIBILITY.md"] != clean["COMPATIBILITY.md"]  # the real boundary, its report gone
    shutil.copy(ROOT / "results" / "bisect" / f"{REAL}.json", path)
    assert answers(compat, results) == clean


def test_a_report_too_large_or_not_json_is_named_not_read(compat, results):
    big = results / "bisect" / "bisect-20261127T000000Z-000001.json"
    big.write_text(json.dumps(dict(forged_sm90_report(), id=big.stem, notes=["x" * 4000] * 400)))
    bad = results / "bisect" / "bisect-20261127T000000Z-000002.json"
    bad.write_bytes(b"[" * 100_000)
    proc = compat("table", "--results", str(results))
    assert proc.returncode == 0, proc.stderr
    assert f"{big}: not a bisection report compat can read (is larger than 1 MiB" in proc.stderr
    assert f"{bad}: not a bisection report compat can read (not JSON" in proc.stderr


def test_markup_in_a_report_and_its_records_is_text_in_the_table(compat, results):
    """A report its records bear out (the real one, with its records' error signature made
    markup in both): shown, as text."""
    markup = "<img src=x onerror=alert(1)> [link](https://evil.example) | ## heading"
    probes = results / "bisect" / "records.jsonl"
    lines = []
    for line in probes.read_text().splitlines():
        rec = json.loads(line)
        if rec["bisect"]["id"] == REAL and rec["outcome"] == "fail":
            rec["error"]["signature"] = markup
        lines.append(json.dumps(rec))
    probes.write_text("\n".join(lines) + "\n")
    path = results / "bisect" / f"{REAL}.json"
    doc = json.loads(path.read_text())
    for p in doc["probes"]:
        if p["outcome"] == "fail":
            p["signature"] = markup
    path.write_text(json.dumps(doc))
    assert compat("table", "--results", str(results)).returncode == 0
    row = next(
        line for line in (results / "COMPATIBILITY.md").read_text().splitlines() if REAL in line and "0.49.0" in line
    )
    assert "&lt;img src=x onerror=alert(1)&gt;" in row and "<img" not in row
    assert "\\[link\\](https&#58;//evil.example) \\| ## heading" in row
