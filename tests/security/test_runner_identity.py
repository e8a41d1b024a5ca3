"""A runner's own records are its own (issue 41, findings 2-5): a runner is known by its key, not
the name in a record. A merged record naming a runner already in the folder (unsigned, or signed
by another key) is refused, so it cannot flip that runner's row; a record is signed over its
content, so a changed one is refused; dates are UTC as compat writes them; compat's own labels are
not runner names; a copy of a run under a new id is refused; and this runner's loss reference
reads only the records its key signed here. Every hostile record is a TEST INPUT made from one of
the project's real records, changed as an attacker would."""

import copy
import json
import uuid

import pytest
import test_records
from test_records import answers, compat, variant

from harness.evidence import signature

from conftest import ROOT, real_records

results = test_records.results  # the fixture: a copy of the published results folder


def gpu_pass() -> dict:
    """A real sm_90 pass, merged from a lent H200 (2026-11-26)."""
    rec = next(r for r in real_records(10_000) if r["axes"]["hardware"] == "sm_90" and r["outcome"] == "pass")
    return copy.deepcopy(rec)


def flipped(rec: dict, **changes) -> dict:
    """The record as a forger sends it: a new id, failed, a day later, no provenance."""
    out = variant(
        rec,
        outcome="fail",
        losses=None,
        finished_at="2026-11-27T12:00:00+00:00",
        error={"type": "RuntimeError", "message": "boom", "signature": "RuntimeError: boom", "excerpt": "boom"},
    )
    out.pop("provenance", None)
    out.update(changes)
    return out


def merge_one(results, tmp_path, rec) -> str:
    path = tmp_path / f"{uuid.uuid4().hex[:6]}.jsonl"
    path.write_text(json.dumps(rec) + "\n")
    proc = compat("merge", str(path), "--into", str(results))
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, (proc.stdout, proc.stderr)
    return proc.stdout + proc.stderr


def test_a_record_naming_another_runner_is_refused_and_changes_nothing(results, tmp_path):
    """Finding 4: a merged record naming the lent H200 flipped its sm_90 row from pass to fail, no
    conflict shown. Unsigned, or signed by a key of the forger's own: refused; everything compat
    publishes and answers stays as it was."""
    clean = answers(results)
    real = gpu_pass()
    unsigned = flipped(real)
    forger = signature.RunnerKey.load({"COMPAT_RUNNER_KEY": str(tmp_path / "forger-key")})
    signed = forger.signed(flipped(real))
    for rec in (unsigned, signed):
        out = merge_one(results, tmp_path, rec)
        assert f"runner {real['runner']['name']!r} has records here vouched for by file " in out
    assert answers(results) == clean


def test_a_signed_record_changed_after_signing_is_refused(results, tmp_path):
    key = signature.RunnerKey.load({"COMPAT_RUNNER_KEY": str(tmp_path / "key")})
    rec = key.signed(variant(gpu_pass(), runner={"name": "contributor-box"}))
    rec.pop("provenance", None)
    rec = key.signed(rec)
    rec["losses"] = {k: v + 1.0 if isinstance(v, float) else v for k, v in rec["losses"].items()}
    clean = answers(results)
    assert "its signature does not match its content" in merge_one(results, tmp_path, rec)
    assert answers(results) == clean


@pytest.mark.parametrize(
    "changes, why",
    [
        ({"finished_at": "2026-11-29T20:00:00+23:59"}, "is not in UTC (+00:00)"),
        ({"finished_at": "2099-01-01T00:00:00+00:00"}, "is in the future"),
        ({"runner": {"name": "lent-NVIDIA-H200 (merged)"}}, "is a label compat writes"),
        ({"runner": {"name": "from records.jsonl"}}, "is a label compat writes"),
    ],
    ids=["offset", "future", "merged-label", "from-label"],
)
def test_dates_ahead_and_compats_own_labels_are_refused(results, tmp_path, changes, why):
    """Finding 4: dates were compared as text, so a +23:59 offset passed the future check and the
    summary read "tested ... to" a day that had not come; a runner could call itself "(merged)"."""
    clean = answers(results)
    rec = variant(real_records(1000)[-1], **{"runner": {"name": "contributor-box"}, **changes})
    rec.pop("provenance", None)
    assert why in merge_one(results, tmp_path, rec)
    assert answers(results) == clean


def test_a_copy_of_a_run_under_a_new_id_is_refused(results, tmp_path):
    """Finding 5: a byte copy of a record under a new id was accepted (one run counted twice)."""
    real = real_records(1000)[-1]
    copied = dict(real, id=uuid.uuid4().hex, runner={"name": "contributor-box"})
    copied.pop("provenance", None)
    clean = answers(results)
    assert f"a copy of record {real['id']}" in merge_one(results, tmp_path, copied)
    assert answers(results) == clean


