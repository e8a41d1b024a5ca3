"""The GitHub Actions templates (the GPU grid on self-hosted runners; the review of pull requests
that touch results/): valid YAML, valid against GitHub's workflow schema (vendored in
check-jsonschema, no network), and wired the way the README says."""

import subprocess
import sys
from pathlib import Path

import yaml

from conftest import ROOT

WORKFLOW = ROOT / ".ci" / "github-actions" / "gpu-matrix.yml"


def check_workflow(path):
    return subprocess.run(
        [sys.executable, "-m", "check_jsonschema", "--builtin-schema", "vendor.github-workflows", str(path)],
        capture_output=True,
        text=True,
    )


def test_the_template_is_a_valid_github_workflow():
    proc = check_workflow(WORKFLOW)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_the_schema_check_rejects_a_broken_workflow(tmp_path):
    broken = tmp_path / "broken.yml"
    doc = yaml.safe_load(WORKFLOW.read_text())
    del doc["jobs"]["gpu"]["runs-on"]
    broken.write_text(yaml.safe_dump(doc))
    proc = check_workflow(broken)
    assert proc.returncode == 1 and "'runs-on' is a required property" in proc.stdout


def test_a_job_per_runner_label_runs_the_gpu_matrix_and_a_job_merges_and_publishes():
    doc = yaml.safe_load(WORKFLOW.read_text())
    gpu, publish = doc["jobs"]["gpu"], doc["jobs"]["publish"]
    labels = gpu["strategy"]["matrix"]["runner"]
    assert labels and all(label.startswith("gpu-") for label in labels)
    assert gpu["runs-on"][0] == "self-hosted" and "${{ matrix.runner }}" in gpu["runs-on"]
    assert gpu["strategy"]["fail-fast"] is False
    assert gpu["env"]["COMPAT_RUNNER_NAME"] == "${{ matrix.runner }}"
    runs = [s.get("run", "") for s in gpu["steps"]]
    assert any(r.startswith("python3 -m tox -e gpu-matrix -- --results incoming") for r in runs)
    uploads = [s for s in gpu["steps"] if s.get("uses", "").startswith("actions/upload-artifact@")]
    assert {u["with"]["name"] for u in uploads} == {"records-${{ matrix.runner }}", "junit-${{ matrix.runner }}"}
    assert all(u["if"] == "always()" for u in uploads)

    assert publish["needs"] == "gpu" and publish["if"] == "always()"
    merge_step = next(s for s in publish["steps"] if "compat merge" in s.get("run", ""))
    assert 'compat merge "${files[@]}" --into results' in merge_step["run"]
    download = next(s for s in publish["steps"] if s.get("uses", "").startswith("actions/download-artifact@"))
    assert download["with"] == {"pattern": "records-*", "path": "incoming"}
    assert any(s.get("uses", "").startswith("actions/deploy-pages@") for s in publish["steps"])


def test_tox_gpu_matrix_writes_junit_where_the_workflow_collects_it():
    tox = (ROOT / "tox.ini").read_text()
    section = tox.split("[testenv:gpu-matrix]")[1].split("\n[")[0]
    commands = [line.strip() for line in section.splitlines() if line.strip().startswith("compat run")]
    assert len(commands) == 1
    assert all("--junit {env:COMPAT_JUNIT_DIR:{envtmpdir}}/" in c and c.endswith("{posargs}") for c in commands)
    assert "COMPAT_*" in section and "GITHUB_*" in section and "RUNNER_NAME" in section


def test_the_gpu_and_cpu_main_jobs_are_one_compat_run_each():
    """tox's gpu-matrix and cpu-matrix envs run every grid of theirs in one `compat run`, so one
    grid's exit code cannot stop the others; the GPU glob takes every GPU grid (not gpus.toml)."""
    import configparser

    from harness.commands.common import matrix_paths
    from harness.run.hardware import Host

    tox = configparser.ConfigParser(interpolation=None)
    tox.read(ROOT / "tox.ini")
    for env, grids in (
        ("gpu-matrix", ["matrix/gpu*.toml"]),
        (
            "cpu-matrix",
            ["matrix/cpu.toml", "matrix/cpu-dist.toml", "matrix/cpu-quant.toml", "matrix/cpu-qlora-dist.toml"],
        ),
    ):
        commands = [c for c in tox[f"testenv:{env}"]["commands"].splitlines() if c.strip()]
        assert len(commands) == 1 and commands[0].split()[:2] == ["compat", "run"], commands
        assert [w.strip("'\"") for w in commands[0].split() if w.strip("'\"").startswith("matrix/")] == grids
    gpu_grids = matrix_paths([str(ROOT / "matrix" / "gpu*.toml")], ROOT, Host("cpu", (), None, None, ""))
    assert [p.name for p in gpu_grids] == [
        "gpu-alloc.toml",
        "gpu-bnb.toml",
        "gpu-dist.toml",
        "gpu-quant.toml",
        "gpu-size-alloc.toml",
        "gpu-size-dist.toml",
        "gpu-size-quant.toml",
        "gpu-size.toml",
        "gpu-versions.toml",
        "gpu.toml",
    ]


