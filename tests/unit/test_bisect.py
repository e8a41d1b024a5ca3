"""compat bisect's search and listing, without running anything (issue 24): which release it
probes next (git bisect's order, skips included, stepping back where no good release is given),
what the probes say at the end, how a probe is judged, and which releases there are (wheel and
sdist names in --find-links folders, an index's simple API, yanked and pre-releases)."""

import pytest

from harness.answers import bisect
from harness.answers.bisect import BAD, GOOD, SKIP

V = ["1.0", "1.1", "1.2", "1.3", "1.4", "1.5", "2.0"]


def search(first_bad: int, skipped: set[int], good: int | None, bad: int = 6) -> tuple[list[int], dict[int, str]]:
    """Run next_probe against a package whose releases from `first_bad` on fail (those in
    `skipped` cannot be judged); the probes in order, and the verdicts."""
    verdicts = {bad: BAD, **({good: GOOD} if good is not None else {})}
    order = []
    for _ in range(len(V) + 2):  # more probes than releases would be a loop
        i = bisect.next_probe(len(V), verdicts)
        if i is None:
            return order, verdicts
        assert i not in verdicts, f"probed {V[i]} twice"
        order.append(i)
        verdicts[i] = SKIP if i in skipped else BAD if i >= first_bad else GOOD
    raise AssertionError(f"no end: {order}")


def test_it_bisects_between_the_ends_nearest_the_middle_first():
    order, verdicts = search(first_bad=5, skipped=set(), good=0)
    assert [V[i] for i in order] == ["1.3", "1.4", "1.5"]
    edge = bisect.boundary(V, verdicts)
    assert (edge.last_good, edge.first_bad, edge.exact) == ("1.4", "1.5", True)


def test_a_skipped_release_is_gone_around():
    order, verdicts = search(first_bad=5, skipped={3}, good=0)
    assert [V[i] for i in order] == ["1.3", "1.2", "1.4", "1.5"]  # 1.3 skipped: the nearest below the middle next
    assert bisect.boundary(V, verdicts).first_bad == "1.5" and bisect.boundary(V, verdicts).exact


def test_a_skip_next_to_the_boundary_leaves_it_open_and_says_between_what():
    _, verdicts = search(first_bad=4, skipped={3}, good=0)
    edge = bisect.boundary(V, verdicts)
    assert (edge.last_good, edge.could_be, edge.exact) == ("1.2", ["1.3", "1.4"], False)


def test_without_a_good_release_it_steps_back_1_2_4_releases():
    order, verdicts = search(first_bad=5, skipped=set(), good=None)
    assert [V[i] for i in order] == ["1.5", "1.4"]  # 2.0 bad, 1.5 bad (the bad end moves), 1.4 good
    assert bisect.boundary(V, verdicts).first_bad == "1.5"
    order, _ = search(first_bad=1, skipped={5, 4}, good=None)
    assert [V[i] for i in order][:3] == ["1.5", "1.4", "1.2"]  # skips do not stop the stepping: 6-1, 6-2, 6-4
    order, verdicts = search(first_bad=0, skipped=set(), good=None)  # nothing passes
    assert bisect.boundary(V, verdicts).last_good is None and order[-1] == 0


def test_a_probe_is_good_when_it_passes_bad_when_it_fails_as_the_bad_end_else_skipped():
    bad = {"outcome": "fail", "error": {"signature": "RuntimeError: injected fault"}}
    assert bisect.judge({"outcome": "pass"}, bad) == (GOOD, "")
    assert bisect.judge(dict(bad), bad) == (BAD, "")
    verdict, why = bisect.judge(
        {"outcome": "install-error", "error": {"signature": "InstallError: no matching distribution"}}, bad
    )
    assert (verdict, why) == (SKIP, "install-error: neither a pass nor the bad end's fail")
    assert bisect.judge({"outcome": "fail", "error": {"signature": "ValueError: other"}}, bad) == (
        SKIP,
        "fail with another error than the bad end's",
    )
    assert bisect.judge(dict(bad), None) == (BAD, "")  # the bad end itself