def test_a_merged_reference_record_never_becomes_this_runners_loss_reference(tmp_path):
    """Finding 2: a merged reference-stack record (another runner's name, every loss +1.0) became
    the reference this host's next run was held to. The real pair: hf2026's full fp32 CPU cell
    and hf2023's, which agree (results/, 2026-11-26); this runner's own reference record is the
    real one, signed by this test's key."""
    from harness.catalog.matrix import MatrixData
    from harness.commands.run import _agreement

    recs = {r["id"]: r for r in real_records(10_000)}
    theirs = copy.deepcopy(recs["4ee0ec61aa8647c19c6848166ca4c059"])  # cpu-hf2023-fp32-none-full-single
    reference = copy.deepcopy(recs[theirs["agreement"]["reference_record"]])  # its hf2026 record
    key = signature.RunnerKey.load()  # the key compat run uses here (conftest: the tests' own)
    results = tmp_path / "results"
    results.mkdir()
    (results / "records.jsonl").write_text(json.dumps(key.signed(copy.deepcopy(reference))) + "\n")
    data = MatrixData.load(ROOT / "matrix")

    def judged() -> dict:
        rec = copy.deepcopy(theirs)
        rec.pop("agreement")
        _agreement(data, results).judge(rec)
        return rec["agreement"]

    clean = judged()
    assert clean["status"] == "agrees" and clean["reference_record"] == reference["id"]
    forged = variant(reference, runner={"name": "lent-NVIDIA-H200"}, finished_at="2026-11-27T00:00:00+00:00")
    forged["losses"]["steps"] = [x + 1.0 for x in forged["losses"]["steps"]]
    forged["provenance"] = [
        {"file": "records.jsonl", "line": 1, "sha256": "0" * 64, "merged_at": "2026-11-27T00:00:00+00:00"}
    ]
    with open(results / "records.jsonl", "a") as f:
        f.write(json.dumps(forged) + "\n")
    assert judged() == clean


def test_a_fingerprint_that_is_not_of_its_cell_is_refused_whatever_the_outcome(results, tmp_path):
    """Finding 5: the GPU check was skipped for `unsupported` and `install-error` records (an sm_90
    install-error with a CPU fingerprint was stored and shown as a failure), and a T4's name
    labelled sm_90 passed."""
    clean = answers(results)
    real = gpu_pass()
    cpu_fp = real_records(1000)[-1]["fingerprint"]
    t4 = {**real["fingerprint"]["hardware"]["gpus"][0], "name": "Tesla T4"}
    cases = [
        (
            variant(real, outcome="install-error", losses=None, memory=[], fingerprint=cpu_fp),
            "a sm_90 cell whose fingerprint names no sm_90 card",
        ),
        (
            variant(
                real, fingerprint={**real["fingerprint"], "hardware": {**real["fingerprint"]["hardware"], "gpus": [t4]}}
            ),
            "card 'Tesla T4' is sm_75 (matrix/gpus.toml), not sm_90",
        ),
        (
            variant(
                real,
                outcome="unsupported",
                losses=None,
                fingerprint={**real["fingerprint"], "hardware": {**real["fingerprint"]["hardware"], "gpus": [t4]}},
            ),
            "card 'Tesla T4' is sm_75",
        ),
    ]
    for rec, why in cases:
        rec.pop("provenance", None)
        rec["runner"] = {"name": "contributor-box"}
        assert why in merge_one(results, tmp_path, rec)
    assert answers(results) == clean


def test_a_contributed_agreement_verdict_is_judged_again_from_the_losses(results, tmp_path):
    """Finding 5: a contributed record's `agreement` was stored as claimed: three times the
    reference's losses counted as "agrees". Now compat merge judges it again from the losses,
    against the reference stack's record the same runner sent. TEST INPUT: the real hf2026 and
    hf2023 full fp32 CPU records that agree (2026-11-26), sent again an hour later by another
    runner, the hf2023 one with every loss tripled and its claim left as "agrees"."""
    import datetime as dt

    recs = {r["id"]: r for r in real_records(10_000)}
    theirs = recs["4ee0ec61aa8647c19c6848166ca4c059"]
    reference = recs[theirs["agreement"]["reference_record"]]

    def later(rec: dict) -> dict:
        out = variant(rec, runner={"name": "contributor-box"})
        out.pop("provenance", None)
        for k in ("started_at", "finished_at"):
            out[k] = (dt.datetime.fromisoformat(rec[k]) + dt.timedelta(hours=1)).isoformat()
        return out

    tripled = later(theirs)
    tripled["losses"] = {
        k: [x * 3 for x in v] if k == "steps" else v * 3 if isinstance(v, float) else v
        for k, v in tripled["losses"].items()
    }
    assert tripled["agreement"]["status"] == "agrees"
    alone = later(theirs)  # claims "agrees" with no reference record sent beside it
    alone["started_at"] = alone["finished_at"]  # another run of the same cell
    path = tmp_path / "contributed.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in (alone, later(reference), tripled)))
    proc = compat("merge", str(path), "--into", str(results), "--no-table")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    stored = {r["id"]: r for r in map(json.loads, (results / "records.jsonl").read_text().splitlines())}
    judged = stored[tripled["id"]]
    assert judged["agreement"]["status"] == "differs" and "trains_differently" in judged["flags"]
    assert stored[alone["id"]]["agreement"]["status"] == "not-compared"