def test_a_gpu_runner_hands_its_nccl_settings_to_cells_and_runs_a_grid_in_ten_minute_steps():
    """NCCL_* / TORCH_NCCL_* (the interface or P2P setting a host needs so 2-card cells do not
    hang) reach the cells through tox; no GPU cell may hold a step of `--stop-after` past ten
    minutes (its time limit plus the step's budget)."""
    import tomllib

    section = (ROOT / "tox.ini").read_text().split("[testenv:gpu-matrix]")[1].split("\n[")[0]
    pass_env = next(line for line in section.splitlines() if line.startswith("pass_env"))
    assert "NCCL_*" in pass_env and "TORCH_NCCL_*" in pass_env and "CUDA_*" in pass_env
    for path in sorted((ROOT / "matrix").glob("gpu*.toml")):
        doc = tomllib.loads(path.read_text())
        if "product" in doc:
            assert doc["settings"]["timeout_s"] <= 300, path.name


REVIEW = ROOT / ".ci" / "github-actions" / "review-records.yml"


def test_the_review_template_is_a_valid_workflow_run_on_pull_requests_with_the_base_branchs_code():
    proc = check_workflow(REVIEW)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    doc = yaml.safe_load(REVIEW.read_text())
    assert doc[True]["pull_request"]["paths"] == ["results/**"]  # YAML reads the key `on` as true
    assert doc["permissions"] == {"contents": "read"}
    steps = doc["jobs"]["review"]["steps"]
    checkouts = [s["with"] for s in steps if s.get("uses", "").startswith("actions/checkout@")]
    assert [(c["ref"], c["path"]) for c in checkouts] == [
        ("${{ github.event.pull_request.base.sha }}", "base"),
        ("${{ github.event.pull_request.head.sha }}", "pr"),
    ]
    assert any(s.get("run") == "python -m pip install ./base" for s in steps)


def _review_step(tmp_path, pr_lines: list[str], more: dict | None = None) -> subprocess.CompletedProcess:
    """The template's review step, run by bash as the runner would, in base/ (this checkout's
    matrix and a copy of its real records and bisections) with the pull request's records in
    pr/results/, and `more` (path under results/ -> bytes) added by the pull request."""
    import os
    import shutil

    doc = yaml.safe_load(REVIEW.read_text())
    step = next(s for s in doc["jobs"]["review"]["steps"] if s.get("working-directory") == "base")
    base, pr = tmp_path / "base", tmp_path / "pr"
    base.mkdir(parents=True)
    (base / "matrix").symlink_to(ROOT / "matrix")
    for side in (base, pr):
        (side / "results").mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / "results" / "records.jsonl", side / "results" / "records.jsonl")
        shutil.copytree(ROOT / "results" / "bisect", side / "results" / "bisect", ignore=shutil.ignore_patterns("logs"))
    (pr / "results" / "records.jsonl").write_text("".join(line + "\n" for line in pr_lines))
    for name, data in (more or {}).items():
        (pr / "results" / name).parent.mkdir(parents=True, exist_ok=True)
        (pr / "results" / name).write_bytes(data)
    env = dict(
        os.environ,
        GITHUB_STEP_SUMMARY=str(tmp_path / "summary.md"),
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
    )
    env.pop("COMPAT_HOME", None)
    return subprocess.run(
        ["bash", "-e", "-c", step["run"]], cwd=base, env=env, capture_output=True, text=True, timeout=300
    )


def test_the_review_step_passes_added_records_and_fails_removed_or_refused_ones(tmp_path):
    """TEST INPUT: the project's real records, one of them sent again with a new id and another
    runner's name (a plausible contribution), one with a run id that is a path (refused)."""
    import json
    import uuid

    published = [line for line in (ROOT / "results" / "records.jsonl").read_text().splitlines() if line.strip()]
    rec = json.loads(published[0])
    merged = [{"file": "records.jsonl", "line": 1, "sha256": "0" * 64, "merged_at": "2026-11-27T00:00:00+00:00"}]
    later = {k: rec[k][:17] + "59" + rec[k][19:] for k in ("started_at", "finished_at")}  # another run, not a copy
    from harness.commands.common import rejudge

    # as compat merge writes it: its provenance, and compat's verdict on its losses
    added = json.dumps(
        rejudge()(dict(rec, id=uuid.uuid4().hex, runner={"name": "contributor-box"}, provenance=merged, **later))
    )
    hostile = json.dumps(dict(rec, id=uuid.uuid4().hex, run_id="../../../../tmp/x", provenance=merged))

    ok = _review_step(tmp_path / "ok", published + [added])
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "1 record(s) would be added" in ok.stdout and "```" in (tmp_path / "ok" / "summary.md").read_text()

    removed = _review_step(tmp_path / "removed", published[1:] + [added])
    assert (
        removed.returncode == 1
        and "::error file=results/records.jsonl::1 published record line(s) removed or edited" in removed.stdout
    )

    refused = _review_step(tmp_path / "refused", published + [hostile])
    assert refused.returncode == 1
    assert f"refused ../pr/results/records.jsonl:{len(published) + 1}: run_id must match pattern" in refused.stdout