def test_releases_come_from_the_folders_and_the_index_yanked_and_pre_releases_left_out(tmp_path):
    for name in (
        "compat_probe-1.0-py3-none-any.whl",
        "compat_probe-1.2-py3-none-any.whl",
        "compat-probe-1.1.tar.gz",
        "compat_probe-2.0rc1-py3-none-any.whl",
        "other-3.0-py3-none-any.whl",
        "README.txt",
    ):
        (tmp_path / name).write_text("")
    # as the index says: 1.4 yanked
    listed = {"1.3": (False, "2024-01-02T03:04:05Z"), "1.4": (True, None), "1.5": (False, None)}
    got = bisect.releases("Compat.Probe", [tmp_path], offline=False, read_index=lambda p, i: listed)
    assert got.versions == ["1.0", "1.1", "1.2", "1.3", "1.5"] and got.problems == []
    assert got.uploaded == {"1.3": "2024-01-02T03:04:05Z"}  # the folders' files carry no upload time
    assert (
        bisect.releases("compat-probe", [tmp_path], offline=False, pre=True, read_index=lambda p, i: {}).versions[-1]
        == "2.0rc1"
    )
    offline = bisect.releases("compat-probe", [tmp_path], offline=True, read_index=pytest.fail)  # the index is not read
    assert offline.versions == ["1.0", "1.1", "1.2"]

    def unreachable(package, index):
        raise OSError("https://pypi.org/simple/compat-probe/: [Errno -3] Temporary failure in name resolution")

    cut_off = bisect.releases("compat-probe", [tmp_path], offline=False, read_index=unreachable)
    assert cut_off.versions == ["1.0", "1.1", "1.2"]
    assert cut_off.problems[0].startswith(
        "the package index could not be read (https://pypi.org/simple/compat-probe/: [Errno -3]"
    )


def test_an_index_upload_time_is_read_as_utc_to_the_second():
    assert bisect._utc("2023-09-05T15:26:45.123456Z") == "2023-09-05T15:26:45Z"
    assert bisect._utc("2023-09-05T17:26:45+02:00") == "2023-09-05T15:26:45Z"
    assert bisect._utc(None) is None and bisect._utc("last tuesday") is None


def test_released_with_picks_each_companions_newest_release_out_by_the_probed_ones_day():
    peft = bisect.Releases(
        ["0.4.0", "0.5.0", "0.6.0"],
        [],
        [],
        {"0.4.0": "2023-07-18T10:00:00Z", "0.5.0": "2023-08-22T10:00:00Z", "0.6.0": "2023-11-03T10:00:00Z"},
    )
    assert bisect.released_with("2023-09-05T15:26:45Z", peft) == "0.5.0"
    assert bisect.released_with("2023-08-22T10:00:00Z", peft) == "0.5.0"  # the same second counts as out
    assert bisect.released_with("2023-01-01T00:00:00Z", peft) is None  # nothing out yet
    assert bisect.released_with(None, peft) is None  # a release with no known upload time


def test_a_paired_probe_is_judged_on_the_difference_the_settings_make():
    refused = {"outcome": "fail", "error": {"signature": "ValueError: You can't pass `load_in_4bit`"}}
    no_gpu = {
        "outcome": "fail",
        "error": {"signature": "RuntimeError: No GPU found. A GPU is needed for quantization."},
    }
    passed = {"outcome": "pass"}
    assert bisect.judge_paired(refused, no_gpu) == (
        BAD,
        "without the settings: fail RuntimeError: No GPU found. A GPU is needed for quantization.",
    )
    assert bisect.judge_paired(dict(no_gpu), no_gpu) == (GOOD, "the settings change nothing: fail both ways")
    assert bisect.judge_paired(refused, passed) == (BAD, "without the settings: pass")
    assert bisect.judge_paired(dict(refused), refused)[0] == GOOD  # it fails that way without them too: not theirs
    assert bisect.judge_paired(passed, no_gpu) == (SKIP, "passes with the settings, fail without")
    assert bisect.judge_paired({"outcome": "install-error"}, {"outcome": "install-error"})[0] == SKIP
    # a later release's way of refusing
    removed = {"outcome": "fail", "error": {"signature": "TypeError: unexpected keyword"}}
    assert bisect.judge_paired(removed, passed) == (BAD, "without the settings: pass")


def test_set_is_read_as_toml_values_and_checked_like_a_grids_settings():
    from harness.answers import bisect_run
    from harness.errors import UsageError

    got = bisect_run.parse_set(["train.load_in_kbit_kwarg=true", "train.lr = 1e-4", "train.padding=max_length"])
    assert got == {"train": {"load_in_kbit_kwarg": True, "lr": 1e-4, "padding": "max_length"}}
    defaults = {"timeout_s": 600, "train": {"load_in_kbit_kwarg": False, "lr": 0.001, "padding": "longest"}}
    laid = bisect_run.laid_over(defaults, got)
    assert (
        laid["train"] == {"load_in_kbit_kwarg": True, "lr": 1e-4, "padding": "max_length"}
        and defaults["train"]["lr"] == 0.001
    )
    with pytest.raises(
        UsageError, match=r"--set \[settings.train\].load_in_kbit_kwargs: unknown setting.*load_in_kbit_kwarg"
    ):
        bisect_run.laid_over(defaults, bisect_run.parse_set(["train.load_in_kbit_kwargs=true"]))
    with pytest.raises(UsageError, match="must be true or false"):
        bisect_run.laid_over(defaults, bisect_run.parse_set(["train.load_in_kbit_kwarg=1"]))
    for bad in ("train.load_in_kbit_kwarg", "=true", "train..lr=1"):
        with pytest.raises(UsageError, match="give KEY=VALUE"):
            bisect_run.parse_set([bad])


