"""Evidence says who measured it (issue 41, finding 6): recommend's evidence for a method cites
records of that method ("passed qlora cells on sm_90" cited LoRA records), and a contributed
record is "measured by runner X (merged)" in recommend, the table and the page (one consistent
sm_80 forgery turned `recommend --gpu A100` into measured with no word of who measured it). The
records are the project's real ones; the A100 record is a TEST INPUT made from a real sm_90 one."""

import copy
import json

from test_records import H100

from harness.evidence import records

from conftest import ROOT, real_records


def recommend(compat, *args) -> dict:
    proc = compat("recommend", *args, "--format", "json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_recommends_evidence_for_a_method_cites_records_of_that_method(compat):
    by_id = {r["id"]: r for r in real_records(10_000)}
    rec = recommend(compat, "--gpu", "H100", "--method", "qlora")
    measured = [e for e in rec["evidence"] if e["kind"] == "measured" and e["about"].startswith("packages.")]
    assert measured
    for e in measured:
        if "bisect" in e["says"]:
            continue
        for rid in e["records"]:
            axes = by_id[rid]["axes"]
            assert axes["method"] == "lora" and axes["quantization"] != "none", (e["says"], rid, axes)
        assert e["measured_by"] == ["by runner lent-NVIDIA-H200 (merged)"], e


def test_a_contributed_record_is_measured_by_its_runner_in_recommend_the_table_and_the_page(compat, tmp_path):
    real = copy.deepcopy(
        next(r for r in real_records(10_000) if r["axes"]["hardware"] == "sm_90" and r["outcome"] == "pass")
    )
    a100 = dict(H100, name="NVIDIA A100-SXM4-80GB", compute_capability="8.0", arch="sm_80")
    real["axes"]["hardware"] = "sm_80"
    real["cell"] = "sm_80" + real["cell"][len("sm_90") :]
    real["fingerprint"]["hardware"]["gpus"] = [a100]
    real["id"] = "f" * 32
    real["runner"] = {"name": "a100-contributor"}
    real.pop("provenance", None)
    path = tmp_path / "a100.jsonl"
    path.write_text(json.dumps(real) + "\n")
    results = tmp_path / "results"
    results.mkdir()
    (results / "records.jsonl").write_bytes((ROOT / "results" / "records.jsonl").read_bytes())
    proc = compat("merge", str(path), "--into", str(results))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rec = recommend(compat, "--gpu", "A100", "--results", str(results))
    on_card = [e for e in rec["evidence"] if e["kind"] == "measured" and e.get("hardware") == "sm_80"]
    assert on_card and all(e["measured_by"] == ["by runner a100-contributor (merged)"] for e in on_card)
    text = compat("recommend", "--gpu", "A100", "--results", str(results)).stdout
    assert "measured by runner a100-contributor (merged)" in text
    table = (results / "COMPATIBILITY.md").read_text()
    row = next(line for line in table.splitlines() if line.startswith(f"| `{real['cell']}` |"))
    assert "`ffffffffffff` a100-contributor (merged)" in row
    page = (results / "index.html").read_text()
    assert '"measured":"by runner a100-contributor (merged)"' in page
    (stored,) = [r for r in records.read_records([results / "records.jsonl"])[0] if r["id"] == real["id"]]
    assert stored["provenance"][0]["file"] == "a100.jsonl"