def test_the_review_step_reviews_every_file_a_pull_request_adds_under_results(tmp_path):
    """Issue 41: a record line added to the published file without the provenance compat merge
    writes (it would read as made here), a bisection report citing records that do not exist, a
    file no results folder holds, a hand-edited table, a link: each refused. TEST INPUT: the real
    records and the real report bisect-20261126T061911Z-a246de, its probes' record ids replaced."""
    import json
    import os
    import uuid

    published = [line for line in (ROOT / "results" / "records.jsonl").read_text().splitlines() if line.strip()]
    bare = json.dumps(dict(json.loads(published[0]), id=uuid.uuid4().hex, runner={"name": "contributor-box"}))
    report = json.loads((ROOT / "results" / "bisect" / "bisect-20261126T061911Z-a246de.json").read_text())
    for p in report["probes"]:
        p["record"] = uuid.uuid4().hex
    forged = {
        "bisect/bisect-20261127T000000Z-abcdef.json": json.dumps(dict(report, id="bisect-20261127T000000Z-abcdef"))
    }
    for name, more, expected in (
        ("bare", {}, "without its provenance: records join a results folder through compat merge"),
        ("report", {k: v.encode() for k, v in forged.items()}, "is not among the bisection records beside it"),
        ("odd", {"notes.txt": b"hello"}, "notes.txt: not a file of a results folder compat knows"),
        ("table", {"COMPATIBILITY.md": b"# all pass\n"}, "COMPATIBILITY.md: not what `compat table` makes"),
    ):
        proc = _review_step(tmp_path / name, published + ([bare] if name == "bare" else []), more)
        assert proc.returncode == 1 and expected in proc.stdout, (name, proc.stdout + proc.stderr)
    (tmp_path / "link" / "pr" / "results").mkdir(parents=True)
    os.symlink("/etc/hostname", tmp_path / "link" / "pr" / "results" / "x.jsonl")
    proc = _review_step(tmp_path / "link", published)
    assert proc.returncode == 1 and "results/x.jsonl::not a plain file" in proc.stdout, proc.stdout + proc.stderr


RELEASE = ROOT / ".ci" / "github-actions" / "release.yml"


def test_the_release_template_builds_checks_and_publishes_with_trusted_publishing_only():
    proc = check_workflow(RELEASE)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    doc = yaml.safe_load(RELEASE.read_text())
    assert doc[True]["push"]["tags"] == ["v*"] and doc["permissions"] == {"contents": "read"}
    build, publish = doc["jobs"]["build"], doc["jobs"]["publish"]
    script = "\n".join(s.get("run", "") for s in build["steps"])
    assert "python -m build" in script and "twine check --strict" in script
    assert "unset COMPAT_HOME" in script and 'cd "$(mktemp -d)"' in script  # answers outside the checkout
    for command in ("recommend", "fit", "preflight --plan", "explain"):
        assert f'"$compat" {command}' in script
    assert (
        publish["needs"] == "build"
        and publish["permissions"] == {"id-token": "write"}
        and publish["environment"] == "pypi"
    )
    (step,) = [s for s in publish["steps"] if s.get("uses", "").startswith("pypa/gh-action-pypi-publish@")]
    assert "with" not in step and "secrets." not in RELEASE.read_text()  # no token: trusted publishing


def test_a_failing_canary_is_bisected_on_its_runner_and_its_drafts_reach_the_pull_request():
    doc = yaml.safe_load(WORKFLOW.read_text())
    grid = next(s for s in doc["jobs"]["gpu"]["steps"] if "tox -e gpu-matrix" in s.get("run", ""))
    assert grid["run"].endswith("--bisect-canary")  # into incoming/bisect/, uploaded with the records
    publish = doc["jobs"]["publish"]["steps"]
    keep = next(s for s in publish if "results/bisect" in s.get("run", ""))
    assert "for d in incoming/records-*/bisect; do" in keep["run"] and "bisect-*.known-issue.toml" in keep["run"]
    assert ">> results/bisect/records.jsonl" in keep["run"]  # every runner's probes, appended
    merge_at = next(i for i, s in enumerate(publish) if "compat merge" in s.get("run", ""))
    assert publish.index(keep) > merge_at  # kept after the merge, in results/bisect/: never in results/records.jsonl
    pr = next(s for s in publish if s.get("uses", "").startswith("peter-evans/create-pull-request@"))
    assert "results/bisect/" in pr["with"]["add-paths"].split()
