"""Splitting a grid across runners (--shard I/N) and JUnit XML for CI dashboards."""

import json
import xml.etree.ElementTree as ET

import pytest

from harness.catalog.matrix import MatrixData, load_matrix
from harness.commands.common import shard
from harness.run import junit

from conftest import ROOT, call_compat

CELLS = load_matrix(ROOT / "matrix" / "cpu.toml", MatrixData.load(ROOT / "matrix")).cells


@pytest.mark.parametrize("n", [1, 2, 3, 7, 40, 41])
def test_shards_cover_the_grid_exactly_once_and_evenly(n):
    shares = [shard(list(CELLS), i, n) for i in range(1, n + 1)]
    ids = [c.id for s in shares for c in s]
    assert sorted(ids) == sorted(c.id for c in CELLS)  # every cell, none twice
    sizes = [len(s) for s in shares]
    assert max(sizes) - min(sizes) <= 1
    # the same share whatever order the cells come in (every runner expands the grid alike), in
    # the order the plan has them ([[first]] cells first)
    backwards = shard(list(reversed(CELLS)), 1, n)
    assert {c.id for c in backwards} == {c.id for c in shares[0]}
    assert [c.id for c in backwards] == [c.id for c in reversed(CELLS) if c in backwards]


def test_shard_from_the_cli_one_half_and_the_other():
    halves = []
    for i in (1, 2):
        proc = call_compat("list", "--matrix", "matrix/cpu.toml", "--shard", f"{i}/2", "--json")
        assert proc.returncode == 0, proc.stderr
        halves.append({c["id"] for c in json.loads(proc.stdout)})
    assert not halves[0] & halves[1]
    assert halves[0] | halves[1] == {c.id for c in CELLS}


@pytest.mark.parametrize("bad", ["0/2", "3/2", "x", "1/0", "1-2"])
def test_a_bad_shard_is_a_clear_error(bad):
    proc = call_compat("list", "--shard", bad)
    assert proc.returncode == 2 and "--shard" in proc.stderr and "Traceback" not in proc.stderr


def record(cell, outcome, **extra):
    return {
        "id": cell.replace("-", "") + "0" * 8,
        "cell": cell,
        "outcome": outcome,
        "duration_s": 2.5,
        "axes": {"hardware": "cpu", "stack": "local"},
        "log": f"logs/{cell}.log",
        **extra,
    }


def test_junit_has_one_case_per_cell_with_the_outcome_as_junit_sees_it(tmp_path):
    recs = [
        record("cpu-local-fp32-none-full-single", "pass"),
        record(
            "cpu-local-fp32-none-lora-single",
            "fail",
            error={"signature": "ValueError: <script>alert(1)</script>", "excerpt": "Traceback ...\x1b[31m\x00boom"},
            known_issues=["some-issue"],
        ),
        record(
            "sm_90-local-bf16-none-full-ddp-r2", "unsupported", reason="needs 2 sm_90 cards; this host has no CUDA GPU"
        ),
        record(
            "cpu-local-bf16-none-full-single",
            "infra",
            error={"signature": "NoResult: no result file", "excerpt": "tail"},
        ),
    ]
    path = tmp_path / "out" / "junit.xml"
    junit.write(path, recs, "compat run test")
    root = ET.parse(path).getroot()
    (suite,) = root.findall("testsuite")
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors"), suite.get("skipped")) == (
        "4",
        "1",
        "1",
        "1",
    )
    cases = {c.get("name"): c for c in suite.findall("testcase")}
    assert list(cases) == [r["cell"] for r in recs]
    assert [child.tag for child in cases["cpu-local-fp32-none-full-single"]] == ["system-out"]
    failure = cases["cpu-local-fp32-none-lora-single"].find("failure")
    assert failure.get("type") == "fail"
    # escaped, read back intact
    assert failure.get("message") == "ValueError: <script>alert(1)</script> (known issue: some-issue)"
    assert "\x00" not in failure.text and "boom" in failure.text
    assert cases["sm_90-local-bf16-none-full-ddp-r2"].find("skipped").get("message").startswith("needs 2 sm_90 cards")
    assert cases["cpu-local-bf16-none-full-single"].find("error").get("type") == "infra"
    assert cases["cpu-local-fp32-none-full-single"].get("time") == "2.500"
    assert cases["cpu-local-fp32-none-full-single"].get("classname") == "compat.cpu.local"

    # and as JUnit tooling reads it (junitparser: the reader CI report actions use for pytest's XML)
    from junitparser import Error, Failure, JUnitXml, Skipped

    (parsed,) = JUnitXml.fromfile(str(path))
    assert (parsed.tests, parsed.failures, parsed.errors, parsed.skipped) == (4, 1, 1, 1)
    kinds = {case.name: [type(r) for r in case.result] for case in parsed}
    assert kinds == {
        "cpu-local-fp32-none-full-single": [],
        "cpu-local-fp32-none-lora-single": [Failure],
        "sm_90-local-bf16-none-full-ddp-r2": [Skipped],
        "cpu-local-bf16-none-full-single": [Error],
    }
