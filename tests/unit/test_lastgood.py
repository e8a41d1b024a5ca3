"""Last known good (issue 24): the bisected boundaries read from compat bisect's reports, shown in
the table and used by `compat recommend`. The reports read here are the real ones committed in
results/bisect/ (bitsandbytes on this project's CPU, 2026-11-26); where a test needs a boundary
on a GPU architecture, it takes a real report and says that it relabels the hardware."""

import dataclasses
import json
import shutil

from harness.answers.recommend import ResolverData, recommend
from harness.commands.common import rules
from harness.evidence import lastgood
from harness.render import table

from conftest import ROOT

DATA = ResolverData.load(ROOT / "matrix")
BNB = "bisect-20261126T061911Z-a246de"  # compat bisect cpu-hf2026-fp32-nf4-lora-single --package bitsandbytes


def real_edges(tmp_path, *ids):
    """The real reports `ids` in a results folder with the real probe records they cite."""
    (tmp_path / "bisect").mkdir(exist_ok=True)
    shutil.copy(ROOT / "results" / "bisect" / "records.jsonl", tmp_path / "bisect")
    for i in ids:
        shutil.copy(ROOT / "results" / "bisect" / f"{i}.json", tmp_path / "bisect")
    return lastgood.load([tmp_path], rules().check)


def test_a_report_gives_the_newest_good_and_the_oldest_bad_release_with_their_records(tmp_path):
    edges, problems = real_edges(tmp_path, BNB)
    assert problems == []
    (e,) = edges
    report = json.loads((ROOT / "results" / "bisect" / f"{BNB}.json").read_text())
    by_version = {p["version"]: p["record"] for p in report["probes"]}
    assert (e.hardware, e.configuration, e.base_stack, e.package) == (
        "cpu",
        "fp32-nf4-lora-single",
        "hf2026",
        "bitsandbytes",
    )
    assert (e.last_good, e.first_bad, e.exact) == ("0.48.2", "0.49.0", True)
    assert (e.good_record, e.bad_record) == (by_version["0.48.2"], by_version["0.49.0"])
    assert (
        e.bisections == (BNB,) and e.date == "2026-11-26" and e.bad_signature.startswith("CheckFailed: saving changed")
    )


def test_an_unreadable_report_is_named_and_the_others_still_count(tmp_path):
    edges, _ = real_edges(tmp_path, BNB)
    (tmp_path / "bisect" / "bisect-20990101T000000Z-broken.json").write_text('{"id": "x", "cell": "not a cell"')
    (tmp_path / "bisect" / "bisect-20990101T000000Z-wrong.json").write_text(json.dumps({"id": "y", "cell": "gpu"}))
    again, problems = lastgood.load([tmp_path], rules().check)
    assert again == edges and len(problems) == 2
    assert all("not a bisection report compat can read" in p and "left out" in p for p in problems)
    assert "bisect-20990101T000000Z-broken.json" in problems[0]


def test_a_skipped_release_between_the_ends_leaves_the_boundary_open():
    """The real report with its 0.49.0 probe turned into a skip (a made-up verdict on a real report:
    load() refuses it, its records say otherwise; the rule is tested on the report as read)."""
    doc = json.loads((ROOT / "results" / "bisect" / f"{BNB}.json").read_text())
    for p in doc["probes"]:
        if p["version"] == "0.49.0":
            p["verdict"] = "skip"
    (e,) = lastgood.edges_of([doc])
    assert e.first_bad == "0.49.2" and not e.exact and "0.49.0" in e.between
    assert "from one of" in e.says() and "one of" in "\n".join(lastgood.table_lines([e]))


def test_the_table_has_a_row_per_boundary_after_the_support_summary(tmp_path):
    edges, _ = real_edges(tmp_path, BNB)
    text = table.render([], "compat table", edges=edges)
    section = text.split("## Last known good (bisected)")[1]
    row = [line for line in section.splitlines() if line.startswith("| cpu |")]
    assert len(row) == 1 and "| bitsandbytes | 0.48.2 (" in row[0] and "**0.49.0**" in row[0] and BNB in row[0]
    assert "## Last known good" not in table.render([], "compat table")


def test_recommend_shows_a_boundary_measured_elsewhere_and_leaves_the_pin(tmp_path):
    edges, _ = real_edges(tmp_path, BNB)
    rec = recommend(DATA.gpus.find("H100"), 1, "qlora", DATA, [], edges=edges).as_json()
    (shown,) = [e for e in rec["evidence"] if "first release that breaks" in e["says"]]
    assert shown["kind"] == "measured" and shown["hardware"] == "cpu" and shown["date"] == "2026-11-26"
    assert shown["says"].endswith(
        "measured on cpu, not on sm_90: the pin is not moved for this card (on a CPU bitsandbytes runs its CPU "
        "backend, not the CUDA kernels this card runs)"
    )
    assert rec["packages"]["bitsandbytes"] != "==0.48.2"
    full = recommend(DATA.gpus.find("H100"), 1, "full", DATA, [], edges=edges).as_json()  # no 4-bit: not its boundary
    assert not [e for e in full["evidence"] if "first release that breaks" in e["says"]]


def test_recommend_pins_below_a_boundary_measured_on_the_cards_architecture(tmp_path):
    """The real CPU report's boundary relabelled as measured on sm_90 (not a measurement: a test of the rule)."""
    edges, _ = real_edges(tmp_path, BNB)
    on_card = [dataclasses.replace(e, hardware="sm_90") for e in edges]
    rec = recommend(DATA.gpus.find("H100"), 1, "qlora", DATA, [], edges=on_card).as_json()
    assert rec["packages"]["bitsandbytes"] == "==0.48.2"
    (shown,) = [e for e in rec["evidence"] if "first release that breaks" in e["says"]]
    assert shown["says"].endswith("pinned to its last good release") and shown["records"] == [
        on_card[0].good_record,
        on_card[0].bad_record,
    ]
    with_settings = [dataclasses.replace(e, settings='{"train": {"load_in_kbit_kwarg": true}}') for e in on_card]
    rec = recommend(DATA.gpus.find("H100"), 1, "qlora", DATA, [], edges=with_settings).as_json()
    assert rec["packages"]["bitsandbytes"] != "==0.48.2"  # a loader's keyword: said, not pinned
    # said as what the user's code does and what they would do (issue 43, item 3), not compat's key
    assert any(
        "if your code passes load_in_4bit=True (or load_in_8bit=True) to from_pretrained beside a quantization_config"
        in n
        and "drop that keyword" in n
        and "pin bitsandbytes<=0.48.2" in n
        for n in rec["notes"]
    )
    assert not any("load_in_kbit_kwarg" in n for n in rec["notes"])
    assert not any("load_in_kbit_kwarg" in e["says"] for e in rec["evidence"])