def test_a_package_that_moves_with_another_says_the_base_stack_holds_the_other():
    note = bisect.companion_note(
        "transformers", {"torch": "inherit", "transformers": "==5.23.0", "peft": "==0.21.2", "accelerate": "==1.15.0"}
    )
    assert note.startswith(
        "transformers moves with peft, accelerate: every probe keeps the base stack's peft==0.21.2, accelerate==1.15.0"
    )
    assert bisect.companion_note("bitsandbytes", {"transformers": "==5.23.0"}) == ""
    ruled = bisect.companion_note(
        "transformers", {"transformers": "==5.23.0", "peft": "==0.21.2", "accelerate": "newest"}, rule=True
    )
    assert ruled.startswith(
        "transformers moves with peft: each probe pins peft at the newest release uploaded on or before"
    )


def test_a_bisection_needs_a_stack_with_an_env_of_its_own(capsys):
    from harness import cli

    assert (
        cli.main(
            ["bisect", "cpu-local-fp32-none-lora-single", "--package", "bitsandbytes", "--offline", "--find-links", "."]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert "stack 'local' runs the interpreter as it is" in err and "Traceback" not in err
    assert cli.main(["bisect", "cpu-hf2026-fp32-none-lora-single", "--package", "bitsandbytes", "--offline"]) == 2
    assert "--offline needs at least one --find-links folder" in capsys.readouterr().err


def _committed(path):
    import json

    from conftest import ROOT

    return [json.loads(line) for line in (ROOT / path).read_text().splitlines()]


def test_a_failing_canary_is_paired_with_the_control_that_passes_and_the_package_that_moved():
    """TEST INPUT: the committed records of results/records.jsonl (real CPU runs). The canary's
    QLoRA cells fail where hf2026's fail too and bnb048's (hf2026 with bitsandbytes 0.48.2) pass:
    each canary cell pairs with bnb048's, bitsandbytes among the packages apart (the canary takes
    each package's newest release, so transformers may differ too: 5.24.0 in the 2026-11-26 run).
    A canary cell that passes (int8) has no pair, nor does a control's failure."""
    from harness.answers import bisect_run
    from harness.catalog.matrix import MatrixData

    from conftest import ROOT

    recs = _committed("results/records.jsonl")
    stacks = MatrixData.load(ROOT / "matrix").stacks
    pairs = {p.canary["cell"]: p for p in bisect_run.canary_pairs(recs, stacks)}
    nf4 = pairs["cpu-canary-fp32-nf4-lora-single"]
    assert (nf4.control["cell"], nf4.control_stack) == ("cpu-bnb048-fp32-nf4-lora-single", "bnb048")
    assert nf4.differ["bitsandbytes"] == ("0.48.2", "0.50.2")
    assert set(nf4.differ) <= {name for name, _ in stacks["canary"].packages}  # only what the canary moves
    assert "cpu-canary-fp32-int8-lora-single" not in pairs
    assert all(p.canary["axes"]["stack"] == "canary" and p.control["outcome"] == "pass" for p in pairs.values())
    # no passing control
    assert bisect_run.canary_pairs([r for r in recs if r["axes"]["stack"] != "bnb048"], stacks) == []


def test_the_draft_known_issue_entry_carries_the_boundary_and_a_signature_that_matches_the_error():
    """TEST INPUT: the committed bisection of bitsandbytes (results/bisect/, real probes): the draft
    is TOML in the base's format, its signature (RE2) matches the bad probe's error and its `when`
    starts at the first bad release; what only a person can give is marked TODO."""
    import json
    import tomllib

    import re2

    from harness.answers import bisect_run

    from conftest import ROOT

    report = json.loads(sorted((ROOT / "results" / "bisect").glob("bisect-*.json"))[0].read_text())
    bad = next(r for r in _committed("results/bisect/records.jsonl") if r["id"] == report["probes"][0]["record"])
    draft = bisect_run.proposed_issue(report, bad)
    (entry,) = tomllib.loads(draft)["issue"]
    assert entry["when"] == {"bitsandbytes": ">=0.49.0"} and "pins" not in entry  # a ceiling is a fix, not a pin
    assert entry["fix"] == [f"Pin bitsandbytes<0.49.0 (bisected by compat: {report['id']})."]
    assert re2.search(entry["signatures"][0], bad["error"]["message"])
    assert entry["sources"] == [] and draft.count("TODO") >= 5 and "compat never merges it as it is" in draft
