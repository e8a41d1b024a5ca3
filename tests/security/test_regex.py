"""Near-miss text cannot make a signature run for minutes (issue 18, finding 4): every signature of
the known-issue base is searched, through `compat explain`, in long text built to nearly match it,
and the inputs the finding reproduced are fed as they were. The subprocess time limits here are
guards against a hang (the backtracking engine took from 12 s to over 300 s on these), not speed
targets: the run takes a second or two."""

import json
import subprocess
import sys

from harness.catalog.known_issues import KnownIssues, clean
from harness.evidence import summary

from conftest import ROOT, run_compat

KNOWN = KnownIssues.load(ROOT / "matrix")


def explain(text: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return run_compat("explain", "-", "--format", "json", input=text, timeout=timeout)


def near_miss(issue) -> str:
    """For each signature: the text it matches in its own example with the last character
    changed, repeated on lines with trailing spaces to about 200 KB, and once as one long line."""
    example = clean(issue.example)
    parts = []
    for sig in issue.signatures:
        m = sig.search(example)
        hit = m.group(0) if m else example.strip().splitlines()[-1]
        almost = hit[:-1] + ("#" if hit[-1:] != "#" else "%")
        parts.append((almost + " " * 40 + "\n") * max(1, 200_000 // (len(almost) + 41)))
        parts.append(almost * max(1, 200_000 // max(1, len(almost))) + "\n")
    return "".join(parts)


def test_every_signature_on_its_own_near_miss_text_answers_at_once():
    texts = {issue.id: near_miss(issue) for issue in KNOWN.issues}
    script = (
        "import json, sys; sys.path.insert(0, %r)\n"
        "from pathlib import Path\n"
        "from harness.catalog.known_issues import KnownIssues\n"
        "k = KnownIssues.load(Path(%r) / 'matrix')\n"
        "texts = json.load(sys.stdin)\n"
        "print(json.dumps({i: [m.issue.id for m in k.explain(t)] for i, t in texts.items()}))\n"
    ) % (str(ROOT), str(ROOT))
    proc = subprocess.run(
        [sys.executable, "-c", script], input=json.dumps(texts), capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    found = json.loads(proc.stdout)
    assert set(found) == {i.id for i in KNOWN.issues}


def test_the_inputs_the_finding_reproduced_answer_at_once():
    cases = {
        "1 MB of is_bf16_supported() and spaces": "is_bf16_supported()" + " " * 1_000_000 + "\n",
        "repeated Found GPU lines": "Found GPU0 NVIDIA A100 which is of cuda capability 8.0 " * 2000 + "\n" * 3,
        "size mismatch lines": (
            "size mismatch for base_model.model.layers.0.self_attn.q_proj.lora_A.default.weight: "
            "copying a param with shape torch.Size([0]) from checkpoint, " * 500 + "\n"
        )
        * 20,
    }
    for what, text in cases.items():
        proc = explain(text)
        assert proc.returncode == 0, (what, proc.stderr[-1000:])
        json.loads(proc.stdout)


def test_a_record_message_past_the_schema_bound_is_refused_and_a_long_one_renders(tmp_path):
    from harness.evidence import records

    from conftest import real_records

    rec = dict(real_records(1)[0], outcome="fail", losses=None)
    rec["error"] = {
        "type": "RuntimeError",
        "message": "is_bf16_supported()" + " " * 150_000,
        "signature": "x",
        "excerpt": "x",
    }
    assert "message" in records.validate(rec)  # 150 KB: more than any error message a cell records
    rec["error"]["message"] = "is_bf16_supported()" + " " * 19_000
    assert records.validate(rec) is None
    assert summary.issues_shown(KNOWN, rec) == []
